/// @file ppo_population.hpp
/// @brief Many PPO agents of one network shape trained as one batched engine (docs/sweeps.md,
///        "Batched populations"): each agent keeps its own environments (its seed's episode starts
///        on its market), rollout, actor-critic, Adam moments, diversity windows, guard and monitor,
///        laid out [agents][...]. A rollout step of every agent is one set of launches (the
///        environments of all agents, the actor and critic as strided batches over the agents'
///        networks, sampling with each agent's seed), a minibatch update of every agent too (the
///        gather, the forwards and backwards, the loss with each agent's coefficients, norm and
///        guard, Adam with each agent's scheduled learning rate) and GAE; the rollout's statistics,
///        the advantages' normalisation and the truncated episodes' bootstrap values run per agent
///        once a rollout. Agent i computes
///        what PpoTrainer does with agent i's profile: bit for bit on the CPU; on CUDA up to the
///        products' rounding (a batch of N networks may take other cuBLAS algorithms than one).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "abi/nn_guard.h"
#include "config/profile.hpp"
#include "env/vec_env.hpp"
#include "math/ppo.h"
#include "ops/device.hpp"
#include "ops/host_read.hpp"
#include "trainers/population.hpp"
#include "trainers/ppo_trainer.hpp"
#include "trainers/softmax_policy.hpp"
#include "trainers/trainer.hpp"

namespace fh::trainers {

class PpoPopulationAgent;

class PpoPopulation final : public BatchedPopulation, public std::enable_shared_from_this<PpoPopulation> {
public:
    /// Why `agent` cannot train in a batched PPO population whose first agent is `first` ("" when
    /// it can): a PPO profile without ppo.curiosity whose networks, rollout (environments, horizon),
    /// epochs, minibatches, clip_value, diversity window, learning-rate schedule, gradient clip,
    /// total steps and environment (run.seed aside) are the first agent's, with a diversity penalty
    /// where the first agent has one. Its own: run.seed (episode starts, initial weights, sampling,
    /// minibatches), training.learning_rate, gamma, max_bad_updates, ppo.gae_lambda, clip,
    /// value_coef, entropy_coef, diversity_coef.
    static std::string unsupported(const config::Profile& agent, const config::Profile& first);

    /// Agent i trains on markets[i]'s training split. Throws UsageError when unsupported() names
    /// a problem.
    PpoPopulation(ops::Device& ops, const std::vector<config::Profile>& agents,
                  const std::vector<const env::DeviceMarket*>& markets);

    int agents() const noexcept override { return agents_; }
    long long batch_rows() const noexcept override { return batch_; }
    long long env_steps_per_iteration() const noexcept override { return static_cast<long long>(n_envs_) * horizon_; }
    long long updates_per_update() const noexcept override { return updates_per_rollout(); }
    /// One rollout of every agent, then ppo.epochs x ppo.minibatches updates of every agent. Tests:
    /// a rollout whose updates include one at which an agent's Trainer asked for a NaN policy loss
    /// runs uncaptured, that agent's loss NaN there.
    void iterate() override;
    void prepare() override {}
    /// Bench: one rollout of every agent; its updates (which also count the rollout, as
    /// PpoTrainer::bench_update).
    void collect() override { collect_rollout(); }
    void update() override { update_from_rollout(0); }
    std::unique_ptr<Trainer> agent(int i) override;

    int n_envs() const noexcept { return n_envs_; }
    int horizon() const noexcept { return horizon_; }
    long long rollouts() const noexcept { return rollouts_; }
    long long updates_per_rollout() const noexcept { return epochs_ * minibatches_; }
    /// Resume (before the first rollout): every agent continues from `rollouts` (the first call
    /// sets the population's; a later one that differs: UsageError).
    void restore_rollouts(long long rollouts);
    const config::Profile& profile(int agent) const { return profiles_.at(static_cast<std::size_t>(agent)); }
    const env::EnvParams& env_params(int agent) const { return env_params_.at(static_cast<std::size_t>(agent)); }
    const ActorCritic& network() const noexcept { return net_; }
    ops::Device& device() noexcept { return ops_; }

    /// Agent i's slices of the population's buffers: what PpoTrainer keeps for one agent.
    struct AgentState {
        ops::View<float> params, m, v, accumulators;
        ops::View<env::EnvState> env_state;
        ops::View<float> env_portfolio, env_states;
        ops::View<int> diversity_window, diversity_counts;
        ops::View<nn::GuardState> guard;
        ops::View<unsigned long long> histogram;
    };
    AgentState agent_state(int agent);

private:
    void collect_rollout();
    void update_from_rollout(std::uint32_t inject_nan);
    void issue_rollout();
    void rollout_ops();
    void rollout_step(int t);
    void sample_actions(int t);
    void bootstrap_truncated();
    void advantage_ops();
    void update_ops(std::uint32_t inject_nan);
    void minibatch_update(int epoch, int minibatch, std::uint32_t inject_nan);
    ops::CounterValue collection_step(int t) const;
    /// The copy of the (agents, n) `step` values (width elements each) into row t of every agent's
    /// (T, n) rollout buffer `rollout`: strided, for Device::copy_group.
    template <class T>
    ops::CopyPair step_row(ops::Buffer<T>& rollout, int t, ops::View<const T> step, std::size_t width = 1);
    std::size_t params() const noexcept { return net_.layout.total(); }

    ops::Device& ops_;
    std::vector<config::Profile> profiles_;
    std::vector<env::EnvParams> env_params_;
    std::vector<const env::DeviceMarket*> markets_;
    int agents_, n_envs_, horizon_, num_actions_, state_dim_, batch_, window_;
    long long epochs_, minibatches_;
    ActorCritic net_;
    env::VecEnv env_;  ///< every agent's n_envs environments, agent-major
    long long rollouts_ = 0;
    bool restored_ = false;        ///< restore_rollouts set rollouts_
    bool rollout_issued_ = false;  ///< issue_rollout ran; collect_rollout completes the rollout

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
    ops::Buffer<float> zeros_;  ///< (T n): the rollout's curiosity bonus, which a population does not take
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
    ops::Buffer<long long> rollouts_dev_;
    // Workspaces: a step's actor and critic (N x n rows), the bootstrap's critic (n rows), a
    // minibatch's actor and critic (N x B rows).
    nn::Mlp::Workspace ws_actor_step_, ws_critic_step_, ws_critic_trunc_, ws_actor_mb_, ws_critic_mb_;
    ops::OpSequence rollout_sequence_, advantage_sequence_, update_sequence_;

    friend class PpoPopulationAgent;
    PopulationAgents<PpoPopulationAgent> members_;
};

/// Agent i of a PpoPopulation as a Trainer (as DqnPopulationAgent): its log lines, checkpoint
/// tensors and counters are a single PPO run's; it continues from a checkpoint as one, or inside a
/// population whose agents all continue from one rollout (PpoPopulation::restore_rollouts).
class PpoPopulationAgent final : public Trainer {
public:
    PpoPopulationAgent(std::shared_ptr<PpoPopulation> population, int agent);
    ~PpoPopulationAgent() override;
    PpoPopulationAgent(const PpoPopulationAgent&) = delete;
    PpoPopulationAgent& operator=(const PpoPopulationAgent&) = delete;

    long long progress_per_iteration() const noexcept override { return population_->env_steps_per_iteration(); }
    long long iterations() const noexcept override { return rollouts_; }
    long long env_steps() const noexcept override { return rollouts_ * population_->env_steps_per_iteration(); }
    long long updates() const noexcept override { return rollouts_ * population_->updates_per_rollout(); }
    void iterate() override;
    LogLine read_log(double seconds) override;
    std::vector<StateTensor> state_tensors() override;
    /// PpoTrainer's: rollouts, steps, updates, curiosity updates (none).
    std::vector<std::int64_t> counter_values() const override {
        return {rollouts_, rollouts_ * population_->horizon(), updates(), 0};
    }
    void restore_counter_values(std::span<const std::int64_t> values) override;
    ops::View<float> policy_weights() noexcept override { return state_.params; }
    GreedyPolicy& policy() noexcept override { return policy_; }
    const env::EnvParams& env_params() const noexcept override { return env_params_; }
    long long bench_update() override;
    long long batch_rows() const noexcept override { return population_->batch_rows(); }
    int agent() const noexcept { return agent_; }
    bool injects_nan_at(long long u) const noexcept { return nan_injected(u); }

private:
    std::shared_ptr<PpoPopulation> population_;
    int agent_;
    PpoPopulation::AgentState state_;
    env::EnvParams env_params_;
    SoftmaxGreedyPolicy policy_;
    long long rollouts_ = 0;
    PpoLogMarks log_marks_;
};

}  // namespace fh::trainers
