/// @file iql_value.h
/// @brief Signatures of cuda/kernels/iql_value.cu: the IQL expectile value loss and the twin-Q
///        TD loss (math in math/iql.h).
#pragma once

#include "math/iql.h"

namespace fh::abi {

/// Both losses run over `agents` batches of B = `batch` rows, one after the other (a population's
/// agents; 1 for one agent): row r is agent r / B's, each agent's rows scaled by 1 / B as its own
/// batch's.
/// Per row (iql::value_row): q = min(q1, q2)[a] of the target twins (B, A), u = q - v,
/// loss[b] = |tau - 1(u < 0)| u^2, d_v[b] = -2 w u / B. loss, d_v distinct from the inputs;
/// the read-only inputs may share memory. tau = scalars[r / B].expectile, or `expectile` when
/// scalars is null.
using IqlValueLoss = void(float* __restrict__ loss, float* __restrict__ d_v, const float* __restrict__ v,
                          const float* __restrict__ q1, const float* __restrict__ q2, const int* __restrict__ actions,
                          float expectile, int num_actions, int batch, const iql::LossScalars* __restrict__ scalars,
                          int agents);

/// Per row (iql::q_row): y = rewards + discounts * v_next, loss[b] = (q1[a] - y)^2 + (q2[a] - y)^2
/// of the online twins (B, A); d_q1, d_q2 (B, A) = 2 (q - y) / B at column a, 0 elsewhere.
/// Outputs distinct from each other and the inputs.
using IqlQLoss = void(float* __restrict__ loss, float* __restrict__ d_q1, float* __restrict__ d_q2,
                      const float* __restrict__ q1, const float* __restrict__ q2, const int* __restrict__ actions,
                      const float* __restrict__ rewards, const float* __restrict__ discounts,
                      const float* __restrict__ v_next, int num_actions, int batch, int agents);

}  // namespace fh::abi

#define FH_KERNELS_iql_value(FH_KERNEL)                       \
    FH_KERNEL(iql_value, iql_value_loss_kernel, IqlValueLoss) \
    FH_KERNEL(iql_value, iql_q_loss_kernel, IqlQLoss)
