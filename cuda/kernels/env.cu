/* env.cu — the vectorized futures environment.
 *
 * Math:        env::reset_env, env::step_env, env::portfolio_features in math/env.h,
 *              shared with the CPU twin (src/ops/env/cpu.cpp); rules in
 *              docs/environment.md.
 * Layout:      state (n_envs) EnvState; portfolio (n_envs, PORTFOLIO_STRIDE = 20) floats;
 *              states (n_envs, state_dim) floats = [market features of bar t | 8 portfolio
 *              features]; market arrays (n_bars) doubles, features (n_bars, market_dim) floats.
 * Agents:      with `agents` (a population's environments in one launch), environment e is
 *              agent e / envs_per_agent's environment e % envs_per_agent on that agent's market
 *              and seed (abi::EnvAgent): what a launch on that agent's environments alone computes.
 * Launch:      reset/step/random actions: one thread per environment, any 1-D grid (grid-stride);
 *              gather: one thread per (environment, column), any 1-D grid.
 * Determinism: exact. Compiled with --fmad=false (cuda/meson.build) so the double accounting
 *              rounds exactly as the host; random numbers are Philox counters. The GPU equals the
 *              CPU bit for bit (tests/env/test_vec_env.cpp, [gpu]).
 * Aliasing:    every pointer parameter of one launch is a distinct buffer (src/env/vec_env.cpp
 *              allocates each separately); __restrict__ is declared accordingly.
 * Signatures:  cuda/abi/env.h.
 */
#include "abi/env.h"
#include "device_functions.cuh"

using fh::device::global_thread_index;
using fh::device::grid_thread_count;
using namespace fh::env;

// Environment e's market and parameters, and its index within its agent (env_reset_kernel's
// starts are drawn for it): the launch's own, or with `agents` those of agent e / envs_per_agent.
struct EnvOf {
    MarketView market;
    EnvParams params;
    int index;
};
__device__ __forceinline__ EnvOf env_of(long long e, const MarketView& market, const EnvParams& params,
                                        const fh::abi::EnvAgent* __restrict__ agents, int envs_per_agent) {
    if (agents == nullptr) return {market, params, static_cast<int>(e)};
    const long long agent = e / envs_per_agent;
    EnvOf own{agents[agent].market, params, static_cast<int>(e - agent * envs_per_agent)};
    own.params.seed = agents[agent].seed;
    return own;
}

extern "C" __global__ void env_reset_kernel(EnvState* __restrict__ state, float* __restrict__ portfolio,
                                            const std::uint8_t* __restrict__ reset_mask, MarketView market,
                                            EnvParams params, int n_envs, const fh::abi::EnvAgent* __restrict__ agents,
                                            int envs_per_agent) {
    for (long long e = global_thread_index(); e < n_envs; e += grid_thread_count()) {
        if (reset_mask != nullptr && reset_mask[e] == 0) continue;
        const EnvOf own = env_of(e, market, params, agents, envs_per_agent);
        EnvState s = state[e];
        reset_env(s, own.index, own.market, own.params);
        state[e] = s;
        portfolio_features(s, own.market, own.params, portfolio + e * PORTFOLIO_STRIDE);
    }
}

extern "C" __global__ void env_step_kernel(EnvState* __restrict__ state, float* __restrict__ portfolio,
                                           float* __restrict__ reward, std::uint8_t* __restrict__ done,
                                           StepInfo* __restrict__ info, const int* __restrict__ actions,
                                           MarketView market, EnvParams params, int n_envs,
                                           const fh::abi::EnvAgent* __restrict__ agents, int envs_per_agent) {
    for (long long e = global_thread_index(); e < n_envs; e += grid_thread_count()) {
        const EnvOf own = env_of(e, market, params, agents, envs_per_agent);
        EnvState s = state[e];
        StepInfo step_info;
        std::uint8_t d = 0;
        reward[e] = step_env(s, actions[e], own.market, own.params, step_info, d);
        state[e] = s;
        done[e] = d;
        info[e] = step_info;
        portfolio_features(s, own.market, own.params, portfolio + e * PORTFOLIO_STRIDE);
    }
}

extern "C" __global__ void env_gather_states_kernel(float* __restrict__ states, const EnvState* __restrict__ state,
                                                    const float* __restrict__ portfolio, MarketView market,
                                                    EnvParams params, int n_envs,
                                                    const fh::abi::EnvAgent* __restrict__ agents, int envs_per_agent) {
    const long long total = static_cast<long long>(n_envs) * params.state_dim;
    for (long long i = global_thread_index(); i < total; i += grid_thread_count()) {
        const long long e = i / params.state_dim;
        const int col = static_cast<int>(i - e * params.state_dim);
        const float* features = agents == nullptr ? market.features : agents[e / envs_per_agent].market.features;
        states[i] =
            fh::env::observation_value(features, state[e].t, params.market_dim, portfolio + e * PORTFOLIO_STRIDE, col);
    }
}

extern "C" __global__ void env_random_actions_kernel(int* actions, std::uint64_t seed, std::uint64_t step,
                                                     int num_actions, int n_envs) {
    for (long long e = global_thread_index(); e < n_envs; e += grid_thread_count())
        actions[e] = random_action(seed, static_cast<int>(e), step, num_actions);
}

FH_KERNELS_env(FH_CHECK_KERNEL_ABI)
