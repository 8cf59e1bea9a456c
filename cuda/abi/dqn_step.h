/// @file dqn_step.h
/// @brief Kernel signatures of cuda/kernels/dqn_step.cu: the DQN trainer's fused device steps
///        (acting, the loss with the head's backward, the update's finish, Adam + target, the
///        collection counters). Math: math/dqn.h. Every kernel takes an agent index from
///        its grid (blockIdx.y for the per-sample kernels, blockIdx.x for the one-block finish):
///        buffers are [agents][...] with the per-agent sizes given, so a population is one launch.
#pragma once

#include "abi/core_network.h"
#include "abi/env.h"
#include "math/dqn.h"
#include "math/env.h"
#include "math/her.h"
#include "math/replay.h"

namespace fh::abi {

/// Acting from head outputs, one warp per environment: q (A) from the dueling C51 head row, then
/// epsilon-greedy (policy::epsilon_greedy; epsilon of counters.steps, Philox(seed, exploration,
/// e, steps)) or, without agent/counters, the first maximal Q.
/// With an ensemble (head_params.ensemble = K > 1) Q is the K heads' mean (dqn::ensemble_q) and
/// collection acts on dqn::ensemble_score (the mean plus agent.ucb times the heads' spread).
struct DqnActArgs {
    int* actions;                   ///< (n) out
    float* q;                       ///< (n, A) out, or null
    unsigned long long* histogram;  ///< (A) += actions taken, or null
    const float* head;              ///< (n, output_width) network outputs
    const dqn::AgentParams* agent;  ///< or null: greedy
    const dqn::Counters* counters;  ///< with agent
    dqn::HeadParams head_params;
    int n;
    int explore;  ///< with agent: 1 epsilon-greedy (collection), 0 greedy on the mean Q
};
using DqnAct = void(DqnActArgs args);

/// The whole loss of one update, one warp per sample: a* = argmax of Q(select row), the target
/// distribution of a*, its C51 projection (gather form), the cross-entropy and the MSE on the
/// expected Q of the taken action, their blend, the CQL term when agent.cql_alpha > 0, and the
/// head's backward: d_head (B, W) = dL/d (head outputs) of the batch-mean loss; stats
/// (kSampleStats, B) = C51 loss, MSE loss, TD error, Q(s, a), CQL term per sample
/// (dqn::SampleStat). With an ensemble of K heads the rows are the B * K head rows (row b * K + k:
/// head k of sample b, W = head_width) and stats has B * K columns; each row's loss is weighted
/// by masks[row] / (B * K), and a* comes from target_actions (the heads' mean Q) when given.
struct DqnLossArgs {
    float* d_head;                  ///< (B * K, W) out
    float* stats;                   ///< (kSampleStats, B * K) out
    const float* head_s;            ///< (B * K, W) online network at s
    const float* head_select;       ///< (B * K, W) picks a*: online at s' (double DQN) or target at s'
    const float* head_target;       ///< (B * K, W) target network at s'
    const int* actions;             ///< (B)
    const float* returns;           ///< (B) n-step returns
    const float* discounts;         ///< (B) gamma^k, 0 after a termination
    const int* target_actions;      ///< (B) a* of every head, or null: each row's own argmax of select
    const float* masks;             ///< (B * K) weights of the rows (bootstrap masks), or null: 1
    const dqn::AgentParams* agent;  ///< mse_alpha, cql_alpha
    dqn::HeadParams head_params;
    int batch;       ///< B, samples
    int stage_rows;  ///< 1: the four-warp loss copies its three rows to shared memory first (dqn_loss_stages_rows)
};
using DqnLoss = void(DqnLossArgs args);

/// The update's finish. Launch: grid (kNormBlocks, agents), kDqnFinishThreads threads. Each
/// block writes its partial of the gradient's squared norm (network_norm_partials_kernel's grid
/// and order); the last block of an agent to finish (an integer ticket after the partials,
/// zero between launches: it resets it) sums the partials and the batch's sample statistics in
/// fixed trees, then runs dqn::finish_update (guard, monitor, Adam constants, target copy,
/// counter). The ticket decides which block finishes, never the order of a sum.
struct DqnFinishArgs {
    dqn::UpdateStep* step;      ///< (1) out
    nn::GuardState* guard;      ///< (1)
    dqn::MonitorStats* stats;   ///< (1)
    dqn::Counters* counters;    ///< (1)
    float* norm_partials;       ///< (kDqnFinishScratch): kNormBlocks partials, then the ticket
    const float* grads;         ///< (n)
    const float* sample_stats;  ///< (kSampleStats, B)
    const dqn::AgentParams* agent;
    int n;  ///< parameters per agent
    int batch;
    int inject_nan;  ///< tests: bit g makes agent g's C51 loss NaN
};
using DqnFinish = void(DqnFinishArgs args);

/// Adam (gated by the guard) and the target update of every parameter (dqn::adam_target_element);
/// with `advance`, also dqn_advance_kernel's increments. Launch: grid (dqn_adam_blocks(n), agents)
/// of kDqnAdamThreads, a thread per parameter.
inline constexpr int kDqnAdamThreads = 256;
FH_HD long long dqn_adam_blocks(long long n) {
    return n > 0 ? (n + kDqnAdamThreads - 1) / kDqnAdamThreads : 1;
}
struct DqnAdamTargetArgs {
    float* params;
    float* m;
    float* v;
    float* target;
    const float* grads;
    const dqn::UpdateStep* step;
    const dqn::AgentParams* agent;
    dqn::Counters* advance;  ///< null, or the counters to advance (one per agent)
    int n;                   ///< parameters per agent
};
using DqnAdamTarget = void(DqnAdamTargetArgs args);

/// The replay ring's arrays, written by collection (slot k % capacity_steps, rows slot * n_envs +
/// env) and read by sampling. Per agent: capacity_steps * n_envs rows.
struct DqnRing {
    float* states;       ///< (rows, state_dim)
    float* next_states;  ///< (rows, state_dim)
    int* actions;        ///< (rows)
    float* rewards;      ///< (rows)
    std::uint8_t* done;  ///< (rows) env::DoneFlag
    int capacity_steps;
    int n_envs;
    int state_dim;
};

/// One collection step of n environments, one warp per environment, written into the ring's slot
/// counters.pushed % capacity_steps: the observation before the step, the action, env::step_env's
/// reward and done flag, the observation after the step (terminal for a finished episode), then
/// a new episode for a finished one (env::reset_env) and its first observation in `states`.
/// With `advance`, each agent's last block to finish (an integer ticket, as the finish's) then
/// does dqn_advance_kernel's increments: a collection step without updates in one launch.
/// Launch: grid (ceil(n / kDqnCollectWarps), agents), kDqnCollectWarps warps per block;
/// dqn_collect_agents_kernel when `agents` is given.
struct DqnCollectArgs {
    env::EnvState* state;  ///< (n)
    float* portfolio;      ///< (n, PORTFOLIO_STRIDE)
    float* states;         ///< (n, state_dim): in, the observations acted on; out, the next ones
    const int* actions;    ///< (n)
    DqnRing ring;
    const dqn::Counters* counters;
    dqn::Counters* advance;  ///< null, or `counters` itself: advanced after the step
    unsigned* tickets;       ///< with advance: (agents) zero between launches
    env::MarketView market;
    env::EnvParams params;
    const EnvAgent* agents;  ///< null: `market` and params.seed for every agent; else (agents)
    int n;
};
/// Warps (environments) per block of dqn_collect_kernel (with `advance`, one ticket per block),
/// and its blocks resident on one multiprocessor at once (at most 64 registers a thread): 4,096
/// environments in one wave on an H200, as acting.
inline constexpr int kDqnCollectWarps = 4;
inline constexpr int kDqnCollectBlocksPerSm = 8;
/// dqn_collect_agents_kernel's (a population's agents' markets: up to 80 registers).
inline constexpr int kDqnCollectAgentsBlocksPerSm = 6;
using DqnCollect = void(DqnCollectArgs args);

/// A batch of B n-step transitions per agent from the ring (replay::sample_nstep, one warp per
/// row: lane 0 draws, the lanes copy the state rows), at the
/// counters' push count and update number (this update's = updates + 1): x (B, 2, ...) holds the
/// states in rows [0, B) and the next states in rows [B, 2B) of a (2B, state_dim) block, so the
/// online network can run on both in one pass.
/// masks (B, K), when given: dqn::bootstrap_mask of each head for each row's first transition.
struct DqnSampleArgs {
    float* x;          ///< (2B, state_dim)
    int* actions;      ///< (B)
    float* returns;    ///< (B)
    float* discounts;  ///< (B)
    float* masks;      ///< (B, ensemble) out, or null
    DqnRing ring;
    const dqn::Counters* counters;
    const dqn::AgentParams* agent;
    int batch;
    int ensemble;  ///< K, heads per row of masks
};
using DqnSample = void(DqnSampleArgs args);

/// The curiosity model's view of the step just collected (before dqn_advance), one warp per
/// environment: input row e (state_dim + num_actions) = ppo::curiosity_input_row(the ring's
/// state row, its action) and next_market row e (market_dim) = the first market_dim columns of
/// the ring's next-state row, of slot counters.pushed % capacity_steps.
struct DqnCuriosityGatherArgs {
    float* input;        ///< (n, state_dim + num_actions) out
    float* next_market;  ///< (n, market_dim) out
    DqnRing ring;        ///< read only
    const dqn::Counters* counters;
    int num_actions;
    int market_dim;
    int n;
};
using DqnCuriosityGather = void(DqnCuriosityGatherArgs args);

/// The bonus into the step just collected, one block of kDqnFinishThreads per agent: the slot's
/// reward of environment e becomes dqn::reward_with_bonus(reward, agent.curiosity_coef,
/// error[e]); stats += (the errors' sum: thread t sums e = t, t + T, ... in double, then the
/// block's fixed tree; n transitions).
struct DqnCuriosityBonusArgs {
    float* rewards;              ///< the ring's rewards (capacity_steps * n per agent)
    dqn::CuriosityStats* stats;  ///< (1)
    const float* error;          ///< (n) the forward model's error per environment
    const dqn::Counters* counters;
    const dqn::AgentParams* agent;
    int capacity_steps;
    int n;
};
using DqnCuriosityBonus = void(DqnCuriosityBonusArgs args);

/// dqn.her, a collection step's observations (before acting), one warp per environment: the goal
/// of environment e's running episode, g = her::episode_goal(agent.seed, e, state[e].episode,
/// agent.her_goal_min, agent.her_goal_max), goes into the ring's goal column at slot
/// counters.pushed % capacity_steps (the transition dqn_collect writes next) and obs row e =
/// her::goal_state_row(states row e, g): the network acts on [observation | goal features].
struct DqnHerObserveArgs {
    float* obs;                  ///< (n, state_dim + her::kGoalFeatures) out
    float* goals;                ///< (capacity_steps * n) the ring's goal column
    const env::EnvState* state;  ///< (n)
    const float* states;         ///< (n, state_dim) the environments' observations
    const dqn::Counters* counters;
    const dqn::AgentParams* agent;
    int capacity_steps;
    int n;
    int state_dim;  ///< D, the environment's observation
};
using DqnHerObserve = void(DqnHerObserveArgs args);

/// dqn.her, evaluation's observations, one warp per row: obs row e = her::goal_state_row(states
/// row e, goal[agent]) (the profile's dqn.her_eval_goal).
struct DqnGoalStatesArgs {
    float* obs;           ///< (n, state_dim + her::kGoalFeatures) out
    const float* states;  ///< (n, state_dim)
    const float* goal;    ///< (1) per agent
    int n;
    int state_dim;
};
using DqnGoalStates = void(DqnGoalStatesArgs args);

/// dqn.her, an update's batch, one warp per row (dqn_sample's layout with wider rows): lane 0
/// draws her::draw_goal_nstep (dqn_sample's transition, relabelled with probability
/// agent.her_ratio, the goal-conditioned n-step return), the lanes copy the state rows with the
/// row's goal features: x (2B, state_dim + her::kGoalFeatures). goals_out (B), when given, gets
/// each row's goal. masks as dqn_sample's.
struct DqnHerSampleArgs {
    float* x;            ///< (2B, state_dim + her::kGoalFeatures) out
    int* actions;        ///< (B)
    float* returns;      ///< (B)
    float* discounts;    ///< (B)
    float* masks;        ///< (B, ensemble) out, or null
    float* goals_out;    ///< (B) out, or null
    DqnRing ring;        ///< read only
    const float* goals;  ///< (capacity_steps * n_envs) the ring's goal column
    const dqn::Counters* counters;
    const dqn::AgentParams* agent;
    int batch;
    int ensemble;
};
using DqnHerSample = void(DqnHerSampleArgs args);

/// After a collection step: steps += 1, pushed += 1 for each of n_agents agents.
using DqnAdvance = void(dqn::Counters* counters, int n_agents);

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
/// (DqnLossArgs::stage_rows): the online, select and target rows, in that order. Each pass over a
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

#define FH_KERNELS_dqn_step(FH_KERNEL)                                   \
    FH_KERNEL(dqn_step, dqn_act_kernel, DqnAct)                          \
    FH_KERNEL(dqn_step, dqn_loss_kernel, DqnLoss)                        \
    FH_KERNEL(dqn_step, dqn_loss_rows_kernel, DqnLoss)                   \
    FH_KERNEL(dqn_step, dqn_finish_kernel, DqnFinish)                    \
    FH_KERNEL(dqn_step, dqn_adam_target_kernel, DqnAdamTarget)           \
    FH_KERNEL(dqn_step, dqn_advance_kernel, DqnAdvance)                  \
    FH_KERNEL(dqn_step, dqn_collect_kernel, DqnCollect)                  \
    FH_KERNEL(dqn_step, dqn_collect_agents_kernel, DqnCollect)           \
    FH_KERNEL(dqn_step, dqn_sample_kernel, DqnSample)                    \
    FH_KERNEL(dqn_step, dqn_curiosity_gather_kernel, DqnCuriosityGather) \
    FH_KERNEL(dqn_step, dqn_curiosity_bonus_kernel, DqnCuriosityBonus)   \
    FH_KERNEL(dqn_step, dqn_her_observe_kernel, DqnHerObserve)           \
    FH_KERNEL(dqn_step, dqn_goal_states_kernel, DqnGoalStates)           \
    FH_KERNEL(dqn_step, dqn_her_sample_kernel, DqnHerSample)
