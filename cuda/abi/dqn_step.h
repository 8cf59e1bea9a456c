/// @file dqn_step.h
/// @brief Kernel signatures of cuda/kernels/dqn_step.cu: the DQN trainer's fused device steps
///        (acting, the loss with the head's backward, the update's finish, Adam + target, the
///        collection counters). Math: math/dqn.h. Every kernel takes an agent index from
///        its grid (blockIdx.y for the per-sample kernels, blockIdx.x for the one-block finish):
///        buffers are [agents][...] with the per-agent sizes given, so a population is one launch.
#pragma once

#include "abi/view.h"
// env.h's and core_optim.h's host parts must not reach the kernel table before this header's
// kernel list exists.
#pragma push_macro("FH_INCLUDING_KERNEL_LISTS")
#define FH_INCLUDING_KERNEL_LISTS
#include "abi/core_optim.h"
#include "abi/env.h"
#pragma pop_macro("FH_INCLUDING_KERNEL_LISTS")
#include "math/dqn.h"
#include "math/env.h"
#include "math/her.h"
#include "math/replay.h"

namespace fh::ops {

/// Acting from head outputs, one warp per environment: q (A) from the dueling C51 head row, then
/// epsilon-greedy (policy::epsilon_greedy; epsilon of counters.steps, Philox(seed, exploration,
/// e, steps)) or, without agent/counters, the first maximal Q.
/// With an ensemble (head_params.ensemble = K > 1) Q is the K heads' mean (dqn::ensemble_q) and
/// collection acts on dqn::ensemble_score (the mean plus agent.ucb times the heads' spread).
struct DqnAct {
    View<int> actions;                   ///< (n) out
    View<float> q;                       ///< (n, A) out, or empty
    View<unsigned long long> histogram;  ///< (A) += actions taken, or empty
    View<const float> head;              ///< (n, output_width) network outputs
    dqn::HeadParams head_params;         ///<
    View<const dqn::AgentParams> agent;  ///< or empty: greedy
    View<const dqn::Counters> counters;  ///< with agent
    bool explore = true;                 ///< with agent: epsilon-greedy (collection), else greedy on the mean Q
    int n = 0;                           ///< rows per agent (the launch rule's)
};

/// The whole loss of one update, one warp per sample: a* = argmax of Q(select row), the target
/// distribution of a*, its C51 projection (gather form), the cross-entropy and the MSE on the
/// expected Q of the taken action, their blend, the CQL term when agent.cql_alpha > 0, and the
/// head's backward: d_head (B, W) = dL/d (head outputs) of the batch-mean loss; stats
/// (kSampleStats, B) = C51 loss, MSE loss, TD error, Q(s, a), CQL term per sample
/// (dqn::SampleStat). With an ensemble of K heads the rows are the B * K head rows (row b * K + k:
/// head k of sample b, W = head_width) and stats has B * K columns; each row's loss is weighted
/// by masks[row] / (B * K), and a* comes from target_actions (the heads' mean Q) when given.
struct DqnLoss {
    View<float> d_head;                  ///< (B * K, W) out
    View<float> stats;                   ///< (kSampleStats, B * K) out
    View<const float> head_s;            ///< (B * K, W) online network at s
    View<const float> head_select;       ///< (B * K, W) picks a*: online at s' (double DQN) or target at s'
    View<const float> head_target;       ///< (B * K, W) target network at s'
    View<const int> actions;             ///< (B)
    View<const float> returns;           ///< (B) n-step returns
    View<const float> discounts;         ///< (B) gamma^k, 0 after a termination
    View<const dqn::AgentParams> agent;  ///< mse_alpha, cql_alpha
    dqn::HeadParams head_params;
    int batch;                         ///< B, samples
    View<const int> target_actions{};  ///< (B) a* of every head, or empty: each row's own argmax of select
    View<const float> masks{};         ///< (B * K) weights of the rows (bootstrap masks), or empty: 1
    int stage_rows = 0;  ///< 1: the four-warp loss copies its three rows to shared memory first (dqn_loss_stages_rows)
};

/// The update's finish. Launch: grid (kNormBlocks, agents), kDqnFinishThreads threads. Each
/// block writes its partial of the gradient's squared norm (network_norm_partials_kernel's grid
/// and order); the last block of an agent to finish (an integer ticket after the partials,
/// zero between launches: it resets it) sums the partials and the batch's sample statistics in
/// fixed trees, then runs dqn::finish_update (guard, monitor, Adam constants, target copy,
/// counter). The ticket decides which block finishes, never the order of a sum.
struct DqnUpdateFinish {
    View<dqn::UpdateStep> step;      ///< (1) out
    View<nn::GuardState> guard;      ///< (1)
    View<dqn::MonitorStats> stats;   ///< (1)
    View<dqn::Counters> counters;    ///< (1)
    View<float> norm_partials;       ///< (kDqnFinishScratch): kNormBlocks partials, then the ticket
    View<const float> grads;         ///< (n)
    View<const float> sample_stats;  ///< (kSampleStats, B)
    View<const dqn::AgentParams> agent;
    int batch;
    std::uint32_t inject_nan;  ///< tests: bit g makes agent g's C51 loss NaN
    int n = 0;                 ///< parameters per agent (the launch rule's)
};

/// Adam (gated by the guard) and the target update of every parameter (dqn::adam_target_element);
/// with `advance`, also dqn_advance_kernel's increments. Launch: grid (dqn_adam_blocks(n), agents)
/// of kDqnAdamThreads, a thread per parameter.
struct DqnAdamTarget {
    View<float> params, m, v, target;
    View<const float> grads;
    View<const dqn::UpdateStep> step;
    View<const dqn::AgentParams> agent;
    View<dqn::Counters> advance{};  ///< empty, or the counters to advance (one per agent)
    int n = 0;                      ///< parameters per agent (the launch rule's)
};

/// The replay ring's arrays, written by collection (slot k % capacity_steps, rows slot * n_envs +
/// env) and read by sampling. Per agent: capacity_steps * n_envs rows.
struct DqnRing {
    View<float> states, next_states;  ///< (rows, state_dim)
    View<int> actions;                ///< (rows)
    View<float> rewards;              ///< (rows)
    View<std::uint8_t> done;          ///< (rows) env::DoneFlag
    int capacity_steps = 0, n_envs = 0, state_dim = 0;
};

/// Agent `agent`'s view of the ring and its sampling parameters (dqn::agent_sampling): where
/// DqnSample and DqnHerSample, kernels and CPU twins, start.
FH_HD dqn::AgentSampling ring_sampling(const DqnRing& r, long long agent, const dqn::Counters& c,
                                       const dqn::AgentParams& p) {
    return dqn::agent_sampling(r.states.data(), r.next_states.data(), r.actions.data(), r.rewards.data(), r.done.data(),
                               r.capacity_steps, r.n_envs, r.state_dim, agent, c, p);
}

/// A collection step that also advances its agents' counters (dqn_advance's increments, once
/// every environment has stepped): counters is the step's own counters, tickets (N) a zeroed
/// scratch of the CUDA kernel (each agent's last block advances). Empty: no advance.
struct CollectAdvance {
    View<dqn::Counters> counters;
    View<unsigned> tickets;
};

/// One collection step of n environments, one warp per environment, written into the ring's slot
/// counters.pushed % capacity_steps: the observation before the step, the action, env::step_env's
/// reward and done flag, the observation after the step (terminal for a finished episode), then
/// a new episode for a finished one (env::reset_env) and its first observation in `states`.
/// With `advance`, each agent's last block to finish (an integer ticket, as the finish's) then
/// does dqn_advance_kernel's increments: a collection step without updates in one launch.
/// Launch: grid (ceil(n / kDqnCollectWarps), agents), kDqnCollectWarps warps per block;
/// dqn_collect_agents_kernel when `agents` is given.
struct DqnCollect {
    View<env::EnvState> state;  ///< (n)
    View<float> portfolio;      ///< (n, PORTFOLIO_STRIDE)
    View<float> states;         ///< (n, state_dim): in, the observations acted on; out, the next ones
    View<const int> actions;    ///< (n)
    DqnRing ring;
    View<const dqn::Counters> counters;
    env::MarketView market;
    env::EnvParams params;
    CollectAdvance advance{};            ///< empty, or `counters` itself: advanced after the step
    View<const abi::EnvAgent> agents{};  ///< empty: `market` and params.seed for every agent; else (agents)
    int n = 0;                           ///< environments per agent (the launch rule's)
};

/// A batch of B n-step transitions per agent from the ring (replay::sample_nstep, one warp per
/// row: lane 0 draws, the lanes copy the state rows), at the
/// counters' push count and update number (this update's = updates + 1): x (B, 2, ...) holds the
/// states in rows [0, B) and the next states in rows [B, 2B) of a (2B, state_dim) block, so the
/// online network can run on both in one pass.
/// masks (B, K), when given: dqn::bootstrap_mask of each head for each row's first transition.
struct DqnSample {
    View<float> x;          ///< (2B, state_dim)
    View<int> actions;      ///< (B)
    View<float> returns;    ///< (B)
    View<float> discounts;  ///< (B)
    DqnRing ring;
    View<const dqn::Counters> counters;
    View<const dqn::AgentParams> agent;
    int batch;
    View<float> masks{};  ///< (B, ensemble) out, or empty
    int ensemble = 1;     ///< K, heads per row of masks
};

/// The curiosity model's view of the step just collected (before dqn_advance), one warp per
/// environment: input row e (state_dim + num_actions) = ppo::curiosity_input_row(the ring's
/// state row, its action) and next_market row e (market_dim) = the first market_dim columns of
/// the ring's next-state row, of slot counters.pushed % capacity_steps.
struct DqnCuriosityGather {
    View<float> input;        ///< (n, state_dim + num_actions) out
    View<float> next_market;  ///< (n, market_dim) out
    DqnRing ring;             ///< read only
    View<const dqn::Counters> counters;
    int num_actions;
    int market_dim;
    int n = 0;  ///< ring.n_envs (the launch rule's)
};

/// The bonus into the step just collected, one block of kDqnFinishThreads per agent: the slot's
/// reward of environment e becomes dqn::reward_with_bonus(reward, agent.curiosity_coef,
/// error[e]); stats += (the errors' sum: thread t sums e = t, t + T, ... in double, then the
/// block's fixed tree; n transitions).
struct DqnCuriosityBonus {
    DqnRing ring;                     ///< its rewards (capacity_steps * n_envs per agent)
    View<dqn::CuriosityStats> stats;  ///< (1)
    View<const float> error;          ///< (n) the forward model's error per environment
    View<const dqn::Counters> counters;
    View<const dqn::AgentParams> agent;
};

/// dqn.her, a collection step's observations (before acting), one warp per environment: the goal
/// of environment e's running episode, g = her::episode_goal(agent.seed, e, state[e].episode,
/// agent.her_goal_min, agent.her_goal_max), goes into the ring's goal column at slot
/// counters.pushed % capacity_steps (the transition dqn_collect writes next) and obs row e =
/// her::goal_state_row(states row e, g): the network acts on [observation | goal features].
struct DqnHerObserve {
    View<float> obs;                  ///< (n, state_dim + her::kGoalFeatures) out
    View<float> goals;                ///< (capacity_steps * n) the ring's goal column
    View<const env::EnvState> state;  ///< (n)
    View<const float> states;         ///< (n, state_dim) the environments' observations
    View<const dqn::Counters> counters;
    View<const dqn::AgentParams> agent;
    int capacity_steps;
    int state_dim;  ///< D, the environment's observation
    int n = 0;      ///< environments per agent (the launch rule's)
};

/// dqn.her, evaluation's observations, one warp per row: obs row e = her::goal_state_row(states
/// row e, goal[agent]) (the profile's dqn.her_eval_goal).
struct DqnGoalStates {
    View<float> obs;           ///< (n, state_dim + her::kGoalFeatures) out
    View<const float> states;  ///< (n, state_dim)
    View<const float> goal;    ///< (1) per agent
    int state_dim;
    int n = 0;  ///< rows per agent (the launch rule's)
};

/// dqn.her, an update's batch, one warp per row (dqn_sample's layout with wider rows): lane 0
/// draws her::draw_goal_nstep (dqn_sample's transition, relabelled with probability
/// agent.her_ratio, the goal-conditioned n-step return), the lanes copy the state rows with the
/// row's goal features: x (2B, state_dim + her::kGoalFeatures). goals_out (B), when given, gets
/// each row's goal. masks as dqn_sample's.
struct DqnHerSample {
    View<float> x;            ///< (2B, state_dim + her::kGoalFeatures) out
    View<int> actions;        ///< (B)
    View<float> returns;      ///< (B)
    View<float> discounts;    ///< (B)
    DqnRing ring;             ///< read only
    View<const float> goals;  ///< (capacity_steps * n_envs) the ring's goal column
    View<const dqn::Counters> counters;
    View<const dqn::AgentParams> agent;
    int batch;
    View<float> masks{};      ///< (B, ensemble) out, or empty
    int ensemble = 1;         ///< K
    View<float> goals_out{};  ///< (B) out, or empty
};

/// After a collection step: steps += 1, pushed += 1 for each agent.
struct DqnAdvance {
    View<dqn::Counters> counters;
};

}  // namespace fh::ops

namespace fh::abi {

/// Warps (environments) per block of dqn_collect_kernel (with `advance`, one ticket per block),
/// and its blocks resident on one multiprocessor at once (at most 64 registers a thread): 4,096
/// environments in one wave on an H200, as acting.
inline constexpr int kDqnCollectWarps = 4;
inline constexpr int kDqnCollectBlocksPerSm = 8;
/// dqn_collect_agents_kernel's (a population's agents' markets: up to 80 registers).
inline constexpr int kDqnCollectAgentsBlocksPerSm = 6;

using DqnAdvance = void(dqn::Counters* counters, int n_agents);

inline constexpr int kDqnAdamThreads = 256;
FH_HD long long dqn_adam_blocks(long long n) {
    return n > 0 ? (n + kDqnAdamThreads - 1) / kDqnAdamThreads : 1;
}
/// Block shape of the per-row kernels: warps per block (act, collect, sample: a warp per row;
/// loss: kDqnLossWarps warps per head row); dynamic shared memory per warp is
/// dqn_step_smem_floats(head) floats.
inline constexpr int kDqnWarpsPerBlock = 2;
inline constexpr int kDqnLossWarps = 4;
/// Blocks of dqn_act_kernel (at most 64 registers a thread) resident on one multiprocessor at
/// once: 4,096 environments in one wave on an H200.
inline constexpr int kDqnActBlocksPerSm = 16;
/// Blocks of the four-warp loss (dqn_loss_kernel, at most 64 registers a thread) resident on one
/// multiprocessor at once.
inline constexpr int kDqnLossBlocksPerSm = 8;
/// The loss's launch shape: while the head rows of all agents on the GPU (a population's too,
/// CudaDevice::gpu_sharers) fit one wave of four-warp blocks (kDqnLossBlocksPerSm per
/// multiprocessor: 1,056 rows on an H200), a block of kDqnLossWarps warps per row
/// (dqn_loss_kernel: a row's independent steps side by side shorten it); beyond,
/// kDqnWarpsPerBlock rows per block, a warp each (dqn_loss_rows_kernel: a second wave of the
/// four-warp blocks would cost more). Both give the same floats.
FH_HD bool dqn_loss_split(long long rows_all_agents, int multiprocessors) {
    return rows_all_agents <= static_cast<long long>(kDqnLossBlocksPerSm) * multiprocessors;
}
/// Per warp: the atoms' values, three Z-float scratch rows, the Q of every action (twice: the
/// scalar head's loss keeps Q(s) and the target's Q there, CQL Q(s) and its coefficients) and
/// each action's softmax maximum and sum (CQL's gradient); with an ensemble, every head's Q (K, A).
FH_HD int dqn_step_smem_floats(const dqn::HeadParams& h) {
    return 4 * h.num_atoms + 4 * h.num_actions + (h.ensemble > 1 ? h.ensemble * h.num_actions : 0);
}
/// Bytes of dynamic shared memory the largest block of the per-row kernels needs, and the most
/// it may use (the default per-block limit; the op and the profile's rules refuse more).
FH_HD long long dqn_step_smem_bytes(const dqn::HeadParams& h) {
    const int warps = kDqnWarpsPerBlock > kDqnLossWarps ? kDqnWarpsPerBlock : kDqnLossWarps;
    return static_cast<long long>(sizeof(float)) * warps * dqn_step_smem_floats(h);
}
inline constexpr long long kDqnMaxSmemBytes = 48 * 1024;
/// Shared memory the device reserves for each resident block (sm_80, sm_86, sm_90).
inline constexpr long long kReservedSmemPerBlock = 1024;
/// Head rows the four-warp loss copies into shared memory after its warps' scratch
/// (ops::DqnLoss::stage_rows): the online, select and target rows, in that order. Each pass over a
/// row (advantage means, softmax maximum, exps, the cross-entropy, CQL) then reads shared memory,
/// not L2: one round trip for the copy instead of one per pass on the row's chain. The same floats
/// either way. (dqn_act the same way, a row per warp, measured slower at 4,096 environments:
/// docs/performance.md.)
inline constexpr int kDqnLossStagedRows = 3;
FH_HD long long dqn_loss_staged_floats(const dqn::HeadParams& h) {
    return static_cast<long long>(kDqnLossStagedRows) * dqn::head_width(h);
}
/// Whether the four-warp loss stages its rows: only while a block's shared memory stays within
/// kDqnMaxSmemBytes and kDqnLossBlocksPerSm such blocks still fit a multiprocessor's
/// `smem_per_sm` bytes (the launch bounds' occupancy); otherwise the rows are read where they are.
FH_HD bool dqn_loss_stages_rows(const dqn::HeadParams& h, long long smem_per_sm) {
    const long long block =
        static_cast<long long>(sizeof(float)) * (kDqnLossWarps * dqn_step_smem_floats(h) + dqn_loss_staged_floats(h));
    return block <= kDqnMaxSmemBytes && kDqnLossBlocksPerSm * (block + kReservedSmemPerBlock) <= smem_per_sm;
}
inline constexpr int kDqnFinishThreads = 256;
/// Floats of the finish's scratch per agent: the norm's partials and the blocks' ticket.
inline constexpr int kDqnFinishScratch = kNormBlocks + 1;
static_assert(kNormThreads == kDqnFinishThreads, "the finish's blocks compute the norm's partials too");

}  // namespace fh::abi

#define FH_KERNELS_dqn_step(FH_KERNEL)                                                \
    FH_KERNEL(dqn_step, dqn_act_kernel, Op<fh::ops::DqnAct>)                          \
    FH_KERNEL(dqn_step, dqn_loss_kernel, Op<fh::ops::DqnLoss>)                        \
    FH_KERNEL(dqn_step, dqn_loss_rows_kernel, Op<fh::ops::DqnLoss>)                   \
    FH_KERNEL(dqn_step, dqn_finish_kernel, Op<fh::ops::DqnUpdateFinish>)              \
    FH_KERNEL(dqn_step, dqn_adam_target_kernel, Op<fh::ops::DqnAdamTarget>)           \
    FH_KERNEL(dqn_step, dqn_advance_kernel, DqnAdvance)                               \
    FH_KERNEL(dqn_step, dqn_collect_kernel, Op<fh::ops::DqnCollect>)                  \
    FH_KERNEL(dqn_step, dqn_collect_agents_kernel, Op<fh::ops::DqnCollect>)           \
    FH_KERNEL(dqn_step, dqn_sample_kernel, Op<fh::ops::DqnSample>)                    \
    FH_KERNEL(dqn_step, dqn_curiosity_gather_kernel, Op<fh::ops::DqnCuriosityGather>) \
    FH_KERNEL(dqn_step, dqn_curiosity_bonus_kernel, Op<fh::ops::DqnCuriosityBonus>)   \
    FH_KERNEL(dqn_step, dqn_her_observe_kernel, Op<fh::ops::DqnHerObserve>)           \
    FH_KERNEL(dqn_step, dqn_goal_states_kernel, Op<fh::ops::DqnGoalStates>)           \
    FH_KERNEL(dqn_step, dqn_her_sample_kernel, Op<fh::ops::DqnHerSample>)

#ifndef __CUDACC__
#include "ops/op_begin.hpp"

namespace detail {
/// One warp per row, kDqnWarpsPerBlock rows per block, a grid row per agent, the rows' scratch.
inline LaunchDims dqn_rows(long long rows, std::size_t agents, const dqn::HeadParams& h) {
    return warp_rows(rows, abi::kDqnWarpsPerBlock, agents,
                     sizeof(float) * abi::kDqnWarpsPerBlock * static_cast<std::size_t>(abi::dqn_step_smem_floats(h)));
}
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
inline std::size_t check_ring(const DqnRing& r, std::size_t N, const char* op) {
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
inline void check(const DqnAct& a) {
    const auto& [actions, q, histogram, head, h, agent, counters, explore, n_rows] = a;
    const char* op = "dqn_act";
    detail::check_head(h, op);
    const std::size_t N = agent.empty() ? 1 : agent.size();
    detail::require(counters.size() == agent.size(), op, "counters and agent parameters come together, one per agent");
    detail::require(!actions.empty() && actions.size() % N == 0, op, "actions must hold n rows per agent");
    const std::size_t A = static_cast<std::size_t>(h.num_actions);
    detail::require_size(head.size(), actions.size() * static_cast<std::size_t>(dqn::output_width(h)), op, "head");
    if (!q.empty()) detail::require_size(q.size(), actions.size() * A, op, "q");
    if (!histogram.empty()) detail::require_size(histogram.size(), N * A, op, "histogram");
    detail::checked_int_size(head.size(), op);
    detail::require_distinct(
        op, {detail::range("actions", actions), detail::range("q", q), detail::range("histogram", histogram),
             detail::range("head", head), detail::range("agent", agent), detail::range("counters", counters)});
}
FH_LAUNCH(DqnAct) {
    const std::size_t N = a.agent.empty() ? 1 : a.agent.size();
    DqnAct k = a;
    k.n = static_cast<int>(a.actions.size() / N);
    gpu.kernels().dqn_act_kernel(gpu.stream(), detail::dqn_rows(k.n, N, a.head_params), k);
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
inline void check(const DqnLoss& a) {
    const auto& [d_head, stats, head_s, head_select, head_target, actions, returns, discounts, agent, h, batch,
                 target_actions, masks, stage_rows] = a;
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
}
FH_LAUNCH(DqnLoss) {
    // A block of kDqnLossWarps warps per C51 head row, or a warp per row (abi::dqn_loss_split), by
    // the rows of every agent on the GPU: this launch's agents and those of the other sharers. The
    // scalar head's few flops per row take a warp (a lane) each.
    DqnLoss k = a;
    const dqn::HeadParams& h = a.head_params;
    const long long rows = static_cast<long long>(a.batch) * h.ensemble;
    const long long rows_on_gpu = rows * static_cast<long long>(a.agent.size()) * gpu.gpu_sharers();
    if (!h.scalar && abi::dqn_loss_split(rows_on_gpu, gpu.device().sm_count)) {
        const auto smem_per_sm = static_cast<long long>(gpu.device().shared_memory_per_sm);
        k.stage_rows = gpu.stage_head_rows() && abi::dqn_loss_stages_rows(h, smem_per_sm) ? 1 : 0;
        const long long floats = abi::kDqnLossWarps * abi::dqn_step_smem_floats(h) +
                                 (k.stage_rows != 0 ? abi::dqn_loss_staged_floats(h) : 0);
        const LaunchDims dims{dim3(static_cast<unsigned>(rows), static_cast<unsigned>(a.agent.size())),
                              dim3(32 * abi::kDqnLossWarps), sizeof(float) * static_cast<std::size_t>(floats)};
        gpu.kernels().dqn_loss_kernel(gpu.stream(), dims, k);
    } else {
        gpu.kernels().dqn_loss_rows_kernel(gpu.stream(), detail::dqn_rows(rows, a.agent.size(), h), k);
    }
}

/// Floats of scratch dqn_update_finish needs per agent (the gradient norm's partial sums and, on
/// CUDA, a ticket): zero it before the first call (the op leaves it reusable).
constexpr std::size_t dqn_finish_scratch_size() noexcept {
    return static_cast<std::size_t>(abi::kDqnFinishScratch);
}

/// The update's finish, per agent: the global norm of grads (N, P) (the fixed grid and trees of
/// ops::GlobalNorm, emulated exactly by the CPU twin), the batch sums of sample_stats
/// (N, kSampleStats, B) in a fixed tree, then dqn::finish_update: the batch-mean losses, the training
/// guard's decision, the monitor, this update's Adam constants and target copy, and counters'
/// update count. step, guard, stats, counters (N); norm_partials (N, dqn_finish_scratch_size()).
/// inject_nan (tests, never in a captured sequence): bit g makes agent g's C51 loss NaN (agents
/// 0 to 31; true: agent 0).
inline void check(const DqnUpdateFinish& a) {
    const auto& [step, guard, stats, counters, norm_partials, grads, sample_stats, agent, batch, inject_nan, n_params] =
        a;
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
}
FH_LAUNCH(DqnUpdateFinish) {
    // One launch: the partials of ops::GlobalNorm (its fixed grid) for every agent, each
    // agent's last block finishing.
    DqnUpdateFinish k = a;
    k.n = static_cast<int>(a.grads.size() / a.agent.size());
    const LaunchDims dims{dim3(abi::kNormBlocks, static_cast<unsigned>(a.agent.size())), dim3(abi::kDqnFinishThreads),
                          0};
    gpu.kernels().dqn_finish_kernel(gpu.stream(), dims, k);
}

/// Adam (when the guard applied the update) and the target update of every parameter, per
/// agent (dqn::adam_target_element): params, m, v, target, grads (N, P), step (N). With
/// `advance` (N counters), also dqn_advance's increments in the same launch (an iteration's
/// last update, after its collection step: one graph node fewer on the iteration's path).
inline void check(const DqnAdamTarget& a) {
    const auto& [params, m, v, target, grads, step, agent, advance, n_params] = a;
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
}
FH_LAUNCH(DqnAdamTarget) {
    DqnAdamTarget k = a;
    k.n = static_cast<int>(a.params.size() / a.agent.size());
    const LaunchDims dims{dim3(static_cast<unsigned>(abi::dqn_adam_blocks(k.n)), static_cast<unsigned>(a.agent.size())),
                          dim3(abi::kDqnAdamThreads), 0};
    gpu.kernels().dqn_adam_target_kernel(gpu.stream(), dims, k);
}

/// After a collection step: counters' steps and pushed += 1, per agent.
inline void check(const DqnAdvance& a) {
    const auto& [counters] = a;
    detail::agents_of(counters.size(), "dqn_advance");
}
FH_LAUNCH(DqnAdvance) {
    gpu.kernels().dqn_advance_kernel(gpu.stream(), LaunchDims{dim3(1), dim3(32), 0}, a.counters.data(),
                                     static_cast<int>(a.counters.size()));
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
inline void check(const DqnCollect& a) {
    const auto& [state, portfolio, states, actions, ring, counters, market, params, advance, agents, n_envs] = a;
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
        detail::require_size(agents.size(), N, op, "agents");  // their markets: checked by the CPU twin
    }
    detail::require_distinct(
        op, {detail::range("state", state), detail::range("portfolio", portfolio), detail::range("states", states),
             detail::range("actions", actions), detail::range("ring states", ring.states),
             detail::range("ring next_states", ring.next_states), detail::range("ring actions", ring.actions),
             detail::range("ring rewards", ring.rewards), detail::range("ring done", ring.done),
             detail::range("counters", counters), detail::range("tickets", advance.tickets)});
}
FH_LAUNCH(DqnCollect) {
    DqnCollect k = a;
    k.n = a.ring.n_envs;
    const LaunchDims dims = warp_rows(k.n, abi::kDqnCollectWarps, a.counters.size());
    if (a.agents.empty())
        gpu.kernels().dqn_collect_kernel(gpu.stream(), dims, k);
    else
        gpu.kernels().dqn_collect_agents_kernel(gpu.stream(), dims, k);
}

/// A uniform batch of B n-step transitions per agent from the ring (replay::sample_nstep), drawn
/// at the counters' push count with this update's number (counters.updates + 1) as the Philox
/// counter, among the steps of dqn::sample_range (the oldest step of a full ring is left out: the
/// collection that runs beside the update overwrites it): x (N, 2B, state_dim) gets the states in
/// rows [0, B) and the next states in rows [B, 2B); actions, returns, discounts (N, B). The ring
/// must hold n_step steps. masks (N, B, ensemble), when given, gets each head's bootstrap mask of
/// the row's first transition (dqn::bootstrap_mask with agent.bootstrap_prob).
inline void check(const DqnSample& a) {
    const auto& [x, actions, returns, discounts, ring, counters, agent, batch, masks, ensemble] = a;
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
}
FH_LAUNCH(DqnSample) {
    gpu.kernels().dqn_sample_kernel(gpu.stream(), warp_rows(a.batch, 4, a.agent.size()), a);
}

/// The curiosity model's view of the step just collected (dqn.curiosity; run after dqn_collect,
/// before dqn_advance), from the ring's slot counters.pushed % capacity_steps: input (N, n,
/// state_dim + num_actions) = [state row | one-hot(action)] (ppo::curiosity_input_row) and
/// next_market (N, n, market_dim) = the first market_dim columns of the next-state rows (the
/// next bar's market features the model predicts). Copies only: equal on both backends.
inline void check(const DqnCuriosityGather& a) {
    const auto& [input, next_market, ring, counters, num_actions, market_dim, n_envs] = a;
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
}
FH_LAUNCH(DqnCuriosityGather) {
    DqnCuriosityGather k = a;
    k.n = a.ring.n_envs;
    gpu.kernels().dqn_curiosity_gather_kernel(gpu.stream(), warp_rows(k.n, abi::kDqnWarpsPerBlock, a.counters.size()),
                                              k);
}

/// The curiosity bonus into the step just collected (run after the model's error, before
/// dqn_advance): the ring's reward of environment e in slot counters.pushed % capacity_steps
/// becomes dqn::reward_with_bonus(reward, agent.curiosity_coef, error[e]), so sampling sees it;
/// stats (N) += the errors' sum (double, the kernel's fixed order: thread t of
/// abi::kDqnFinishThreads sums e = t, t + T, ..., then a fixed tree) and n transitions. error
/// (N, n). Equal on both backends, bit for bit.
inline void check(const DqnCuriosityBonus& a) {
    const auto& [ring, stats, error, counters, agent] = a;
    const char* op = "dqn_curiosity_bonus";
    const std::size_t N = detail::agents_of(agent.size(), op);
    detail::check_ring(ring, N, op);
    detail::require_size(counters.size(), N, op, "counters");
    detail::require_size(stats.size(), N, op, "stats");
    detail::require_size(error.size(), N * static_cast<std::size_t>(ring.n_envs), op, "error");
    detail::require_distinct(
        op, {detail::range("ring rewards", ring.rewards), detail::range("stats", stats), detail::range("error", error),
             detail::range("counters", counters), detail::range("agent", agent)});
}
FH_LAUNCH(DqnCuriosityBonus) {
    const LaunchDims dims{dim3(static_cast<unsigned>(a.agent.size())), dim3(abi::kDqnFinishThreads), 0};
    gpu.kernels().dqn_curiosity_bonus_kernel(gpu.stream(), dims, a);
}

/// dqn.her (docs/dqn.md, "Hindsight experience replay"), before a collection step acts: the goal
/// of each environment's running episode, g_e = her::episode_goal(agent.seed, e, state[e].episode,
/// agent.her_goal_min, agent.her_goal_max), into the ring's goal column goals (N, capacity_steps *
/// n) at slot counters.pushed % capacity_steps (the row dqn_collect writes next), and the rows the
/// network acts on, obs (N, n, state_dim + her::kGoalFeatures) = [states row | g_e, g_e -
/// achieved] (her::goal_state_row). state (N, n), states (N, n, state_dim). Copies and one Philox
/// draw per environment: equal on both backends, bit for bit.
inline void check(const DqnHerObserve& a) {
    const auto& [obs, goals, state, states, counters, agent, capacity_steps, state_dim, n_envs] = a;
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
}
FH_LAUNCH(DqnHerObserve) {
    DqnHerObserve k = a;
    k.n = static_cast<int>(a.state.size() / a.agent.size());
    gpu.kernels().dqn_her_observe_kernel(gpu.stream(), warp_rows(k.n, abi::kDqnWarpsPerBlock, a.agent.size()), k);
}

/// dqn.her, evaluation: obs (N, n, state_dim + her::kGoalFeatures) = [states row | goal, goal -
/// achieved] with agent g's fixed goal[g] (dqn.her_eval_goal). states (N, n, state_dim), goal (N).
inline void check(const DqnGoalStates& a) {
    const auto& [obs, states, goal, state_dim, n_rows] = a;
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
}
FH_LAUNCH(DqnGoalStates) {
    DqnGoalStates k = a;
    k.n = static_cast<int>(a.states.size() / (a.goal.size() * static_cast<std::size_t>(a.state_dim)));
    gpu.kernels().dqn_goal_states_kernel(gpu.stream(), warp_rows(k.n, abi::kDqnWarpsPerBlock, a.goal.size()), k);
}

/// dqn.her, an update's batch: dqn_sample's transitions (the same draws), each relabelled with
/// probability agent.her_ratio with a return its episode achieved later, and returns that include
/// the goal reward (her::draw_goal_nstep); x (N, 2B, state_dim + her::kGoalFeatures) holds the
/// states and next states with the row's goal features. goals (N, capacity_steps * n_envs) is the
/// ring's goal column (dqn_her_observe); goals_out (N, B), when given, gets each row's goal.
/// actions, returns, discounts, masks as dqn_sample's. Equal on both backends, bit for bit.
inline void check(const DqnHerSample& a) {
    const auto& [x, actions, returns, discounts, ring, goals, counters, agent, batch, masks, ensemble, goals_out] = a;
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
}
FH_LAUNCH(DqnHerSample) {
    gpu.kernels().dqn_her_sample_kernel(gpu.stream(), warp_rows(a.batch, 4, a.agent.size()), a);
}
#include "ops/op_end.hpp"
#endif
