/// @file dqn_population.hpp
/// @brief Many DQN agents of one network shape trained as one batched engine (docs/sweeps.md,
///        "Batched populations"): every buffer is laid out [agents][...], every op of a
///        collection step or an update is one launch for all agents (the DQN kernels take the
///        agent from their grid, the layers are strided-batched products), and an iteration of
///        the whole population is one captured sequence. Agent i computes what DqnTrainer does
///        with agent i's profile: bit for bit on the CPU; on CUDA up to the products' rounding
///        (a strided batch of N networks may take another cuBLAS algorithm than one network).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/profile.hpp"
#include "env/vec_env.hpp"
#include "math/dqn.h"
#include "math/nn.h"
#include "ops/device.hpp"
#include "ops/dqn/ops.hpp"
#include "trainers/dqn_trainer.hpp"
#include "trainers/population.hpp"
#include "trainers/q_network.hpp"
#include "trainers/trainer.hpp"

namespace fh::trainers {

class DqnPopulationAgent;

class DqnPopulation final : public BatchedPopulation, public std::enable_shared_from_this<DqnPopulation> {
public:
    /// Why `agent` cannot train in a batched population whose first agent is `first` ("" when it
    /// can): a DQN profile with the C51 or scalar head and none of dqn.her, dqn.curiosity,
    /// dqn.attention, dqn.head = "iqn", an ensemble or replay_buffer.save_dump, whose shapes and
    /// environment (run.seed aside) are those of `first`.
    static std::string unsupported(const config::Profile& agent, const config::Profile& first);

    /// `agents[i]` trains on `markets[i]`'s training split (agents with different seeds may have
    /// different synthetic markets; the same market may serve several). Throws UsageError when
    /// unsupported() names a problem.
    DqnPopulation(ops::Device& ops, const std::vector<config::Profile>& agents,
                  const std::vector<const env::DeviceMarket*>& markets);

    int agents() const noexcept override { return agents_; }
    int n_envs() const noexcept { return n_envs_; }
    long long batch_rows() const noexcept override { return batch_; }
    long long env_steps_per_iteration() const noexcept override { return n_envs_; }
    std::unique_ptr<Trainer> agent(int i) override;
    /// Per agent (every agent advances together).
    long long steps() const noexcept { return steps_; }
    long long updates() const noexcept { return updates_; }

    /// One iteration of every agent: a collection step and, once the replay holds
    /// training.min_replay_size transitions, training.updates_per_iteration updates (as DqnTrainer).
    /// Tests: an update at which an agent's Trainer asked for a NaN loss (inject_nan_at_updates)
    /// runs uncaptured, that agent's loss NaN.
    void iterate() override;
    /// Bench: collection steps until the replay is ready; one collection step; one update.
    void prepare() override;
    void collect() override;
    void update() override;

    const config::Profile& profile(int agent) const { return profiles_.at(static_cast<std::size_t>(agent)); }
    /// Resume (before the first iteration): agent `agent` continues from its checkpoint's steps
    /// and updates, and its device counters follow. Every agent must continue from the same ones
    /// (the first call sets the population's; a later one that differs: UsageError).
    void restore_counters(int agent, long long steps, long long updates);

    /// Agent i's slices of the population's buffers: what DqnTrainer keeps for one agent.
    struct AgentState {
        ops::View<float> online, target, m, v;
        ops::View<float> ring_states, ring_next_states, ring_rewards;
        ops::View<int> ring_actions;
        ops::View<std::uint8_t> ring_done;
        ops::View<env::EnvState> env_state;
        ops::View<float> env_portfolio, env_states;
        ops::View<nn::GuardState> guard;
        ops::View<dqn::MonitorStats> stats;
        ops::View<unsigned long long> histogram;
    };
    AgentState agent_state(int agent);
    int capacity_steps() const noexcept { return capacity_steps_; }
    const env::EnvParams& env_params() const noexcept { return env_params_; }

private:
    bool ready_to_update() const noexcept;
    void collect_ops(bool advance);
    void gradient_ops(std::uint32_t inject_nan = 0);
    void adam_ops(bool end_step);
    std::size_t params() const noexcept { return net_.layout().total(); }

    ops::Device& ops_;
    std::vector<config::Profile> profiles_;
    int agents_, n_envs_, batch_, num_actions_, capacity_steps_;
    long long min_steps_, updates_per_iteration_;
    env::EnvParams env_params_;  // agent 0's; every agent's but for the seed
    QNetwork net_;
    long long steps_ = 0, updates_ = 0;
    bool restored_ = false;  ///< restore_counters set steps_ and updates_

    // Parameters (N, P): online, target, gradients, Adam's moments.
    ops::Buffer<float> online_, target_, grads_, m_, v_;
    // The environments (N, n): state, portfolio, observations; each agent's market and seed.
    ops::Buffer<env::EnvState> env_state_;
    ops::Buffer<float> env_portfolio_, env_states_;
    ops::Buffer<abi::EnvAgent> collect_agents_;
    env::MarketView market0_{};  // agent 0's (dqn_collect's `market`, unused beside collect_agents_)
    // The replay rings (N, capacity_steps * n).
    ops::Buffer<float> ring_states_, ring_next_states_, ring_rewards_;
    ops::Buffer<int> ring_actions_;
    ops::Buffer<std::uint8_t> ring_done_;
    // Per agent on the device: constants, counters, the collection's tickets, the update's step.
    ops::Buffer<dqn::AgentParams> agent_;
    ops::Buffer<dqn::Counters> counters_;
    ops::Buffer<unsigned> collect_tickets_;
    ops::Buffer<dqn::UpdateStep> step_;
    // One batch per agent: x (N, 2B, D) = [s; s'], actions, returns, discounts (N, B); acting (N, n).
    ops::Buffer<float> x_, returns_, discounts_;
    ops::Buffer<int> batch_actions_, actions_;
    ops::Buffer<float> d_head_, sample_stats_, norm_partials_;
    ops::Buffer<nn::GuardState> guard_;
    ops::Buffer<dqn::MonitorStats> stats_;
    ops::Buffer<unsigned long long> histogram_;
    // Acting (N x n rows); the online network on s (differentiated), on s', the target on s'
    // (N x B rows each).
    QNetwork::Workspace ws_act_, ws_s_, ws_next_, ws_target_;
    ops::OpSequence collect_sequence_, iteration_sequence_, update_sequence_;
    friend class DqnPopulationAgent;
    PopulationAgents<DqnPopulationAgent> members_;

    ops::RingViews ring();
};

/// Agent i of a DqnPopulation as a Trainer, so that a population's runner gives it its own logs,
/// evaluations, checkpoints and summary, as a single run's. The agents advance together: the first
/// agent whose iterate() asks for the population's next iteration runs it for every agent, the
/// others then count it (a runner steps every live agent once per round, on one host thread; an
/// agent that ends leaves, the others go on). Its checkpoint tensors and counters are a single
/// run's; a checkpoint resumes as one, or into a population whose agents all continue from one
/// iteration (DqnPopulation::restore_counters).
class DqnPopulationAgent final : public Trainer {
public:
    DqnPopulationAgent(std::shared_ptr<DqnPopulation> population, int agent);
    ~DqnPopulationAgent() override;
    DqnPopulationAgent(const DqnPopulationAgent&) = delete;
    DqnPopulationAgent& operator=(const DqnPopulationAgent&) = delete;

    long long progress_per_iteration() const noexcept override { return population_->n_envs(); }
    long long iterations() const noexcept override { return steps_; }
    long long env_steps() const noexcept override { return steps_ * population_->n_envs(); }
    long long updates() const noexcept override { return population_->updates(); }
    void iterate() override;
    LogLine read_log(double seconds) override;
    std::vector<StateTensor> state_tensors() override;
    std::vector<std::int64_t> counter_values() const override { return {steps_, updates(), steps_}; }
    void restore_counter_values(std::span<const std::int64_t> values) override;
    ops::View<float> policy_weights() noexcept override { return state_.online; }
    GreedyPolicy& policy() noexcept override { return policy_; }
    const env::EnvParams& env_params() const noexcept override { return env_params_; }
    long long bench_update() override;
    long long batch_rows() const noexcept override { return population_->batch_rows(); }
    int agent() const noexcept { return agent_; }
    /// Whether a test asked for a NaN loss at update u of this agent.
    bool injects_nan_at(long long u) const noexcept { return nan_injected(u); }

private:
    std::shared_ptr<DqnPopulation> population_;
    int agent_;
    DqnPopulation::AgentState state_;
    env::EnvParams env_params_;
    DqnGreedyPolicy policy_;
    long long steps_ = 0;
    DqnLogMarks log_marks_;
};

}  // namespace fh::trainers
