/// @file env.h
/// @brief Signatures of cuda/kernels/env.cu (the vectorized environment), declared once.
#pragma once

#include <cstdint>

#include "math/env.h"

namespace fh::abi {

/// One agent's own market and episode seed when the environments of several agents (a
/// population's) step in one launch: environment e belongs to agent e / envs_per_agent, is that
/// agent's environment e % envs_per_agent, trades agents[agent].market and draws its episode
/// starts with agents[agent].seed in place of params.seed. Agents whose run.seed differs draw
/// different starts and, on the synthetic market, trade different bars.
struct EnvAgent {
    env::MarketView market;
    std::uint64_t seed;
};

/// Resets the environments whose reset_mask entry is non-zero (all when reset_mask is null):
/// new start bar from the counter RNG, flat, initial equity; rewrites their portfolio rows.
/// state (n_envs), portfolio (n_envs, PORTFOLIO_STRIDE), reset_mask (n_envs) or null.
/// agents null: every environment on `market` with params.seed; else (n_envs / envs_per_agent)
/// EnvAgents (the three kernels below alike).
using EnvReset = void(env::EnvState* __restrict__ state, float* __restrict__ portfolio,
                      const std::uint8_t* __restrict__ reset_mask, env::MarketView market, env::EnvParams params,
                      int n_envs, const EnvAgent* __restrict__ agents, int envs_per_agent);

/// One step of every environment with actions[e] (env::step_env).
/// state (n_envs), portfolio (n_envs, PORTFOLIO_STRIDE), reward (n_envs), done (n_envs),
/// info (n_envs), actions (n_envs): all distinct buffers.
using EnvStep = void(env::EnvState* __restrict__ state, float* __restrict__ portfolio, float* __restrict__ reward,
                     std::uint8_t* __restrict__ done, env::StepInfo* __restrict__ info, const int* __restrict__ actions,
                     env::MarketView market, env::EnvParams params, int n_envs, const EnvAgent* __restrict__ agents,
                     int envs_per_agent);

/// states[e] = [features of bar t_e (market_dim) | portfolio row e (kPortfolioFeatures)].
/// states (n_envs, state_dim), state (n_envs), portfolio (n_envs, PORTFOLIO_STRIDE).
using EnvGatherStates = void(float* __restrict__ states, const env::EnvState* __restrict__ state,
                             const float* __restrict__ portfolio, env::MarketView market, env::EnvParams params,
                             int n_envs, const EnvAgent* __restrict__ agents, int envs_per_agent);

/// actions[e] = env::random_action(seed, e, step, num_actions).
using EnvRandomActions = void(int* actions, std::uint64_t seed, std::uint64_t step, int num_actions, int n_envs);

}  // namespace fh::abi

#define FH_KERNELS_env(FH_KERNEL)                             \
    FH_KERNEL(env, env_reset_kernel, EnvReset)                \
    FH_KERNEL(env, env_step_kernel, EnvStep)                  \
    FH_KERNEL(env, env_gather_states_kernel, EnvGatherStates) \
    FH_KERNEL(env, env_random_actions_kernel, EnvRandomActions)
