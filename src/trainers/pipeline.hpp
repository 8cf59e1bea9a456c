/// @file pipeline.hpp
/// @brief From a resolved profile to a trained agent: backend, memory pre-check, data,
///        environment, trainer, run directory. The CLI's `train` and `bench` call these.
#pragma once

#include <string>

#include "config/profile.hpp"

namespace fh::trainers {

/// Trains per the profile and writes the run directory (config.toml, metrics.jsonl,
/// summary.json). Returns the run directory's path. Throws fh::Error subclasses (exit codes).
std::string train(const config::Profile& profile);

/// Throughput figures of the profile's trainer as one JSON object (SPEC section 9): collection
/// env steps/s (collection only), updates/s (training only), end-to-end env steps/s, time to
/// first kernel, peak device memory.
std::string bench(const config::Profile& profile);

}  // namespace fh::trainers
