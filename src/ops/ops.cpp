/// @file ops.cpp
/// @brief The checks shared by both backends, and the ops composed from others.
#include "ops/checks.hpp"
#include "ops/ops.hpp"

#include <fmt/format.h>

#include <limits>

namespace fh::ops {

void Ops::require_same_size(std::size_t a, std::size_t b, const char* op) {
    if (a != b)
        throw std::invalid_argument(fmt::format("ops::{}: size mismatch ({} vs {} elements)", op, a, b));
}

int Ops::checked_int_size(std::size_t n, const char* op) {
    if (n > static_cast<std::size_t>(std::numeric_limits<int>::max()))
        throw std::invalid_argument(
            fmt::format("ops::{}: {} elements exceed the kernels' int index range", op, n));
    return static_cast<int>(n);
}

void Ops::fill(View<float> y, float value) {
    checked_int_size(y.size(), "fill");
    if (!y.empty()) fill_impl(y, value);
}

void Ops::copy(View<float> dst, View<const float> src) {
    require_same_size(dst.size(), src.size(), "copy");
    checked_int_size(dst.size(), "copy");
    if (overlaps(dst, View<const float>(src)))
        throw std::invalid_argument("ops::copy: dst and src overlap; the copy kernel's pointers are "
                                    "__restrict__ and must refer to distinct buffers");
    if (!dst.empty()) copy_impl(dst, src);
}

void Ops::saxpy(View<float> y, float a, View<const float> x) {
    require_same_size(y.size(), x.size(), "saxpy");
    checked_int_size(y.size(), "saxpy");
    if (overlaps(y, x))
        throw std::invalid_argument(
            "ops::saxpy: y and x overlap. The saxpy kernel's pointers are __restrict__, so an "
            "aliased call is undefined behaviour (it produced NaNs in the earlier system). To scale "
            "a buffer in place use ops::scale (scale_f32_kernel).");
    if (!y.empty()) saxpy_impl(y, a, x);
}

void Ops::scale(View<float> y, float alpha) {
    checked_int_size(y.size(), "scale");
    if (!y.empty()) scale_impl(y, alpha);
}

namespace {

void check_env_params(const env::EnvParams& p, const env::MarketView& m) {
    if (p.position_levels < 1 || p.position_levels % 2 == 0)
        throw std::invalid_argument(fmt::format("env: position_levels must be odd and >= 1, got {}", p.position_levels));
    if (p.urgency_levels < 1 || p.urgency_levels > 3)
        throw std::invalid_argument(fmt::format("env: urgency_levels must be 1..3, got {}", p.urgency_levels));
    if (p.state_dim != p.market_dim + env::kPortfolioFeatures)
        throw std::invalid_argument(fmt::format("env: state_dim {} != market_dim {} + {} portfolio features",
                                                p.state_dim, p.market_dim, env::kPortfolioFeatures));
    if (p.episode_length < 1 || p.max_contracts < 1 || !(p.initial_equity > 0) || !(p.tick_size > 0))
        throw std::invalid_argument("env: episode_length, max_contracts, initial_equity and tick_size must be positive");
    if (m.n_starts < 1 || m.n_bars < 2)
        throw std::invalid_argument("env: the market has no valid episode start");
}

}  // namespace

void Ops::env_reset(View<env::EnvState> state, View<float> portfolio, View<const std::uint8_t> mask,
                    const env::MarketView& market, const env::EnvParams& params) {
    check_env_params(params, market);
    const std::size_t n = state.size();
    checked_int_size(n, "env_reset");
    require_same_size(portfolio.size(), n * env::PORTFOLIO_STRIDE, "env_reset (portfolio)");
    if (!mask.empty()) require_same_size(mask.size(), n, "env_reset (mask)");
    detail::require_distinct("env_reset", {detail::range("state", state), detail::range("portfolio", portfolio),
                                           detail::range("mask", mask)});
    if (n) env_reset_impl(state, portfolio, mask, market, params);
}

void Ops::env_step(View<env::EnvState> state, View<float> portfolio, View<float> reward,
                   View<std::uint8_t> done, View<env::StepInfo> info, View<const int> actions,
                   const env::MarketView& market, const env::EnvParams& params) {
    check_env_params(params, market);
    const std::size_t n = state.size();
    checked_int_size(n, "env_step");
    require_same_size(portfolio.size(), n * env::PORTFOLIO_STRIDE, "env_step (portfolio)");
    require_same_size(reward.size(), n, "env_step (reward)");
    require_same_size(done.size(), n, "env_step (done)");
    require_same_size(info.size(), n, "env_step (info)");
    require_same_size(actions.size(), n, "env_step (actions)");
    detail::require_distinct("env_step", {detail::range("state", state), detail::range("portfolio", portfolio),
                                          detail::range("reward", reward), detail::range("done", done),
                                          detail::range("info", info), detail::range("actions", actions)});
    if (n) env_step_impl(state, portfolio, reward, done, info, actions, market, params);
}

void Ops::gather_states(View<float> states, View<const env::EnvState> state,
                        View<const float> portfolio, const env::MarketView& market,
                        const env::EnvParams& params) {
    check_env_params(params, market);
    const std::size_t n = state.size();
    require_same_size(states.size(), n * static_cast<std::size_t>(params.state_dim), "gather_states");
    require_same_size(portfolio.size(), n * env::PORTFOLIO_STRIDE, "gather_states (portfolio)");
    checked_int_size(states.size(), "gather_states");
    detail::require_distinct("gather_states", {detail::range("states", states), detail::range("state", state),
                                               detail::range("portfolio", portfolio)});
    if (n) gather_states_impl(states, state, portfolio, market, params);
}

void Ops::random_actions(View<int> actions, std::uint64_t seed, std::uint64_t step, int num_actions) {
    checked_int_size(actions.size(), "random_actions");
    if (num_actions < 1) throw std::invalid_argument("ops::random_actions: num_actions must be >= 1");
    if (!actions.empty()) random_actions_impl(actions, seed, step, num_actions);
}

void blend_c51_mse_gradient(Ops& ops, View<float> c51_grad, View<const float> mse_grad,
                            float alpha) {
    if (!(alpha >= 0.f && alpha <= 1.f))
        throw std::invalid_argument(fmt::format("blend: alpha {} is outside [0, 1]", alpha));
    ops.scale(c51_grad, alpha);                // c51 *= alpha (single pointer, in place)
    ops.saxpy(c51_grad, 1.f - alpha, mse_grad);  // c51 += (1 - alpha) * mse (distinct buffers)
}

}  // namespace fh::ops
