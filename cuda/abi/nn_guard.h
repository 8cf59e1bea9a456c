/// @file nn_guard.h
/// @brief Kernel signature of cuda/kernels/nn_guard.cu, the training guard (math: math/nn.h).
#pragma once

#include "math/core.h"
#include "math/nn.h"

namespace fh::abi {

using nn::GuardState;

/// gate[0] = guard_decide(state, losses (n_losses), grad_norm[0], update.value()): the update
/// number from the launch or from device memory. One thread.
using TrainingGuard = void(int* __restrict__ gate, GuardState* __restrict__ state, const float* __restrict__ losses,
                           int n_losses, const float* __restrict__ grad_norm, core::CounterValue update);

}  // namespace fh::abi

#define FH_KERNELS_nn_guard(FH_KERNEL) FH_KERNEL(nn_guard, training_guard_kernel, TrainingGuard)
