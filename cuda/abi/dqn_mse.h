/// @file dqn_mse.h
/// @brief Signature of cuda/kernels/dqn_mse.cu: the MSE loss on the expected Q.
#pragma once

#include "math/dqn.h"

namespace fh::abi {

/// Per sample: a* = argmax q_next_select (B, A); y = returns + discounts * q_next_target[a*];
/// loss[b] = 0.5 (q[b, a_b] - y)^2, td[b] = q[b, a_b] - y, d_logits (B, A, Z) = gradient / B on
/// the taken action's row, 0 elsewhere. All buffers distinct.
using MseLoss = void(float* __restrict__ loss, float* __restrict__ d_logits, float* __restrict__ td,
                     const float* __restrict__ probs, const float* __restrict__ q,
                     const float* __restrict__ q_next_select, const float* __restrict__ q_next_target,
                     const int* __restrict__ actions, const float* __restrict__ returns,
                     const float* __restrict__ discounts, dqn::HeadParams head, int batch);

}  // namespace fh::abi

#define FH_KERNELS_dqn_mse(FH_KERNEL) FH_KERNEL(dqn_mse, mse_loss_kernel, MseLoss)
