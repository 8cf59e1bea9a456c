/// @file iql_population.hpp
/// @brief Many IQL agents of one network shape trained as one batched engine (docs/sweeps.md,
///        "Batched populations"): each agent keeps its own dataset (its seed's behaviour data on its
///        market), networks, targets and Adam moments, laid out [agents][...]; every op of an
///        update is one launch for all agents (the sampling, losses, norm and guard, and Adam take
///        the agent from their grid or row; each layer is a strided-batched product over the
///        agents' networks), and an update of the whole population is one captured sequence.
///        Agent i computes what IqlTrainer does with agent i's profile: bit for bit on the CPU; on
///        CUDA up to the products' rounding (a batch of N networks may take other cuBLAS algorithms
///        than IqlTrainer's twin pair).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "abi/replay_nstep.h"
#include "config/profile.hpp"
#include "env/vec_env.hpp"
#include "math/iql.h"
#include "math/nn.h"
#include "ops/device.hpp"
#include "trainers/iql_trainer.hpp"
#include "trainers/population.hpp"
#include "trainers/replay_ring.hpp"
#include "trainers/softmax_policy.hpp"
#include "trainers/trainer.hpp"

namespace fh::trainers {

class IqlPopulation final : public BatchedPopulation, public std::enable_shared_from_this<IqlPopulation> {
public:
    /// Why `agent` cannot train in a batched IQL population whose first agent is `first` ("" when
    /// it can): an IQL profile whose network, batch, dataset, clipping, target mode and period and
    /// environment (run.seed aside) are the first agent's. Its own: run.seed (dataset, initial
    /// weights, sampling), training.learning_rate, gamma, tau, iql.expectile, beta, max_weight,
    /// max_bad_updates.
    static std::string unsupported(const config::Profile& agent, const config::Profile& first);

    /// Builds each agent's dataset as IqlTrainer does (agent i on markets[i]). Throws UsageError
    /// when unsupported() names a problem.
    IqlPopulation(ops::Device& ops, const std::vector<config::Profile>& agents,
                  const std::vector<const env::DeviceMarket*>& markets);

    int agents() const noexcept override { return agents_; }
    long long batch_rows() const noexcept override { return batch_; }
    long long env_steps_per_iteration() const noexcept override { return 0; }
    /// One update of every agent. Tests: an update at which an agent's Trainer asked for a NaN
    /// loss runs uncaptured, that agent's value loss NaN.
    void iterate() override;
    void prepare() override {}
    void collect() override {}
    void update() override { iterate(); }
    std::unique_ptr<Trainer> agent(int i) override;
    /// The sum of the agents' dataset collection rates.
    double dataset_collection_env_steps_per_s() const noexcept override;

    long long updates() const noexcept { return updates_; }
    /// Resume (before the first update): every agent continues from `updates` (the first call
    /// sets the population's update number; a later one that differs: UsageError).
    void restore_updates(long long updates);
    const config::Profile& profile(int agent) const { return profiles_.at(static_cast<std::size_t>(agent)); }
    const env::EnvParams& env_params(int agent) const { return env_params_.at(static_cast<std::size_t>(agent)); }
    const IqlNetworks& networks() const noexcept { return net_; }
    ops::Device& device() noexcept { return ops_; }

    /// Agent i's slices of the population's buffers: what IqlTrainer keeps for one agent.
    struct AgentState {
        ops::View<float> online, target, m, v, accumulators;
        ops::View<nn::GuardState> guard;
        long long dataset_transitions = 0;
        double dataset_env_steps_per_s = 0;
    };
    AgentState agent_state(int agent);

private:
    void update_ops(std::uint32_t inject_nan);
    std::size_t params() const noexcept { return net_.layout.total(); }

    ops::Device& ops_;
    std::vector<config::Profile> profiles_;
    std::vector<env::EnvParams> env_params_;
    int agents_, num_actions_, state_dim_, batch_;
    IqlNetworks net_;
    std::size_t twin_stride_ = 0;  ///< q2's parameters are q1's shifted by this (IqlTrainer's)
    long long updates_ = 0;
    bool restored_ = false;  ///< restore_updates set updates_

    // Each agent's dataset (its ring, as IqlTrainer's) and its sampling on the device.
    std::vector<ReplayRing> datasets_;
    std::vector<long long> transitions_;
    std::vector<double> collection_seconds_;
    ops::Buffer<abi::SampleAgent> sample_agents_;
    // Parameters (N, P): online, target, gradients, Adam's moments; the shared update number.
    ops::Buffer<float> online_, target_, grads_, m_, v_;
    ops::Buffer<long long> step_;
    ops::Buffer<unsigned> step_ticket_;
    // Per agent on the device: learning rate, soft target's tau and keep, the losses' coefficients.
    ops::Buffer<float> lr_, tau_keep_;
    ops::Buffer<iql::LossScalars> scalars_;
    // One batch per agent: x (N, 2B, D) = [s; s'], actions, rewards, discounts (N, B).
    ops::Buffer<float> x_, rewards_, discounts_;
    ops::Buffer<int> actions_;
    ops::Buffer<float> loss_v_, loss_q_, loss_pi_, awr_weights_, d_v_, d_q1_, d_q2_, d_logits_;
    // The monitor: this update's statistics (stats, N) stat-major, their sums (N, stats)
    // agent-major (an agent's are a single run's accumulators), the norm's scratch, gate, guard.
    ops::Buffer<float> current_, accum_, norm_scratch_;
    ops::Buffer<int> gate_;
    ops::Buffer<nn::GuardState> guard_;
    // Workspaces (N x B rows each): the target twins on s, V on s and on s', the online twins, the policy.
    nn::Mlp::Workspace ws_q1_target_, ws_q2_target_, ws_v_, ws_v_next_, ws_q1_, ws_q2_, ws_policy_;
    ops::OpSequence update_sequence_;

    friend class IqlPopulationAgent;
    PopulationAgents<class IqlPopulationAgent> members_;
};

/// Agent i of an IqlPopulation as a Trainer (as DqnPopulationAgent): its log lines, checkpoint
/// tensors and counters are a single IQL run's; it continues from a checkpoint as one, or inside
/// a population whose agents all continue from one update (IqlPopulation::restore_updates).
class IqlPopulationAgent final : public UpdateCountedTrainer {
public:
    IqlPopulationAgent(std::shared_ptr<IqlPopulation> population, int agent);
    ~IqlPopulationAgent() override;
    IqlPopulationAgent(const IqlPopulationAgent&) = delete;
    IqlPopulationAgent& operator=(const IqlPopulationAgent&) = delete;

    long long env_steps() const noexcept override { return state_.dataset_transitions; }
    void iterate() override;
    LogLine read_log(double seconds) override;
    std::vector<StateTensor> state_tensors() override;
    ops::View<float> policy_weights() noexcept override { return state_.online; }
    GreedyPolicy& policy() noexcept override { return policy_; }
    const env::EnvParams& env_params() const noexcept override { return env_params_; }
    long long bench_update() override;
    long long batch_rows() const noexcept override { return population_->batch_rows(); }
    double dataset_collection_env_steps_per_s() const noexcept override { return state_.dataset_env_steps_per_s; }
    int agent() const noexcept { return agent_; }
    bool injects_nan_at(long long u) const noexcept { return nan_injected(u); }

private:
    void restore_optimizer_steps(long long steps) override { population_->restore_updates(steps); }

    std::shared_ptr<IqlPopulation> population_;
    int agent_;
    IqlPopulation::AgentState state_;
    env::EnvParams env_params_;
    SoftmaxGreedyPolicy policy_;
};

}  // namespace fh::trainers
