/// @file memory_estimate.hpp
/// @brief The memory of a run's data, from its resolved profile and the data's size (the market, the
///        backtests' records, the CUDA context), and the reckoning shared with the trainers'
///        memory plans (src/trainers/memory_plan.hpp): consumers, arrays, the refusals. `check`
///        prints and checks the estimates; a run checks them again before it allocates anything:
///        an array past the kernels' int index range is a usage error naming the key (exit 2),
///        memory beyond what is available a device error naming the biggest consumers (exit 4).
#pragma once

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
    std::string what;  ///< e.g. "replay buffer (999424 transitions x 409 B): replay states (49971200 x 4 B)"
    std::uint64_t elements = 0;
    std::string key;  ///< the key that sets its size
};

inline constexpr std::int64_t kMarketDim = data::kCore42Dim;  ///< the features per bar the estimate assumes
/// The kernels' index type is int: no array may hold more elements.
inline constexpr std::uint64_t kMaxArrayElements = 2147483647;

/// What the estimate needs besides the profile.
struct SizeInputs {
    std::uint64_t bars = 0;       ///< bars of market data; 0 = data.synthetic_bars (for a CSV whose
                                  ///< size is not known yet the same figure stands in)
    bool bars_known = true;       ///< false: `bars` is a stand-in (no array check on it)
    std::uint64_t dump_rows = 0;  ///< an offline trainer's replay dump: its rows
    bool host_backend = false;    ///< the CPU backend: "device" memory is host memory
};

/// The data's device memory by consumer: the market, the backtests' records and, on a GPU, the
/// CUDA context (and BF16 scratch).
std::vector<MemoryItem> data_device_memory(const Profile& profile, const SizeInputs& in);
/// The market's peak host memory while its features are computed and cached.
MemoryItem market_host_memory(const Profile& profile, const SizeInputs& in);
/// The data's arrays (the market features; none while the bars are not known).
std::vector<ArrayExtent> data_arrays(const Profile& profile, const SizeInputs& in);

/// One message per array beyond kMaxArrayElements, each naming its key ("... : lower KEY").
struct IndexProblem {
    std::string key;
    std::string message;
};
std::vector<IndexProblem> index_range_problems(const std::vector<ArrayExtent>& arrays);

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
