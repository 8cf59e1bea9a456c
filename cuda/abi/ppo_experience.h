/// @file ppo_experience.h
/// @brief Signatures of cuda/kernels/ppo_experience.cu: PPO action sampling and the
///        action-diversity penalty during collection.
#pragma once

#include <cstdint>

#include "math/core.h"
#include "math/ppo.h"

namespace fh::abi {

/// For e < n: actions[e] = ppo::sample_action(logits + e * num_actions, ..., log_probs[e]);
/// logits (n, num_actions). All buffers distinct. agent_seeds null: `seed` and index e; else
/// several agents' environments: agent_seeds[e / envs_per_agent] and index e % envs_per_agent.
using PpoSample = void(int* __restrict__ actions, float* __restrict__ log_probs, const float* __restrict__ logits,
                       int num_actions, std::uint64_t seed, core::CounterValue step, int n,
                       const std::uint64_t* __restrict__ agent_seeds, int envs_per_agent);
/// For e < n: penalty[e] = ppo::diversity_update(window + e * W, counts + e * num_actions,
/// actions[e], ...); window (n, W), counts (n, num_actions). All buffers distinct. agent_coef null:
/// `coef`; else agent_coef[e / envs_per_agent] (several agents' environments).
using PpoDiversity = void(int* __restrict__ window, int* __restrict__ counts, float* __restrict__ penalty,
                          const int* __restrict__ actions, int num_actions, int W, float coef, core::CounterValue step,
                          int n, const float* __restrict__ agent_coef, int envs_per_agent);

}  // namespace fh::abi

#define FH_KERNELS_ppo_experience(FH_KERNEL)                \
    FH_KERNEL(ppo_experience, ppo_sample_kernel, PpoSample) \
    FH_KERNEL(ppo_experience, ppo_diversity_kernel, PpoDiversity)
