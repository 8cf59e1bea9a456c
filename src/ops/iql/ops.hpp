/// @file ops.hpp
/// @brief The IQL op family: the expectile value loss, the twin-Q TD loss, the AWR policy loss and the
///        behaviour policy of the offline dataset (the math: math/iql.h; docs/iql.md).
///
/// Each op checks its arguments here, once, then runs its CPU twin (cpu_twin::, plain loops over
/// the shared math, src/ops/iql/cpu.cpp) or its CUDA twin (cuda_twin::, the kernels of
/// cuda/kernels/iql_*.cu, launched by src/ops/iql/cuda.cpp).
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <stdexcept>

#include "math/iql.h"
#include "device/device.hpp"

namespace fh::ops {

namespace cpu_twin {
void iql_value_loss(View<float> loss, View<float> d_v, View<const float> v, View<const float> q1, View<const float> q2,
                    View<const int> actions, float expectile, int num_actions, int batch,
                    const iql::LossScalars* scalars, int agents);
void iql_q_loss(View<float> loss, View<float> d_q1, View<float> d_q2, View<const float> q1, View<const float> q2,
                View<const int> actions, View<const float> rewards, View<const float> discounts,
                View<const float> v_next, int num_actions, int batch, int agents);
void awr_policy_loss(View<float> loss, View<float> weights, View<float> d_logits, View<const float> logits,
                     View<const float> q1, View<const float> q2, View<const float> v, View<const int> actions,
                     float beta, float max_weight, int num_actions, int batch, const iql::LossScalars* scalars,
                     int agents);
void behaviour_actions(View<int> actions, View<const float> states, const iql::BehaviourParams& p, std::uint64_t step);
}  // namespace cpu_twin

namespace cuda_twin {
void iql_value_loss(CudaDevice& device, View<float> loss, View<float> d_v, View<const float> v, View<const float> q1,
                    View<const float> q2, View<const int> actions, float expectile, int num_actions, int batch,
                    const iql::LossScalars* scalars, int agents);
void iql_q_loss(CudaDevice& device, View<float> loss, View<float> d_q1, View<float> d_q2, View<const float> q1,
                View<const float> q2, View<const int> actions, View<const float> rewards, View<const float> discounts,
                View<const float> v_next, int num_actions, int batch, int agents);
void awr_policy_loss(CudaDevice& device, View<float> loss, View<float> weights, View<float> d_logits,
                     View<const float> logits, View<const float> q1, View<const float> q2, View<const float> v,
                     View<const int> actions, float beta, float max_weight, int num_actions, int batch,
                     const iql::LossScalars* scalars, int agents);
void behaviour_actions(CudaDevice& device, View<int> actions, View<const float> states, const iql::BehaviourParams& p,
                       std::uint64_t step);
}  // namespace cuda_twin

namespace detail {
/// B >= 1 from a per-sample vector, A >= 1 from a (B, A) matrix; both within int range.
inline std::pair<int, int> batch_and_actions(std::size_t batch, std::size_t matrix, const char* op,
                                             const char* batch_name, const char* matrix_name) {
    if (batch == 0) throw std::invalid_argument(fmt::format("ops::{}: empty batch ({} is empty)", op, batch_name));
    if (matrix == 0 || matrix % batch != 0)
        throw std::invalid_argument(
            fmt::format("ops::{}: {} has {} elements, not a positive multiple of the batch {} (the (B, A) layout)", op,
                        matrix_name, matrix, batch));
    if (matrix > static_cast<std::size_t>(std::numeric_limits<int>::max()))
        throw std::invalid_argument(
            fmt::format("ops::{}: {} elements exceed the kernels' int index range", op, matrix));
    return {static_cast<int>(batch), static_cast<int>(matrix / batch)};
}
/// The rows of one agent's batch when `rows` are `agents` batches one after the other (agents >= 1).
inline int agent_batch(int rows, std::size_t agents, const char* op) {
    if (agents < 1 || rows % static_cast<long long>(agents) != 0)
        throw std::invalid_argument(
            fmt::format("ops::{}: {} rows do not split into {} agents' batches of one size", op, rows, agents));
    return static_cast<int>(rows / static_cast<long long>(agents));
}
}  // namespace detail

/// Expectile value loss. v (B) = V(s); q1, q2 (B, A) = the TARGET twin Q at s; actions (B).
/// q = min(q1[a], q2[a]), u = q - v, w = |expectile - 1(u < 0)|: loss[i] = w u^2 (B),
/// d_v[i] = -2 w u / B (B). expectile in (0, 1).
/// A population's agents at once: scalars (N, device memory, each agent's valid: the caller's
/// check) makes the B rows N batches one after the other, agent a's rows [a B / N, ...) with its
/// own expectile and scaled by N / B (its own batch's 1 / B); `expectile` is then not used.
inline void iql_value_loss(Device& device, View<float> loss, View<float> d_v, View<const float> v, View<const float> q1,
                           View<const float> q2, View<const int> actions, float expectile,
                           View<const iql::LossScalars> scalars = {}) {
    const char* op = "iql_value_loss";
    const auto [rows, A] = detail::batch_and_actions(v.size(), q1.size(), op, "v", "q1");
    const int agents = scalars.empty() ? 1 : static_cast<int>(scalars.size());
    const int B = detail::agent_batch(rows, static_cast<std::size_t>(agents), op);
    if (scalars.empty() && !(expectile > 0.0f && expectile < 1.0f))
        throw std::invalid_argument(fmt::format("ops::{}: expectile {} is not in (0, 1)", op, expectile));
    const std::size_t b = v.size();
    detail::require_size(loss.size(), b, op, "loss");
    detail::require_size(d_v.size(), b, op, "d_v");
    detail::require_size(q2.size(), q1.size(), op, "q2");
    detail::require_size(actions.size(), b, op, "actions");
    detail::require_distinct(
        op, {detail::range("loss", loss), detail::range("d_v", d_v), detail::range("v", v), detail::range("q1", q1),
             detail::range("q2", q2), detail::range("actions", actions), detail::range("scalars", scalars)});
    const iql::LossScalars* own = scalars.empty() ? nullptr : scalars.data();
    if (CudaDevice* cuda = device.cuda())
        return cuda_twin::iql_value_loss(*cuda, loss, d_v, v, q1, q2, actions, expectile, A, B, own, agents);
    cpu_twin::iql_value_loss(loss, d_v, v, q1, q2, actions, expectile, A, B, own, agents);
}

/// Twin-Q TD loss. q1, q2 (B, A) = the ONLINE twin Q at s; actions, rewards, discounts (B)
/// (discounts = gamma (1 - terminated)); v_next (B) = V(s'). y = rewards + discounts * v_next,
/// loss[i] = (q1[a] - y)^2 + (q2[a] - y)^2 (B); d_q1, d_q2 (B, A) = 2 (q - y) / B at column a,
/// 0 elsewhere. `agents` > 1: the B rows are that many agents' batches one after the other, each
/// scaled by its own batch's size (iql_value_loss).
inline void iql_q_loss(Device& device, View<float> loss, View<float> d_q1, View<float> d_q2, View<const float> q1,
                       View<const float> q2, View<const int> actions, View<const float> rewards,
                       View<const float> discounts, View<const float> v_next, int agents = 1) {
    const char* op = "iql_q_loss";
    const auto [rows, A] = detail::batch_and_actions(actions.size(), q1.size(), op, "actions", "q1");
    if (agents < 1) throw std::invalid_argument("ops::iql_q_loss: agents must be >= 1");
    const int B = detail::agent_batch(rows, static_cast<std::size_t>(agents), op);
    const std::size_t b = actions.size();
    detail::require_size(loss.size(), b, op, "loss");
    detail::require_size(d_q1.size(), q1.size(), op, "d_q1");
    detail::require_size(d_q2.size(), q1.size(), op, "d_q2");
    detail::require_size(q2.size(), q1.size(), op, "q2");
    detail::require_size(rewards.size(), b, op, "rewards");
    detail::require_size(discounts.size(), b, op, "discounts");
    detail::require_size(v_next.size(), b, op, "v_next");
    detail::require_distinct(op, {detail::range("loss", loss), detail::range("d_q1", d_q1), detail::range("d_q2", d_q2),
                                  detail::range("q1", q1), detail::range("q2", q2), detail::range("actions", actions),
                                  detail::range("rewards", rewards), detail::range("discounts", discounts),
                                  detail::range("v_next", v_next)});
    if (CudaDevice* cuda = device.cuda())
        return cuda_twin::iql_q_loss(*cuda, loss, d_q1, d_q2, q1, q2, actions, rewards, discounts, v_next, A, B,
                                     agents);
    cpu_twin::iql_q_loss(loss, d_q1, d_q2, q1, q2, actions, rewards, discounts, v_next, A, B, agents);
}

/// AWR policy loss. logits (B, A) of the policy; q1, q2 (B, A) = the TARGET twin Q at s;
/// v (B); actions (B). adv = min(q1[a], q2[a]) - v, weights[i] = min(exp(beta adv),
/// max_weight) with the exponent clamped to iql::kMaxAwrExponent (B; a constant, no gradient);
/// loss[i] = -weights[i] log pi(a|s) (B); d_logits (B, A) = weights[i] (softmax - onehot(a)) / B.
/// beta >= 0 and max_weight > 0, both finite. scalars (N): N agents' batches at once, each with its
/// own beta and max_weight (iql_value_loss); beta and max_weight are then not used.
inline void awr_policy_loss(Device& device, View<float> loss, View<float> weights, View<float> d_logits,
                            View<const float> logits, View<const float> q1, View<const float> q2, View<const float> v,
                            View<const int> actions, float beta, float max_weight,
                            View<const iql::LossScalars> scalars = {}) {
    const char* op = "awr_policy_loss";
    const auto [rows, A] = detail::batch_and_actions(v.size(), logits.size(), op, "v", "logits");
    const int agents = scalars.empty() ? 1 : static_cast<int>(scalars.size());
    const int B = detail::agent_batch(rows, static_cast<std::size_t>(agents), op);
    if (scalars.empty() && !(std::isfinite(beta) && beta >= 0.0f))
        throw std::invalid_argument(fmt::format("ops::{}: beta {} must be finite and >= 0", op, beta));
    if (scalars.empty() && !(std::isfinite(max_weight) && max_weight > 0.0f))
        throw std::invalid_argument(fmt::format("ops::{}: max_weight {} must be finite and > 0", op, max_weight));
    const std::size_t b = v.size();
    detail::require_size(loss.size(), b, op, "loss");
    detail::require_size(weights.size(), b, op, "weights");
    detail::require_size(d_logits.size(), logits.size(), op, "d_logits");
    detail::require_size(q1.size(), logits.size(), op, "q1");
    detail::require_size(q2.size(), logits.size(), op, "q2");
    detail::require_size(actions.size(), b, op, "actions");
    detail::require_distinct(
        op, {detail::range("loss", loss), detail::range("weights", weights), detail::range("d_logits", d_logits),
             detail::range("logits", logits), detail::range("q1", q1), detail::range("q2", q2), detail::range("v", v),
             detail::range("actions", actions), detail::range("scalars", scalars)});
    const iql::LossScalars* own = scalars.empty() ? nullptr : scalars.data();
    if (CudaDevice* cuda = device.cuda())
        return cuda_twin::awr_policy_loss(*cuda, loss, weights, d_logits, logits, q1, q2, v, actions, beta, max_weight,
                                          A, B, own, agents);
    cpu_twin::awr_policy_loss(loss, weights, d_logits, logits, q1, q2, v, actions, beta, max_weight, A, B, own, agents);
}

/// The behaviour policy of the offline data set (iql::behaviour_action): actions (n) from
/// states (n, p.state_dim), a mixture of traders by environment index e % 4 (random, momentum,
/// mean reversion, trend), Philox (p.seed, behaviour, e, step). Exact, equal on both backends.
inline void behaviour_actions(Device& device, View<int> actions, View<const float> states,
                              const iql::BehaviourParams& p, std::uint64_t step) {
    const char* op = "behaviour_actions";
    if (actions.empty()) throw std::invalid_argument("ops::behaviour_actions: no environments (actions is empty)");
    detail::checked_int_size(actions.size(), op);
    if (p.position_levels < 1 || p.urgency_levels < 1 ||
        static_cast<long long>(p.position_levels) * p.urgency_levels > std::numeric_limits<int>::max())
        throw std::invalid_argument(
            fmt::format("ops::{}: need position_levels >= 1 and urgency_levels >= 1 (got {}, {})", op,
                        p.position_levels, p.urgency_levels));
    if (p.market_dim < 1 || p.state_dim < p.market_dim)
        throw std::invalid_argument(
            fmt::format("ops::{}: need 1 <= market_dim <= state_dim (got market_dim {}, state_dim {})", op,
                        p.market_dim, p.state_dim));
    if (!(p.random_fraction >= 0.0f && p.random_fraction <= 1.0f))
        throw std::invalid_argument(fmt::format("ops::{}: random_fraction {} is not in [0, 1]", op, p.random_fraction));
    detail::require_size(states.size(), actions.size() * static_cast<std::size_t>(p.state_dim), op, "states");
    detail::require_distinct(op, {detail::range("actions", actions), detail::range("states", states)});
    if (CudaDevice* cuda = device.cuda()) return cuda_twin::behaviour_actions(*cuda, actions, states, p, step);
    cpu_twin::behaviour_actions(actions, states, p, step);
}

}  // namespace fh::ops
