/// @file checkpoint.hpp
/// @brief Trainer checkpoints (docs/checkpoints.md): every device buffer of the trainer's state, its
///        counters, the early-stopping state, the feature normalisation statistics and the
///        resolved profile, in one safetensors file written atomically.
#pragma once

#include <string>
#include <cstdint>
#include <vector>

#include "config/profile.hpp"
#include "io/safetensors.hpp"
#include "data/market_data.hpp"
#include "nn/param_layout.hpp"
#include "device/device.hpp"
#include "trainers/trainer.hpp"
#include "trainers/early_stopping.hpp"

namespace fh::trainers {

/// What a run keeps across a resume besides the trainer's and early stopping's state.
struct RunRecord {
    double wall_seconds = 0;      ///< wall time of the run's processes up to this checkpoint
    std::string best_validation;  ///< summary.json's "validation" object of the best evaluation; "" = none
    /// load_checkpoint: the checkpoint left the replay memory out (checkpoint.keep_replay =
    /// false), so the resumed trainer refills it from empty (not an exact resume).
    bool replay_omitted = false;
};

/// Writes the trainer's full state (resumable) to `path`, with the metadata of
/// docs/checkpoints.md (profile, normalisation, step, parameter layout, bars_per_year, ...).
/// With checkpoint.keep_replay = false, without the replay memory (the tensors replay_memory()
/// names) and with the counters of an emptied replay (Trainer::counters_without_replay);
/// metadata `replay` says which ("kept", "omitted", or "none" for a trainer without one).
void save_checkpoint(const std::string& path, ops::Device& ops, Trainer& trainer, const config::Profile& profile,
                     const data::MarketData& market, const EarlyStopping& early_stopping, const RunRecord& record = {});

/// What the integers of a checkpoint's state are checked against at load.
struct CheckpointBounds {
    std::int64_t num_actions = 0;
    std::int64_t n_bars = 0;  ///< the market's bars: an environment's bar indices stay below
    std::int64_t max_contracts = 0;
    std::int64_t diversity_window = 0;
};

/// Restores a trainer built from the same profile (the trainer kind, then sizes tensor by tensor,
/// are checked) and the early-stopping state; returns the run record. Throws io::CheckpointError
/// (exit 2) on any mismatch, corruption or malformed metadata value, and on any integer of the
/// state outside what the run allows (an action past env's actions, a bar index past the data's
/// `n_bars`, a negative counter; docs/checkpoints.md). Nothing is uploaded until every tensor and
/// every metadata value has been checked.
RunRecord load_checkpoint(const std::string& path, ops::Device& ops, Trainer& trainer, const config::Profile& profile,
                          EarlyStopping* early_stopping, std::int64_t n_bars);

/// The flat layout of params/online for run.trainer's networks (docs/checkpoints.md,
/// "param_layout"): slice names, offsets and sizes.
nn::ParamLayout policy_weights_layout(const config::Profile& profile, int state_dim);

/// Refuses (io::CheckpointError, exit 2) a checkpoint whose parameter layout is not this
/// version's for the profile's trainer (metadata layout_version, trainers::parameter_layout; a
/// checkpoint without the key is layout "<trainer>/1").
void require_layout_version(const io::TensorFile& file, const std::string& path, const config::Profile& profile);

/// The host counters stored in a checkpoint (Trainer::counter_values at its save), e.g. to see
/// whether a population's agents stand at one iteration before they resume.
std::vector<std::int64_t> checkpoint_counters(const std::string& path);

/// The resolved profile stored in a checkpoint (its TOML text).
std::string checkpoint_profile_toml(const std::string& path);

/// The normalisation statistics stored in a checkpoint (mean, stddev, clip).
data::NormalizationStats checkpoint_normalization(const std::string& path);

}  // namespace fh::trainers
