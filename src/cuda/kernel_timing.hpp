/// @file kernel_timing.hpp
/// @brief Two diagnostics of where the microseconds of a collection step or an update go.
///        `bench --kernel-times` times every kernel launch and matrix product with a pair of CUDA
///        events; while on, sequences run op by op (no CUDA Graphs), so the times add up to more
///        than a captured step takes. `bench --ablate` leaves the launches of one name out of
///        the captured sequences and times them again: what that op costs inside the graph, with
///        its overlap with other branches (the results of such a run are meaningless; only the
///        bench uses it). Both off by default.
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

/// The ablation filter: launches named `name` are skipped (empty: none). Sequences captured
/// under another filter are captured again (filter_generation).
void set_skipped_op(std::string name);
/// Whether callers must name their launches (timing on or a filter set).
bool op_names_wanted() noexcept;
/// Whether the launch named `name` is to be skipped.
bool op_skipped(const std::string& name);
/// Changes whenever the filter does.
unsigned op_filter_generation() noexcept;

struct KernelTime {
    std::string name;
    long long calls = 0;
    double total_us = 0;  ///< sum over calls of the time between the two events
};

/// Synchronises with the device, then returns the times recorded since the last call, one
/// entry per name in the order of first launch, and forgets them.
std::vector<KernelTime> collect_kernel_times();

}  // namespace fh::cuda
