/// @file ppo_ops.cpp
/// @brief Argument checks of the PPO and curiosity ops (sizes, and the aliasing rule of
///        ops/checks.hpp: an output overlaps nothing, read-only inputs may share), shared by both
///        backends.
#include <fmt/format.h>

#include <cmath>
#include <initializer_list>

#include "ops/checks.hpp"
#include "ops/ops.hpp"

namespace fh::ops {
namespace {

using detail::range;
using detail::require_distinct;

using detail::require_size;

void require_positive(long long v, const char* op, const char* what) {
    if (v < 1) throw std::invalid_argument(fmt::format("ops::{}: {} must be >= 1 (got {})", op, what, v));
}

/// The rows (n) of a (n, cols) buffer: its size must be a non-zero multiple of n.
std::size_t columns(std::size_t size, std::size_t rows, const char* op, const char* what) {
    if (rows == 0 || size == 0 || size % rows != 0)
        throw std::invalid_argument(
            fmt::format("ops::{}: {} has {} elements, not a non-zero multiple of {} rows", op, what, size, rows));
    return size / rows;
}

}  // namespace

void Ops::ppo_sample(View<int> actions, View<float> log_probs, View<const float> logits, int num_actions,
                     std::uint64_t seed, std::uint64_t step) {
    const char* op = "ppo_sample";
    require_positive(static_cast<long long>(actions.size()), op, "the number of environments");
    require_positive(num_actions, op, "num_actions");
    const std::size_t n = actions.size();
    require_size(log_probs.size(), n, op, "log_probs");
    require_size(logits.size(), n * static_cast<std::size_t>(num_actions), op, "logits");
    checked_int_size(logits.size(), op);
    require_distinct(op, {range("actions", actions), range("log_probs", log_probs), range("logits", logits)});
    ppo_sample_impl(actions, log_probs, logits, num_actions, seed, step);
}

void Ops::ppo_diversity(View<int> window, View<int> counts, View<float> penalty, View<const int> actions,
                        int num_actions, int diversity_window, float coef, std::uint64_t step) {
    const char* op = "ppo_diversity";
    require_positive(static_cast<long long>(actions.size()), op, "the number of environments");
    require_positive(num_actions, op, "num_actions");
    require_positive(diversity_window, op, "diversity_window");
    if (!std::isfinite(coef)) throw std::invalid_argument("ops::ppo_diversity: coef is not finite");
    const std::size_t n = actions.size();
    require_size(window.size(), n * static_cast<std::size_t>(diversity_window), op, "window");
    require_size(counts.size(), n * static_cast<std::size_t>(num_actions), op, "counts");
    require_size(penalty.size(), n, op, "penalty");
    checked_int_size(window.size(), op);
    checked_int_size(counts.size(), op);
    require_distinct(op, {range("window", window), range("counts", counts), range("penalty", penalty),
                          range("actions", actions)});
    ppo_diversity_impl(window, counts, penalty, actions, num_actions, diversity_window, coef, step);
}

void Ops::ppo_gae(View<float> advantages, View<float> returns, View<const float> rewards,
                  View<const float> values, View<const float> next_values, View<const std::uint8_t> done,
                  float gamma, float lambda, int T) {
    const char* op = "ppo_gae";
    require_positive(T, op, "T");
    const std::size_t size = rewards.size();
    columns(size, static_cast<std::size_t>(T), op, "rewards");  // n = size / T >= 1
    require_size(advantages.size(), size, op, "advantages");
    require_size(returns.size(), size, op, "returns");
    require_size(values.size(), size, op, "values");
    require_size(next_values.size(), size, op, "next_values");
    require_size(done.size(), size, op, "done");
    checked_int_size(size, op);
    require_distinct(op, {range("advantages", advantages), range("returns", returns), range("rewards", rewards),
                          range("values", values), range("next_values", next_values), range("done", done)});
    ppo_gae_impl(advantages, returns, rewards, values, next_values, done, gamma, lambda, T);
}

void Ops::normalize(View<float> x, View<float> scratch) {
    const char* op = "normalize";
    if (x.empty()) throw std::invalid_argument("ops::normalize: empty input");
    if (scratch.size() < normalize_scratch_size())
        throw std::invalid_argument(fmt::format("ops::normalize: scratch has {} floats, needs {} "
                                                "(Ops::normalize_scratch_size())",
                                                scratch.size(), normalize_scratch_size()));
    checked_int_size(x.size(), op);
    require_distinct(op, {range("x", x), range("scratch", scratch)});
    normalize_impl(x, scratch.subview(0, normalize_scratch_size()));
}

void Ops::ppo_gather(View<float> states, View<int> actions, View<float> old_log_probs, View<float> advantages,
                     View<float> returns, View<float> old_values, const ppo::RolloutView& r, std::uint64_t seed,
                     std::uint64_t epoch, int offset) {
    const char* op = "ppo_gather";
    require_positive(static_cast<long long>(actions.size()), op, "the minibatch size");
    require_positive(r.rows, op, "rollout.rows");
    require_positive(r.state_dim, op, "rollout.state_dim");
    if (!r.states || !r.actions || !r.log_probs || !r.advantages || !r.returns || !r.values)
        throw std::invalid_argument("ops::ppo_gather: a rollout pointer is null");
    const std::size_t B = actions.size(), D = static_cast<std::size_t>(r.state_dim),
                      M = static_cast<std::size_t>(r.rows);
    if (offset < 0 || static_cast<std::size_t>(offset) + B > M)
        throw std::invalid_argument(fmt::format(
            "ops::ppo_gather: rows [{}, {}) lie outside the rollout's {} rows", offset,
            static_cast<long long>(offset) + static_cast<long long>(B), M));
    require_size(states.size(), B * D, op, "states");
    require_size(old_log_probs.size(), B, op, "old_log_probs");
    require_size(advantages.size(), B, op, "advantages");
    require_size(returns.size(), B, op, "returns");
    require_size(old_values.size(), B, op, "old_values");
    checked_int_size(B * D, op);
    checked_int_size(M * D, op);
    require_distinct(op, {range("states", states), range("actions", actions),
                          range("old_log_probs", old_log_probs), range("advantages", advantages),
                          range("returns", returns), range("old_values", old_values),
                          range("rollout.states", View<const float>(r.states, M * D)),
                          range("rollout.actions", View<const int>(r.actions, M)),
                          range("rollout.log_probs", View<const float>(r.log_probs, M)),
                          range("rollout.advantages", View<const float>(r.advantages, M)),
                          range("rollout.returns", View<const float>(r.returns, M)),
                          range("rollout.values", View<const float>(r.values, M))});
    ppo_gather_impl(states, actions, old_log_probs, advantages, returns, old_values, r, seed, epoch, offset);
}

void Ops::ppo_loss(View<float> stats, View<float> d_logits, View<float> d_values, View<const float> logits,
                   View<const float> values, View<const int> actions, View<const float> old_log_probs,
                   View<const float> advantages, View<const float> returns, View<const float> old_values,
                   const ppo::LossParams& p) {
    const char* op = "ppo_loss";
    require_positive(static_cast<long long>(actions.size()), op, "the minibatch size");
    const std::size_t B = actions.size();
    const std::size_t A = columns(logits.size(), B, op, "logits");
    if (!(p.clip >= 0.f) || !std::isfinite(p.clip) || !std::isfinite(p.value_coef) ||
        !std::isfinite(p.entropy_coef))
        throw std::invalid_argument(fmt::format(
            "ops::ppo_loss: need a finite clip >= 0 and finite coefficients (got clip {}, value_coef {}, "
            "entropy_coef {})", p.clip, p.value_coef, p.entropy_coef));
    require_size(stats.size(), static_cast<std::size_t>(ppo::kPpoLossStats) * B, op, "stats");
    require_size(d_logits.size(), B * A, op, "d_logits");
    require_size(d_values.size(), B, op, "d_values");
    require_size(values.size(), B, op, "values");
    require_size(old_log_probs.size(), B, op, "old_log_probs");
    require_size(advantages.size(), B, op, "advantages");
    require_size(returns.size(), B, op, "returns");
    require_size(old_values.size(), B, op, "old_values");
    checked_int_size(B * A, op);
    checked_int_size(stats.size(), op);
    require_distinct(op, {range("stats", stats), range("d_logits", d_logits), range("d_values", d_values),
                          range("logits", logits), range("values", values), range("actions", actions),
                          range("old_log_probs", old_log_probs), range("advantages", advantages),
                          range("returns", returns), range("old_values", old_values)});
    ppo_loss_impl(stats, d_logits, d_values, logits, values, actions, old_log_probs, advantages, returns,
                  old_values, p);
}

void Ops::curiosity_input(View<float> input, View<const float> states, View<const int> actions,
                          int num_actions) {
    const char* op = "curiosity_input";
    require_positive(static_cast<long long>(actions.size()), op, "the number of rows");
    require_positive(num_actions, op, "num_actions");
    const std::size_t n = actions.size();
    const std::size_t D = columns(states.size(), n, op, "states");
    require_size(input.size(), n * (D + static_cast<std::size_t>(num_actions)), op, "input");
    checked_int_size(input.size(), op);
    require_distinct(op, {range("input", input), range("states", states), range("actions", actions)});
    curiosity_input_impl(input, states, actions, num_actions);
}

void Ops::curiosity_error(View<float> error, View<float> d_pred, View<const float> pred,
                          View<const float> next_states, int state_dim) {
    const char* op = "curiosity_error";
    require_positive(static_cast<long long>(error.size()), op, "the number of rows");
    require_positive(state_dim, op, "state_dim");
    const std::size_t n = error.size();
    const std::size_t P = columns(pred.size(), n, op, "pred");
    if (P > static_cast<std::size_t>(state_dim))
        throw std::invalid_argument(fmt::format(
            "ops::curiosity_error: the prediction has {} columns, more than the state's {}", P, state_dim));
    require_size(d_pred.size(), pred.size(), op, "d_pred");
    require_size(next_states.size(), n * static_cast<std::size_t>(state_dim), op, "next_states");
    checked_int_size(next_states.size(), op);
    require_distinct(op, {range("error", error), range("d_pred", d_pred), range("pred", pred),
                          range("next_states", next_states)});
    curiosity_error_impl(error, d_pred, pred, next_states, state_dim);
}

}  // namespace fh::ops
