/// @file iql_ops.cpp
/// @brief Argument checks of the IQL ops (sizes, scalar ranges, and the aliasing rule of
///        ops/checks.hpp: an output overlaps nothing, read-only inputs may share), shared by both
///        backends. The batch B is taken from a (B) vector, A = q1.size() / B.
#include <fmt/format.h>

#include <cmath>
#include <initializer_list>
#include <limits>

#include "ops/checks.hpp"
#include "ops/ops.hpp"

namespace fh::ops {
namespace {

using detail::range;
using detail::require_distinct;

using detail::require_size;

/// B >= 1 from a per-sample vector, A >= 1 from a (B, A) matrix; both within int range.
std::pair<int, int> batch_and_actions(std::size_t batch, std::size_t matrix, const char* op,
                                      const char* batch_name, const char* matrix_name) {
    if (batch == 0) throw std::invalid_argument(fmt::format("ops::{}: empty batch ({} is empty)", op, batch_name));
    if (matrix == 0 || matrix % batch != 0)
        throw std::invalid_argument(fmt::format(
            "ops::{}: {} has {} elements, not a positive multiple of the batch {} (the (B, A) layout)", op,
            matrix_name, matrix, batch));
    if (matrix > static_cast<std::size_t>(std::numeric_limits<int>::max()))
        throw std::invalid_argument(
            fmt::format("ops::{}: {} elements exceed the kernels' int index range", op, matrix));
    return {static_cast<int>(batch), static_cast<int>(matrix / batch)};
}

}  // namespace

void Ops::iql_value_loss(View<float> loss, View<float> d_v, View<const float> v, View<const float> q1,
                         View<const float> q2, View<const int> actions, float expectile) {
    const char* op = "iql_value_loss";
    const auto [B, A] = batch_and_actions(v.size(), q1.size(), op, "v", "q1");
    if (!(expectile > 0.0f && expectile < 1.0f))
        throw std::invalid_argument(fmt::format("ops::{}: expectile {} is not in (0, 1)", op, expectile));
    const std::size_t b = v.size();
    require_size(loss.size(), b, op, "loss");
    require_size(d_v.size(), b, op, "d_v");
    require_size(q2.size(), q1.size(), op, "q2");
    require_size(actions.size(), b, op, "actions");
    require_distinct(op, {range("loss", loss), range("d_v", d_v), range("v", v), range("q1", q1),
                          range("q2", q2), range("actions", actions)});
    iql_value_loss_impl(loss, d_v, v, q1, q2, actions, expectile, A, B);
}

void Ops::iql_q_loss(View<float> loss, View<float> d_q1, View<float> d_q2, View<const float> q1,
                     View<const float> q2, View<const int> actions, View<const float> rewards,
                     View<const float> discounts, View<const float> v_next) {
    const char* op = "iql_q_loss";
    const auto [B, A] = batch_and_actions(actions.size(), q1.size(), op, "actions", "q1");
    const std::size_t b = actions.size();
    require_size(loss.size(), b, op, "loss");
    require_size(d_q1.size(), q1.size(), op, "d_q1");
    require_size(d_q2.size(), q1.size(), op, "d_q2");
    require_size(q2.size(), q1.size(), op, "q2");
    require_size(rewards.size(), b, op, "rewards");
    require_size(discounts.size(), b, op, "discounts");
    require_size(v_next.size(), b, op, "v_next");
    require_distinct(op, {range("loss", loss), range("d_q1", d_q1), range("d_q2", d_q2), range("q1", q1),
                          range("q2", q2), range("actions", actions), range("rewards", rewards),
                          range("discounts", discounts), range("v_next", v_next)});
    iql_q_loss_impl(loss, d_q1, d_q2, q1, q2, actions, rewards, discounts, v_next, A, B);
}

void Ops::awr_policy_loss(View<float> loss, View<float> weights, View<float> d_logits, View<const float> logits,
                          View<const float> q1, View<const float> q2, View<const float> v,
                          View<const int> actions, float beta, float max_weight) {
    const char* op = "awr_policy_loss";
    const auto [B, A] = batch_and_actions(v.size(), logits.size(), op, "v", "logits");
    if (!(std::isfinite(beta) && beta >= 0.0f))
        throw std::invalid_argument(fmt::format("ops::{}: beta {} must be finite and >= 0", op, beta));
    if (!(std::isfinite(max_weight) && max_weight > 0.0f))
        throw std::invalid_argument(fmt::format("ops::{}: max_weight {} must be finite and > 0", op, max_weight));
    const std::size_t b = v.size();
    require_size(loss.size(), b, op, "loss");
    require_size(weights.size(), b, op, "weights");
    require_size(d_logits.size(), logits.size(), op, "d_logits");
    require_size(q1.size(), logits.size(), op, "q1");
    require_size(q2.size(), logits.size(), op, "q2");
    require_size(actions.size(), b, op, "actions");
    require_distinct(op, {range("loss", loss), range("weights", weights), range("d_logits", d_logits),
                          range("logits", logits), range("q1", q1), range("q2", q2), range("v", v),
                          range("actions", actions)});
    awr_policy_loss_impl(loss, weights, d_logits, logits, q1, q2, v, actions, beta, max_weight, A, B);
}

void Ops::behaviour_actions(View<int> actions, View<const float> states, const iql::BehaviourParams& p,
                            std::uint64_t step) {
    const char* op = "behaviour_actions";
    if (actions.empty()) throw std::invalid_argument("ops::behaviour_actions: no environments (actions is empty)");
    checked_int_size(actions.size(), op);
    if (p.position_levels < 1 || p.urgency_levels < 1 ||
        static_cast<long long>(p.position_levels) * p.urgency_levels > std::numeric_limits<int>::max())
        throw std::invalid_argument(fmt::format("ops::{}: need position_levels >= 1 and urgency_levels >= 1 (got {}, {})",
                                                op, p.position_levels, p.urgency_levels));
    if (p.market_dim < 1 || p.state_dim < p.market_dim)
        throw std::invalid_argument(fmt::format(
            "ops::{}: need 1 <= market_dim <= state_dim (got market_dim {}, state_dim {})", op, p.market_dim,
            p.state_dim));
    if (!(p.random_fraction >= 0.0f && p.random_fraction <= 1.0f))
        throw std::invalid_argument(fmt::format("ops::{}: random_fraction {} is not in [0, 1]", op, p.random_fraction));
    require_size(states.size(), actions.size() * static_cast<std::size_t>(p.state_dim), op, "states");
    require_distinct(op, {range("actions", actions), range("states", states)});
    behaviour_actions_impl(actions, states, p, step);
}

}  // namespace fh::ops
