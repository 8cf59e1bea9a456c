/// @file engine.hpp
/// @brief The distributional DQN (docs/dqn.md), the one DQN engine: dueling C51 (or scalar, or
///        IQN) head blended with an MSE loss on the expected Q, double-DQN targets, n-step
///        returns, uniform replay on the device, epsilon-greedy collection, soft or periodic
///        target updates, Adam with global-norm clipping and the training guard; with its options
///        (HER, curiosity, feature attention, bootstrapped ensembles, CQL). Buffers are laid out
///        [agents][...]; a single run is an engine of one agent, a batched population
///        (docs/sweeps.md, "Batched populations") one of N, agent i computing what an engine of
///        one computes with agent i's profile (bit for bit on the CPU; on CUDA up to the
///        products' rounding: a batch of N networks may take other cuBLAS algorithms).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/profile.hpp"
#include "env/vec_env.hpp"
#include "math/dqn.h"
#include "math/nn.h"
#include "device/device.hpp"
#include "abi/dqn_step.h"
#include "trainers/curiosity_model.hpp"
#include "trainers/memory_plan.hpp"
#include "trainers/population.hpp"
#include "trainers/dqn/network.hpp"
#include "trainers/trainer.hpp"

namespace fh::trainers {

/// The network a DQN profile describes, for observations of state_dim floats.
QNetworkConfig network_config(const config::Profile& profile, int state_dim);

/// The replay ring's collection steps (capacity) and the steps it holds before the first update, of a
/// DQN profile (n_envs transitions a step).
struct DqnReplaySteps {
    int capacity = 0;
    long long before_updates = 0;
};
DqnReplaySteps dqn_replay_steps(const config::Profile& profile);

/// The agent's constants the DQN device steps read (math/dqn.h): seed, epsilon schedule,
/// gamma, the losses' coefficients, the target update, Adam's hyperparameters.
dqn::AgentParams dqn_agent_params(const config::Profile& profile);

/// The counters at the last log line (its rates are per second since).
struct DqnLogMarks {
    long long updates = 0, env_steps = 0;
};

/// Evaluation: the first action of maximal Q of a QNetwork (no exploration). With a goal (dqn.her),
/// the network sees each observation with that goal's features (ops::dqn_goal_states): `config`
/// is then the goal-conditioned network's (network_config adds the features).
class DqnGreedyPolicy final : public GreedyPolicy {
public:
    explicit DqnGreedyPolicy(const QNetworkConfig& config, std::optional<float> goal = std::nullopt)
        : net_(config), goal_(goal) {}
    std::size_t weights_size() const override { return net_.layout().total(); }
    void act(ops::Device& ops, ops::View<const float> weights, ops::View<int> actions, ops::View<const float> states,
             int n) override;
    bool capture_safe() const noexcept override { return true; }  // a forward and the greedy pick

private:
    QNetwork net_;
    QNetwork::Workspace ws_;  ///< grown to the largest batch seen
    ops::Device* ws_owner_ = nullptr;
    std::optional<float> goal_;                  ///< dqn.her_eval_goal, with dqn.her
    ops::Buffer<float> goal_obs_, goal_buffer_;  ///< with a goal: the rows [s | goal features], the goal (1)
};

/// The goal a DQN profile's policy is evaluated with: dqn.her_eval_goal with dqn.her, else none.
std::optional<float> eval_goal(const config::Profile& profile);

class DqnAgent;

/// A DQN run of `profile` on `market`'s training split: agent 0 of an engine of one.
std::unique_ptr<DqnAgent> make_dqn_trainer(ops::Device& ops, const config::Profile& profile,
                                           const env::DeviceMarket& market);

/// One iteration = one collection step of every agent's environments and, once the replay holds
/// training.min_replay_size transitions, training.updates_per_iteration gradient updates of every
/// agent. The two overlap on the device: collection acts with the online weights of the
/// iteration's start and writes the next replay slot while the first update samples the steps
/// stored before it (dqn::sample_range) and computes its gradient; its Adam step follows both;
/// then the counters advance. An iteration of every agent is one captured sequence.
///
/// Every op takes all agents in one launch, except the networks of an engine whose network cannot
/// run as a strided batch over agents (dqn.attention or the IQN head with more than one agent):
/// there each agent's forward, loss and backward run one after the other in the same sequence.
class DqnEngine final : public BatchedEngine<DqnEngine, DqnAgent> {
public:
    /// Why `agent` cannot train in one engine with `first` ("" when it can): a DQN profile whose
    /// network, options, batch, replay, schedule shape and environment (run.seed aside) are the
    /// first agent's. Its own: run.seed, the learning rate, gamma, tau, epsilon schedule, the
    /// losses' coefficients (cql_alpha, mse_blend_alpha, curiosity_coef, HER's ratio, reward and
    /// goal range, the ensemble's bootstrap probability and UCB), max_bad_updates.
    static std::string unsupported(const config::Profile& agent, const config::Profile& first);
    /// With run.population_batching = "auto": why agents of `first`'s shape run faster on their own
    /// launches ("" when they batch; TrainerKind::auto_batching_declined).
    static std::string auto_batching_declined(const config::Profile& first);
    /// What an engine of `agents` agents of `first`'s shape allocates (TrainerKind::plan); the
    /// constructor allocates its buffers from it.
    static MemoryPlan plan(const config::Profile& first, int agents, const PlanInputs& in);
    /// Whether an engine of `first`'s shape keeps bootstrap masks (an ensemble whose heads see
    /// each transition with dqn.ensemble_bootstrap < 1): its plan declares them, its ops read them.
    static bool bootstrap_masks(const config::Profile& first) {
        return first.dqn.ensemble_size > 1 && first.dqn.ensemble_bootstrap < 1.0;
    }

    /// `agents[i]` trains on `markets[i]`'s training split (agents with different seeds may have
    /// different synthetic markets; the same market may serve several). Throws UsageError when an
    /// option is not implemented or unsupported() names a problem.
    DqnEngine(ops::Device& ops, const std::vector<config::Profile>& agents,
              const std::vector<const env::DeviceMarket*>& markets);

    int n_envs() const noexcept { return n_envs_; }
    long long batch_rows() const noexcept override { return batch_; }
    long long env_steps_per_iteration() const noexcept override { return n_envs_; }
    /// An agent's own steps (collection steps: the engine's iterations), updates and steps in
    /// its ring since it was (re)filled.
    long long steps(int agent) const { return steps_.at(static_cast<std::size_t>(agent)); }
    long long updates(int agent) const { return updates_.at(static_cast<std::size_t>(agent)); }
    long long pushed(int agent) const { return pushed_.at(static_cast<std::size_t>(agent)); }
    /// Slot `agent` starts a new agent of `profile` on `market` from scratch, as a single run of
    /// that profile starts (its seed's weights and environments, Adam's moments zero, an empty
    /// ring, its counters zero: epsilon, the ring's fill before updates, the target period and
    /// Adam's step count from here); the other agents train on. Between iterations; its Trainer
    /// (agent()) is made afterwards, the slot's old one gone. UsageError when unsupported() names a
    /// problem against the first agent.
    void reset_agent(int agent, const config::Profile& profile, const env::DeviceMarket& market) override;

    /// One iteration of every agent. Tests: an update at which an agent's Trainer asked for a NaN
    /// loss (inject_nan_at_updates) runs uncaptured, that agent's loss NaN.
    void iterate() override;
    /// Bench: collection steps until the replay is ready; one collection step; one update.
    void prepare() override;
    void collect() override;
    void update() override;

    const env::EnvParams& env_params() const noexcept { return env_params_; }
    /// Agent `agent`'s own (its seed).
    env::EnvParams env_params(int agent) const;
    int capacity_steps() const noexcept { return capacity_steps_; }

    /// Resume (before the first iteration): agent `agent` continues from its checkpoint's steps,
    /// updates and steps pushed to its ring since it was (re)filled (`pushed` <= `steps`; fewer
    /// after a resume from a checkpoint without the replay memory, checkpoint.keep_replay =
    /// false, whose ring refills from empty), and its device counters follow.
    void restore_counters(int agent, long long steps, long long updates, long long pushed);
    /// Agent i's checkpoint tensors (a single run's names, shapes and order, those of earlier
    /// versions' too: a checkpoint resumes alone or in a population), its log line, its replay as a dump.
    std::vector<StateTensor> state_tensors(int agent);
    LogLine read_log(int agent, double seconds, DqnLogMarks& marks);
    io::ReplayDump replay_dump(int agent);
    ops::View<float> online(int agent);
    ops::View<float> target(int agent);
    /// Agent `agent` trains on with `profile`'s per-agent keys (its seed and every other key as
    /// before; else UsageError): its device constants (dqn::AgentParams) are replaced and the
    /// captured sequences captured again.
    void set_agent_keys(int agent, const config::Profile& profile);

    /// An engine of one: batches up to this many rows run the online and target networks as one
    /// batched pass on [s; s'] (small products: one launch beats two); larger batches run the
    /// online network on [s; s'] beside the target on s' alone, a quarter fewer forward products.
    /// The same values either way (rows are independent); the GPU's products may differ in their
    /// last bits. An engine of several agents runs the latter (or the batched forwards).
    static constexpr int kPairedForwardMaxRows = 512;
    /// Tests: another threshold than kPairedForwardMaxRows (before the first iteration).
    void set_paired_forward_max_rows(int rows);

private:
    /// Agent a's updates start once its ring holds min_steps_ steps (again, after a resume that
    /// refills it); an agent whose ring is not ready waits on the device (AgentParams::min_pushed).
    bool ready_to_update(std::size_t a) const noexcept { return pushed_[a] >= min_steps_; }
    bool any_ready_to_update() const noexcept;
    /// Agent a's starting state of `profile` on `market` beside the plan's starting values (which
    /// the constructor's allocation and reset_agent write): its weights from its seed, the target a
    /// copy, its environments, constants, counters and curiosity model. The constructor starts
    /// each agent with it, reset_agent a slot.
    void start_agent(std::size_t a, const config::Profile& profile, const env::DeviceMarket& market);
    void collect_ops(bool advance);  // acting and the environment step into the replay slot (and dqn_advance)
    void curiosity_ops();            // the bonus into the slot just written, one step of each model
    void gradient_ops(std::uint32_t inject_nan);  // one update's ops up to its Adam step
    void agent_gradient_ops(int a);               // agent a's forward, loss and backward (the unbatched networks)
    void iqn_loss_ops(int a);                     // dqn.head = "iqn": fractions, both networks' quantiles, the loss
    void loss_ops(int a, ops::View<const float> head_s, ops::View<const float> head_select,
                  ops::View<const float> head_target);
    void adam_ops(bool end_step);  // one update's Adam step and target update (and dqn_advance)
    void after_collect();
    /// Whether an engine of `agents` runs `net` as a strided batch over them (more than one
    /// agent, neither attention nor the IQN head).
    static bool batched_net(const QNetwork& net, int agents) {
        return agents > 1 && net.attention_groups().empty() && net.iqn_params().quantiles == 0;
    }
    /// The rows and fractions of the update's workspaces ws_pair_, ws_next_, ws_target_ (rows 0:
    /// none) of an engine of `agents` (plan, make_update_workspaces).
    struct WorkspaceShape {
        int rows = 0, quantiles = 0;
    };
    static std::array<WorkspaceShape, 3> update_workspaces(const QNetwork& net, int agents, int batch,
                                                           int paired_forward_max_rows);
    void make_update_workspaces();
    /// The paired forward of an engine of one (online and target contiguous in nets_).
    bool paired_forward() const noexcept {
        return agents_ == 1 && batch_ <= paired_forward_max_rows_ && net_.iqn_params().quantiles == 0;
    }
    std::size_t params() const noexcept { return net_.layout().total(); }
    /// The ring of every agent (a < 0), or of agent a alone.
    ops::DqnRing ring(int a = -1);
    /// With bootstrap_masks(): the masks of every agent (a < 0) or of agent a; else none (empty).
    ops::View<float> masks(int a = -1);
    template <class T>
    ops::View<T> slice(ops::Buffer<T>& b, int a) {
        const std::size_t per = b.size() / static_cast<std::size_t>(agents_);
        return b.view().subview(static_cast<std::size_t>(a) * per, per);
    }
    template <class T>
    ops::View<const T> cslice(ops::Buffer<T>& b, int a) {
        return ops::View<const T>(slice(b, a));
    }

    int n_envs_, batch_, num_actions_, capacity_steps_ = 0;
    long long min_steps_ = 0, updates_per_iteration_ = 0;
    env::EnvParams env_params_;  // agent 0's; every agent's but for the seed
    QNetwork net_;
    bool batched_net_ = false;                         ///< more than one agent and a network forward_agents runs
    std::vector<long long> steps_, updates_, pushed_;  // per agent: the device counters' mirror (dqn::Counters)

    // Parameters: the online networks (N, P) then the targets (N, P) in one buffer (an engine of
    // one runs both in one batched pass); gradients and Adam's moments (N, P).
    ops::Buffer<float> nets_, grads_, m_, v_;
    ops::View<float> online_, target_;
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
    // What changes from step to step lives on the device, so the sequences replay unchanged.
    ops::Buffer<dqn::AgentParams> agent_;
    ops::Buffer<dqn::Counters> counters_;
    ops::Buffer<unsigned> collect_tickets_;
    ops::Buffer<dqn::UpdateStep> step_;
    // dqn.her: the goal of every transition in the rings (N, capacity_steps * n) and the acting
    // rows [observation | goal features] (N, n, D + 2).
    ops::Buffer<float> her_goals_, her_obs_;
    // One batch per agent: x (N, 2B, DX) = [s; s'] (DX = D, or D + 2 with HER); actions, returns,
    // discounts (N, B); acting's actions (N, n).
    ops::Buffer<float> x_, returns_, discounts_;
    ops::Buffer<int> batch_actions_, actions_;
    // The loss's gradient w.r.t. the head outputs (N, B * max(1, quantiles), W), per-row statistics
    // (N, kSampleStats, B * K), norm partials (N, scratch).
    ops::Buffer<float> d_head_, sample_stats_, norm_partials_;
    // dqn.ensemble_size > 1: the bootstrap masks (N, B, K; when ensemble_bootstrap < 1), the
    // ensemble's target actions (N, B), and the acting outputs of the last collection step
    // (per agent, for q/ensemble_spread).
    ops::Buffer<float> masks_;
    ops::Buffer<int> target_actions_;
    std::vector<ops::View<const float>> act_outputs_;
    // dqn.head = "iqn": the update's fractions of the rows of [s; s'] (N, 2B * quantiles) and their
    // features.
    ops::Buffer<float> iqn_features_, iqn_taus_;
    // dqn.curiosity: each agent's forward model (n rows per collection step), the step's next-bar
    // features (N, n, M) and errors (N, n), the bonus's sums since the last log (N).
    std::vector<CuriosityModel> curiosity_;
    ops::Buffer<float> cur_next_market_, cur_error_;
    ops::Buffer<dqn::CuriosityStats> cur_stats_;
    // Guard and monitoring (N; histograms (N, A)).
    ops::Buffer<nn::GuardState> guard_;
    ops::Buffer<dqn::MonitorStats> stats_;
    ops::Buffer<unsigned long long> histogram_;
    // Workspaces. Acting: one of N x n rows (batched) or one per agent. The update, batched: the
    // online networks on s (differentiated) and s', the targets on s' (N x B rows each); unbatched
    // (an agent at a time): the paired pass (4B rows), or the online network on [s; s'] (ws_pair_,
    // 2B rows) beside the target on s' (ws_target_, B rows).
    std::vector<QNetwork::Workspace> ws_act_;
    QNetwork::Workspace ws_pair_, ws_next_, ws_target_;
    int paired_forward_max_rows_ = kPairedForwardMaxRows;
    // The captured sequences (CUDA Graphs on the GPU): a collection step alone (until the replay
    // is ready), a whole iteration, and an update alone (bench).
    ops::OpSequence collect_sequence_, iteration_sequence_, update_sequence_;
};

/// Agent i of a DqnEngine as a Trainer (EngineAgent). Its checkpoint tensors and counters are the
/// same whatever the engine's size: a checkpoint resumes alone, or inside an engine whose agents
/// all continue from one iteration (DqnEngine::restore_counters).
class DqnAgent final : public EngineAgent<DqnEngine> {
public:
    DqnAgent(std::shared_ptr<DqnEngine> engine, int agent);

    long long progress_per_iteration() const noexcept override { return engine_->n_envs(); }
    long long iterations() const noexcept override { return steps_; }
    long long env_steps() const noexcept override { return steps_ * engine_->n_envs(); }
    long long updates() const noexcept override { return engine_->updates(agent_); }
    void iterate() override;
    LogLine read_log(double seconds) override { return engine_->read_log(agent_, seconds, log_marks_); }
    /// Weights, target, Adam moments, the replay ring, the environments, the guard and the
    /// monitoring accumulators (and the options' state), in a fixed order; counters: steps,
    /// updates, pushed steps (those in the ring since it was (re)filled: DqnEngine::pushed).
    std::vector<StateTensor> state_tensors() override { return engine_->state_tensors(agent_); }
    std::vector<std::int64_t> counter_values() const override { return {steps_, updates(), engine_->pushed(agent_)}; }
    void restore_counter_values(std::span<const std::int64_t> values) override;
    /// An emptied ring: no pushed steps.
    std::vector<std::int64_t> counters_without_replay(std::span<const std::int64_t> values) const override;
    ops::View<float> policy_weights() noexcept override { return engine_->online(agent_); }
    GreedyPolicy& policy() noexcept override { return policy_; }
    io::ReplayDump replay_dump() override { return engine_->replay_dump(agent_); }

    /// Bench of an engine of one (a population is benched as one, bench_population).
    void bench_prepare() override;
    long long bench_collect() override;
    long long bench_update() override;

private:
    DqnGreedyPolicy policy_;
    long long steps_ = 0;
    DqnLogMarks log_marks_;
};

}  // namespace fh::trainers
