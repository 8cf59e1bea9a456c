/// @file env.h
/// @brief Signatures of cuda/kernels/env.cu (the vectorized environment), declared once.
#pragma once

#include <cstdint>

#include "math/env.h"
#include "abi/view.h"

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

/// The kernels of the ops below (ops::EnvReset, ...), one thread per environment, on their
/// operands' pointers (an empty View: null) and n_envs. agents null: every environment on `market`
/// with params.seed; else environment e is agent e / envs_per_agent's.
using EnvReset = void(env::EnvState* __restrict__ state, float* __restrict__ portfolio,
                      const std::uint8_t* __restrict__ reset_mask, env::MarketView market, env::EnvParams params,
                      int n_envs, const EnvAgent* __restrict__ agents, int envs_per_agent);
using EnvStep = void(env::EnvState* __restrict__ state, float* __restrict__ portfolio, float* __restrict__ reward,
                     std::uint8_t* __restrict__ done, env::StepInfo* __restrict__ info, const int* __restrict__ actions,
                     env::MarketView market, env::EnvParams params, int n_envs, const EnvAgent* __restrict__ agents,
                     int envs_per_agent);
using EnvGatherStates = void(float* __restrict__ states, const env::EnvState* __restrict__ state,
                             const float* __restrict__ portfolio, env::MarketView market, env::EnvParams params,
                             int n_envs, const EnvAgent* __restrict__ agents, int envs_per_agent);
using EnvRandomActions = void(int* actions, std::uint64_t seed, std::uint64_t step, int num_actions, int n_envs);

}  // namespace fh::abi

namespace fh::ops {

/// Resets the environments whose mask entry is non-zero (an empty mask resets all): a new start bar
/// from the counter RNG, flat, initial equity; their portfolio rows rewritten. state, mask
/// (n_envs), portfolio (n_envs, PORTFOLIO_STRIDE). With `agents` (abi::EnvAgent; env_step and
/// env_gather_states alike) the environments are several agents' (n_envs / agents each), each on
/// its agent's market and seed; `market` is then the first agent's.
struct EnvReset {
    View<env::EnvState> state;
    View<float> portfolio;
    View<const std::uint8_t> mask;
    env::MarketView market;
    env::EnvParams params;
    View<const abi::EnvAgent> agents{};
};

/// One step of every environment with actions[e] (env::step_env); actions must lie in [0,
/// position_levels * urgency_levels). state, reward, done, info, actions (n_envs), portfolio
/// (n_envs, PORTFOLIO_STRIDE); all buffers distinct.
struct EnvStep {
    View<env::EnvState> state;
    View<float> portfolio;
    View<float> reward;
    View<std::uint8_t> done;
    View<env::StepInfo> info;
    View<const int> actions;
    env::MarketView market;
    env::EnvParams params;
    View<const abi::EnvAgent> agents{};
};

/// states (n_envs, state_dim) row e = [features of bar t_e (market_dim) | portfolio row e
/// (kPortfolioFeatures)]; state (n_envs), portfolio (n_envs, PORTFOLIO_STRIDE).
struct EnvGatherStates {
    View<float> states;
    View<const env::EnvState> state;
    View<const float> portfolio;
    env::MarketView market;
    env::EnvParams params;
    View<const abi::EnvAgent> agents{};
};

/// actions[e] = env::random_action(seed, e, step, num_actions): uniformly random in [0,
/// num_actions), a function of (seed, e, step) only.
struct EnvRandomActions {
    View<int> actions;
    std::uint64_t seed;
    std::uint64_t step;
    int num_actions;
};

}  // namespace fh::ops

#define FH_KERNELS_env(FH_KERNEL)                             \
    FH_KERNEL(env, env_reset_kernel, EnvReset)                \
    FH_KERNEL(env, env_step_kernel, EnvStep)                  \
    FH_KERNEL(env, env_gather_states_kernel, EnvGatherStates) \
    FH_KERNEL(env, env_random_actions_kernel, EnvRandomActions)

#ifndef __CUDACC__
#include "ops/op_begin.hpp"

namespace detail {
inline void check_env_params(const env::EnvParams& p, const env::MarketView& m) {
    if (p.position_levels < 1 || p.position_levels % 2 == 0)
        throw std::invalid_argument(
            fmt::format("env: position_levels must be odd and >= 1, got {}", p.position_levels));
    if (p.urgency_levels < 1 || p.urgency_levels > 3)
        throw std::invalid_argument(fmt::format("env: urgency_levels must be 1..3, got {}", p.urgency_levels));
    if (p.state_dim != p.market_dim + env::kPortfolioFeatures)
        throw std::invalid_argument(fmt::format("env: state_dim {} != market_dim {} + {} portfolio features",
                                                p.state_dim, p.market_dim, env::kPortfolioFeatures));
    if (p.episode_length < 1 || p.max_contracts < 1 || !(p.initial_equity > 0) || !(p.tick_size > 0))
        throw std::invalid_argument(
            "env: episode_length, max_contracts, initial_equity and tick_size must be positive");
    if (m.n_starts < 1 || m.n_bars < 2) throw std::invalid_argument("env: the market has no valid episode start");
}
/// With `agents` (a population's environments, abi::EnvAgent): n environments split evenly.
inline void check_env_agents(std::size_t n, View<const abi::EnvAgent> agents, const char* op) {
    require(agents.empty() || (n % agents.size() == 0 && n != 0), op, "{} environments do not split into {} agents", n,
            agents.size());
}
/// Environments per agent (all of them without agents).
inline int per_agent(std::size_t n, View<const abi::EnvAgent> agents) {
    return static_cast<int>(agents.empty() ? n : n / agents.size());
}
}  // namespace detail

inline bool check(const EnvReset& a) {
    const auto& [state, portfolio, mask, market, params, agents] = a;
    detail::check_env_params(params, market);
    const std::size_t n = state.size();
    detail::check_env_agents(n, agents, "env_reset");
    detail::checked_int_size(n, "env_reset");
    detail::require_same_size(portfolio.size(), n * env::PORTFOLIO_STRIDE, "env_reset (portfolio)");
    if (!mask.empty()) detail::require_same_size(mask.size(), n, "env_reset (mask)");
    detail::require_distinct("env_reset", {FH_RANGES(state, portfolio, mask)});
    return n > 0;
}
FH_LAUNCH(EnvReset) {
    const auto& [state, portfolio, mask, market, params, agents] = a;
    gpu.kernels().env_reset_kernel(gpu.stream(), LaunchDims::linear(state.size(), 128), state.data(), portfolio.data(),
                                   mask.empty() ? nullptr : mask.data(), market, params, static_cast<int>(state.size()),
                                   or_null(agents), detail::per_agent(state.size(), agents));
}

inline bool check(const EnvStep& a) {
    const auto& [state, portfolio, reward, done, info, actions, market, params, agents] = a;
    detail::check_env_params(params, market);
    const std::size_t n = state.size();
    detail::check_env_agents(n, agents, "env_step");
    detail::checked_int_size(n, "env_step");
    detail::require_same_size(portfolio.size(), n * env::PORTFOLIO_STRIDE, "env_step (portfolio)");
    detail::require_same_size(reward.size(), n, "env_step (reward)");
    detail::require_same_size(done.size(), n, "env_step (done)");
    detail::require_same_size(info.size(), n, "env_step (info)");
    detail::require_same_size(actions.size(), n, "env_step (actions)");
    detail::require_distinct("env_step", {FH_RANGES(state, portfolio, reward, done, info, actions)});
    return n > 0;
}
FH_LAUNCH(EnvStep) {
    const auto& [state, portfolio, reward, done, info, actions, market, params, agents] = a;
    gpu.kernels().env_step_kernel(gpu.stream(), LaunchDims::linear(state.size(), 128), state.data(), portfolio.data(),
                                  reward.data(), done.data(), info.data(), actions.data(), market, params,
                                  static_cast<int>(state.size()), or_null(agents),
                                  detail::per_agent(state.size(), agents));
}

inline bool check(const EnvGatherStates& a) {
    const auto& [states, state, portfolio, market, params, agents] = a;
    detail::check_env_params(params, market);
    const std::size_t n = state.size();
    detail::check_env_agents(n, agents, "env_gather_states");
    detail::require_same_size(states.size(), n * static_cast<std::size_t>(params.state_dim), "env_gather_states");
    detail::require_same_size(portfolio.size(), n * env::PORTFOLIO_STRIDE, "env_gather_states (portfolio)");
    detail::checked_int_size(states.size(), "env_gather_states");
    detail::require_distinct("env_gather_states", {FH_RANGES(states, state, portfolio)});
    return n > 0;
}
FH_LAUNCH(EnvGatherStates) {
    const auto& [states, state, portfolio, market, params, agents] = a;
    gpu.kernels().env_gather_states_kernel(gpu.stream(), LaunchDims::linear(states.size()), states.data(), state.data(),
                                           portfolio.data(), market, params, static_cast<int>(state.size()),
                                           or_null(agents), detail::per_agent(state.size(), agents));
}

inline bool check(const EnvRandomActions& a) {
    const auto& [actions, seed, step, num_actions] = a;
    detail::checked_int_size(actions.size(), "env_random_actions");
    if (num_actions < 1) throw std::invalid_argument("ops::env_random_actions: num_actions must be >= 1");
    return !actions.empty();
}
FH_LAUNCH(EnvRandomActions) {
    const auto& [actions, seed, step, num_actions] = a;
    gpu.kernels().env_random_actions_kernel(gpu.stream(), LaunchDims::linear(actions.size()), actions.data(), seed,
                                            step, num_actions, static_cast<int>(actions.size()));
}

#include "ops/op_end.hpp"
#endif
