/// @file ppo_minibatch.h
/// @brief Signature of cuda/kernels/ppo_minibatch.cu: a shuffled minibatch of the rollout.
#pragma once

#include <cstdint>

#include "math/core.h"
#include "math/ppo.h"

namespace fh::abi {

/// Minibatch rows per warp of ppo_gather_kernel as the trainer launches it: measured on an H200
/// against 1 and 8 (docs/performance-log.md, "Batched PPO populations"), fastest for one agent and for 16.
inline constexpr int kPpoGatherRowsPerWarp = 4;

/// For i < batch: ppo::gather_row(i, rollout, seed, epoch, offset, ...): states (batch,
/// state_dim), the rest (batch). Outputs distinct from each other and from the rollout.
/// Launch: a warp per rows_per_warp (1 to 32) rows, blocks of whole warps, any grid in x. Several
/// agents: grid y = agents, agent y's minibatch (rows y batch..) from its rollout
/// (ppo::agent_rollout(rollout, y)) with agent_seeds[y] (null: `seed`).
using PpoGather = void(float* __restrict__ states, int* __restrict__ actions, float* __restrict__ old_log_probs,
                       float* __restrict__ advantages, float* __restrict__ returns, float* __restrict__ old_values,
                       ppo::RolloutView rollout, std::uint64_t seed, core::CounterValue epoch, int offset, int batch,
                       int rows_per_warp, const std::uint64_t* __restrict__ agent_seeds);

/// lr[0] = ppo::scheduled_learning_rate(base_lr, linear, total_rollouts, rollouts.value()):
/// this rollout's learning rate, which Adam then reads from device memory. One thread.
using PpoLearningRate = void(float* __restrict__ lr, double base_lr, int linear, double total_rollouts,
                             core::CounterValue rollouts);

}  // namespace fh::abi

#define FH_KERNELS_ppo_minibatch(FH_KERNEL)                \
    FH_KERNEL(ppo_minibatch, ppo_gather_kernel, PpoGather) \
    FH_KERNEL(ppo_minibatch, ppo_learning_rate_kernel, PpoLearningRate)
