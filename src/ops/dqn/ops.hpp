/// @file ops.hpp
/// @brief The DQN op family: the trainer's fused device steps. Acting from the head outputs
///        (Q of the dueling C51 head, epsilon-greedy), the whole loss of an update with the head's
///        backward, the update's finish (gradient norm, guard, monitor, Adam constants, target
///        copy, counters), Adam with the target update, and the collection counters (the math:
///        math/dqn.h; docs/dqn.md).
///
/// Each op checks its arguments here, once, then runs its CPU twin (cpu_twin::, plain loops over
/// the shared math, src/ops/dqn/cpu.cpp) or its CUDA twin (cuda_twin::, the kernels of
/// cuda/kernels/dqn_step.cu, launched by src/ops/dqn/cuda.cpp). Every op takes its agents'
/// parameters and counters as device arrays (one entry per agent; N = 1 for a single run), so
/// its launches never carry a per-step host value and can be captured in a CUDA Graph.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <stdexcept>

#include "abi/dqn_step.h"
#include "math/dqn.h"
#include "math/env.h"
#include "math/her.h"
#include "math/replay.h"
#include "ops/device.hpp"

namespace fh::ops {

/// The replay ring's arrays per agent (N agents, rows = capacity_steps * n_envs each): the
/// transitions collection writes and sampling reads (slot k % capacity_steps, rows slot * n_envs + e).
struct RingViews {
    View<float> states, next_states;  ///< (N, rows, state_dim)
    View<int> actions;                ///< (N, rows)
    View<float> rewards;              ///< (N, rows)
    View<std::uint8_t> done;          ///< (N, rows) env::DoneFlag
    int capacity_steps = 0, n_envs = 0, state_dim = 0;
};

/// A collection step that also advances its agents' counters (dqn_advance's increments, once
/// every environment has stepped): counters is the step's own counters, tickets (N) a zeroed
/// scratch of the CUDA twin (each agent's last block advances). Empty: no advance.
struct CollectAdvance {
    View<dqn::Counters> counters;
    View<unsigned> tickets;
};

namespace cpu_twin {
void dqn_act(View<int> actions, View<float> q, View<unsigned long long> histogram, View<const float> head,
             const dqn::HeadParams& h, View<const dqn::AgentParams> agent, View<const dqn::Counters> counters, int n,
             bool explore);
void dqn_loss(View<float> d_head, View<float> stats, View<const float> head_s, View<const float> head_select,
              View<const float> head_target, View<const int> actions, View<const float> returns,
              View<const float> discounts, View<const dqn::AgentParams> agent, const dqn::HeadParams& h, int batch,
              View<const int> target_actions, View<const float> masks);
void dqn_update_finish(View<dqn::UpdateStep> step, View<nn::GuardState> guard, View<dqn::MonitorStats> stats,
                       View<dqn::Counters> counters, View<float> norm_partials, View<const float> grads,
                       View<const float> sample_stats, View<const dqn::AgentParams> agent, int batch, int inject_nan);
void dqn_adam_target(View<float> params, View<float> m, View<float> v, View<float> target, View<const float> grads,
                     View<const dqn::UpdateStep> step, View<const dqn::AgentParams> agent);
void dqn_advance(View<dqn::Counters> counters);
void dqn_collect(View<env::EnvState> state, View<float> portfolio, View<float> states, View<const int> actions,
                 const RingViews& ring, View<const dqn::Counters> counters, const env::MarketView& market,
                 const env::EnvParams& params, const CollectAdvance& advance, View<const abi::EnvAgent> agents);
void dqn_sample(View<float> x, View<int> actions, View<float> returns, View<float> discounts, View<float> masks,
                const RingViews& ring, View<const dqn::Counters> counters, View<const dqn::AgentParams> agent,
                int batch, int ensemble);
void dqn_curiosity_gather(View<float> input, View<float> next_market, const RingViews& ring,
                          View<const dqn::Counters> counters, int num_actions, int market_dim);
void dqn_curiosity_bonus(const RingViews& ring, View<dqn::CuriosityStats> stats, View<const float> error,
                         View<const dqn::Counters> counters, View<const dqn::AgentParams> agent);
void dqn_her_observe(View<float> obs, View<float> goals, View<const env::EnvState> state, View<const float> states,
                     View<const dqn::Counters> counters, View<const dqn::AgentParams> agent, int capacity_steps,
                     int state_dim);
void dqn_goal_states(View<float> obs, View<const float> states, View<const float> goal, int state_dim);
void dqn_her_sample(View<float> x, View<int> actions, View<float> returns, View<float> discounts, View<float> masks,
                    View<float> goals_out, const RingViews& ring, View<const float> goals,
                    View<const dqn::Counters> counters, View<const dqn::AgentParams> agent, int batch, int ensemble);
}  // namespace cpu_twin

namespace cuda_twin {
void dqn_act(CudaDevice& device, View<int> actions, View<float> q, View<unsigned long long> histogram,
             View<const float> head, const dqn::HeadParams& h, View<const dqn::AgentParams> agent,
             View<const dqn::Counters> counters, int n, bool explore);
void dqn_loss(CudaDevice& device, View<float> d_head, View<float> stats, View<const float> head_s,
              View<const float> head_select, View<const float> head_target, View<const int> actions,
              View<const float> returns, View<const float> discounts, View<const dqn::AgentParams> agent,
              const dqn::HeadParams& h, int batch, View<const int> target_actions, View<const float> masks);
void dqn_update_finish(CudaDevice& device, View<dqn::UpdateStep> step, View<nn::GuardState> guard,
                       View<dqn::MonitorStats> stats, View<dqn::Counters> counters, View<float> norm_partials,
                       View<const float> grads, View<const float> sample_stats, View<const dqn::AgentParams> agent,
                       int batch, int inject_nan);
void dqn_adam_target(CudaDevice& device, View<float> params, View<float> m, View<float> v, View<float> target,
                     View<const float> grads, View<const dqn::UpdateStep> step, View<const dqn::AgentParams> agent,
                     View<dqn::Counters> advance);
void dqn_advance(CudaDevice& device, View<dqn::Counters> counters);
void dqn_collect(CudaDevice& device, View<env::EnvState> state, View<float> portfolio, View<float> states,
                 View<const int> actions, const RingViews& ring, View<const dqn::Counters> counters,
                 const env::MarketView& market, const env::EnvParams& params, const CollectAdvance& advance,
                 View<const abi::EnvAgent> agents);
void dqn_sample(CudaDevice& device, View<float> x, View<int> actions, View<float> returns, View<float> discounts,
                View<float> masks, const RingViews& ring, View<const dqn::Counters> counters,
                View<const dqn::AgentParams> agent, int batch, int ensemble);
void dqn_curiosity_gather(CudaDevice& device, View<float> input, View<float> next_market, const RingViews& ring,
                          View<const dqn::Counters> counters, int num_actions, int market_dim);
void dqn_curiosity_bonus(CudaDevice& device, const RingViews& ring, View<dqn::CuriosityStats> stats,
                         View<const float> error, View<const dqn::Counters> counters,
                         View<const dqn::AgentParams> agent);
void dqn_her_observe(CudaDevice& device, View<float> obs, View<float> goals, View<const env::EnvState> state,
                     View<const float> states, View<const dqn::Counters> counters, View<const dqn::AgentParams> agent,
                     int capacity_steps, int state_dim);
void dqn_goal_states(CudaDevice& device, View<float> obs, View<const float> states, View<const float> goal,
                     int state_dim);
void dqn_her_sample(CudaDevice& device, View<float> x, View<int> actions, View<float> returns, View<float> discounts,
                    View<float> masks, View<float> goals_out, const RingViews& ring, View<const float> goals,
                    View<const dqn::Counters> counters, View<const dqn::AgentParams> agent, int batch, int ensemble);
}  // namespace cuda_twin

namespace detail {
inline void check_head(const dqn::HeadParams& h, const char* op) {
    if (h.num_actions < 1 || h.num_atoms < 2 || !(h.v_min < h.v_max))
        throw std::invalid_argument(
            fmt::format("ops::{}: need num_actions >= 1, num_atoms >= 2 and v_min < v_max (got {}, {}, [{}, {}])", op,
                        h.num_actions, h.num_atoms, h.v_min, h.v_max));
    if (h.ensemble < 1 || h.ensemble > dqn::kMaxEnsemble)
        throw std::invalid_argument(
            fmt::format("ops::{}: the ensemble has {} heads, need 1 to {}", op, h.ensemble, dqn::kMaxEnsemble));
    // The per-row kernels' scratch (dynamic shared memory) must fit the default 48 KB per block.
    const long long smem = abi::dqn_step_smem_bytes(h);
    if (smem > abi::kDqnMaxSmemBytes)
        throw std::invalid_argument(fmt::format(
            "ops::{}: {} actions, {} atoms and {} heads need {} bytes of scratch per block, more than 48 KB", op,
            h.num_actions, h.num_atoms, h.ensemble, smem));
}
/// Sizes of a ring for N agents; returns its rows per agent.
inline std::size_t check_ring(const RingViews& r, std::size_t N, const char* op) {
    if (r.capacity_steps < 1 || r.n_envs < 1 || r.state_dim < 1)
        throw std::invalid_argument(fmt::format("ops::{}: the ring needs capacity_steps, n_envs, state_dim >= 1", op));
    const std::size_t rows = static_cast<std::size_t>(r.capacity_steps) * static_cast<std::size_t>(r.n_envs);
    const std::size_t D = static_cast<std::size_t>(r.state_dim);
    require_size(r.states.size(), N * rows * D, op, "ring states");
    require_size(r.next_states.size(), N * rows * D, op, "ring next_states");
    require_size(r.actions.size(), N * rows, op, "ring actions");
    require_size(r.rewards.size(), N * rows, op, "ring rewards");
    require_size(r.done.size(), N * rows, op, "ring done");
    checked_int_size(N * rows * D, op);
    return rows;
}
/// Agents of a call: the size of its parameter array (>= 1).
inline std::size_t agents_of(std::size_t n, const char* op) {
    if (n == 0) throw std::invalid_argument(fmt::format("ops::{}: no agent parameters", op));
    return n;
}
}  // namespace detail

/// Acting from network outputs (n rows of dqn::output_width floats per agent): Q (A) of each row's
/// dueling C51 head (with an ensemble of K heads: the heads' mean, dqn::ensemble_q), then
/// epsilon-greedy with the epsilon of counters.steps and Philox(seed, exploration, row, steps)
/// on Q, or with an ensemble and agent.ucb > 0 on dqn::ensemble_score (agent, counters given and
/// explore: collection), or the first maximal Q (agent and counters empty: evaluation; or explore
/// false: an ensemble's target action, per agent). actions (N, n) out; q (N, n, A) out or empty;
/// histogram (N, A) += the actions taken, or empty.
inline void dqn_act(Device& device, View<int> actions, View<float> q, View<unsigned long long> histogram,
                    View<const float> head, const dqn::HeadParams& h, View<const dqn::AgentParams> agent,
                    View<const dqn::Counters> counters, bool explore = true) {
    const char* op = "dqn_act";
    detail::check_head(h, op);
    const std::size_t N = agent.empty() ? 1 : agent.size();
    detail::require(counters.size() == agent.size(), op, "counters and agent parameters come together, one per agent");
    detail::require(!actions.empty() && actions.size() % N == 0, op, "actions must hold n rows per agent");
    const std::size_t n = actions.size() / N, A = static_cast<std::size_t>(h.num_actions);
    detail::require_size(head.size(), actions.size() * static_cast<std::size_t>(dqn::output_width(h)), op, "head");
    if (!q.empty()) detail::require_size(q.size(), actions.size() * A, op, "q");
    if (!histogram.empty()) detail::require_size(histogram.size(), N * A, op, "histogram");
    detail::checked_int_size(head.size(), op);
    detail::require_distinct(
        op, {detail::range("actions", actions), detail::range("q", q), detail::range("histogram", histogram),
             detail::range("head", head), detail::range("agent", agent), detail::range("counters", counters)});
    if (CudaDevice* cuda = device.cuda())
        return cuda_twin::dqn_act(*cuda, actions, q, histogram, head, h, agent, counters, static_cast<int>(n), explore);
    cpu_twin::dqn_act(actions, q, histogram, head, h, agent, counters, static_cast<int>(n), explore);
}

/// The whole loss of one update on a batch of B transitions per agent, from the head outputs of
/// the online network at s (head_s), of the network that picks a* at s' (head_select: the online
/// network for double DQN, else the target network; may be head_target itself) and of the target
/// network at s' (head_target), each (N, B, W): d_head (N, B, W) = the gradient of the
/// batch-mean loss alpha * C51 + (1 - alpha) * MSE + cql_alpha * CQL with respect to head_s;
/// stats (N, kSampleStats, B) = per-sample C51 loss, MSE loss, TD error, Q(s, a) and CQL term
/// (dqn::SampleStat; the CQL row is 0 when cql_alpha = 0). actions,
/// returns, discounts (N, B). An action outside [0, A) gives its sample NaN statistics and no
/// gradient (the guard then skips the update).
/// With an ensemble of K heads (h.ensemble) the head arrays are (N, B, K * W) = B * K head rows
/// per agent, each row (head k of sample b) its own loss with the sample's action, return and
/// discount, weighted by masks (N, B * K) (the bootstrap masks; empty: all 1) and 1 / (B * K):
/// d_head is the gradient of (1 / (B K)) sum_{b,k} mask_bk L_bk; stats (N, kSampleStats, B * K).
/// target_actions (N, B), when given, is every head's a* (the ensemble's: the heads' mean Q of
/// the select network, dqn_act with explore = false); empty: each row's own argmax.
inline void dqn_loss(Device& device, View<float> d_head, View<float> stats, View<const float> head_s,
                     View<const float> head_select, View<const float> head_target, View<const int> actions,
                     View<const float> returns, View<const float> discounts, View<const dqn::AgentParams> agent,
                     const dqn::HeadParams& h, int batch, View<const int> target_actions = {},
                     View<const float> masks = {}) {
    const char* op = "dqn_loss";
    detail::check_head(h, op);
    const std::size_t N = detail::agents_of(agent.size(), op);
    detail::require(batch >= 1, op, "batch must be >= 1");
    const std::size_t samples = N * static_cast<std::size_t>(batch);
    const std::size_t rows = samples * static_cast<std::size_t>(h.ensemble),
                      W = static_cast<std::size_t>(dqn::head_width(h));
    for (auto [v, name] : {std::pair{head_s, "head_s"}, {head_select, "head_select"}, {head_target, "head_target"}})
        detail::require_size(v.size(), rows * W, op, name);
    detail::require_size(d_head.size(), rows * W, op, "d_head");
    detail::require_size(stats.size(), rows * dqn::kSampleStats, op, "stats");
    detail::require_size(actions.size(), samples, op, "actions");
    detail::require_size(returns.size(), samples, op, "returns");
    detail::require_size(discounts.size(), samples, op, "discounts");
    if (!target_actions.empty()) detail::require_size(target_actions.size(), samples, op, "target_actions");
    if (!masks.empty()) detail::require_size(masks.size(), rows, op, "masks");
    detail::checked_int_size(rows * W, op);
    detail::require_distinct(
        op, {detail::range("d_head", d_head), detail::range("stats", stats), detail::range("head_s", head_s),
             detail::range("head_select", head_select), detail::range("head_target", head_target),
             detail::range("actions", actions), detail::range("returns", returns),
             detail::range("discounts", discounts), detail::range("target_actions", target_actions),
             detail::range("masks", masks), detail::range("agent", agent)});
    if (CudaDevice* cuda = device.cuda())
        return cuda_twin::dqn_loss(*cuda, d_head, stats, head_s, head_select, head_target, actions, returns, discounts,
                                   agent, h, batch, target_actions, masks);
    cpu_twin::dqn_loss(d_head, stats, head_s, head_select, head_target, actions, returns, discounts, agent, h, batch,
                       target_actions, masks);
}

/// Floats of scratch dqn_update_finish needs per agent (the gradient norm's partial sums and, on
/// CUDA, a ticket): zero it before the first call (the op leaves it reusable).
constexpr std::size_t dqn_finish_scratch_size() noexcept {
    return static_cast<std::size_t>(abi::kDqnFinishScratch);
}

/// The update's finish, per agent: the global norm of grads (N, P) (the fixed grid and trees of
/// Device::global_norm, emulated exactly by the CPU twin), the batch sums of sample_stats
/// (N, kSampleStats, B) in a fixed tree, then dqn::finish_update: the batch-mean losses, the training
/// guard's decision, the monitor, this update's Adam constants and target copy, and counters'
/// update count. step, guard, stats, counters (N); norm_partials (N, dqn_finish_scratch_size()).
/// inject_nan (tests, never in a captured sequence): bit g makes agent g's C51 loss NaN (agents
/// 0 to 31; true: agent 0).
inline void dqn_update_finish(Device& device, View<dqn::UpdateStep> step, View<nn::GuardState> guard,
                              View<dqn::MonitorStats> stats, View<dqn::Counters> counters, View<float> norm_partials,
                              View<const float> grads, View<const float> sample_stats,
                              View<const dqn::AgentParams> agent, int batch, std::uint32_t inject_nan) {
    const char* op = "dqn_update_finish";
    const std::size_t N = detail::agents_of(agent.size(), op);
    detail::require(batch >= 1, op, "batch must be >= 1");
    for (auto [size, name] : {std::pair{step.size(), "step"},
                              {guard.size(), "guard"},
                              {stats.size(), "stats"},
                              {counters.size(), "counters"}})
        detail::require_size(size, N, op, name);
    detail::require_size(norm_partials.size(), N * dqn_finish_scratch_size(), op, "norm_partials");
    detail::require(!grads.empty() && grads.size() % N == 0, op, "grads must hold the same parameters per agent");
    detail::require_size(sample_stats.size(), N * dqn::kSampleStats * static_cast<std::size_t>(batch), op,
                         "sample_stats");
    detail::checked_int_size(grads.size() / N, op);
    detail::require_distinct(op, {detail::range("step", step), detail::range("guard", guard),
                                  detail::range("stats", stats), detail::range("counters", counters),
                                  detail::range("norm_partials", norm_partials), detail::range("grads", grads),
                                  detail::range("sample_stats", sample_stats), detail::range("agent", agent)});
    if (CudaDevice* cuda = device.cuda())
        return cuda_twin::dqn_update_finish(*cuda, step, guard, stats, counters, norm_partials, grads, sample_stats,
                                            agent, batch, static_cast<int>(inject_nan));
    cpu_twin::dqn_update_finish(step, guard, stats, counters, norm_partials, grads, sample_stats, agent, batch,
                                static_cast<int>(inject_nan));
}

/// Adam (when the guard applied the update) and the target update of every parameter, per
/// agent (dqn::adam_target_element): params, m, v, target, grads (N, P), step (N). With
/// `advance` (N counters), also dqn_advance's increments in the same launch (an iteration's
/// last update, after its collection step: one graph node fewer on the iteration's path).
inline void dqn_adam_target(Device& device, View<float> params, View<float> m, View<float> v, View<float> target,
                            View<const float> grads, View<const dqn::UpdateStep> step,
                            View<const dqn::AgentParams> agent, View<dqn::Counters> advance = {}) {
    const char* op = "dqn_adam_target";
    const std::size_t N = detail::agents_of(agent.size(), op);
    detail::require(!params.empty() && params.size() % N == 0, op, "params must hold the same count per agent");
    for (auto [size, name] :
         {std::pair{m.size(), "m"}, {v.size(), "v"}, {target.size(), "target"}, {grads.size(), "grads"}})
        detail::require_size(size, params.size(), op, name);
    detail::require_size(step.size(), N, op, "step");
    if (!advance.empty()) detail::require_size(advance.size(), N, op, "advance");
    detail::checked_int_size(params.size() / N, op);
    detail::require_distinct(
        op, {detail::range("params", params), detail::range("m", m), detail::range("v", v),
             detail::range("target", target), detail::range("grads", grads), detail::range("step", step),
             detail::range("agent", agent), detail::range("advance", advance)});
    if (CudaDevice* cuda = device.cuda())
        return cuda_twin::dqn_adam_target(*cuda, params, m, v, target, grads, step, agent, advance);
    cpu_twin::dqn_adam_target(params, m, v, target, grads, step, agent);
    if (!advance.empty()) cpu_twin::dqn_advance(advance);
}

/// After a collection step: counters' steps and pushed += 1, per agent.
inline void dqn_advance(Device& device, View<dqn::Counters> counters) {
    detail::agents_of(counters.size(), "dqn_advance");
    if (CudaDevice* cuda = device.cuda()) return cuda_twin::dqn_advance(*cuda, counters);
    cpu_twin::dqn_advance(counters);
}

/// One collection step of n environments per agent into the replay ring's slot
/// counters.pushed % capacity_steps (rows slot * n_envs + e): the observation states[e] before
/// the step, actions[e], env::step_env's reward and done flag, the observation after the step;
/// a finished episode restarts (env::reset_env) and states[e] becomes the next decision's
/// observation. Equal to VecEnv::step followed by a copy into the ring, bit for bit, on both
/// backends. state (N, n), portfolio (N, n, PORTFOLIO_STRIDE), states (N, n, state_dim),
/// actions (N, n), counters (N). Run dqn_advance after it, or give `advance` (the same counters
/// and N zeroed tickets) to advance them in the same launch. `agents` (N), when given: agent g
/// steps on agents[g].market with params.seed replaced by agents[g].seed (a population whose
/// agents have their own seeds and markets; `market` is then unused); their markets share
/// params' market_dim.
inline void dqn_collect(Device& device, View<env::EnvState> state, View<float> portfolio, View<float> states,
                        View<const int> actions, const RingViews& ring, View<const dqn::Counters> counters,
                        const env::MarketView& market, const env::EnvParams& params, const CollectAdvance& advance = {},
                        View<const abi::EnvAgent> agents = {}) {
    const char* op = "dqn_collect";
    const std::size_t N = detail::agents_of(counters.size(), op);
    if (!advance.counters.empty() || !advance.tickets.empty()) {
        detail::require(advance.counters.data() == counters.data() && advance.counters.size() == N, op,
                        "the counters to advance must be the step's own counters");
        detail::require_size(advance.tickets.size(), N, op, "tickets");
    }
    detail::check_ring(ring, N, op);
    const std::size_t n = static_cast<std::size_t>(ring.n_envs);
    detail::require(ring.state_dim == params.state_dim, op, "the ring's state_dim differs from the environment's");
    detail::require_size(state.size(), N * n, op, "state");
    detail::require_size(portfolio.size(), N * n * env::PORTFOLIO_STRIDE, op, "portfolio");
    detail::require_size(states.size(), N * n * static_cast<std::size_t>(params.state_dim), op, "states");
    detail::require_size(actions.size(), N * n, op, "actions");
    if (agents.empty()) {
        detail::require(market.n_starts >= 1 && market.n_bars >= 2, op, "the market has no valid episode start");
    } else {
        detail::require_size(agents.size(), N, op, "agents");
        // The agents' entries live where the kernels read them; their markets' sizes are the host's copy.
        for (std::size_t g = 0; g < N && device.cuda() == nullptr; ++g)
            detail::require(agents.data()[g].market.n_starts >= 1 && agents.data()[g].market.n_bars >= 2, op,
                            "an agent's market has no valid episode start");
    }
    detail::require_distinct(
        op, {detail::range("state", state), detail::range("portfolio", portfolio), detail::range("states", states),
             detail::range("actions", actions), detail::range("ring states", ring.states),
             detail::range("ring next_states", ring.next_states), detail::range("ring actions", ring.actions),
             detail::range("ring rewards", ring.rewards), detail::range("ring done", ring.done),
             detail::range("counters", counters), detail::range("tickets", advance.tickets)});
    if (CudaDevice* cuda = device.cuda())
        return cuda_twin::dqn_collect(*cuda, state, portfolio, states, actions, ring, counters, market, params, advance,
                                      agents);
    cpu_twin::dqn_collect(state, portfolio, states, actions, ring, counters, market, params, advance, agents);
}

/// A uniform batch of B n-step transitions per agent from the ring (replay::sample_nstep), drawn
/// at the counters' push count with this update's number (counters.updates + 1) as the Philox
/// counter, among the steps of dqn::sample_range (the oldest step of a full ring is left out: the
/// collection that runs beside the update overwrites it): x (N, 2B, state_dim) gets the states in
/// rows [0, B) and the next states in rows [B, 2B); actions, returns, discounts (N, B). The ring
/// must hold n_step steps. masks (N, B, ensemble), when given, gets each head's bootstrap mask of
/// the row's first transition (dqn::bootstrap_mask with agent.bootstrap_prob).
inline void dqn_sample(Device& device, View<float> x, View<int> actions, View<float> returns, View<float> discounts,
                       const RingViews& ring, View<const dqn::Counters> counters, View<const dqn::AgentParams> agent,
                       int batch, View<float> masks = {}, int ensemble = 1) {
    const char* op = "dqn_sample";
    const std::size_t N = detail::agents_of(agent.size(), op);
    detail::require(batch >= 1, op, "batch must be >= 1");
    detail::check_ring(ring, N, op);
    detail::require_size(counters.size(), N, op, "counters");
    const std::size_t B = static_cast<std::size_t>(batch);
    detail::require_size(x.size(), N * 2 * B * static_cast<std::size_t>(ring.state_dim), op, "x");
    detail::require_size(actions.size(), N * B, op, "actions");
    detail::require_size(returns.size(), N * B, op, "returns");
    detail::require_size(discounts.size(), N * B, op, "discounts");
    detail::require(ensemble >= 1 && ensemble <= dqn::kMaxEnsemble, op, "ensemble must be in [1, 32]");
    if (!masks.empty()) detail::require_size(masks.size(), N * B * static_cast<std::size_t>(ensemble), op, "masks");
    detail::require_distinct(
        op, {detail::range("x", x), detail::range("actions", actions), detail::range("returns", returns),
             detail::range("discounts", discounts), detail::range("masks", masks),
             detail::range("ring states", View<const float>(ring.states)),
             detail::range("ring next_states", View<const float>(ring.next_states)),
             detail::range("ring actions", View<const int>(ring.actions)),
             detail::range("ring rewards", View<const float>(ring.rewards)),
             detail::range("ring done", View<const std::uint8_t>(ring.done)), detail::range("counters", counters),
             detail::range("agent", agent)});
    if (CudaDevice* cuda = device.cuda())
        return cuda_twin::dqn_sample(*cuda, x, actions, returns, discounts, masks, ring, counters, agent, batch,
                                     ensemble);
    cpu_twin::dqn_sample(x, actions, returns, discounts, masks, ring, counters, agent, batch, ensemble);
}

/// The curiosity model's view of the step just collected (dqn.curiosity; run after dqn_collect,
/// before dqn_advance), from the ring's slot counters.pushed % capacity_steps: input (N, n,
/// state_dim + num_actions) = [state row | one-hot(action)] (ppo::curiosity_input_row) and
/// next_market (N, n, market_dim) = the first market_dim columns of the next-state rows (the
/// next bar's market features the model predicts). Copies only: equal on both backends.
inline void dqn_curiosity_gather(Device& device, View<float> input, View<float> next_market, const RingViews& ring,
                                 View<const dqn::Counters> counters, int num_actions, int market_dim) {
    const char* op = "dqn_curiosity_gather";
    const std::size_t N = detail::agents_of(counters.size(), op);
    detail::check_ring(ring, N, op);
    detail::require(num_actions >= 1, op, "num_actions must be >= 1");
    detail::require(market_dim >= 1 && market_dim <= ring.state_dim, op, "market_dim must be in [1, state_dim]");
    const std::size_t n = static_cast<std::size_t>(ring.n_envs);
    detail::require_size(input.size(), N * n * static_cast<std::size_t>(ring.state_dim + num_actions), op, "input");
    detail::require_size(next_market.size(), N * n * static_cast<std::size_t>(market_dim), op, "next_market");
    detail::checked_int_size(input.size(), op);
    detail::require_distinct(
        op, {detail::range("input", input), detail::range("next_market", next_market),
             detail::range("ring states", View<const float>(ring.states)),
             detail::range("ring next_states", View<const float>(ring.next_states)),
             detail::range("ring actions", View<const int>(ring.actions)), detail::range("counters", counters)});
    if (CudaDevice* cuda = device.cuda())
        return cuda_twin::dqn_curiosity_gather(*cuda, input, next_market, ring, counters, num_actions, market_dim);
    cpu_twin::dqn_curiosity_gather(input, next_market, ring, counters, num_actions, market_dim);
}

/// The curiosity bonus into the step just collected (run after the model's error, before
/// dqn_advance): the ring's reward of environment e in slot counters.pushed % capacity_steps
/// becomes dqn::reward_with_bonus(reward, agent.curiosity_coef, error[e]), so sampling sees it;
/// stats (N) += the errors' sum (double, the kernel's fixed order: thread t of
/// abi::kDqnFinishThreads sums e = t, t + T, ..., then a fixed tree) and n transitions. error
/// (N, n). Equal on both backends, bit for bit.
inline void dqn_curiosity_bonus(Device& device, const RingViews& ring, View<dqn::CuriosityStats> stats,
                                View<const float> error, View<const dqn::Counters> counters,
                                View<const dqn::AgentParams> agent) {
    const char* op = "dqn_curiosity_bonus";
    const std::size_t N = detail::agents_of(agent.size(), op);
    detail::check_ring(ring, N, op);
    detail::require_size(counters.size(), N, op, "counters");
    detail::require_size(stats.size(), N, op, "stats");
    detail::require_size(error.size(), N * static_cast<std::size_t>(ring.n_envs), op, "error");
    detail::require_distinct(
        op, {detail::range("ring rewards", ring.rewards), detail::range("stats", stats), detail::range("error", error),
             detail::range("counters", counters), detail::range("agent", agent)});
    if (CudaDevice* cuda = device.cuda())
        return cuda_twin::dqn_curiosity_bonus(*cuda, ring, stats, error, counters, agent);
    cpu_twin::dqn_curiosity_bonus(ring, stats, error, counters, agent);
}

/// dqn.her (docs/dqn.md, "Hindsight experience replay"), before a collection step acts: the goal
/// of each environment's running episode, g_e = her::episode_goal(agent.seed, e, state[e].episode,
/// agent.her_goal_min, agent.her_goal_max), into the ring's goal column goals (N, capacity_steps *
/// n) at slot counters.pushed % capacity_steps (the row dqn_collect writes next), and the rows the
/// network acts on, obs (N, n, state_dim + her::kGoalFeatures) = [states row | g_e, g_e -
/// achieved] (her::goal_state_row). state (N, n), states (N, n, state_dim). Copies and one Philox
/// draw per environment: equal on both backends, bit for bit.
inline void dqn_her_observe(Device& device, View<float> obs, View<float> goals, View<const env::EnvState> state,
                            View<const float> states, View<const dqn::Counters> counters,
                            View<const dqn::AgentParams> agent, int capacity_steps, int state_dim) {
    const char* op = "dqn_her_observe";
    const std::size_t N = detail::agents_of(agent.size(), op);
    detail::require_size(counters.size(), N, op, "counters");
    detail::require(capacity_steps >= 1, op, "capacity_steps must be >= 1");
    detail::require(state_dim > env::kPortfolioFeatures, op, "state_dim must hold the portfolio features");
    detail::require(!state.empty() && state.size() % N == 0, op, "state must hold n environments per agent");
    const std::size_t n = state.size() / N, D = static_cast<std::size_t>(state_dim);
    detail::require_size(states.size(), N * n * D, op, "states");
    detail::require_size(obs.size(), N * n * (D + her::kGoalFeatures), op, "obs");
    detail::require_size(goals.size(), N * static_cast<std::size_t>(capacity_steps) * n, op, "goals");
    detail::checked_int_size(goals.size(), op);
    detail::checked_int_size(obs.size(), op);
    detail::require_distinct(
        op, {detail::range("obs", obs), detail::range("goals", goals), detail::range("state", state),
             detail::range("states", states), detail::range("counters", counters), detail::range("agent", agent)});
    if (CudaDevice* cuda = device.cuda())
        return cuda_twin::dqn_her_observe(*cuda, obs, goals, state, states, counters, agent, capacity_steps, state_dim);
    cpu_twin::dqn_her_observe(obs, goals, state, states, counters, agent, capacity_steps, state_dim);
}

/// dqn.her, evaluation: obs (N, n, state_dim + her::kGoalFeatures) = [states row | goal, goal -
/// achieved] with agent g's fixed goal[g] (dqn.her_eval_goal). states (N, n, state_dim), goal (N).
inline void dqn_goal_states(Device& device, View<float> obs, View<const float> states, View<const float> goal,
                            int state_dim) {
    const char* op = "dqn_goal_states";
    const std::size_t N = detail::agents_of(goal.size(), op);
    detail::require(state_dim > env::kPortfolioFeatures, op, "state_dim must hold the portfolio features");
    const std::size_t D = static_cast<std::size_t>(state_dim);
    detail::require(!states.empty() && states.size() % (N * D) == 0, op, "states must hold n rows per agent");
    const std::size_t n = states.size() / (N * D);
    detail::require_size(obs.size(), N * n * (D + her::kGoalFeatures), op, "obs");
    detail::checked_int_size(obs.size(), op);
    detail::require_distinct(op,
                             {detail::range("obs", obs), detail::range("states", states), detail::range("goal", goal)});
    if (CudaDevice* cuda = device.cuda()) return cuda_twin::dqn_goal_states(*cuda, obs, states, goal, state_dim);
    cpu_twin::dqn_goal_states(obs, states, goal, state_dim);
}

/// dqn.her, an update's batch: dqn_sample's transitions (the same draws), each relabelled with
/// probability agent.her_ratio with a return its episode achieved later, and returns that include
/// the goal reward (her::draw_goal_nstep); x (N, 2B, state_dim + her::kGoalFeatures) holds the
/// states and next states with the row's goal features. goals (N, capacity_steps * n_envs) is the
/// ring's goal column (dqn_her_observe); goals_out (N, B), when given, gets each row's goal.
/// actions, returns, discounts, masks as dqn_sample's. Equal on both backends, bit for bit.
inline void dqn_her_sample(Device& device, View<float> x, View<int> actions, View<float> returns, View<float> discounts,
                           const RingViews& ring, View<const float> goals, View<const dqn::Counters> counters,
                           View<const dqn::AgentParams> agent, int batch, View<float> masks = {}, int ensemble = 1,
                           View<float> goals_out = {}) {
    const char* op = "dqn_her_sample";
    const std::size_t N = detail::agents_of(agent.size(), op);
    detail::require(batch >= 1, op, "batch must be >= 1");
    const std::size_t rows = detail::check_ring(ring, N, op);
    detail::require(ring.state_dim > env::kPortfolioFeatures, op, "the ring's states must hold the portfolio features");
    detail::require_size(counters.size(), N, op, "counters");
    detail::require_size(goals.size(), N * rows, op, "goals");
    const std::size_t B = static_cast<std::size_t>(batch);
    detail::require_size(x.size(), N * 2 * B * static_cast<std::size_t>(ring.state_dim + her::kGoalFeatures), op, "x");
    detail::require_size(actions.size(), N * B, op, "actions");
    detail::require_size(returns.size(), N * B, op, "returns");
    detail::require_size(discounts.size(), N * B, op, "discounts");
    detail::require(ensemble >= 1 && ensemble <= dqn::kMaxEnsemble, op, "ensemble must be in [1, 32]");
    if (!masks.empty()) detail::require_size(masks.size(), N * B * static_cast<std::size_t>(ensemble), op, "masks");
    if (!goals_out.empty()) detail::require_size(goals_out.size(), N * B, op, "goals_out");
    detail::checked_int_size(x.size(), op);
    detail::require_distinct(
        op, {detail::range("x", x), detail::range("actions", actions), detail::range("returns", returns),
             detail::range("discounts", discounts), detail::range("masks", masks),
             detail::range("goals_out", goals_out), detail::range("ring states", View<const float>(ring.states)),
             detail::range("ring next_states", View<const float>(ring.next_states)),
             detail::range("ring actions", View<const int>(ring.actions)),
             detail::range("ring rewards", View<const float>(ring.rewards)),
             detail::range("ring done", View<const std::uint8_t>(ring.done)), detail::range("goals", goals),
             detail::range("counters", counters), detail::range("agent", agent)});
    if (CudaDevice* cuda = device.cuda())
        return cuda_twin::dqn_her_sample(*cuda, x, actions, returns, discounts, masks, goals_out, ring, goals, counters,
                                         agent, batch, ensemble);
    cpu_twin::dqn_her_sample(x, actions, returns, discounts, masks, goals_out, ring, goals, counters, agent, batch,
                             ensemble);
}
}  // namespace fh::ops
