/// @file dqn_ops.cpp
/// @brief Argument checks of the DQN ops (sizes, and that the buffers of one call are distinct,
///        as their kernels' __restrict__ pointers require), shared by both backends.
#include <fmt/format.h>

#include <initializer_list>

#include "ops/checks.hpp"
#include "ops/ops.hpp"

namespace fh::ops {
namespace {

using detail::range;
using detail::require_distinct;

using detail::require_size;

void check_head(const dqn::HeadParams& h, int batch, const char* op) {
    if (h.num_actions < 1 || h.num_atoms < 2 || batch < 1 || !(h.v_min < h.v_max))
        throw std::invalid_argument(fmt::format(
            "ops::{}: need num_actions >= 1, num_atoms >= 2, batch >= 1 and v_min < v_max (got {}, {}, {}, "
            "[{}, {}])", op, h.num_actions, h.num_atoms, batch, h.v_min, h.v_max));
}

}  // namespace

void Ops::mean(View<float> out, View<const float> x) {
    require_size(out.size(), 1, "mean", "out");
    if (x.empty()) throw std::invalid_argument("ops::mean: empty input");
    checked_int_size(x.size(), "mean");
    require_distinct("mean", {range("out", out), range("x", x)});
    mean_impl(out, x);
}

void Ops::c51_head_forward(View<float> logits, View<float> probs, View<float> q, View<const float> value,
                           View<const float> adv, const dqn::HeadParams& h, int batch) {
    check_head(h, batch, "c51_head_forward");
    const std::size_t B = static_cast<std::size_t>(batch), A = static_cast<std::size_t>(h.num_actions),
                      Z = static_cast<std::size_t>(h.num_atoms);
    require_size(logits.size(), B * A * Z, "c51_head_forward", "logits");
    require_size(probs.size(), B * A * Z, "c51_head_forward", "probs");
    require_size(q.size(), B * A, "c51_head_forward", "q");
    require_size(value.size(), h.dueling ? B * Z : 0, "c51_head_forward", "value");
    require_size(adv.size(), B * A * Z, "c51_head_forward", "adv");
    checked_int_size(B * A * Z, "c51_head_forward");
    require_distinct("c51_head_forward", {range("logits", logits), range("probs", probs), range("q", q),
                                          range("value", value), range("adv", adv)});
    c51_head_forward_impl(logits, probs, q, value, adv, h, batch);
}

void Ops::c51_head_backward(View<float> d_value, View<float> d_adv, View<const float> d_logits,
                            const dqn::HeadParams& h, int batch) {
    check_head(h, batch, "c51_head_backward");
    const std::size_t B = static_cast<std::size_t>(batch), A = static_cast<std::size_t>(h.num_actions),
                      Z = static_cast<std::size_t>(h.num_atoms);
    require_size(d_value.size(), h.dueling ? B * Z : 0, "c51_head_backward", "d_value");
    require_size(d_adv.size(), B * A * Z, "c51_head_backward", "d_adv");
    require_size(d_logits.size(), B * A * Z, "c51_head_backward", "d_logits");
    require_distinct("c51_head_backward", {range("d_value", d_value), range("d_adv", d_adv),
                                           range("d_logits", d_logits)});
    c51_head_backward_impl(d_value, d_adv, d_logits, h, batch);
}

void Ops::c51_loss(View<float> loss, View<float> d_logits, View<const float> logits, View<const float> probs,
                   View<const float> q_next_select, View<const float> probs_next_target,
                   View<const int> actions, View<const float> returns, View<const float> discounts,
                   const dqn::HeadParams& h, int batch) {
    check_head(h, batch, "c51_loss");
    const std::size_t B = static_cast<std::size_t>(batch), A = static_cast<std::size_t>(h.num_actions),
                      Z = static_cast<std::size_t>(h.num_atoms);
    require_size(loss.size(), B, "c51_loss", "loss");
    require_size(d_logits.size(), B * A * Z, "c51_loss", "d_logits");
    require_size(logits.size(), B * A * Z, "c51_loss", "logits");
    require_size(probs.size(), B * A * Z, "c51_loss", "probs");
    require_size(q_next_select.size(), B * A, "c51_loss", "q_next_select");
    require_size(probs_next_target.size(), B * A * Z, "c51_loss", "probs_next_target");
    require_size(actions.size(), B, "c51_loss", "actions");
    require_size(returns.size(), B, "c51_loss", "returns");
    require_size(discounts.size(), B, "c51_loss", "discounts");
    require_distinct("c51_loss", {range("loss", loss), range("d_logits", d_logits), range("logits", logits),
                                  range("probs", probs), range("q_next_select", q_next_select),
                                  range("probs_next_target", probs_next_target), range("actions", actions),
                                  range("returns", returns), range("discounts", discounts)});
    c51_loss_impl(loss, d_logits, logits, probs, q_next_select, probs_next_target, actions, returns,
                  discounts, h, batch);
}

void Ops::mse_loss(View<float> loss, View<float> d_logits, View<float> td, View<const float> probs,
                   View<const float> q, View<const float> q_next_select, View<const float> q_next_target,
                   View<const int> actions, View<const float> returns, View<const float> discounts,
                   const dqn::HeadParams& h, int batch) {
    check_head(h, batch, "mse_loss");
    const std::size_t B = static_cast<std::size_t>(batch), A = static_cast<std::size_t>(h.num_actions),
                      Z = static_cast<std::size_t>(h.num_atoms);
    require_size(loss.size(), B, "mse_loss", "loss");
    require_size(d_logits.size(), B * A * Z, "mse_loss", "d_logits");
    require_size(td.size(), B, "mse_loss", "td");
    require_size(probs.size(), B * A * Z, "mse_loss", "probs");
    require_size(q.size(), B * A, "mse_loss", "q");
    require_size(q_next_select.size(), B * A, "mse_loss", "q_next_select");
    require_size(q_next_target.size(), B * A, "mse_loss", "q_next_target");
    require_size(actions.size(), B, "mse_loss", "actions");
    require_size(returns.size(), B, "mse_loss", "returns");
    require_size(discounts.size(), B, "mse_loss", "discounts");
    require_distinct("mse_loss", {range("loss", loss), range("d_logits", d_logits), range("td", td),
                                  range("probs", probs), range("q", q), range("q_next_select", q_next_select),
                                  range("q_next_target", q_next_target), range("actions", actions),
                                  range("returns", returns), range("discounts", discounts)});
    mse_loss_impl(loss, d_logits, td, probs, q, q_next_select, q_next_target, actions, returns, discounts, h,
                  batch);
}

void Ops::nstep_sample(View<float> states, View<float> next_states, View<int> actions, View<float> returns,
                       View<float> discounts, const replay::ReplayView& r, const replay::SampleParams& p,
                       int batch) {
    if (batch < 1 || r.capacity_steps < 1 || r.n_envs < 1 || r.state_dim < 1 || p.n_step < 1 ||
        p.sampleable < 1 || p.oldest_step < 0)
        throw std::invalid_argument("ops::nstep_sample: empty batch, ring or sampleable range");
    const std::size_t B = static_cast<std::size_t>(batch), D = static_cast<std::size_t>(r.state_dim);
    require_size(states.size(), B * D, "nstep_sample", "states");
    require_size(next_states.size(), B * D, "nstep_sample", "next_states");
    require_size(actions.size(), B, "nstep_sample", "actions");
    require_size(returns.size(), B, "nstep_sample", "returns");
    require_size(discounts.size(), B, "nstep_sample", "discounts");
    const std::size_t rows = static_cast<std::size_t>(r.capacity_steps) * static_cast<std::size_t>(r.n_envs);
    const View<const float> ring_states(r.states, rows * D), ring_next(r.next_states, rows * D);
    require_distinct("nstep_sample", {range("states", states), range("next_states", next_states),
                                      range("actions", actions), range("returns", returns),
                                      range("discounts", discounts), range("ring states", ring_states),
                                      range("ring next_states", ring_next)});
    nstep_sample_impl(states, next_states, actions, returns, discounts, r, p, batch);
}

void Ops::epsilon_greedy(View<int> actions, View<const float> q, int num_actions, float epsilon,
                         std::uint64_t seed, std::uint64_t step) {
    if (num_actions < 1 || actions.empty()) throw std::invalid_argument("ops::epsilon_greedy: empty");
    require_size(q.size(), actions.size() * static_cast<std::size_t>(num_actions), "epsilon_greedy", "q");
    checked_int_size(q.size(), "epsilon_greedy");
    require_distinct("epsilon_greedy", {range("actions", actions), range("q", q)});
    epsilon_greedy_impl(actions, q, num_actions, epsilon, seed, step);
}

void Ops::training_guard(View<int> gate, View<nn::GuardState> state, View<const float> losses,
                         View<const float> grad_norm, long long update) {
    require_size(gate.size(), 1, "training_guard", "gate");
    require_size(state.size(), 1, "training_guard", "state");
    require_size(grad_norm.size(), 1, "training_guard", "grad_norm");
    if (losses.empty()) throw std::invalid_argument("ops::training_guard: no losses");
    require_distinct("training_guard", {range("gate", gate), range("state", state), range("losses", losses),
                                        range("grad_norm", grad_norm)});
    training_guard_impl(gate, state, losses, grad_norm, update);
}

void Ops::monitor_update(View<dqn::MonitorStats> stats, View<const float> losses, View<const float> q,
                         View<const int> actions, View<const float> td, View<const float> grad_norm,
                         int num_actions, int batch) {
    const std::size_t B = static_cast<std::size_t>(batch);
    require_size(stats.size(), 1, "monitor_update", "stats");
    require_size(losses.size(), 2, "monitor_update", "losses");
    require_size(q.size(), B * static_cast<std::size_t>(num_actions), "monitor_update", "q");
    require_size(actions.size(), B, "monitor_update", "actions");
    require_size(td.size(), B, "monitor_update", "td");
    require_size(grad_norm.size(), 1, "monitor_update", "grad_norm");
    require_distinct("monitor_update", {range("stats", stats), range("losses", losses), range("q", q),
                                        range("actions", actions), range("td", td),
                                        range("grad_norm", grad_norm)});
    monitor_update_impl(stats, losses, q, actions, td, grad_norm, num_actions, batch);
}

void Ops::monitor_actions(View<unsigned long long> histogram, View<const int> actions, int num_actions) {
    require_size(histogram.size(), static_cast<std::size_t>(num_actions), "monitor_actions", "histogram");
    checked_int_size(actions.size(), "monitor_actions");
    require_distinct("monitor_actions", {range("histogram", histogram), range("actions", actions)});
    if (!actions.empty()) monitor_actions_impl(histogram, actions, num_actions);
}

}  // namespace fh::ops
