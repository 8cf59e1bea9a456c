/// @file nn_guard.h
/// @brief The training guard, its kernel in cuda/kernels/nn_guard.cu (math: math/nn.h). CPU twin:
///        src/ops/nn/cpu.cpp.
#pragma once

#include "abi/view.h"
#include "math/core.h"
#include "math/nn.h"

namespace fh::ops {

/// gate (1) = 1 when every loss (n_losses) and the gradient norm (1) are finite, else 0
/// (nn::guard_decide); updates the guard counters state (1). `update` is the update number, from
/// the host or from device memory (counter_value: a captured update's counter). One thread.
struct TrainingGuard {
    View<int> gate;
    View<nn::GuardState> state;
    View<const float> losses;
    View<const float> grad_norm;
    core::CounterValue update;
};

}  // namespace fh::ops

#define FH_KERNELS_nn_guard(FH_KERNEL) FH_KERNEL(nn_guard, training_guard_kernel, Op<fh::ops::TrainingGuard>)

#ifndef __CUDACC__
#include "ops/op_begin.hpp"

inline void check(const TrainingGuard& a) {
    detail::require_sizes(1, "training_guard", {FH_SIZES_OF(a, gate, state, grad_norm)});
    if (a.losses.empty()) throw std::invalid_argument("ops::training_guard: no losses");
    detail::require_distinct("training_guard", {FH_RANGES_OF(a, gate, state, losses, grad_norm)});
}
FH_LAUNCH_KERNEL(TrainingGuard, training_guard_kernel, LaunchDims{dim3(1), dim3(32), 0});

#include "ops/op_end.hpp"
#endif
