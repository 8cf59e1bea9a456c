/// @file memory_estimate.hpp
/// @brief Device memory a run needs, by consumer, from its resolved profile:
///        printed by `check`, and compared with the free memory before a run
///        allocates anything. An estimate: layouts may differ slightly from the trainers' own.
#pragma once

#include "math/env.h"
#include "data/features.hpp"

#include <cstdint>
#include <string>
#include <vector>

#include "config/profile.hpp"

namespace fh::config {

/// One consumer of device memory and the profile key that changes it most.
struct MemoryItem {
    std::string consumer;  ///< e.g. "replay buffer (1000000 transitions x 416 B)"
    std::uint64_t bytes = 0;
    std::string key;       ///< e.g. "replay_buffer.buffer_size"; "" when no key controls it
};

/// Sizes the estimate assumes (from the environment's observation layout).
inline constexpr std::int64_t kMarketDim = data::kCore42Dim;            ///< core42 features per bar
inline constexpr std::int64_t kPortfolioDim = env::kPortfolioFeatures;  ///< portfolio features per observation
inline constexpr std::int64_t kStateDim = kMarketDim + kPortfolioDim;

/// Estimated device memory by consumer, largest first.
/// @param bars  bars of market data on the device; 0 = data.synthetic_bars (the embedded market;
///              for a CSV whose size is not known yet the same figure is used as a placeholder)
std::vector<MemoryItem> estimate_device_memory(const Profile& profile, std::uint64_t bars = 0);

/// Sum of the items.
std::uint64_t total_bytes(const std::vector<MemoryItem>& items);

/// "1.2 GiB", "340.0 MiB", "12.0 KiB", "512 B".
std::string format_bytes(std::uint64_t bytes);

}  // namespace fh::config
