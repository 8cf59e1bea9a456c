/// @file engine.hpp
/// @brief PPO (docs/ppo.md), the one PPO engine: an actor-critic over the environment's actions,
///        rollouts of experience.gpu_timesteps_per_episode steps of every environment, GAE(lambda),
///        advantage normalisation, a clipped surrogate with an (optionally clipped) value loss and
///        an entropy bonus over several epochs of shuffled minibatches, global-norm clipping, a
///        learning-rate schedule, the action-diversity penalty and an optional curiosity bonus.
///        Each agent keeps its own environments (its seed's episode starts on its market),
///        rollout, actor-critic, Adam moments, diversity windows, guard and monitor, laid out
///        [agents][...]. A rollout step of every agent is one set of launches (the environments of
///        all agents, the actor and critic as strided batches over the agents' networks, sampling
///        with each agent's seed), a minibatch update of every agent too (the gather, the forwards
///        and backwards, the loss with each agent's coefficients, norm and guard, Adam with each
///        agent's scheduled learning rate) and GAE; the rollout's statistics, the advantages'
///        normalisation, the truncated episodes' bootstrap values and the curiosity model (each
///        agent's own) run per agent. A single run is an engine of one agent; a batched population
///        (docs/sweeps.md) one of N, agent i computing what an engine of one computes with agent
///        i's profile: bit for bit on the CPU; on CUDA up to the products' rounding (a batch of N
///        networks may take other cuBLAS algorithms than one). Inside an iteration the host waits
///        once, for the counts of the rollout's truncated episodes.
#pragma once

#include <cstdint>
#include <iterator>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "abi/nn_guard.h"
#include "config/profile.hpp"
#include "env/vec_env.hpp"
#include "math/ppo.h"
#include "nn/mlp.hpp"
#include "nn/param_layout.hpp"
#include "device/device.hpp"
#include "device/host_read.hpp"
#include "trainers/memory_plan.hpp"
#include "trainers/curiosity_model.hpp"
#include "trainers/population.hpp"
#include "trainers/softmax_policy.hpp"
#include "trainers/trainer.hpp"
#include "abi/core_vector.h"

namespace fh::trainers {

/// The actor (logits over the actions) and the critic (one value) as two MLPs in one flat
/// parameter buffer, so Adam, the gradient norm, the guard and checkpoints see one buffer.
struct ActorCritic {
    nn::ParamLayout layout;
    nn::Mlp actor, critic;
    ActorCritic(const config::Profile& profile, int state_dim, int num_actions);
};

/// The monitor's sums (accumulators, kAccSize floats: a checkpoint's "monitor/accumulators"): the
/// five loss means and the gradient norm are added once per update, the rollout's statistics once
/// per rollout; a log line divides them by the updates and rollouts since the last.
namespace ppo_monitor {
inline constexpr int kAccPolicy = 0, kAccValue = 1, kAccEntropy = 2, kAccKl = 3, kAccClip = 4;  // minibatch means
// The loss's five means land at kAccPolicy.. in one ops::mean call: the stats' order.
static_assert(kAccPolicy == ppo::kStatPolicy && kAccValue == ppo::kStatValue && kAccEntropy == ppo::kStatEntropy &&
              kAccKl == ppo::kStatKl && kAccClip == ppo::kStatClipped && ppo::kPpoLossStats == 5);
inline constexpr int kAccGradNorm = 5;  // per update
inline constexpr int kAccReward = 6, kAccPenalty = 7, kAccCuriosity = 8, kAccValueMean = 9,
                     kAccReturn = 10;  // per rollout
inline constexpr int kAccSize = 11;
inline constexpr int kUpdateGroup = kAccGradNorm + 1;        // [0, 6) gets one add per update
inline constexpr int kRolloutGroup = kAccSize - kAccReward;  // [6, 11) one per rollout
/// The losses each update passes to the guard, in order; then the gradient norm.
inline constexpr const char* kGuardLossNames[] = {"the policy loss", "the value loss", "the entropy"};
inline constexpr int kGuardLosses = static_cast<int>(std::size(kGuardLossNames));
static_assert(kGuardLosses == kAccEntropy + 1, "the guard reads the first kGuardLosses statistics");
static_assert(ppo::kPpoLossStats == kAccClip + 1, "one accumulator per PPO loss statistic");
}  // namespace ppo_monitor

/// A PPO run's counters at a log line (the last line's marks: what the next divides by).
struct PpoLogMarks {
    long long rollouts = 0, steps = 0, updates = 0;
};

/// The log line of a PPO run (each agent's): the monitor's
/// sums `acc` (ppo_monitor::kAccSize) over the interval since `marks`, the guard, the action
/// histogram, the counters now; marks becomes now. Throws TrainingDiverged as the guard says.
LogLine ppo_log_line(const config::Profile& profile, std::span<const float> acc, const nn::GuardState& guard,
                     std::span<const unsigned long long> histogram, const PpoLogMarks& now, int n_envs, double seconds,
                     PpoLogMarks& marks);
/// The rollouts of a run (total_steps over a rollout's env steps, at least 1) and the learning
/// rate of rollout `rollouts` (ppo.lr_schedule: constant, or linear from lr down to lr / R).
double ppo_total_rollouts(const config::Profile& profile);
float ppo_scheduled_learning_rate(const config::Profile& profile, long long rollouts);

class PpoAgent;

/// A PPO run of `profile` on `market`'s training split: agent 0 of an engine of one.
std::unique_ptr<PpoAgent> make_ppo_trainer(ops::Device& ops, const config::Profile& profile,
                                           const env::DeviceMarket& market);

class PpoEngine final : public BatchedEngine<PpoEngine, PpoAgent> {
public:
    /// Why `agent` cannot train in one engine with `first` ("" when it can): a PPO profile whose
    /// networks, rollout (environments, horizon), epochs, minibatches, clip_value, diversity window,
    /// learning-rate schedule, gradient clip, total steps, curiosity and environment (run.seed
    /// aside) are the first agent's, with a diversity penalty where the first agent has one. Its own: run.seed (episode
    /// starts, initial weights, sampling, minibatches), training.learning_rate, gamma, max_bad_updates, ppo.gae_lambda,
    /// clip, value_coef, entropy_coef, diversity_coef, curiosity_coef.
    static std::string unsupported(const config::Profile& agent, const config::Profile& first);
    /// With run.population_batching = "auto": why agents of `first`'s shape run faster on their own
    /// launches ("" when they batch; TrainerKind::auto_batching_declined).
    static std::string auto_batching_declined(const config::Profile& first);
    /// What an engine of `agents` agents of `first`'s shape allocates (TrainerKind::plan); the
    /// constructor allocates its buffers from it.
    static MemoryPlan plan(const config::Profile& first, int agents, const PlanInputs& in);
    /// Agent `agent` trains on with `profile`'s per-agent keys (its seed and every other key as
    /// before; else UsageError): its loss coefficients, gamma and lambda and diversity weight on
    /// the device are replaced (its learning rate follows at the next rollout) and the captured
    /// sequences captured again.
    void set_agent_keys(int agent, const config::Profile& profile);

    /// Agent i trains on markets[i]'s training split. Throws UsageError when unsupported() names
    /// a problem.
    PpoEngine(ops::Device& ops, const std::vector<config::Profile>& agents,
              const std::vector<const env::DeviceMarket*>& markets);

    long long batch_rows() const noexcept override { return batch_; }
    long long env_steps_per_iteration() const noexcept override { return static_cast<long long>(n_envs_) * horizon_; }
    long long updates_per_update() const noexcept override { return updates_per_rollout(); }
    /// One rollout of every agent, then ppo.epochs x ppo.minibatches updates of every agent. Tests:
    /// a rollout whose updates include one at which an agent's Trainer asked for a NaN policy loss
    /// runs uncaptured, that agent's loss NaN there.
    void iterate() override;
    void prepare() override {}
    /// Issues the next rollout's captured steps and the read of its truncated episodes' counts
    /// ahead of iterate(), unless they are issued already.
    void issue_ahead() {
        if (!rollout_issued_) issue_rollout();
    }
    /// Bench: one rollout of every agent; its updates (which also count the rollout).
    void collect() override { collect_rollout(); }
    void update() override { update_from_rollout(0); }

    int n_envs() const noexcept { return n_envs_; }
    int horizon() const noexcept { return horizon_; }
    /// An agent's own rollouts (an iteration: a rollout and its updates).
    long long rollouts(int agent) const { return rollouts_.at(static_cast<std::size_t>(agent)); }
    long long updates_per_rollout() const noexcept { return epochs_ * minibatches_; }
    /// Resume (before the first rollout): agent `agent` continues from its checkpoint's
    /// `rollouts` (its sampling, minibatches, learning rate, guard and Adam step count on from there).
    void restore_rollouts(int agent, long long rollouts);
    /// Slot `agent` starts a new agent of `profile` on `market` from scratch, as a single run of
    /// that profile starts (its seed's weights and environments, Adam's moments zero, its
    /// diversity windows, guard, monitor and curiosity model new, its rollout count zero: the
    /// sampling, minibatches, learning-rate schedule and Adam's bias corrections from here); the
    /// other agents train on. Between iterations (no rollout issued ahead); its Trainer (agent())
    /// is made afterwards, the slot's old one gone. UsageError when unsupported() names a problem
    /// against the first agent.
    void reset_agent(int agent, const config::Profile& profile, const env::DeviceMarket& market) override;
    const env::EnvParams& env_params(int agent) const { return env_params_.at(static_cast<std::size_t>(agent)); }
    const ActorCritic& network() const noexcept { return net_; }

    /// Agent i's slices of the engine's buffers; its rollout (T rows of n environments).
    struct AgentState {
        ops::View<float> params, m, v, accumulators;
        ops::View<env::EnvState> env_state;
        ops::View<float> env_portfolio, env_states;
        ops::View<int> diversity_window, diversity_counts;
        ops::View<nn::GuardState> guard;
        ops::View<unsigned long long> histogram;
        ops::View<const float> rollout_values, rollout_next_values;
        ops::View<const int> rollout_actions;
        ops::View<const std::uint8_t> rollout_done;
        CuriosityModel* curiosity = nullptr;  ///< with ppo.curiosity
    };
    AgentState agent_state(int agent);

private:
    void collect_rollout();
    void update_from_rollout(std::uint32_t inject_nan);
    void issue_rollout();
    void rollout_ops();
    void rollout_step(int t);
    void sample_actions(int t);
    ops::View<const float> step_forward(const nn::Mlp& net, ops::View<const float> states, nn::Mlp::Workspace& ws);
    void curiosity_step(int t);
    void bootstrap_truncated();
    void advantage_ops();
    void update_ops(std::uint32_t inject_nan);
    void minibatch_update(int epoch, int minibatch, std::uint32_t inject_nan);
    /// Each agent's own collection step: rollouts_dev_[a] * T + t.
    ops::CounterValue collection_step(int t) const { return agent_counter(rollouts_dev_.cview(), horizon_, t); }
    /// The copy of the (agents, n) `step` values (width elements each) into row t of every agent's
    /// (T, n) rollout buffer `rollout`: strided, for ops::CopyGroup.
    template <class T>
    ops::CopyPair step_row(ops::Buffer<T>& rollout, int t, ops::View<const T> step, std::size_t width = 1);
    std::size_t params() const noexcept { return net_.layout.total(); }
    /// Agent a's starting state of `profile` on `market` beside the plan's starting values (which
    /// the constructor's allocation and reset_agent write) and its environments (VecEnv's): its
    /// seed, keys, weights from its seed, curiosity model and rollout count. The constructor starts
    /// each agent with it, reset_agent a slot.
    void start_agent(std::size_t a, const config::Profile& profile, const env::DeviceMarket& market);
    /// Agent a's per-agent keys on the device (loss coefficients, GAE's gamma and lambda, diversity weight).
    void upload_keys(std::size_t a, const config::Profile& profile);
    /// Each agent's update number at minibatch update `index` (1-based) of this rollout, for the NaN tests.
    std::uint32_t nan_mask_at(long long index) const;

    std::vector<env::EnvParams> env_params_;
    std::vector<const env::DeviceMarket*> markets_;
    int n_envs_, horizon_, num_actions_, state_dim_, batch_, window_;
    long long epochs_, minibatches_;
    ActorCritic net_;
    env::VecEnv env_;                  ///< every agent's n_envs environments, agent-major
    std::vector<long long> rollouts_;  ///< per agent: the device counters' mirror (rollouts_dev_)
    bool rollout_issued_ = false;      ///< issue_rollout ran; collect_rollout completes the rollout

    // Per agent on the device: run.seed (sampling, minibatches), loss coefficients, GAE's gamma and
    // lambda (pairs), diversity coefficient, learning rate.
    ops::Buffer<std::uint64_t> seeds_;
    ops::Buffer<ppo::LossParams> loss_params_;
    ops::Buffer<float> gamma_lambda_, diversity_coef_, lr_;
    // Parameters (N, P): actor-critic, gradients, Adam's moments.
    ops::Buffer<float> params_, grads_, m_, v_;
    // Each agent's rollout (N, T, n): row t * n + e of agent a at a T n + t n + e.
    ops::Buffer<float> r_states_, r_logp_, r_values_, r_next_values_, r_rewards_, r_adv_, r_returns_, r_penalty_;
    ops::Buffer<int> r_actions_;
    ops::Buffer<std::uint8_t> r_done_;
    // ppo.curiosity: each agent's forward model (n rows a step) and the rollout's bonus before its
    // coefficient (N, T, n; zero without curiosity).
    std::vector<CuriosityModel> curiosity_;
    ops::Buffer<float> r_curiosity_;
    // One step of every agent (N, n): the sampled actions and log-probabilities (two sets: step t's
    // are stored while step t + 1's are sampled), the rewards less the diversity penalty, the penalty.
    ops::Buffer<int> step_actions_;
    ops::Buffer<float> step_logp_, step_rewards_, step_penalty_;
    // Truncated episodes, per agent: (N, T n) entries, (N) counts; their observations (n rows).
    ops::Buffer<int> trunc_rows_, trunc_bars_, trunc_count_;
    ops::Buffer<float> trunc_portfolio_, trunc_states_;
    ops::HostRead<int> trunc_read_;
    // Diversity windows (N, n, W) and counts (N, n, A).
    ops::Buffer<int> div_window_, div_counts_;
    // One minibatch per agent (N, B): states (N, B, D), stats (kPpoLossStats, N, B).
    ops::Buffer<float> mb_states_, mb_old_logp_, mb_adv_, mb_returns_, mb_old_values_, mb_stats_, mb_d_logits_,
        mb_d_values_;
    ops::Buffer<int> mb_actions_;
    // The monitor: an update's statistics (kUpdateGroup, N) stat-major; a rollout's (N,
    // kRolloutGroup); the sums (N, kAccSize) agent-major (an agent's are a single run's
    // accumulators); norm scratch, gate, guard, histograms (N, A).
    ops::Buffer<float> current_, rollout_current_, accum_, norm_scratch_, normalize_scratch_;
    ops::Buffer<int> gate_;
    ops::Buffer<nn::GuardState> guard_;
    ops::Buffer<unsigned long long> histogram_;
    ops::Buffer<long long> rollouts_dev_;  ///< each agent's rollouts (N)
    // Workspaces: a step's actor and critic (N x n rows), the bootstrap's critic (n rows), a
    // minibatch's actor and critic (N x B rows).
    nn::Mlp::Workspace ws_actor_step_, ws_critic_step_, ws_critic_trunc_, ws_actor_mb_, ws_critic_mb_;
    ops::OpSequence rollout_sequence_, advantage_sequence_, update_sequence_;
};

/// Agent i of a PpoEngine as a Trainer (EngineAgent). Its checkpoint tensors and counters are the
/// same whatever the engine's size: a checkpoint resumes alone or inside an engine (each agent
/// from its own rollout, PpoEngine::restore_rollouts).
class PpoAgent final : public EngineAgent<PpoEngine> {
public:
    PpoAgent(std::shared_ptr<PpoEngine> population, int agent);

    long long progress_per_iteration() const noexcept override { return engine_->env_steps_per_iteration(); }
    long long iterations() const noexcept override { return rollouts_; }
    long long env_steps() const noexcept override { return rollouts_ * engine_->env_steps_per_iteration(); }
    long long updates() const noexcept override { return rollouts_ * engine_->updates_per_rollout(); }
    void iterate() override;
    /// The first agent of a round issues the engine's next rollout ahead (PpoEngine::issue_ahead).
    void prepare_iteration() override;
    LogLine read_log(double seconds) override;
    std::vector<StateTensor> state_tensors() override;
    /// Rollouts, steps, updates, curiosity updates.
    std::vector<std::int64_t> counter_values() const override {
        return {rollouts_, rollouts_ * engine_->horizon(), updates(), state_.curiosity ? state_.curiosity->steps() : 0};
    }
    void restore_counter_values(std::span<const std::int64_t> values) override;
    ops::View<float> policy_weights() noexcept override { return state_.params; }
    GreedyPolicy& policy() noexcept override { return policy_; }
    /// Bench of a single run (an engine of one agent): one rollout; its updates.
    long long bench_collect() override;
    long long bench_update() override;
    const ActorCritic& network() const noexcept { return engine_->network(); }
    /// The learning rate of the next update (the schedule).
    float learning_rate() const noexcept;
    /// The last rollout (T rows of n environments), for tests. next_values: V of the observation
    /// after each step (terminal where the episode was truncated); rows of terminated steps hold
    /// V(s_{t+1}) of the next episode, which GAE never reads.
    ops::View<const int> rollout_actions() const noexcept { return state_.rollout_actions; }
    ops::View<const float> rollout_values() const noexcept { return state_.rollout_values; }
    ops::View<const float> rollout_next_values() const noexcept { return state_.rollout_next_values; }
    ops::View<const std::uint8_t> rollout_done() const noexcept { return state_.rollout_done; }

private:
    PpoEngine::AgentState state_;
    SoftmaxGreedyPolicy policy_;
    long long rollouts_ = 0;
    PpoLogMarks log_marks_;
};

}  // namespace fh::trainers
