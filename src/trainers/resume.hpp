/// @file resume.hpp
/// @brief `--resume RUN_DIR`: everything checked before the resumed run writes a byte, then the
///        run directory made consistent with the checkpoint it continues from.
#pragma once

#include <string>
#include <vector>

#include "config/profile.hpp"
#include "io/run_directory.hpp"
#include "device/device.hpp"
#include "trainers/checkpoint.hpp"
#include "trainers/early_stopping.hpp"
#include "trainers/trainer.hpp"

namespace fh::trainers {

/// What a resumed run continues with.
struct Resumed {
    RunRecord record;                 ///< wall time so far, the best validation backtest
    std::vector<float> best_weights;  ///< the best validation's weights ("" when none was kept)
};

/// Loads and checks checkpoints/last.safetensors into `trainer` and `early` (every tensor, the
/// metadata), refuses a finished run (summary.json status completed or early_stopped) unless
/// run.total_steps goes past the checkpoint, and only then removes the temporaries a killed
/// process left, cuts metrics.jsonl and eval.jsonl back to the checkpoint and writes config.toml
/// with the profile in force (the resume's --set overrides included). `dir` must be locked
/// (RunDirectory::open). `n_bars`: the market's bars (the checkpoint's bar indices are checked
/// against it). Throws UsageError / CheckpointError (exit 2) before writing anything.
Resumed resume_run(io::RunDirectory& dir, ops::Device& ops, Trainer& trainer, const config::Profile& profile,
                   EarlyStopping& early, std::int64_t n_bars);

}  // namespace fh::trainers
