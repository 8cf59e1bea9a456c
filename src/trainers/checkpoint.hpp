/// @file checkpoint.hpp
/// @brief Trainer checkpoints (docs/checkpoints.md): every device buffer of the trainer's state, its
///        counters, the early-stopping state, the feature normalisation statistics and the
///        resolved profile, in one safetensors file written atomically.
#pragma once

#include <string>
#include <vector>

#include "config/profile.hpp"
#include "io/safetensors.hpp"
#include "data/market_data.hpp"
#include "ops/device.hpp"
#include "trainers/trainer.hpp"
#include "trainers/early_stopping.hpp"

namespace fh::trainers {

/// Writes the trainer's full state (resumable) to `path`.
void save_checkpoint(const std::string& path, ops::Device& ops, Trainer& trainer, const config::Profile& profile,
                     const data::MarketData& market, const EarlyStopping& early_stopping);

/// Restores a trainer built from the same profile (the trainer kind, then sizes tensor by tensor,
/// are checked) and the early-stopping state. Throws io::CheckpointError (exit 2) on any mismatch
/// or corruption.
void load_checkpoint(const std::string& path, ops::Device& ops, Trainer& trainer, const config::Profile& profile,
                     EarlyStopping* early_stopping);

/// Refuses (io::CheckpointError, exit 2) a checkpoint whose parameter layout is not this
/// version's for the profile's trainer (parameter_layout; a checkpoint without the key is layout 1).
void require_parameter_layout(const io::TensorFile& file, const std::string& path, const config::Profile& profile);

/// The resolved profile stored in a checkpoint (its TOML text).
std::string checkpoint_profile_toml(const std::string& path);

/// The normalisation statistics stored in a checkpoint (mean, stddev, clip).
data::NormalizationStats checkpoint_normalization(const std::string& path);

}  // namespace fh::trainers
