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

/// Acting from network outputs, one warp per row (n rows of dqn::output_width floats per agent): Q
/// (A) of each row's dueling C51 head (with an ensemble of K heads, head_params.ensemble: the
/// heads' mean, dqn::ensemble_q), then epsilon-greedy (policy::epsilon_greedy) with the epsilon of
/// counters.steps and Philox(seed, exploration, row, steps) on Q, or with an ensemble and agent.ucb
/// > 0 on dqn::ensemble_score (the mean plus agent.ucb times the heads' spread) (agent, counters
/// given and explore: collection), or the first maximal Q (agent and counters empty: evaluation; or
/// explore false: an ensemble's target action, per agent).
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

/// The whole loss of one update on a batch of B transitions per agent, one warp per sample: a* =
/// argmax of Q(select row), the target distribution of a*, its C51 projection (gather form), the
/// cross-entropy and the MSE on the expected Q of the taken action, and the head's backward: d_head
/// = the gradient of the batch-mean loss alpha * C51 + (1 - alpha) * MSE + cql_alpha * CQL (agent's
/// mse_alpha and cql_alpha) with respect to head_s; stats = per-sample C51 loss, MSE loss, TD
/// error, Q(s, a) and CQL term (dqn::SampleStat; the CQL row is 0 when cql_alpha = 0). head_select
/// may be head_target itself. An action outside [0, A) gives its sample NaN statistics and no
/// gradient (the guard then skips the update). With an ensemble of K heads (head_params.ensemble)
/// the rows are the B * K head rows (row b * K + k: head k of sample b, W = head_width), each its
/// own loss with the sample's action, return and discount, weighted by masks[row] / (B * K): d_head
/// is the gradient of (1 / (B K)) sum_{b,k} mask_bk L_bk, and stats has B * K columns. a* comes
/// from target_actions when given (every head's: the heads' mean Q of the select network, dqn_act
/// with explore = false), else from each row's own argmax.
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

/// The update's finish, per agent: the global norm of grads (the fixed grid and trees of
/// ops::GlobalNorm, emulated exactly by the CPU twin), the batch sums of sample_stats in a fixed
/// tree, then dqn::finish_update: the batch-mean losses, the training guard's decision, the
/// monitor, this update's Adam constants and target copy, and counters' update count. Launch: grid
/// (kNormBlocks, agents), kDqnFinishThreads threads. Each block writes its partial of the
/// gradient's squared norm (network_norm_partials_kernel's grid and order); the last block of an
/// agent to finish (an integer ticket after the partials, zero between launches: it resets it) sums
/// the partials and the statistics. The ticket decides which block finishes, never the order of a
/// sum.
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
    std::uint32_t inject_nan;  ///< tests, never in a captured sequence: bit g makes agent g's C51 loss NaN (g < 32)
    int n = 0;                 ///< parameters per agent (the launch rule's)
};

/// Adam (when the guard applied the update) and the target update of every parameter, per agent
/// (dqn::adam_target_element). With `advance`, also dqn_advance_kernel's increments in the same
/// launch (an iteration's last update, after its collection step: one graph node fewer on the
/// iteration's path). Launch: grid (dqn_adam_blocks(n), agents) of kDqnAdamThreads, a thread per
/// parameter.
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

/// One collection step of n environments per agent, one warp per environment, into the replay
/// ring's slot counters.pushed % capacity_steps (rows slot * n_envs + e): the observation states[e]
/// before the step, actions[e], env::step_env's reward and done flag, the observation after the
/// step (terminal for a finished episode); a finished episode restarts (env::reset_env) and
/// states[e] becomes the next decision's observation. Equal to VecEnv::step followed by a copy into
/// the ring, bit for bit, on both backends. Run dqn_advance after it, or give `advance`: each
/// agent's last block to finish (an integer ticket, as the finish's) then does dqn_advance_kernel's
/// increments, a collection step without updates in one launch. `agents`, when given: agent g steps
/// on agents[g].market with params.seed replaced by agents[g].seed (a population whose agents have
/// their own seeds and markets, which share params' market_dim; `market` is then unused). Launch:
/// grid (ceil(n / kDqnCollectWarps), agents), kDqnCollectWarps warps per block;
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

/// A uniform batch of B n-step transitions per agent from the ring (replay::sample_nstep, one warp
/// per row: lane 0 draws, the lanes copy the state rows), drawn at the counters' push count with
/// this update's number (counters.updates + 1) as the Philox counter, among the steps of
/// dqn::sample_range (the oldest step of a full ring is left out: the collection that runs beside
/// the update overwrites it). x holds the states in rows [0, B) and the next states in rows [B, 2B)
/// of a (2B, state_dim) block, so the online network can run on both in one pass. The ring must
/// hold n_step steps. masks, when given: each head's bootstrap mask of the row's first transition
/// (dqn::bootstrap_mask with agent.bootstrap_prob).
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

/// The curiosity model's view of the step just collected (dqn.curiosity; run after dqn_collect,
/// before dqn_advance), one warp per environment, from the ring's slot counters.pushed %
/// capacity_steps: input row e = [state row | one-hot(action)] (ppo::curiosity_input_row) and
/// next_market row e = the first market_dim columns of the next-state row (the next bar's market
/// features the model predicts). Copies only: equal on both backends.
struct DqnCuriosityGather {
    View<float> input;        ///< (n, state_dim + num_actions) out
    View<float> next_market;  ///< (n, market_dim) out
    DqnRing ring;             ///< read only
    View<const dqn::Counters> counters;
    int num_actions;
    int market_dim;
    int n = 0;  ///< ring.n_envs (the launch rule's)
};

/// The curiosity bonus into the step just collected (run after the model's error, before
/// dqn_advance), one block of kDqnFinishThreads per agent: the ring's reward of environment e in
/// slot counters.pushed % capacity_steps becomes dqn::reward_with_bonus(reward,
/// agent.curiosity_coef, error[e]), so sampling sees it; stats += the errors' sum (double, a fixed
/// order: thread t sums e = t, t + T, ..., then the block's fixed tree) and n transitions. Equal on
/// both backends, bit for bit.
struct DqnCuriosityBonus {
    DqnRing ring;                     ///< its rewards (capacity_steps * n_envs per agent)
    View<dqn::CuriosityStats> stats;  ///< (1)
    View<const float> error;          ///< (n) the forward model's error per environment
    View<const dqn::Counters> counters;
    View<const dqn::AgentParams> agent;
};

/// dqn.her (docs/dqn.md, "Hindsight experience replay"), a collection step's observations before it
/// acts, one warp per environment: the goal of environment e's running episode, g =
/// her::episode_goal(agent.seed, e, state[e].episode, agent.her_goal_min, agent.her_goal_max), goes
/// into the ring's goal column at slot counters.pushed % capacity_steps (the row dqn_collect writes
/// next) and obs row e = her::goal_state_row(states row e, g) = [states row | g, g - achieved]: the
/// network acts on [observation | goal features]. Copies and one Philox draw per environment: equal
/// on both backends, bit for bit.
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

/// dqn.her, evaluation's observations, one warp per row: obs row e = her::goal_state_row(states row
/// e, goal[agent]) = [states row | goal, goal - achieved] (the profile's dqn.her_eval_goal).
struct DqnGoalStates {
    View<float> obs;           ///< (n, state_dim + her::kGoalFeatures) out
    View<const float> states;  ///< (n, state_dim)
    View<const float> goal;    ///< (1) per agent
    int state_dim;
    int n = 0;  ///< rows per agent (the launch rule's)
};

/// dqn.her, an update's batch, one warp per row: dqn_sample's transitions (the same draws; lane 0
/// draws her::draw_goal_nstep), each relabelled with probability agent.her_ratio with a return its
/// episode achieved later, and returns that include the goal reward; the lanes copy the state rows
/// with the row's goal features. goals is the ring's goal column (dqn_her_observe); goals_out, when
/// given, gets each row's goal. actions, returns, discounts, masks as dqn_sample's. Equal on both
/// backends, bit for bit.
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
    require(h.num_actions >= 1 && h.num_atoms >= 2 && h.v_min < h.v_max, op,
            "need num_actions >= 1, num_atoms >= 2 and v_min < v_max (got {}, {}, [{}, {}])", h.num_actions,
            h.num_atoms, h.v_min, h.v_max);
    require(h.ensemble >= 1 && h.ensemble <= dqn::kMaxEnsemble, op, "the ensemble has {} heads, need 1 to {}",
            h.ensemble, dqn::kMaxEnsemble);
    // The per-row kernels' scratch (dynamic shared memory) must fit the default 48 KB per block.
    const long long smem = abi::dqn_step_smem_bytes(h);
    require(smem <= abi::kDqnMaxSmemBytes, op,
            "{} actions, {} atoms and {} heads need {} bytes of scratch per block, more than 48 KB", h.num_actions,
            h.num_atoms, h.ensemble, smem);
}
/// Sizes of a ring for N agents; returns its rows per agent.
inline std::size_t check_ring(const DqnRing& r, std::size_t N, const char* op) {
    require(r.capacity_steps >= 1 && r.n_envs >= 1 && r.state_dim >= 1, op,
            "the ring needs capacity_steps, n_envs, state_dim >= 1");
    const std::size_t rows = static_cast<std::size_t>(r.capacity_steps) * static_cast<std::size_t>(r.n_envs);
    const std::size_t D = static_cast<std::size_t>(r.state_dim);
    require_size(r.states.size(), N * rows * D, op, "ring states");
    require_size(r.next_states.size(), N * rows * D, op, "ring next_states");
    require_sizes(
        N * rows, op,
        {{r.actions.size(), "ring actions"}, {r.rewards.size(), "ring rewards"}, {r.done.size(), "ring done"}});
    checked_int_size(N * rows * D, op);
    return rows;
}
/// A ring's five arrays in a require_distinct list, as `range` names them: detail::range (the
/// Views' own access: dqn_collect writes them) or detail::read_range (sampling reads them).
#define FH_DQN_RING_RANGES(r, range)                                                          \
    detail::range("ring states", r.states), detail::range("ring next_states", r.next_states), \
        detail::range("ring actions", r.actions), detail::range("ring rewards", r.rewards),   \
        detail::range("ring done", r.done)
/// Agents of a call: the size of its parameter array (>= 1).
inline std::size_t agents_of(std::size_t n, const char* op) {
    require(n != 0, op, "no agent parameters");
    return n;
}
}  // namespace detail

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
    detail::require_distinct(op, {FH_RANGES(actions, q, histogram, head, agent, counters)});
}
FH_LAUNCH(DqnAct) {
    const std::size_t N = a.agent.empty() ? 1 : a.agent.size();
    DqnAct k = a;
    k.n = static_cast<int>(a.actions.size() / N);
    gpu.kernels().dqn_act_kernel(gpu.stream(), detail::dqn_rows(k.n, N, a.head_params), k);
}

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
    detail::require_sizes(rows * W, op, {FH_SIZES(head_s, head_select, head_target, d_head)});
    detail::require_size(stats.size(), rows * dqn::kSampleStats, op, "stats");
    detail::require_sizes(samples, op, {FH_SIZES(actions, returns, discounts)});
    if (!target_actions.empty()) detail::require_size(target_actions.size(), samples, op, "target_actions");
    if (!masks.empty()) detail::require_size(masks.size(), rows, op, "masks");
    detail::checked_int_size(rows * W, op);
    detail::require_distinct(op, {FH_RANGES(d_head, stats, head_s, head_select, head_target, actions, returns,
                                            discounts, target_actions, masks, agent)});
}
FH_LAUNCH(DqnLoss) {
    // abi::dqn_loss_split's shape by the rows of every agent on the GPU (the sharers' too); the
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

inline void check(const DqnUpdateFinish& a) {
    const auto& [step, guard, stats, counters, norm_partials, grads, sample_stats, agent, batch, inject_nan, n_params] =
        a;
    const char* op = "dqn_update_finish";
    const std::size_t N = detail::agents_of(agent.size(), op);
    detail::require(batch >= 1, op, "batch must be >= 1");
    detail::require_sizes(N, op, {FH_SIZES(step, guard, stats, counters)});
    detail::require_size(norm_partials.size(), N * dqn_finish_scratch_size(), op, "norm_partials");
    detail::require(!grads.empty() && grads.size() % N == 0, op, "grads must hold the same parameters per agent");
    detail::require_size(sample_stats.size(), N * dqn::kSampleStats * static_cast<std::size_t>(batch), op,
                         "sample_stats");
    detail::checked_int_size(grads.size() / N, op);
    detail::require_distinct(op, {FH_RANGES(step, guard, stats, counters, norm_partials, grads, sample_stats, agent)});
}
FH_LAUNCH(DqnUpdateFinish) {
    DqnUpdateFinish k = a;
    k.n = static_cast<int>(a.grads.size() / a.agent.size());
    const LaunchDims dims{dim3(abi::kNormBlocks, static_cast<unsigned>(a.agent.size())), dim3(abi::kDqnFinishThreads),
                          0};
    gpu.kernels().dqn_finish_kernel(gpu.stream(), dims, k);
}

inline void check(const DqnAdamTarget& a) {
    const auto& [params, m, v, target, grads, step, agent, advance, n_params] = a;
    const char* op = "dqn_adam_target";
    const std::size_t N = detail::agents_of(agent.size(), op);
    detail::require(!params.empty() && params.size() % N == 0, op, "params must hold the same count per agent");
    detail::require_sizes(params.size(), op, {FH_SIZES(m, v, target, grads)});
    detail::require_size(step.size(), N, op, "step");
    if (!advance.empty()) detail::require_size(advance.size(), N, op, "advance");
    detail::checked_int_size(params.size() / N, op);
    detail::require_distinct(op, {FH_RANGES(params, m, v, target, grads, step, agent, advance)});
}
FH_LAUNCH(DqnAdamTarget) {
    DqnAdamTarget k = a;
    k.n = static_cast<int>(a.params.size() / a.agent.size());
    const LaunchDims dims{dim3(static_cast<unsigned>(abi::dqn_adam_blocks(k.n)), static_cast<unsigned>(a.agent.size())),
                          dim3(abi::kDqnAdamThreads), 0};
    gpu.kernels().dqn_adam_target_kernel(gpu.stream(), dims, k);
}

inline void check(const DqnAdvance& a) {
    const auto& [counters] = a;
    detail::agents_of(counters.size(), "dqn_advance");
}
FH_LAUNCH(DqnAdvance) {
    gpu.kernels().dqn_advance_kernel(gpu.stream(), LaunchDims{dim3(1), dim3(32), 0}, a.counters.data(),
                                     static_cast<int>(a.counters.size()));
}

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
    detail::require_distinct(op, {FH_RANGES(state, portfolio, states, actions), FH_DQN_RING_RANGES(ring, range),
                                  FH_RANGES(counters), FH_RANGES_OF(advance, tickets)});
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

inline void check(const DqnSample& a) {
    const auto& [x, actions, returns, discounts, ring, counters, agent, batch, masks, ensemble] = a;
    const char* op = "dqn_sample";
    const std::size_t N = detail::agents_of(agent.size(), op);
    detail::require(batch >= 1, op, "batch must be >= 1");
    detail::check_ring(ring, N, op);
    detail::require_size(counters.size(), N, op, "counters");
    const std::size_t B = static_cast<std::size_t>(batch);
    detail::require_size(x.size(), N * 2 * B * static_cast<std::size_t>(ring.state_dim), op, "x");
    detail::require_sizes(N * B, op, {FH_SIZES(actions, returns, discounts)});
    detail::require(ensemble >= 1 && ensemble <= dqn::kMaxEnsemble, op, "ensemble must be in [1, 32]");
    if (!masks.empty()) detail::require_size(masks.size(), N * B * static_cast<std::size_t>(ensemble), op, "masks");
    detail::require_distinct(op, {FH_RANGES(x, actions, returns, discounts, masks),
                                  FH_DQN_RING_RANGES(ring, read_range), FH_RANGES(counters, agent)});
}
FH_LAUNCH_KERNEL(DqnSample, dqn_sample_kernel, warp_rows(a.batch, 4, a.agent.size()));

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
    detail::require_distinct(op, {FH_RANGES(input, next_market), detail::read_range("ring states", ring.states),
                                  detail::read_range("ring next_states", ring.next_states),
                                  detail::read_range("ring actions", ring.actions), FH_RANGES(counters)});
}
FH_LAUNCH(DqnCuriosityGather) {
    DqnCuriosityGather k = a;
    k.n = a.ring.n_envs;
    gpu.kernels().dqn_curiosity_gather_kernel(gpu.stream(), warp_rows(k.n, abi::kDqnWarpsPerBlock, a.counters.size()),
                                              k);
}

inline void check(const DqnCuriosityBonus& a) {
    const auto& [ring, stats, error, counters, agent] = a;
    const char* op = "dqn_curiosity_bonus";
    const std::size_t N = detail::agents_of(agent.size(), op);
    detail::check_ring(ring, N, op);
    detail::require_sizes(N, op, {FH_SIZES(counters, stats)});
    detail::require_size(error.size(), N * static_cast<std::size_t>(ring.n_envs), op, "error");
    detail::require_distinct(op,
                             {detail::range("ring rewards", ring.rewards), FH_RANGES(stats, error, counters, agent)});
}
FH_LAUNCH(DqnCuriosityBonus) {
    const LaunchDims dims{dim3(static_cast<unsigned>(a.agent.size())), dim3(abi::kDqnFinishThreads), 0};
    gpu.kernels().dqn_curiosity_bonus_kernel(gpu.stream(), dims, a);
}

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
    detail::require_distinct(op, {FH_RANGES(obs, goals, state, states, counters, agent)});
}
FH_LAUNCH(DqnHerObserve) {
    DqnHerObserve k = a;
    k.n = static_cast<int>(a.state.size() / a.agent.size());
    gpu.kernels().dqn_her_observe_kernel(gpu.stream(), warp_rows(k.n, abi::kDqnWarpsPerBlock, a.agent.size()), k);
}

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
    detail::require_distinct(op, {FH_RANGES(obs, states, goal)});
}
FH_LAUNCH(DqnGoalStates) {
    DqnGoalStates k = a;
    k.n = static_cast<int>(a.states.size() / (a.goal.size() * static_cast<std::size_t>(a.state_dim)));
    gpu.kernels().dqn_goal_states_kernel(gpu.stream(), warp_rows(k.n, abi::kDqnWarpsPerBlock, a.goal.size()), k);
}

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
    detail::require_sizes(N * B, op, {FH_SIZES(actions, returns, discounts)});
    detail::require(ensemble >= 1 && ensemble <= dqn::kMaxEnsemble, op, "ensemble must be in [1, 32]");
    if (!masks.empty()) detail::require_size(masks.size(), N * B * static_cast<std::size_t>(ensemble), op, "masks");
    if (!goals_out.empty()) detail::require_size(goals_out.size(), N * B, op, "goals_out");
    detail::checked_int_size(x.size(), op);
    detail::require_distinct(op, {FH_RANGES(x, actions, returns, discounts, masks, goals_out),
                                  FH_DQN_RING_RANGES(ring, read_range), FH_RANGES(goals, counters, agent)});
}
FH_LAUNCH_KERNEL(DqnHerSample, dqn_her_sample_kernel, warp_rows(a.batch, 4, a.agent.size()));
#include "ops/op_end.hpp"
#endif
