/// @file experience_abi.h
/// @brief Signatures of cuda/experience_kernels.cu (the vectorized environment), declared once.
#pragma once

#include <cstdint>

#include "abi/futures_env.h"

namespace fh::abi {

/// Resets the environments whose reset_mask entry is non-zero (all when reset_mask is null):
/// new start bar from the counter RNG, flat, initial equity; rewrites their portfolio rows.
/// state (n_envs), portfolio (n_envs, PORTFOLIO_STRIDE), reset_mask (n_envs) or null.
using ExperienceEnvReset = void(env::EnvState* __restrict__ state, float* __restrict__ portfolio,
                                const std::uint8_t* __restrict__ reset_mask, env::MarketView market,
                                env::EnvParams params, int n_envs);

/// One step of every environment with actions[e] (env::step_env).
/// state (n_envs), portfolio (n_envs, PORTFOLIO_STRIDE), reward (n_envs), done (n_envs),
/// info (n_envs), actions (n_envs): all distinct buffers.
using ExperienceEnvStep = void(env::EnvState* __restrict__ state, float* __restrict__ portfolio,
                               float* __restrict__ reward, std::uint8_t* __restrict__ done,
                               env::StepInfo* __restrict__ info, const int* __restrict__ actions,
                               env::MarketView market, env::EnvParams params, int n_envs);

/// states[e] = [features of bar t_e (market_dim) | portfolio row e (kPortfolioFeatures)].
/// states (n_envs, state_dim), state (n_envs), portfolio (n_envs, PORTFOLIO_STRIDE).
using ExperienceStateGather = void(float* __restrict__ states, const env::EnvState* __restrict__ state,
                                   const float* __restrict__ portfolio, env::MarketView market,
                                   env::EnvParams params, int n_envs);

/// actions[e] = env::random_action(seed, e, step, num_actions).
using ExperienceRandomActions = void(int* actions, std::uint64_t seed, std::uint64_t step,
                                     int num_actions, int n_envs);

}  // namespace fh::abi

#define FH_EXPERIENCE_KERNELS(FH_KERNEL)                                                 \
    FH_KERNEL(experience_kernels, experience_env_reset_kernel, ExperienceEnvReset)       \
    FH_KERNEL(experience_kernels, experience_env_step_kernel, ExperienceEnvStep)         \
    FH_KERNEL(experience_kernels, experience_state_gather_kernel, ExperienceStateGather) \
    FH_KERNEL(experience_kernels, experience_random_actions_kernel, ExperienceRandomActions)
