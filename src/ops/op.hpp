/// @file op.hpp
/// @brief ops::run, the one dispatch of every op. An op is one argument struct (its operands as
///        Views, its shapes as numbers) declared in cuda/abi/<module>.h; beside it, in the
///        header's host part, its checks `check(const Op&)` (sizes, the kernels' int range, the
///        aliasing rule of src/device/checks.hpp), its launch rule `launch(Gpu&, const Op&)` (launch
///        shape and kernel; a single-kernel op's kernel receives the struct itself) and the
///        declaration of its CPU twin `cpu(const Op&)` (src/ops/<family>/cpu.cpp). A caller
///        writes `ops::run(device, ops::ColumnMoments{mean, m2, ...})`. A header's host part
///        opens with ops/op_begin.hpp and closes with ops/op_end.hpp.
#pragma once

#include <fmt/format.h>

#include "device/cuda/kernel.hpp"
#include "device/device.hpp"

namespace fh::ops {

using cuda::LaunchDims;

/// Declares Op's CPU twin `void cpu(const Op& a)` and opens its launch rule
/// `template <class Gpu> void launch(Gpu& gpu, const Op& a)`: `FH_LAUNCH(DqnLoss) { ... }`.
#define FH_LAUNCH(Op)      \
    void cpu(const Op& a); \
    template <class Gpu>   \
    void launch(Gpu& gpu, const Op& a)

/// The launch rule of an op whose one kernel receives the struct itself: `kernel` on the op's
/// stream with the LaunchDims that follow (an expression of the argument struct `a`). The
/// static_assert takes the invocation's semicolon.
#define FH_LAUNCH_KERNEL(Op, kernel, ...)                   \
    FH_LAUNCH(Op) {                                         \
        gpu.kernels().kernel(gpu.stream(), __VA_ARGS__, a); \
    }                                                       \
    static_assert(true)

/// Checks the op's arguments, then runs its CUDA launch rule on a CUDA device or its CPU twin.
/// check, launch and cpu are found by overload on the argument struct's type. A check that
/// returns bool says whether there is work (false: nothing to do, e.g. no rows).
template <class Op>
void run(Device& device, const Op& op) {
    if constexpr (std::is_same_v<decltype(check(op)), bool>) {
        if (!check(op)) return;
    } else {
        check(op);
    }
    if (CudaDevice* gpu = device.cuda()) return launch(*gpu, op);
    cpu(op);
}

/// One warp per row, `warps` rows per block, `agents` grid rows, `smem` bytes of shared memory.
inline LaunchDims warp_rows(long long rows, int warps, std::size_t agents = 1, std::size_t smem = 0) {
    return LaunchDims{dim3(static_cast<unsigned>((rows + warps - 1) / warps), static_cast<unsigned>(agents)),
                      dim3(32 * static_cast<unsigned>(warps)), smem};
}

}  // namespace fh::ops
