/// @file kernel_timing.hpp
/// @brief A diagnostic that times every kernel launch and matrix product with a pair of CUDA
///        events (`bench --kernel-times`): where each microsecond of a collection step or an
///        update goes. Off by default; while on, sequences run op by op (no CUDA Graphs), so the
///        times add up to more than a captured step takes.
#pragma once

#include <cuda_runtime.h>

#include <string>
#include <vector>

namespace fh::cuda {

void set_kernel_timing(bool on) noexcept;
bool kernel_timing() noexcept;

/// Times what is launched on `stream` during its lifetime under `name` (a no-op when off).
class TimedRegion {
public:
    TimedRegion(std::string name, cudaStream_t stream);
    ~TimedRegion();
    TimedRegion(const TimedRegion&) = delete;
    TimedRegion& operator=(const TimedRegion&) = delete;

private:
    std::string name_;
    cudaStream_t stream_ = nullptr;
    int slot_ = -1;
};

struct KernelTime {
    std::string name;
    long long calls = 0;
    double total_us = 0;  ///< sum over calls of the time between the two events
};

/// Synchronises with the device, then returns the times recorded since the last call, one
/// entry per name in the order of first launch, and forgets them.
std::vector<KernelTime> collect_kernel_times();

}  // namespace fh::cuda
