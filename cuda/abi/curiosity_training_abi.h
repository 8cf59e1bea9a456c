/// @file curiosity_training_abi.h
/// @brief Signatures of cuda/curiosity_training_kernel.cu: the elementwise parts of the
///        curiosity forward model (the MLP itself is nn::Mlp on the network ops).
#pragma once

#include "abi/ppo_math.h"

namespace fh::abi {

/// For e < n: input row e (D + num_actions) = ppo::curiosity_input_row(states row e, actions[e]);
/// states (n, D). Buffers distinct.
using CuriosityInput = void(float* __restrict__ input, const float* __restrict__ states,
                            const int* __restrict__ actions, int D, int num_actions, int n);
/// For e < n: error[e] = ppo::curiosity_error_row(d_pred row e, pred row e, next_states row e,
/// P, n); pred, d_pred (n, P), next_states (n, state_dim), P <= state_dim. Buffers distinct.
using CuriosityError = void(float* __restrict__ error, float* __restrict__ d_pred,
                            const float* __restrict__ pred, const float* __restrict__ next_states,
                            int P, int state_dim, int n);

}  // namespace fh::abi

#define FH_CURIOSITY_TRAINING_KERNELS(FH_KERNEL)                                \
    FH_KERNEL(curiosity_training_kernel, curiosity_input_kernel, CuriosityInput) \
    FH_KERNEL(curiosity_training_kernel, curiosity_error_kernel, CuriosityError)
