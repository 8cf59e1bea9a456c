/// @file ops.hpp
/// @brief The op family every network trainer shares: greedy / epsilon-greedy action selection, the
///        action histogram, the training guard and feature-group attention (the math:
///        math/policy.h, math/nn.h, math/attention.h).
///
/// Each op checks its arguments here, once, then runs its CPU twin (cpu_twin::, plain loops over
/// the shared math, src/ops/nn/cpu.cpp) or its CUDA twin (cuda_twin::, the kernels of
/// cuda/kernels/nn_select.cu, nn_guard.cu, nn_attention.cu, launched by src/ops/nn/cuda.cpp).
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <stdexcept>
#include <utility>
#include <vector>

#include "math/attention.h"
#include "math/nn.h"
#include "math/policy.h"
#include "device/device.hpp"

namespace fh::ops {

namespace cpu_twin {
void epsilon_greedy(View<int> actions, View<const float> q, int num_actions, float epsilon, std::uint64_t seed,
                    std::uint64_t step);
void action_histogram(View<unsigned long long> histogram, View<const int> actions, int num_actions, int agents);
void training_guard(View<int> gate, View<nn::GuardState> state, View<const float> losses, View<const float> grad_norm,
                    core::CounterValue update);
void group_attention_forward(View<float> x_out, View<float> alpha, View<const float> x, View<const float> scores,
                             const attention::Groups& groups, int D, int rows, int x_rows);
void group_attention_backward(View<float> d_scores, View<const float> d_x_out, View<const float> x,
                              View<const float> alpha, const attention::Groups& groups, int D, int rows);
}  // namespace cpu_twin

namespace cuda_twin {
void epsilon_greedy(CudaDevice& device, View<int> actions, View<const float> q, int num_actions, float epsilon,
                    std::uint64_t seed, std::uint64_t step);
void action_histogram(CudaDevice& device, View<unsigned long long> histogram, View<const int> actions, int num_actions,
                      int agents);
void training_guard(CudaDevice& device, View<int> gate, View<nn::GuardState> state, View<const float> losses,
                    View<const float> grad_norm, core::CounterValue update);
void norm_and_guard(CudaDevice& device, View<float> grad_norm, View<float> scratch, View<const float> x, View<int> gate,
                    View<nn::GuardState> state, View<const float> losses, core::CounterValue update, View<float> accum,
                    View<const float> stats);
void norm_and_guard_agents(CudaDevice& device, int agents, View<const float> x, View<float> scratch, View<int> gate,
                           View<nn::GuardState> state, View<float> stats, int n_losses, int norm_index,
                           core::CounterValue update, View<float> accum, int accum_stride);
void adam_step_agents(CudaDevice& device, int agents, View<float> params, View<float> m, View<float> v,
                      View<const float> grads, View<const float> grad_norm, View<const int> gate,
                      core::CounterValue step, const core::AdamConstants& c, View<const float> lr, View<float> target,
                      View<const float> tau_keep);
void group_attention_forward(CudaDevice& device, View<float> x_out, View<float> alpha, View<const float> x,
                             View<const float> scores, const attention::Groups& groups, int D, int rows, int x_rows);
void group_attention_backward(CudaDevice& device, View<float> d_scores, View<const float> d_x_out, View<const float> x,
                              View<const float> alpha, const attention::Groups& groups, int D, int rows);
}  // namespace cuda_twin

/// actions (n) epsilon-greedy from q (n, num_actions).
inline void epsilon_greedy(Device& device, View<int> actions, View<const float> q, int num_actions, float epsilon,
                           std::uint64_t seed, std::uint64_t step) {
    if (num_actions < 1 || actions.empty()) throw std::invalid_argument("ops::epsilon_greedy: empty");
    detail::require_size(q.size(), actions.size() * static_cast<std::size_t>(num_actions), "epsilon_greedy", "q");
    detail::checked_int_size(q.size(), "epsilon_greedy");
    detail::require_distinct("epsilon_greedy", {detail::range("actions", actions), detail::range("q", q)});
    if (CudaDevice* cuda = device.cuda())
        return cuda_twin::epsilon_greedy(*cuda, actions, q, num_actions, epsilon, seed, step);
    cpu_twin::epsilon_greedy(actions, q, num_actions, epsilon, seed, step);
}

/// histogram (num_actions) += counts of actions (n). Several agents' actions (agents > 1): rows
/// split evenly, agent g's counts into histogram (agents, num_actions) row g.
inline void action_histogram(Device& device, View<unsigned long long> histogram, View<const int> actions,
                             int num_actions, int agents = 1) {
    if (agents < 1 || actions.size() % static_cast<std::size_t>(agents) != 0)
        throw std::invalid_argument(
            fmt::format("ops::action_histogram: {} actions do not split into {} agents", actions.size(), agents));
    detail::require_size(histogram.size(), static_cast<std::size_t>(num_actions) * static_cast<std::size_t>(agents),
                         "action_histogram", "histogram");
    detail::checked_int_size(actions.size(), "action_histogram");
    detail::require_distinct("action_histogram",
                             {detail::range("histogram", histogram), detail::range("actions", actions)});
    if (!actions.empty()) {
        if (CudaDevice* cuda = device.cuda())
            return cuda_twin::action_histogram(*cuda, histogram, actions, num_actions, agents);
        cpu_twin::action_histogram(histogram, actions, num_actions, agents);
    }
}

/// gate (1) = 1 when every loss (n_losses) and the gradient norm (1) are finite; updates the
/// guard counters (1). `update` is the update number, from the host or from device memory
/// (counter_value: a captured update's counter).
inline void training_guard(Device& device, View<int> gate, View<nn::GuardState> state, View<const float> losses,
                           View<const float> grad_norm, CounterValue update) {
    detail::require_size(gate.size(), 1, "training_guard", "gate");
    detail::require_size(state.size(), 1, "training_guard", "state");
    detail::require_size(grad_norm.size(), 1, "training_guard", "grad_norm");
    if (losses.empty()) throw std::invalid_argument("ops::training_guard: no losses");
    detail::require_distinct(
        "training_guard", {detail::range("gate", gate), detail::range("state", state), detail::range("losses", losses),
                           detail::range("grad_norm", grad_norm)});
    if (CudaDevice* cuda = device.cuda())
        return cuda_twin::training_guard(*cuda, gate, state, losses, grad_norm, update);
    cpu_twin::training_guard(gate, state, losses, grad_norm, update);
}

/// Floats of norm_and_guard's scratch: the norm's partials and a ticket. Zero it once after
/// allocating; the op leaves it zero again.
constexpr std::size_t norm_guard_scratch_size() noexcept {
    return static_cast<std::size_t>(abi::kNormGuardScratch);
}

/// An update's tail: grad_norm (1) = the global norm of x (Device::global_norm), then
/// training_guard(gate, state, losses, grad_norm, update), then, with accum, the log's
/// accumulators accum += stats (Device::saxpy with a = 1; stats may hold grad_norm and losses).
/// On CUDA one launch (network_norm_guard_kernel) instead of four, the same bits. scratch
/// (norm_guard_scratch_size()), zero before the first call.
inline void norm_and_guard(Device& device, View<float> grad_norm, View<float> scratch, View<const float> x,
                           View<int> gate, View<nn::GuardState> state, View<const float> losses, CounterValue update,
                           View<float> accum = {}, View<const float> stats = {}) {
    detail::require_size(scratch.size(), norm_guard_scratch_size(), "norm_and_guard", "scratch");
    detail::require_size(stats.size(), accum.size(), "norm_and_guard", "stats");
    detail::checked_int_size(x.size(), "norm_and_guard");
    detail::checked_int_size(accum.size(), "norm_and_guard");
    detail::require_distinct("norm_and_guard",
                             {detail::range("grad_norm", grad_norm), detail::range("scratch", scratch),
                              detail::range("x", x), detail::range("gate", gate), detail::range("state", state),
                              detail::range("losses", losses), detail::range("accum", accum)});
    detail::require_distinct("norm_and_guard", {detail::range("accum", accum), detail::range("stats", stats)});
    if (CudaDevice* cuda = device.cuda()) {
        detail::require_size(grad_norm.size(), 1, "norm_and_guard", "grad_norm");
        detail::require_size(gate.size(), 1, "norm_and_guard", "gate");
        detail::require_size(state.size(), 1, "norm_and_guard", "state");
        if (losses.empty()) throw std::invalid_argument("ops::norm_and_guard: no losses");
        return cuda_twin::norm_and_guard(*cuda, grad_norm, scratch, x, gate, state, losses, update, accum, stats);
    }
    device.global_norm(grad_norm, x, scratch.subview(0, Device::global_norm_scratch_size()));
    training_guard(device, gate, state, losses, grad_norm, update);
    if (!accum.empty()) device.saxpy(accum, 1.0f, stats);
}

/// norm_and_guard for every agent of a population in one launch. Agent a's gradients are x[a P,
/// (a + 1) P) (P = x.size() / agents), its scratch block a of scratch (agents x
/// norm_guard_scratch_size(), zero before the first call), its gate[a] and state[a]. Its
/// statistics are column a of stats (n_stats, agents), stat-major: the guard reads its losses
/// stats[k agents + a], k < n_losses (at most abi::kMaxAgentGuardLosses), and its norm goes to
/// stats[norm_index agents + a]; then, with accum (agents, n_stats), agent-major (each agent's
/// log sums contiguous, as a single run's), accum row a += column a of stats; accum_stride (0:
/// n_stats) spaces the rows where an agent keeps more sums than these (accum (agents,
/// accum_stride), the first n_stats of each row). Each agent's norm, gate, state and sums are
/// norm_and_guard's on its slices, bit for bit; agent a's update number is update.agent(a)'s (its
/// own counter where update.agent_stride > 0).
inline void norm_and_guard_agents(Device& device, int agents, View<const float> x, View<float> scratch, View<int> gate,
                                  View<nn::GuardState> state, View<float> stats, int n_losses, int norm_index,
                                  CounterValue update, View<float> accum = {}, int accum_stride = 0) {
    const char* op = "norm_and_guard_agents";
    if (agents < 1 || x.empty() || x.size() % static_cast<std::size_t>(agents) != 0)
        throw std::invalid_argument(
            fmt::format("ops::{}: {} gradients do not split into {} agents", op, x.size(), agents));
    const std::size_t N = static_cast<std::size_t>(agents), P = x.size() / N;
    if (stats.empty() || stats.size() % N != 0)
        throw std::invalid_argument(
            fmt::format("ops::{}: stats ({}) is not (n_stats, {} agents)", op, stats.size(), agents));
    const int n_stats = static_cast<int>(stats.size() / N);
    if (n_losses < 1 || n_losses > abi::kMaxAgentGuardLosses || norm_index < 0 || norm_index >= n_stats)
        throw std::invalid_argument(
            fmt::format("ops::{}: need 1 <= n_losses <= {} and a norm index below {} (got {}, {})", op,
                        abi::kMaxAgentGuardLosses, n_stats, n_losses, norm_index));
    detail::require_size(scratch.size(), N * norm_guard_scratch_size(), op, "scratch");
    detail::require_size(gate.size(), N, op, "gate");
    detail::require_size(state.size(), N, op, "state");
    if (accum_stride == 0) accum_stride = n_stats;
    if (accum_stride < n_stats)
        throw std::invalid_argument(fmt::format("ops::{}: accum_stride {} < {} statistics", op, accum_stride, n_stats));
    if (!accum.empty()) detail::require_size(accum.size(), N * static_cast<std::size_t>(accum_stride), op, "accum");
    detail::checked_int_size(P, op);
    detail::checked_int_size(stats.size(), op);
    detail::require_distinct(
        op, {detail::range("x", x), detail::range("scratch", scratch), detail::range("gate", gate),
             detail::range("state", state), detail::range("stats", stats), detail::range("accum", accum)});
    if (CudaDevice* cuda = device.cuda())
        return cuda_twin::norm_and_guard_agents(*cuda, agents, x, scratch, gate, state, stats, n_losses, norm_index,
                                                update, accum, accum_stride);
    // The CPU: norm_and_guard's steps on each agent's slices.
    std::vector<float> losses(static_cast<std::size_t>(n_losses));
    for (std::size_t a = 0; a < N; ++a) {
        const View<float> norm = stats.subview(static_cast<std::size_t>(norm_index) * N + a, 1);
        device.global_norm(norm, x.subview(a * P, P),
                           scratch.subview(a * norm_guard_scratch_size(), Device::global_norm_scratch_size()));
        for (std::size_t k = 0; k < losses.size(); ++k) losses[k] = stats.data()[k * N + a];
        training_guard(device, gate.subview(a, 1), state.subview(a, 1), View<const float>(losses.data(), losses.size()),
                       norm, update.agent(static_cast<long long>(a)));
        for (std::size_t k = 0; k < static_cast<std::size_t>(accum.empty() ? 0 : n_stats); ++k) {
            float& sum = accum.data()[a * static_cast<std::size_t>(accum_stride) + k];
            sum = core::saxpy_element(sum, 1.0f, stats.data()[k * N + a]);
        }
    }
}

/// Device::adam_step (the captured form, at update number `step`) for every agent of a
/// population in one launch. Agent a's params, m, v, grads and target are [a P, (a + 1) P) of
/// theirs (P = params.size() / agents); its gradient norm grad_norm[a] (read when p.clip_norm > 0),
/// its gate[a] (or gate empty), its learning rate lr[a] (device memory; p.lr is not used) and,
/// with a target, its soft target's tau and keep tau_keep[2 a], tau_keep[2 a + 1] (device memory,
/// SoftTarget's; target empty: none). p's betas, eps, weight decay and clip are every agent's;
/// agent a's update number is step.agent(a)'s (its own counter where step.agent_stride > 0).
/// Each agent's floats are adam_step's on its slices with its scalars.
inline void adam_step_agents(Device& device, int agents, View<float> params, View<float> m, View<float> v,
                             View<const float> grads, View<const float> grad_norm, View<const int> gate,
                             CounterValue step, const AdamParams& p, View<const float> lr, View<float> target = {},
                             View<const float> tau_keep = {}) {
    const char* op = "adam_step_agents";
    if (agents < 1 || params.empty() || params.size() % static_cast<std::size_t>(agents) != 0)
        throw std::invalid_argument(
            fmt::format("ops::{}: {} parameters do not split into {} agents", op, params.size(), agents));
    const std::size_t N = static_cast<std::size_t>(agents), P = params.size() / N;
    for (auto [size, name] : {std::pair{m.size(), "m"}, {v.size(), "v"}, {grads.size(), "grads"}})
        detail::require_size(size, params.size(), op, name);
    if (p.clip_norm > 0.f) detail::require_size(grad_norm.size(), N, op, "grad_norm (clip_norm > 0)");
    if (!gate.empty()) detail::require_size(gate.size(), N, op, "gate");
    detail::require_size(lr.size(), N, op, "lr");
    if (!target.empty()) {
        detail::require_size(target.size(), params.size(), op, "target");
        detail::require_size(tau_keep.size(), 2 * N, op, "tau_keep");
    }
    if (step.counter == nullptr && step.offset < 1)
        throw std::invalid_argument(fmt::format("ops::{}: step must be >= 1 (1-based), got {}", op, step.offset));
    detail::checked_int_size(P, op);
    detail::require_distinct(
        op, {detail::range("params", params), detail::range("m", m), detail::range("v", v),
             detail::range("grads", grads), detail::range("grad_norm", grad_norm), detail::range("gate", gate),
             detail::range("lr", lr), detail::range("target", target), detail::range("tau_keep", tau_keep)});
    if (CudaDevice* cuda = device.cuda()) {
        core::AdamConstants c = core::constants_of(p);
        if (step.counter == nullptr) c = core::at_step(c, step.offset);  // as Device::adam_step
        return cuda_twin::adam_step_agents(*cuda, agents, params, m, v, grads,
                                           p.clip_norm > 0.f ? grad_norm : View<const float>(), gate, step, c, lr,
                                           target, tau_keep);
    }
    for (std::size_t a = 0; a < N; ++a) {
        AdamParams own = p;
        own.lr = lr.data()[a];
        const SoftTarget soft =
            target.empty() ? SoftTarget{}
                           : SoftTarget{target.subview(a * P, P), tau_keep.data()[2 * a], tau_keep.data()[2 * a + 1]};
        device.adam_step(params.subview(a * P, P), m.subview(a * P, P), v.subview(a * P, P), grads.subview(a * P, P),
                         p.clip_norm > 0.f ? grad_norm.subview(a, 1) : View<const float>(),
                         gate.empty() ? View<const int>() : gate.subview(a, 1), step.agent(static_cast<long long>(a)),
                         own, lr.subview(a, 1), soft);
    }
}

namespace detail {
/// The width D of the rows the groups cover: 1..kMaxGroups contiguous, non-empty groups from
/// column 0, in order (checked); D = the last group's end.
inline int group_row_width(const attention::Groups& g, const char* op) {
    require(g.count >= 1 && g.count <= attention::kMaxGroups, op,
            fmt::format("need 1..{} groups (got {})", attention::kMaxGroups, g.count));
    require(g.begin[0] == 0, op, "the groups must start at column 0");
    for (int k = 0; k < g.count; ++k) require(g.begin[k] < g.begin[k + 1], op, "every group needs a column, in order");
    return g.begin[g.count];
}
}  // namespace detail

/// Feature-group attention, forward (attention::forward_row per row): x_out (rows, D) and alpha
/// (rows, G) from scores (rows, G) and x (x_rows, D), row r reading x row r % x_rows (x_rows
/// divides rows: one X under several networks). Equal to the CPU twin within rounding (exp).
inline void group_attention_forward(Device& device, View<float> x_out, View<float> alpha, View<const float> x,
                                    View<const float> scores, const attention::Groups& groups, int rows, int x_rows) {
    const char* op = "group_attention_forward";
    const int D = detail::group_row_width(groups, op);
    detail::require(rows >= 1 && x_rows >= 1 && rows % x_rows == 0, op, "need rows >= 1 and x_rows dividing rows");
    const auto G = static_cast<std::size_t>(groups.count), R = static_cast<std::size_t>(rows);
    detail::require_size(x_out.size(), R * static_cast<std::size_t>(D), op, "x_out");
    detail::require_size(alpha.size(), R * G, op, "alpha");
    detail::require_size(scores.size(), R * G, op, "scores");
    detail::require_size(x.size(), static_cast<std::size_t>(x_rows) * static_cast<std::size_t>(D), op, "x");
    detail::checked_int_size(x_out.size(), op);
    detail::require_distinct(op, {detail::range("x_out", x_out), detail::range("alpha", alpha), detail::range("x", x),
                                  detail::range("scores", scores)});
    if (CudaDevice* cuda = device.cuda())
        return cuda_twin::group_attention_forward(*cuda, x_out, alpha, x, scores, groups, D, rows, x_rows);
    cpu_twin::group_attention_forward(x_out, alpha, x, scores, groups, D, rows, x_rows);
}

/// Feature-group attention, backward to the scores (attention::backward_row per row): d_scores
/// (rows, G) from d_x_out (rows, D), x (rows, D) and alpha (rows, G) of the forward.
inline void group_attention_backward(Device& device, View<float> d_scores, View<const float> d_x_out,
                                     View<const float> x, View<const float> alpha, const attention::Groups& groups,
                                     int rows) {
    const char* op = "group_attention_backward";
    const int D = detail::group_row_width(groups, op);
    detail::require(rows >= 1, op, "need rows >= 1");
    const auto G = static_cast<std::size_t>(groups.count), R = static_cast<std::size_t>(rows);
    detail::require_size(d_scores.size(), R * G, op, "d_scores");
    detail::require_size(d_x_out.size(), R * static_cast<std::size_t>(D), op, "d_x_out");
    detail::require_size(x.size(), R * static_cast<std::size_t>(D), op, "x");
    detail::require_size(alpha.size(), R * G, op, "alpha");
    detail::checked_int_size(d_x_out.size(), op);
    detail::require_distinct(op, {detail::range("d_scores", d_scores), detail::range("d_x_out", d_x_out),
                                  detail::range("x", x), detail::range("alpha", alpha)});
    if (CudaDevice* cuda = device.cuda())
        return cuda_twin::group_attention_backward(*cuda, d_scores, d_x_out, x, alpha, groups, D, rows);
    cpu_twin::group_attention_backward(d_scores, d_x_out, x, alpha, groups, D, rows);
}

}  // namespace fh::ops
