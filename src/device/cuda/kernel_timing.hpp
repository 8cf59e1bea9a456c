/// @file kernel_timing.hpp
/// @brief Two diagnostics of where the microseconds of a collection step or an update go.
///        `bench --kernel-times` times every kernel launch and matrix product with a pair of CUDA
///        events; while on, sequences run op by op (no CUDA Graphs), so the times add up to more
///        than a captured step takes. `bench --ablate` leaves the launches of one name out of
///        the captured sequences and times them again: what that op costs inside the graph, with
///        its overlap with other branches; and replaces them (or every launch) by a kernel that
///        does nothing, which keeps the graph's nodes and edges and removes only the work (the
///        results of such runs are meaningless; only the bench uses them). Both off by default.
#pragma once

#include <cuda_runtime.h>

#include <functional>
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

/// What the ablation filter does with the launches it takes.
enum class FilterMode {
    leave_out,  ///< not issued: the op's node and its edges go with its work
    stand_in,   ///< each replaced by the stand-in (set_stand_in): the node and edges stay, the work goes
    alone,      ///< every other launch replaced by the stand-in: the named op's work alone in the graph
};
/// The filter's name for every launch.
inline constexpr const char* kEveryOp = "*";
/// The ablation filter: launches named `name` (every launch: kEveryOp; none: empty) are treated
/// as `mode` says. Sequences captured under another filter are captured again
/// (op_filter_generation).
void set_op_filter(std::string name, FilterMode mode = FilterMode::leave_out);
/// Whether callers must name their launches (timing on or a filter set).
bool op_names_wanted() noexcept;
/// Whether the filter takes the launch named `name`: if so the caller must not issue it (in
/// stand_in mode this has launched the stand-in on `stream` in its place).
bool op_filtered(const std::string& name, cudaStream_t stream);
/// The stand-in's launcher (the kernel registry sets it: one block of a kernel that does
/// nothing). Only `owner`, the one that set it, clears it.
void set_stand_in(const void* owner, std::function<void(cudaStream_t)> launch);
void clear_stand_in(const void* owner) noexcept;
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
