/// @file nn_guard.h
/// @brief Kernel signature of cuda/kernels/nn_guard.cu, the training guard (math: cuda/math/nn.h).
#pragma once

#include "math/nn.h"

namespace fh::abi {

using nn::GuardState;

/// gate[0] = guard_decide(state, losses (n_losses), grad_norm[0], update). One thread.
/// update_from (1) or null: the update number read from device memory instead of `update`.
using TrainingGuard = void(int* __restrict__ gate, GuardState* __restrict__ state,
                           const float* __restrict__ losses, int n_losses,
                           const float* __restrict__ grad_norm, long long update,
                           const long long* __restrict__ update_from);

}  // namespace fh::abi

#define FH_KERNELS_nn_guard(FH_KERNEL) \
    FH_KERNEL(nn_guard, training_guard_kernel, TrainingGuard)
