/// @file ppo_curiosity.h
/// @brief Signatures of cuda/kernels/ppo_curiosity.cu: the elementwise parts of the
///        curiosity forward model (the MLP itself is nn::Mlp on the network ops).
#pragma once

#include "math/ppo.h"

namespace fh::abi {

/// For e < n: input row e (D + num_actions) = ppo::curiosity_input_row(states row e, actions[e]);
/// states (n, D). Buffers distinct.
using CuriosityInput = void(float* __restrict__ input, const float* __restrict__ states,
                            const int* __restrict__ actions, int D, int num_actions, int n);
/// For e < n: error[e] = ppo::curiosity_error_row(d_pred row e, pred row e, next_states row e,
/// P, n); pred, d_pred (n, P), next_states (n, state_dim), P <= state_dim. Buffers distinct.
using CuriosityError = void(float* __restrict__ error, float* __restrict__ d_pred, const float* __restrict__ pred,
                            const float* __restrict__ next_states, int P, int state_dim, int n);

}  // namespace fh::abi

#define FH_KERNELS_ppo_curiosity(FH_KERNEL)                          \
    FH_KERNEL(ppo_curiosity, curiosity_input_kernel, CuriosityInput) \
    FH_KERNEL(ppo_curiosity, curiosity_error_kernel, CuriosityError)
