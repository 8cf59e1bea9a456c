/// @file run.hpp
/// @brief The program's three runs: train (src/run/train.cpp), eval (eval.cpp) and bench
///        (bench.cpp), each from a resolved profile; src/cli/ wires the command line to them.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "config/profile.hpp"

namespace fh::run {

/// Trains per the profile and writes the run directory: config.toml,
/// metrics.jsonl, eval.jsonl (validation backtests every run.eval_interval env steps),
/// checkpoints/last.safetensors (every run.checkpoint_interval and at the end) and
/// best.safetensors (the best validation metric), backtest/equity.csv and trades.csv (the test
/// split with the best weights), summary.json. With `resume_dir`, continues that run from its
/// last checkpoint. Early stopping ends the run with status "early_stopped" (exit 0); SIGINT or
/// SIGTERM with "interrupted" after a checkpoint (InterruptedError, exit 130). Returns the run
/// directory's path. `overrides` (the command line's "section.key=value") are recorded in
/// summary.json with the seed, the data and bars_per_year (run/facts.hpp). Throws fh::Error
/// subclasses (exit codes).
/// `force`: train although the instrument does not fit the prices (src/trainers/run_checks.hpp).
std::string train(const config::Profile& profile, const std::string& resume_dir = "",
                  const std::vector<std::string>& overrides = {}, bool force = false);

/// The run directory's name: run.name, else "<trainer>-<UTC date>-<time>".
std::string run_name(const config::Profile& profile);

/// What `eval` is asked for.
struct EvalRequest {
    std::string checkpoint;              ///< a checkpoint file
    std::string split = "test";          ///< "val", "test", "all" (every bar) or "FROM:TO" (bars [FROM, TO))
    std::vector<std::string> overrides;  ///< "section.key=value", only eval_honoured_keys()
    std::string output_dir;              ///< "" = print only
    bool force = false;                  ///< write into an existing non-empty output_dir
};

/// The profile keys `eval` honours on top of the checkpoint's profile: the data (path, format,
/// split fractions, cache, synthetic market), the costs (commission, slippage), bars_per_year,
/// eval.segments and the device. Anything else would change what the policy sees or does.
const std::vector<std::string>& eval_honoured_keys();

/// The profile stored in `checkpoint` with `overrides` applied, each of which must be one of
/// eval_honoured_keys() (UsageError naming `command` otherwise; dqn.her_eval_goal only for a
/// policy trained with hindsight experience replay).
config::Profile checkpoint_profile(const std::string& checkpoint, const std::vector<std::string>& overrides,
                                   std::string_view command);

/// The policy's weights (params/online, `weights_size` floats) of `checkpoint`: its parameter
/// layout checked against the profile's, every weight finite (io::CheckpointError, exit 2).
std::vector<float> checkpoint_policy_weights(const std::string& checkpoint, const config::Profile& profile,
                                             std::size_t weights_size);

/// Backtests the policy of a checkpoint on a split of its profile's data (with the honoured
/// overrides), normalised with the checkpoint's statistics: one exact sequential pass, or
/// eval.segments parts when that is overridden. Returns one JSON object: the split and the
/// strategy's and buy-and-hold's metrics. With an output directory it also writes eval.json,
/// equity.csv, trades.csv, config.toml (the profile used) and report.html there.
std::string evaluate(const EvalRequest& request);

/// `content` metadata of an exported policy file (export_policy).
inline constexpr std::string_view kPolicyExportContent = "foxhunt-policy/1";

/// The checkpoint behind `source`: the file itself, or a run directory's
/// checkpoints/best.safetensors, else its checkpoints/last.safetensors (UsageError when none).
std::string policy_checkpoint(const std::string& source);

/// Writes the policy of a checkpoint (or a run directory's, policy_checkpoint) to `output`, a
/// safetensors file (docs/checkpoints.md "Exported weights"): one F32 tensor per slice of the
/// trainer's parameter layout (`q.l0.weight` (out, in), `q.l0.bias`, ...), the calibration
/// that follows them (supervised, dt), the normalisation (`norm.mean`, `norm.stddev`), and in
/// the metadata the resolved profile, the normalisation (and its clip), the dimensions and the
/// table of tensors. Refuses an existing `output` unless `force`. Returns the checkpoint read.
std::string export_policy(const std::string& source, const std::string& output, bool force);

/// Throughput figures of the profile's trainer as one JSON object: collection
/// env steps/s (collection only), updates/s (training only), end-to-end env steps/s, time to
/// first kernel, peak device memory. With kernel_times (CUDA only), also each kernel's and matrix
/// product's time per collection step and per update, measured op by op with CUDA events. With
/// ablate (CUDA only), also each op's share of the captured step: the step timed again with that
/// op's launches left out of the graph.
std::string bench(const config::Profile& profile, bool kernel_times = false, bool force = false, bool ablate = false);

}  // namespace fh::run
