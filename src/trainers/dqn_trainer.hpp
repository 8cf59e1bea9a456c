/// @file dqn_trainer.hpp
/// @brief The distributional DQN of SPEC section 7: dueling C51 head blended with an MSE loss on
///        the expected Q, double-DQN targets, n-step returns, uniform replay on the device,
///        epsilon-greedy collection, soft or periodic target updates, Adam with global-norm
///        clipping, and the training guard. Runs on either backend through ops::Ops.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "abi/dqn_monitor.h"
#include "abi/nn_guard.h"
#include "config/profile.hpp"
#include "env/vec_env.hpp"
#include "io/replay_dump.hpp"
#include "ops/device.hpp"
#include "trainers/q_network.hpp"
#include "trainers/trainer.hpp"

namespace fh::trainers {

/// One metrics line (SPEC section 8), averaged over the log interval.
struct DqnMetrics {
    long long step = 0;        ///< collection steps
    long long env_steps = 0;   ///< step * n_envs
    long long updates = 0;
    double loss = 0, loss_c51 = 0, loss_mse = 0;
    double q_mean = 0, q_min = 0, q_max = 0, td_abs = 0;
    double grad_norm = 0, grad_norm_max = 0;
    double epsilon = 0;
    long long skipped_updates = 0;
    std::vector<unsigned long long> action_histogram;
    double env_steps_per_s = 0, updates_per_s = 0;
};

struct DqnResult {
    long long steps = 0, env_steps = 0, updates = 0;
    double wall_seconds = 0;
    std::vector<DqnMetrics> log;  ///< one entry per log interval
};

/// Test and diagnosis hooks.
struct DqnHooks {
    /// Replaces the batch loss with NaN at these update numbers (1-based): the guard must skip them.
    std::vector<long long> inject_nan_at_updates;
    /// Called with every metrics line as it is produced.
    std::function<void(const DqnMetrics&)> on_log;
    /// Called after every collection step (and its updates) with the steps taken so far; returning
    /// false ends training there (evaluation, early stopping, checkpoints, interrupts live here).
    std::function<bool(long long steps)> after_step;
};

/// Host-side counters that, with the seed, determine every later random draw (all randomness is
/// Philox of (seed, purpose, stream, counter)).
struct DqnCounters {
    std::int64_t steps = 0, updates = 0, pushed_steps = 0;
};

/// Evaluation: the first action of maximal Q of a QNetwork (no exploration).
class DqnGreedyPolicy final : public GreedyPolicy {
public:
    explicit DqnGreedyPolicy(const QNetworkConfig& config) : net_(config) {}
    std::size_t weights_size() const override { return net_.layout().total(); }
    void act(ops::Device& ops, ops::View<const float> weights, ops::View<int> actions, ops::View<const float> states,
             int n) override;

private:
    QNetwork net_;
    QNetwork::Workspace ws_;  ///< grown to the largest batch seen
    ops::Device* ws_owner_ = nullptr;
};

class DqnTrainer final : public Trainer {
public:
    DqnTrainer(ops::Device& ops, const config::Profile& profile, const env::DeviceMarket& market,
               DqnHooks hooks = {});

    /// The metrics accumulated since the last call (synchronises with the device), then resets
    /// the accumulators. Throws DivergedError (exit 5) when the guard has skipped
    /// training.max_bad_updates updates.
    DqnMetrics read_metrics(long long step);

    /// Trains for run.total_steps environment steps. Throws DivergedError (exit 5) when the
    /// guard has skipped training.max_bad_updates updates.
    DqnResult train();

    /// One collection step of every environment (epsilon-greedy, env step, push to the ring).
    void collect_step();
    /// True once the ring holds training.min_replay_size transitions with their n-step futures.
    bool ready_to_update() const noexcept;
    /// One gradient update.
    void update_step();
    long long steps() const noexcept { return steps_; }
    long long updates() const noexcept override { return updates_; }

    // Trainer: one iteration = one collection step and, once the replay is ready,
    // training.updates_per_iteration updates.
    long long progress_per_iteration() const noexcept override { return n_envs_; }
    long long iterations() const noexcept override { return steps_; }
    long long env_steps() const noexcept override { return steps_ * n_envs_; }
    void iterate() override;
    LogLine read_log(double seconds) override;
    std::vector<std::int64_t> counter_values() const override { return {steps_, updates_, pushed_steps_}; }
    void restore_counter_values(std::span<const std::int64_t> values) override;
    ops::View<float> policy_weights() noexcept override { return online_.view(); }
    GreedyPolicy& policy() noexcept override { return policy_; }
    BenchFigures bench(long long iterations) override;

    /// Every device buffer a resumed run needs (weights, target, Adam moments, the replay ring,
    /// the environments, the guard and monitoring accumulators), in a fixed order.
    std::vector<StateTensor> state_tensors() override;
    DqnCounters counters() const noexcept { return {steps_, updates_, pushed_steps_}; }
    /// Continues from a checkpoint's counters (after its tensors were uploaded).
    void restore_counters(const DqnCounters& c);
    /// The replay memory as a dump (docs/replay-dump.md): an IQL dataset (iql.dataset).
    io::ReplayDump replay_dump() override;
    /// The online weights, for keeping the best ones and restoring them.
    ops::View<float> mutable_online_params() noexcept { return online_.view(); }

    /// Greedy actions (n) of the online network for states (n, state_dim), any n >= 1.
    void greedy_actions(ops::View<int> actions, ops::View<const float> states, int n);

    const QNetwork& network() const noexcept { return net_; }
    ops::View<const float> online_params() const noexcept { return online_.cview(); }
    const env::EnvParams& env_params() const noexcept override { return env_params_; }

private:
    /// read_metrics plus the rates since the last log, `seconds` ago.
    DqnMetrics read_metrics_with_rates(double seconds);
    void collect(long long step);
    void update(long long update_number);
    long long steps_ = 0, updates_ = 0;
    float epsilon_at(long long step) const;

    ops::Device& ops_;
    config::Profile profile_;
    DqnHooks hooks_;
    env::EnvParams env_params_;
    env::VecEnv env_;
    int n_envs_, batch_, num_actions_;
    QNetwork net_;
    DqnGreedyPolicy policy_;
    long long updates_at_log_ = 0, env_steps_at_log_ = 0;

    // Parameters, target copy, gradients and Adam moments: one flat buffer each (same layout).
    ops::Buffer<float> online_, target_, grads_, adam_m_, adam_v_;
    QNetwork::Workspace ws_act_, ws_s_, ws_next_online_, ws_next_target_;

    // Replay ring: capacity_steps collection steps of n_envs transitions.
    int capacity_steps_ = 0;
    long long pushed_steps_ = 0;
    ops::Buffer<float> ring_states_, ring_next_, ring_rewards_;
    ops::Buffer<int> ring_actions_;
    ops::Buffer<std::uint8_t> ring_done_;

    // One batch.
    ops::Buffer<float> b_states_, b_next_, b_returns_, b_discounts_;
    ops::Buffer<int> b_actions_;
    ops::Buffer<float> loss_c51_, loss_mse_, td_, d_c51_, d_mse_, batch_losses_, grad_norm_, norm_scratch_;

    // Guard, monitoring, exploration.
    ops::Buffer<int> gate_, actions_;
    ops::Buffer<nn::GuardState> guard_;
    ops::Buffer<dqn::MonitorStats> stats_;
    ops::Buffer<unsigned long long> histogram_;
};

/// The network a DQN profile describes, for observations of state_dim floats.
QNetworkConfig network_config(const config::Profile& profile, int state_dim);

/// One metrics.jsonl line (docs/dqn.md).
io::json::Value metrics_value(const DqnMetrics& m);


}  // namespace fh::trainers
