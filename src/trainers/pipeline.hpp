/// @file pipeline.hpp
/// @brief From a resolved profile to a trained agent: backend, memory pre-check, data,
///        environment, trainer, run directory. The CLI's `train` and `bench` call these.
#pragma once

#include <string>

#include "config/profile.hpp"

namespace fh::trainers {

/// Trains per the profile and writes the run directory: config.toml,
/// metrics.jsonl, eval.jsonl (validation backtests every run.eval_interval env steps),
/// checkpoints/last.safetensors (every run.checkpoint_interval and at the end) and
/// best.safetensors (the best validation metric), backtest/equity.csv and trades.csv (the test
/// split with the best weights), summary.json. With `resume_dir`, continues that run from its
/// last checkpoint. Early stopping ends the run with status "early_stopped" (exit 0); SIGINT or
/// SIGTERM with "interrupted" after a checkpoint (InterruptedError, exit 130). Returns the run
/// directory's path. Throws fh::Error subclasses (exit codes).
/// `force`: train although the instrument does not fit the prices (run_checks.hpp).
std::string train(const config::Profile& profile, const std::string& resume_dir = "", bool force = false);

/// Backtests the policy of a checkpoint on `split` ("val" or "test") of its profile's data, or of
/// `data_path` when given, normalised with the checkpoint's statistics; one exact sequential pass.
/// Returns one JSON object: the split and the strategy's and buy-and-hold's metrics.
std::string evaluate(const std::string& checkpoint, const std::string& split, const std::string& data_path,
                     const std::string& device);

/// Throughput figures of the profile's trainer as one JSON object: collection
/// env steps/s (collection only), updates/s (training only), end-to-end env steps/s, time to
/// first kernel, peak device memory.
std::string bench(const config::Profile& profile, bool force = false);

}  // namespace fh::trainers
