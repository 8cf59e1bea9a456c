/// @file memory_estimate.hpp
/// @brief What a run allocates, from its resolved profile and the data's size: device memory by consumer, host memory
/// by consumer, and the largest
///        single array of each consumer. `check` prints and checks them; a run checks them again
///        before it allocates anything: an array past the kernels' int index range is a usage
///        error naming the key (exit 2), memory beyond what is available a device error naming
///        the biggest consumers (exit 4). The sizes follow the trainers' own allocations (replay
///        rings, rollouts, datasets, parameter copies, workspaces); small buffers are left out.
#pragma once

#include "math/env.h"
#include "data/features.hpp"

#include <cstdint>
#include <string>
#include <vector>

#include "config/profile.hpp"

namespace fh::config {

/// One consumer of memory and the profile key that changes it most.
struct MemoryItem {
    std::string consumer;  ///< e.g. "replay buffer (999424 transitions x 409 B)"
    std::uint64_t bytes = 0;
    std::string key;  ///< e.g. "replay_buffer.buffer_size"; "" when no key controls it
};

/// The largest single array of a consumer, in elements: the kernels index with int.
struct ArrayExtent {
    std::string what;  ///< e.g. "the replay buffer's states (999424 x 50 floats)"
    std::uint64_t elements = 0;
    std::string key;  ///< the key that sets its size
};

/// Sizes the estimate assumes (from the environment's observation layout).
inline constexpr std::int64_t kMarketDim = data::kCore42Dim;            ///< core42 features per bar
inline constexpr std::int64_t kPortfolioDim = env::kPortfolioFeatures;  ///< portfolio features per observation
inline constexpr std::int64_t kStateDim = kMarketDim + kPortfolioDim;
/// Rows of one validation chunk of the supervised trainer (its validation loss runs the
/// forecaster on the validation split in chunks of this many samples).
inline constexpr std::int64_t kSupervisedValidationChunk = 4096;
/// The kernels' index type is int: no array may hold more elements.
inline constexpr std::uint64_t kMaxArrayElements = 2147483647;

/// What the estimate needs besides the profile.
struct SizeInputs {
    std::uint64_t bars = 0;       ///< bars of market data; 0 = data.synthetic_bars (for a CSV whose
                                  ///< size is not known yet the same figure stands in)
    bool bars_known = true;       ///< false: `bars` is a stand-in (no array check on it)
    std::uint64_t dump_rows = 0;  ///< IQL from a replay dump: its rows (0: iql.dataset_size)
    bool host_backend = false;    ///< the CPU backend: "device" memory is host memory
};

/// Rows of the DQN replay ring: whole steps of every environment,
/// max(floor(buffer_size / gpu_n_episodes), n_step + 1) * gpu_n_episodes.
std::uint64_t dqn_replay_rows(const Profile& profile);

/// Estimated device memory by consumer, largest first.
std::vector<MemoryItem> estimate_device_memory(const Profile& profile, const SizeInputs& in);
std::vector<MemoryItem> estimate_device_memory(const Profile& profile, std::uint64_t bars = 0);

/// Estimated peak host memory by consumer, largest first (the market data while its features
/// are computed and cached, the host copy a checkpoint or replay dump is written from, a replay
/// dump read for IQL; with the CPU backend also everything estimate_device_memory lists).
std::vector<MemoryItem> estimate_host_memory(const Profile& profile, const SizeInputs& in);

/// The largest array of each consumer.
std::vector<ArrayExtent> array_extents(const Profile& profile, const SizeInputs& in);

/// One message per array beyond kMaxArrayElements, each naming its key ("... : lower KEY").
struct IndexProblem {
    std::string key;
    std::string message;
};
std::vector<IndexProblem> index_range_problems(const Profile& profile, const SizeInputs& in);

/// Sum of the items.
std::uint64_t total_bytes(const std::vector<MemoryItem>& items);

/// "1.2 GiB", "340.0 MiB", "12.0 KiB", "512 B".
std::string format_bytes(std::uint64_t bytes);

/// Throws DeviceError (exit 4) when the items need more than `available` bytes: "the run needs
/// about X of <what> but Y is available (<where>); the biggest consumers: ..." with the key to
/// change for each of the three largest.
void require_memory(const std::vector<MemoryItem>& items, std::uint64_t available, const std::string& what,
                    const std::string& where);

/// Host memory this process may still use: MemAvailable from /proc/meminfo, lowered by a
/// cgroup v2 memory limit when one is set. 0 when neither can be read (then nothing is checked).
std::uint64_t available_host_memory();

}  // namespace fh::config
