/// @file dqn_trainer.hpp
/// @brief The distributional DQN (docs/dqn.md): dueling C51 head blended with an MSE loss on
///        the expected Q, double-DQN targets, n-step returns, uniform replay on the device,
///        epsilon-greedy collection, soft or periodic target updates, Adam with global-norm
///        clipping, and the training guard. Runs on either backend.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "config/profile.hpp"
#include "env/vec_env.hpp"
#include "math/dqn.h"
#include "math/nn.h"
#include "ops/device.hpp"
#include "trainers/adam_state.hpp"
#include "trainers/curiosity_model.hpp"
#include "trainers/q_network.hpp"
#include "trainers/replay_ring.hpp"
#include "trainers/trainer.hpp"

namespace fh::trainers {

/// The counters at the last log line (its rates are per second since).
struct DqnLogMarks {
    long long updates = 0, env_steps = 0;
};

/// A DQN metrics line from one log interval's monitor sums, guard, action histogram and curiosity
/// sums, at `steps` collection steps of n_envs environments and `updates` updates, `seconds` after
/// the line before (`marks`, advanced). The keys every DQN run writes; a head's extras (IQN, HER,
/// attention, an ensemble) are the caller's to append. Throws DivergedError (exit 5) when the guard
/// has skipped training.max_bad_updates updates.
LogLine dqn_log_line(const config::Profile& profile, const dqn::MonitorStats& stats, const nn::GuardState& guard,
                     const std::vector<unsigned long long>& histogram, const dqn::CuriosityStats& curiosity,
                     long long steps, long long updates, int n_envs, double seconds, DqnLogMarks& marks);

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
    std::optional<float> goal_;                   ///< dqn.her_eval_goal, with dqn.her
    ops::Buffer<float> goal_obs_, goal_buffer_;   ///< with a goal: the rows [s | goal features], the goal (1)
};

/// The goal a DQN profile's policy is evaluated with: dqn.her_eval_goal with dqn.her, else none.
std::optional<float> eval_goal(const config::Profile& profile);

/// One iteration = one collection step of every environment and, once the replay holds
/// training.min_replay_size transitions, training.updates_per_iteration gradient updates. The
/// two overlap on the device: collection acts with the online weights of the iteration's start
/// and writes the next replay slot while the first update samples the steps stored before it
/// (dqn::sample_range) and computes its gradient; its Adam step follows both; then the counters
/// advance.
class DqnTrainer final : public Trainer {
public:
    DqnTrainer(ops::Device& ops, const config::Profile& profile, const env::DeviceMarket& market);

    long long progress_per_iteration() const noexcept override { return n_envs_; }
    long long iterations() const noexcept override { return steps_; }
    long long env_steps() const noexcept override { return steps_ * n_envs_; }
    long long updates() const noexcept override { return updates_; }
    void iterate() override;
    LogLine read_log(double seconds) override;
    /// Weights, target, Adam moments, the replay ring, the environments, the guard and the
    /// monitoring accumulators, in a fixed order; counters: steps, updates, pushed steps.
    std::vector<StateTensor> state_tensors() override;
    std::vector<std::int64_t> counter_values() const override { return {steps_, updates_, replay_.pushed_steps()}; }
    void restore_counter_values(std::span<const std::int64_t> values) override;
    ops::View<float> policy_weights() noexcept override { return online_; }
    GreedyPolicy& policy() noexcept override { return policy_; }
    const env::EnvParams& env_params() const noexcept override { return env_params_; }
    io::ReplayDump replay_dump() override { return replay_.dump(ops_, num_actions_); }

    void bench_prepare() override;
    long long bench_collect() override;
    long long bench_update() override;
    long long batch_rows() const noexcept override { return batch_; }

    /// Batches up to this many rows run the online and target networks as one batched pass on
    /// [s; s'] (small products: one launch beats two); larger batches run the online network on
    /// [s; s'] beside the target on s' alone, a quarter fewer forward products. The same values
    /// either way (rows are independent); the GPU's products may differ in their last bits.
    static constexpr int kPairedForwardMaxRows = 512;
    /// Tests: another threshold than kPairedForwardMaxRows (before the first iteration).
    void set_paired_forward_max_rows(int rows);

private:
    void collect();                 // one collection step (epsilon-greedy, env step, push)
    bool ready_to_update() const noexcept;
    void update();                  // one gradient update
    void collect_ops(bool advance = false);  // acting and the environment step into the replay slot (and end_step_ops)
    void curiosity_ops();           // the bonus into the slot just written, one step of its model
    void gradient_ops(bool inject_nan);  // one update's ops up to its Adam step
    void adam_ops(bool end_step);        // one update's Adam step and target update (and end_step_ops)
    void iqn_loss_ops();               // dqn.head = "iqn": fractions, both networks' quantiles, the loss
    void end_step_ops();            // after a collection step: the counters advance
    void after_collect();           // the host's mirror of end_step_ops
    void after_update();
    void upload_counters();
    bool split_forward() const noexcept {
        return batch_ > paired_forward_max_rows_ && net_.iqn_params().quantiles == 0;
    }
    void make_update_workspaces();  // ws_pair_ (and ws_target_) for split_forward()

    ops::Device& ops_;
    config::Profile profile_;
    env::EnvParams env_params_;
    env::VecEnv env_;
    int n_envs_, batch_, num_actions_;
    QNetwork net_;
    DqnGreedyPolicy policy_;
    long long steps_ = 0, updates_ = 0;
    DqnLogMarks log_marks_;

    // The online and the target network's parameters side by side in one buffer (2, P), so that
    // both run in one batched pass; the gradients (P).
    ops::Buffer<float> nets_, grads_;
    ops::View<float> online_, target_;
    AdamState adam_;
    // Workspaces: acting (n_envs rows), the online and target networks on [s; s'] (2 x 2B rows).
    // Above kPairedForwardMaxRows batch rows (split_forward), ws_pair_ holds the online network on
    // [s; s'] (2B rows) and ws_target_ the target on s' (B rows), two forwards side by side.
    QNetwork::Workspace ws_act_, ws_pair_, ws_target_;
    int paired_forward_max_rows_ = kPairedForwardMaxRows;
    ReplayRing replay_;

    // dqn.curiosity: the forward model (n_envs rows per collection step), the step's next-bar
    // features and errors, and the bonus's sums since the last log.
    std::optional<CuriosityModel> curiosity_;
    ops::Buffer<float> cur_next_market_, cur_error_;
    ops::Buffer<dqn::CuriosityStats> cur_stats_;

    // What changes from step to step lives on the device (so the sequences replay unchanged):
    // the agent's constants, its counters, and each update's decisions.
    ops::Buffer<dqn::AgentParams> agent_;
    ops::Buffer<dqn::Counters> counters_;
    ops::Buffer<unsigned> collect_tickets_;  ///< (1) zero between launches: dqn_collect advancing the counters
    ops::Buffer<dqn::UpdateStep> step_;
    // dqn.her: the goal of every transition in the ring (capacity_steps * n_envs, with the ring's
    // rows) and the acting rows [observation | goal features] (n_envs, D + 2).
    ops::Buffer<float> her_goals_, her_obs_;
    // One batch: x = [states; next states] (2B, D; D + 2 with HER); actions, returns, discounts (B).
    ops::Buffer<float> x_, returns_, discounts_;
    ops::Buffer<int> batch_actions_, actions_;
    // The loss's gradient w.r.t. the network outputs (B, K * W), per-row statistics (kSampleStats,
    // B * K), norm partials.
    ops::Buffer<float> d_head_, sample_stats_, norm_partials_;
    // dqn.ensemble_size > 1: the heads' bootstrap masks of the batch (B, K; when ensemble_bootstrap
    // < 1), the ensemble's target actions (B), and the acting network's outputs of the last
    // collection step (for q/ensemble_spread).
    ops::Buffer<float> masks_;
    ops::Buffer<int> target_actions_;
    ops::View<const float> act_outputs_;
    // dqn.head = "iqn": the update's fractions of the rows of [s; s'] (2B, N) and their features.
    ops::Buffer<float> iqn_features_, iqn_taus_;
    // Guard and monitoring.
    ops::Buffer<nn::GuardState> guard_;
    ops::Buffer<dqn::MonitorStats> stats_;
    ops::Buffer<unsigned long long> histogram_;
    // The captured sequences (CUDA Graphs on the GPU): a collection step alone (until the replay
    // is ready), a whole iteration, and an update alone (bench).
    ops::OpSequence collect_sequence_, iteration_sequence_, update_sequence_;
};

/// The network a DQN profile describes, for observations of state_dim floats.
QNetworkConfig network_config(const config::Profile& profile, int state_dim);

/// The replay ring's collection steps (capacity) and the steps it holds before the first update, of a
/// DQN profile (n_envs transitions a step).
struct DqnReplaySteps {
    int capacity = 0;
    long long before_updates = 0;
};
DqnReplaySteps dqn_replay_steps(const config::Profile& profile);

/// The agent's constants the DQN device steps read (cuda/math/dqn.h): seed, epsilon schedule,
/// gamma, the losses' coefficients, the target update, Adam's hyperparameters.
dqn::AgentParams dqn_agent_params(const config::Profile& profile);

}  // namespace fh::trainers
