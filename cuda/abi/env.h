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

namespace fh::ops {

/// Resets the environments whose mask entry is non-zero; an empty mask resets all.
/// portfolio (n_envs * PORTFOLIO_STRIDE), mask (n_envs) or empty. With `agents` (device memory,
/// abi::EnvAgent; env_step and env_gather_states alike) the environments are several agents'
/// (n_envs / agents each), each on its agent's market and seed; `market` is then the first agent's.
struct EnvReset {
    View<env::EnvState> state;
    View<float> portfolio;
    View<const std::uint8_t> mask;
    env::MarketView market;
    env::EnvParams params;
    View<const abi::EnvAgent> agents{};
};

/// Steps every environment; actions must lie in [0, position_levels * urgency_levels).
/// reward, done, info, actions (n_envs); all buffers distinct.
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

/// states (n_envs * state_dim) = [features of bar t | portfolio features] per environment.
struct EnvGatherStates {
    View<float> states;
    View<const env::EnvState> state;
    View<const float> portfolio;
    env::MarketView market;
    env::EnvParams params;
    View<const abi::EnvAgent> agents{};
};

/// actions[e] uniformly random in [0, num_actions), a function of (seed, e, step) only.
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
    if (!agents.empty() && (n % agents.size() != 0 || n == 0))
        throw std::invalid_argument(
            fmt::format("ops::{}: {} environments do not split into {} agents", op, n, agents.size()));
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
    detail::require_distinct("env_reset", {detail::range("state", state), detail::range("portfolio", portfolio),
                                           detail::range("mask", mask)});
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
    detail::require_distinct("env_step", {detail::range("state", state), detail::range("portfolio", portfolio),
                                          detail::range("reward", reward), detail::range("done", done),
                                          detail::range("info", info), detail::range("actions", actions)});
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
    detail::require_distinct("env_gather_states", {detail::range("states", states), detail::range("state", state),
                                                   detail::range("portfolio", portfolio)});
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
