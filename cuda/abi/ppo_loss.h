/// @file ppo_loss.h
/// @brief Signature of cuda/kernels/ppo_loss.cu: the clipped surrogate, value and entropy losses
///        and their gradients.
#pragma once

#include "math/ppo.h"

namespace fh::abi {

/// For i < batch: ppo::loss_sample(i, batch, rows_per_agent, num_actions, ...) with row i's
/// agent_params[i / rows_per_agent] (agent_params null: params, rows_per_agent = batch), with each row's sums over
/// kPpoLossLanes lanes: stats (kPpoLossStats, batch), d_logits and logits (batch, num_actions), the
/// rest (batch). Outputs distinct from each other and from the inputs. Launch: blocks of
/// kPpoLossThreads threads, kPpoLossLanes lanes per sample (grid-stride over the groups).
using PpoLoss = void(float* __restrict__ stats, float* __restrict__ d_logits, float* __restrict__ d_values,
                     const float* __restrict__ logits, const float* __restrict__ values,
                     const int* __restrict__ actions, const float* __restrict__ old_log_probs,
                     const float* __restrict__ advantages, const float* __restrict__ returns,
                     const float* __restrict__ old_values, ppo::LossParams params, int num_actions, int batch,
                     const ppo::LossParams* __restrict__ agent_params, int rows_per_agent);
inline constexpr int kPpoLossThreads = 256;
/// Lanes per sample: a group of eight adds a row of PPO's 45 actions in six steps a lane and three
/// shuffles, where a warp's 32 lanes repeat the sample's scalar work 32 times.
inline constexpr int kPpoLossLanes = 8;

}  // namespace fh::abi

#define FH_KERNELS_ppo_loss(FH_KERNEL) FH_KERNEL(ppo_loss, ppo_loss_kernel, PpoLoss)
