/// @file engine.hpp
/// @brief Implicit Q-learning, offline (docs/iql.md): the one IQL engine. Each agent keeps a fixed
///        dataset of transitions (collected on its training split by the documented behaviour
///        policy, or a DQN run's replay dump), twin Q networks with target copies trained towards
///        r + gamma * (1 - terminated) * V(s'), V by expectile regression on the target twin
///        minimum, and a softmax policy extracted by advantage-weighted regression. Buffers are
///        laid out [agents][...]; every op of an update is one launch for all agents (the
///        sampling, losses, norm and guard, and Adam take the agent from their grid or row; each
///        layer is a strided-batched product over the agents' networks), and an update of every
///        agent is one captured sequence. A single run is an engine of one agent; a batched
///        population (docs/sweeps.md, "Batched populations") one of N, agent i computing what an
///        engine of one computes with agent i's profile (bit for bit on the CPU; on CUDA up to the
///        products' rounding: a batch of N networks may take other cuBLAS algorithms).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "abi/nn_guard.h"
#include "abi/replay_nstep.h"
#include "config/profile.hpp"
#include "env/vec_env.hpp"
#include "math/iql.h"
#include "math/nn.h"
#include "nn/mlp.hpp"
#include "nn/param_layout.hpp"
#include "device/device.hpp"
#include "trainers/memory_plan.hpp"
#include "trainers/population.hpp"
#include "trainers/replay_ring.hpp"
#include "trainers/softmax_policy.hpp"
#include "trainers/trainer.hpp"

namespace fh::trainers {

/// The four IQL networks in one flat parameter buffer: q1, q2 (state -> one Q per action),
/// v (state -> V), policy (state -> logits).
struct IqlNetworks {
    nn::ParamLayout layout;
    nn::Mlp q1, q2, v, policy;
    IqlNetworks(const config::Profile& profile, int state_dim, int num_actions);
};

/// An IQL update's statistics (the monitor's floats, in this order): the guard reads the first
/// kGuardLosses (the losses), then the gradient norm.
namespace iql_stats {
constexpr int kValueLoss = 0, kQLoss = 1, kPolicyLoss = 2, kGradNorm = 3, kWeight = 4, kV = 5, kCount = 6;
constexpr int kGuardLosses = 3;
static_assert(kGuardLosses == kGradNorm, "the guard reads the statistics [0, kGuardLosses), then the norm");
}  // namespace iql_stats

/// One log line of an IQL agent from its interval's statistics sums (iql_stats order), guard and
/// counts; throws DivergedError (exit 5) when the guard gave up.
LogLine iql_log_line(const config::Profile& profile, const std::vector<float>& sums, const nn::GuardState& guard,
                     double updates_in_interval, double updates_per_s, long long updates,
                     long long dataset_transitions);

/// The behaviour policy that collects the dataset (docs/iql.md) in environments of `params`.
iql::BehaviourParams behaviour_params(const env::EnvParams& params, std::uint64_t seed);

class IqlAgent;

/// An IQL run of `profile` on `market`'s training split: agent 0 of an engine of one.
std::unique_ptr<IqlAgent> make_iql_trainer(ops::Device& ops, const config::Profile& profile,
                                           const env::DeviceMarket& market);

class IqlEngine final : public BatchedEngine<IqlEngine, IqlAgent, UpdateCountedTrainer> {
public:
    /// Why `agent` cannot train in one engine with `first` ("" when it can): an IQL profile whose network, batch,
    /// dataset, clipping, target mode and period and environment (run.seed aside) are the first agent's. Its own:
    /// run.seed (dataset, initial weights, sampling), training.learning_rate, gamma, tau, iql.expectile, beta,
    /// max_weight, max_bad_updates.
    static std::string unsupported(const config::Profile& agent, const config::Profile& first);
    /// What an engine of `agents` agents of `first`'s shape allocates (TrainerKind::plan); the
    /// constructor allocates its buffers from it.
    static MemoryPlan plan(const config::Profile& first, int agents, const PlanInputs& in);

    /// Builds each agent's dataset (agent i on markets[i]: its seed's behaviour data, or the replay
    /// dump iql.dataset names) and initialises its networks from its seed. Throws UsageError when
    /// unsupported() names a problem.
    IqlEngine(ops::Device& ops, const std::vector<config::Profile>& agents,
              const std::vector<const env::DeviceMarket*>& markets);

    long long batch_rows() const noexcept override { return batch_; }
    long long env_steps_per_iteration() const noexcept override { return 0; }
    /// One update of every agent. Tests: an update at which an agent's Trainer asked for a NaN
    /// loss runs uncaptured, that agent's value loss NaN.
    void iterate() override;
    void prepare() override {}
    void collect() override {}
    void update() override { iterate(); }
    /// The sum of the agents' dataset collection rates.
    double dataset_collection_env_steps_per_s() const noexcept override;

    /// An agent's own updates (an iteration: an update).
    long long updates(int agent) const { return updates_.at(static_cast<std::size_t>(agent)); }
    /// Resume (before the first update): agent `agent` continues from its checkpoint's `updates`
    /// (its sampling, guard, Adam step and target period count on from there).
    void restore_updates(int agent, long long updates);
    /// Slot `agent` starts a new agent of `profile` on `market` from scratch, as a single run of
    /// that profile starts (its dataset built from its seed on `market`, its seed's weights, the
    /// target a copy, Adam's moments zero, its update count zero: sampling, guard, Adam's bias
    /// corrections and the target period from here); the other agents train on. Between
    /// iterations; its Trainer (agent()) is made afterwards, the slot's old one gone. UsageError
    /// when unsupported() names a problem against the first agent.
    void reset_agent(int agent, const config::Profile& profile, const env::DeviceMarket& market) override;
    const env::EnvParams& env_params(int agent) const { return env_params_.at(static_cast<std::size_t>(agent)); }
    const IqlNetworks& networks() const noexcept { return net_; }

    /// Agent `agent` trains on with `profile`'s per-agent keys (its seed and every other key as
    /// before; else UsageError): its learning rate, target rate, loss scalars and sampling's gamma
    /// on the device are replaced and the captured update captured again.
    void set_agent_keys(int agent, const config::Profile& profile);

    /// Agent i's slices of the engine's buffers.
    struct AgentState {
        ops::View<float> online, target, m, v, accumulators;
        ops::View<nn::GuardState> guard;
        long long dataset_transitions = 0;
        double dataset_env_steps_per_s = 0;
    };
    AgentState agent_state(int agent);

private:
    void update_ops(std::uint32_t inject_nan);
    /// Agent a's starting state of `profile` on `market` beside the plan's starting values (which
    /// the constructor's allocation and reset_agent write): its dataset, weights from its seed,
    /// the target a copy, its keys and update count. The constructor starts each agent with it,
    /// reset_agent a slot.
    void start_agent(std::size_t a, const config::Profile& profile, const env::DeviceMarket& market);
    /// Agent a's per-agent keys on the device (learning rate, target rate, loss scalars, sampling).
    void upload_keys(std::size_t a, const config::Profile& profile);
    std::size_t params() const noexcept { return net_.layout.total(); }
    bool alone() const noexcept { return agents_ == 1; }  ///< an engine of one (a single run)

    std::vector<env::EnvParams> env_params_;
    int num_actions_, state_dim_, batch_;
    IqlNetworks net_;
    std::size_t twin_stride_ = 0;     ///< q2's parameters are q1's shifted by this inside an agent's slice
    std::vector<long long> updates_;  ///< per agent: the device counter's mirror (step_)

    // Each agent's dataset (a ring of the replay layout, sampled with n = 1) and its sampling on the device.
    std::vector<ReplayRing> datasets_;
    std::vector<long long> transitions_;
    std::vector<double> collection_seconds_;
    ops::Buffer<abi::SampleAgent> sample_agents_;
    // Parameters (N, P): online, target, gradients, Adam's moments; each agent's update number (N).
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
};

/// Agent i of an IqlEngine as a Trainer (EngineAgent; an iteration is an update). Its checkpoint
/// tensors and counters are the same whatever the engine's size: a checkpoint resumes alone or
/// inside an engine (each agent from its own update, IqlEngine::restore_updates).
class IqlAgent final : public EngineAgent<IqlEngine, UpdateCountedTrainer> {
public:
    IqlAgent(std::shared_ptr<IqlEngine> population, int agent);

    long long env_steps() const noexcept override { return state_.dataset_transitions; }
    void iterate() override;
    LogLine read_log(double seconds) override;
    std::vector<StateTensor> state_tensors() override;
    ops::View<float> policy_weights() noexcept override { return state_.online; }
    GreedyPolicy& policy() noexcept override { return policy_; }
    /// Bench of a single run (an engine of one agent): one update.
    long long bench_update() override;
    double dataset_collection_env_steps_per_s() const noexcept override { return state_.dataset_env_steps_per_s; }

private:
    void restore_optimizer_steps(long long steps) override {
        engine_->restore_updates(agent_, steps);
        restart_at(steps);
    }
    long long updates_at_last_log(long long updates) override {
        return last_log_point(engine_->device(), state_.accumulators, engine_->profile(agent_).run.log_interval,
                              updates);
    }

    IqlEngine::AgentState state_;
    SoftmaxGreedyPolicy policy_;
};

}  // namespace fh::trainers
