/// @file iql_awr.h
/// @brief Signature of cuda/kernels/iql_awr.cu: the advantage-weighted (AWR) policy loss of
///        IQL (math in math/iql.h, the softmax in math/policy.h).
#pragma once

#include "math/iql.h"

namespace fh::abi {

/// Per row (iql::awr_row): adv = min(q1, q2)[a] - v (target twins), weights[b] =
/// min(exp(min(beta adv, 80)), max_weight), loss[b] = -weights[b] log softmax(logits[b])[a],
/// d_logits (B, A) = weights[b] (softmax - onehot(a)) / B. Outputs distinct from each other and
/// the inputs. Over `agents` batches of B = `batch` rows (iql_value.h): beta and max_weight are
/// scalars[r / B]'s, or the arguments when scalars is null.
using AwrPolicyLoss = void(float* __restrict__ loss, float* __restrict__ weights, float* __restrict__ d_logits,
                           const float* __restrict__ logits, const float* __restrict__ q1, const float* __restrict__ q2,
                           const float* __restrict__ v, const int* __restrict__ actions, float beta, float max_weight,
                           int num_actions, int batch, const iql::LossScalars* __restrict__ scalars, int agents);

}  // namespace fh::abi

#define FH_KERNELS_iql_awr(FH_KERNEL) FH_KERNEL(iql_awr, awr_policy_loss_kernel, AwrPolicyLoss)
