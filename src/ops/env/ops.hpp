/// @file ops.hpp
/// @brief The environment op family: reset, step, observations and random actions of n_envs trading
///        environments (the math: math/env.h; the rules: docs/environment.md).
///
/// Each op checks its arguments here, once, then runs its CPU twin (cpu_twin::, plain loops over
/// the shared math, src/ops/env/cpu.cpp) or its CUDA twin (cuda_twin::, the kernels of
/// cuda/kernels/env.cu, launched by src/ops/env/cuda.cpp).
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <stdexcept>

#include "abi/env.h"
#include "math/env.h"
#include "ops/device.hpp"

namespace fh::ops {

namespace cpu_twin {
void env_reset(View<env::EnvState> state, View<float> portfolio, View<const std::uint8_t> mask,
               const env::MarketView& market, const env::EnvParams& params, View<const abi::EnvAgent> agents);
void env_step(View<env::EnvState> state, View<float> portfolio, View<float> reward, View<std::uint8_t> done,
              View<env::StepInfo> info, View<const int> actions, const env::MarketView& market,
              const env::EnvParams& params, View<const abi::EnvAgent> agents);
void env_gather_states(View<float> states, View<const env::EnvState> state, View<const float> portfolio,
                       const env::MarketView& market, const env::EnvParams& params, View<const abi::EnvAgent> agents);
void env_random_actions(View<int> actions, std::uint64_t seed, std::uint64_t step, int num_actions);
}  // namespace cpu_twin

namespace cuda_twin {
void env_reset(CudaDevice& device, View<env::EnvState> state, View<float> portfolio, View<const std::uint8_t> mask,
               const env::MarketView& market, const env::EnvParams& params, View<const abi::EnvAgent> agents);
void env_step(CudaDevice& device, View<env::EnvState> state, View<float> portfolio, View<float> reward,
              View<std::uint8_t> done, View<env::StepInfo> info, View<const int> actions, const env::MarketView& market,
              const env::EnvParams& params, View<const abi::EnvAgent> agents);
void env_gather_states(CudaDevice& device, View<float> states, View<const env::EnvState> state,
                       View<const float> portfolio, const env::MarketView& market, const env::EnvParams& params,
                       View<const abi::EnvAgent> agents);
void env_random_actions(CudaDevice& device, View<int> actions, std::uint64_t seed, std::uint64_t step, int num_actions);
}  // namespace cuda_twin

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
}  // namespace detail

/// Resets the environments whose mask entry is non-zero; an empty mask resets all.
/// portfolio (n_envs * PORTFOLIO_STRIDE), mask (n_envs) or empty. With `agents` (device memory,
/// abi::EnvAgent; env_step and env_gather_states alike) the environments are several agents'
/// (n_envs / agents each), each on its agent's market and seed; `market` is then the first agent's.
inline void env_reset(Device& device, View<env::EnvState> state, View<float> portfolio, View<const std::uint8_t> mask,
                      const env::MarketView& market, const env::EnvParams& params,
                      View<const abi::EnvAgent> agents = {}) {
    detail::check_env_params(params, market);
    const std::size_t n = state.size();
    detail::check_env_agents(n, agents, "env_reset");
    detail::checked_int_size(n, "env_reset");
    detail::require_same_size(portfolio.size(), n * env::PORTFOLIO_STRIDE, "env_reset (portfolio)");
    if (!mask.empty()) detail::require_same_size(mask.size(), n, "env_reset (mask)");
    detail::require_distinct("env_reset", {detail::range("state", state), detail::range("portfolio", portfolio),
                                           detail::range("mask", mask)});
    if (n) {
        if (CudaDevice* cuda = device.cuda())
            return cuda_twin::env_reset(*cuda, state, portfolio, mask, market, params, agents);
        cpu_twin::env_reset(state, portfolio, mask, market, params, agents);
    }
}

/// Steps every environment; actions must lie in [0, position_levels * urgency_levels).
/// reward, done, info, actions (n_envs); all buffers distinct.
inline void env_step(Device& device, View<env::EnvState> state, View<float> portfolio, View<float> reward,
                     View<std::uint8_t> done, View<env::StepInfo> info, View<const int> actions,
                     const env::MarketView& market, const env::EnvParams& params,
                     View<const abi::EnvAgent> agents = {}) {
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
    if (n) {
        if (CudaDevice* cuda = device.cuda())
            return cuda_twin::env_step(*cuda, state, portfolio, reward, done, info, actions, market, params, agents);
        cpu_twin::env_step(state, portfolio, reward, done, info, actions, market, params, agents);
    }
}

/// states (n_envs * state_dim) = [features of bar t | portfolio features] per environment.
inline void env_gather_states(Device& device, View<float> states, View<const env::EnvState> state,
                              View<const float> portfolio, const env::MarketView& market, const env::EnvParams& params,
                              View<const abi::EnvAgent> agents = {}) {
    detail::check_env_params(params, market);
    const std::size_t n = state.size();
    detail::check_env_agents(n, agents, "env_gather_states");
    detail::require_same_size(states.size(), n * static_cast<std::size_t>(params.state_dim), "env_gather_states");
    detail::require_same_size(portfolio.size(), n * env::PORTFOLIO_STRIDE, "env_gather_states (portfolio)");
    detail::checked_int_size(states.size(), "env_gather_states");
    detail::require_distinct("env_gather_states", {detail::range("states", states), detail::range("state", state),
                                                   detail::range("portfolio", portfolio)});
    if (n) {
        if (CudaDevice* cuda = device.cuda())
            return cuda_twin::env_gather_states(*cuda, states, state, portfolio, market, params, agents);
        cpu_twin::env_gather_states(states, state, portfolio, market, params, agents);
    }
}

/// actions[e] uniformly random in [0, num_actions), a function of (seed, e, step) only.
inline void env_random_actions(Device& device, View<int> actions, std::uint64_t seed, std::uint64_t step,
                               int num_actions) {
    detail::checked_int_size(actions.size(), "env_random_actions");
    if (num_actions < 1) throw std::invalid_argument("ops::env_random_actions: num_actions must be >= 1");
    if (!actions.empty()) {
        if (CudaDevice* cuda = device.cuda())
            return cuda_twin::env_random_actions(*cuda, actions, seed, step, num_actions);
        cpu_twin::env_random_actions(actions, seed, step, num_actions);
    }
}

}  // namespace fh::ops
