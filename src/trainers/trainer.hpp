/// @file trainer.hpp
/// @brief What the pipeline (run directory, evaluation, early stopping, checkpoints, resume,
///        bench) needs from a trainer, so DQN, PPO and IQL share one pipeline. A trainer advances
///        in iterations (DQN: one collection step and its updates; PPO: one rollout and its
///        epochs; IQL: one gradient update); run.total_steps, log_interval, eval_interval and
///        checkpoint_interval count the trainer's progress unit (environment steps for DQN and
///        PPO, gradient updates for IQL and the supervised forecaster).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "abi/nn_guard.h"
#include "config/profile.hpp"
#include "env/vec_env.hpp"
#include "io/json.hpp"
#include "io/replay_dump.hpp"
#include "device/device.hpp"
#include "trainers/adam_state.hpp"
#include "trainers/state_tensor.hpp"

namespace fh::trainers {

/// One metrics line: the JSON object of metrics.jsonl and the human-readable log line.
struct LogLine {
    io::json::Value json;  ///< one metrics.jsonl object
    std::string text;
    double loss = 0;  ///< shown on the progress line
    double env_steps_per_s = 0, updates_per_s = 0;
};

/// The deterministic policy of a trainer's network (evaluation): actions from states given the
/// weights. Built from the profile alone, so `eval --checkpoint` needs only the stored weights.
class GreedyPolicy {
public:
    virtual ~GreedyPolicy() = default;
    /// Floats of the weights (the checkpoint's params/online).
    virtual std::size_t weights_size() const = 0;
    /// actions (n) for states (n, state_dim); any n >= 1.
    virtual void act(ops::Device& ops, ops::View<const float> weights, ops::View<int> actions,
                     ops::View<const float> states, int n) = 0;
    /// Whether act, called again with the same n, weights and buffers, issues the same ops with
    /// the same arguments and allocates nothing (no per-call host value): a backtest may then
    /// capture its steps (backtest::backtest's capture_steps).
    virtual bool capture_safe() const noexcept { return false; }
};

class Trainer {
public:
    virtual ~Trainer() = default;

    /// Progress units one iteration advances (n_envs for DQN, n_envs * rollout steps for PPO, 1
    /// for IQL).
    virtual long long progress_per_iteration() const noexcept = 0;
    virtual long long iterations() const noexcept = 0;
    long long progress() const noexcept { return iterations() * progress_per_iteration(); }
    /// What progress counts, as a JSON key: "env_steps" (DQN, PPO) or "updates" (IQL).
    virtual const char* progress_unit() const noexcept { return "env_steps"; }
    virtual long long env_steps() const noexcept = 0;
    virtual long long updates() const noexcept = 0;

    /// One iteration (see the file comment). Never synchronises with the host, except PPO's: it
    /// waits for its rollout's count of truncated episodes (one event; docs/ppo.md).
    virtual void iterate() = 0;
    /// Issues the part of the next iteration that needs no wait for the device, which iterate()
    /// (or bench_collect) then completes, so that a population's worker can issue every agent's
    /// before it waits for any (PPO: the rollout's steps). Nothing else may run in between.
    virtual void prepare_iteration() {}
    /// The metrics accumulated since the last call (synchronises), `seconds` after it. Throws
    /// DivergedError (exit 5) when the guard has skipped training.max_bad_updates updates.
    virtual LogLine read_log(double seconds) = 0;

    /// Every device buffer a resumed run needs, in a fixed order, and the host counters that
    /// (with the seed) determine every later random draw.
    virtual std::vector<StateTensor> state_tensors() = 0;
    virtual std::vector<std::int64_t> counter_values() const = 0;
    /// Continues from a checkpoint's counters (after its tensors were uploaded).
    virtual void restore_counter_values(std::span<const std::int64_t> values) = 0;
    /// The counters of the same state with its replay memory emptied (the state tensors that
    /// replay_memory() names): what a checkpoint without them stores (checkpoint.keep_replay =
    /// false), from which a resume refills the replay. The counters unchanged by default (a
    /// trainer without replay memory).
    virtual std::vector<std::int64_t> counters_without_replay(std::span<const std::int64_t> values) const {
        return {values.begin(), values.end()};
    }

    /// The weights the checkpoint stores as params/online and evaluation acts with.
    virtual ops::View<float> policy_weights() noexcept = 0;
    virtual GreedyPolicy& policy() noexcept = 0;
    virtual const env::EnvParams& env_params() const noexcept = 0;

    /// The replay memory as an IQL dataset (docs/replay-dump.md), for trainers that keep one
    /// (DQN; replay_buffer.save_dump is refused for the others).
    virtual io::ReplayDump replay_dump() { throw std::logic_error("this trainer keeps no replay memory"); }

    // ---- bench (src/run/bench.cpp times the phases alone, then whole iterations) ----------
    /// Brings the trainer to where training's steady state begins (DQN: the replay holds
    /// min_replay_size transitions); a no-op by default.
    virtual void bench_prepare() {}
    /// One collection phase alone (DQN: a collection step; PPO: a rollout), returning the
    /// environment steps it took; 0 when the trainer collects nothing while training (IQL).
    virtual long long bench_collect() { return 0; }
    /// One update phase alone (DQN and IQL: one gradient update; PPO: the epochs of a rollout),
    /// returning the gradient updates it took.
    virtual long long bench_update() = 0;
    /// Rows of one gradient update (PPO: a minibatch).
    virtual long long batch_rows() const noexcept = 0;
    /// An offline trainer's dataset collection rate (IQL's behaviour dataset), env steps/s; 0 otherwise.
    virtual double dataset_collection_env_steps_per_s() const noexcept { return 0; }

    /// The loss on the validation split of a trainer that has one (the supervised forecaster:
    /// early_stopping.metric = "val_loss"); synchronises. nullopt for the others.
    virtual std::optional<double> validation_loss() { return std::nullopt; }

    /// A population search (run.search, src/run/search.hpp): from the next iteration on, this
    /// agent trains with `profile`'s per-agent keys (run::agent_keys(); run.seed unchanged), every
    /// other key as before. Throws UsageError for a trainer that cannot change them while it trains.
    virtual void set_agent_keys(const config::Profile& profile);

    /// Tests: the first loss the trainer gives the guard becomes NaN at these update numbers
    /// (1-based), the same way in every trainer, so the guard's skip and give-up can be tested.
    void inject_nan_at_updates(std::vector<long long> updates) { nan_updates_ = std::move(updates); }

    /// Greedy actions of the current weights: policy().act(policy_weights()).
    void act(ops::Device& ops, ops::View<int> actions, ops::View<const float> states, int n) {
        policy().act(ops, policy_weights(), actions, states, n);
    }

protected:
    /// True when update `update` is one inject_nan_at_updates named.
    bool nan_injected(long long update) const noexcept;

private:
    std::vector<long long> nan_updates_;
};

/// What the offline trainers (IQL, supervised) share: they advance in gradient updates, one per
/// iteration, and sum each update's statistics into a device accumulator that the log reads.
class UpdateCountedTrainer : public Trainer {
public:
    long long progress_per_iteration() const noexcept override { return 1; }
    const char* progress_unit() const noexcept override { return "updates"; }
    long long iterations() const noexcept override { return updates_; }
    long long updates() const noexcept override { return updates_; }
    std::vector<std::int64_t> counter_values() const override { return {updates_}; }
    void restore_counter_values(std::span<const std::int64_t> values) override;
    long long bench_update() override {
        iterate();
        return 1;
    }

protected:
    /// Sets the optimizer's step count to `steps` (resume).
    virtual void restore_optimizer_steps(long long steps) = 0;
    /// A resumed trainer at `updates`: the update count of the last metrics line before it, from
    /// which the next line's averages count (the checkpoint's accumulators hold the sums since
    /// that line when the run was interrupted between two). Default: `updates`.
    virtual long long updates_at_last_log(long long updates) { return updates; }

    /// What an offline trainer keeps beside its networks: this update's statistics and their
    /// sums over the log interval (`stats` floats each; the guard reads the first ones, its
    /// losses, then the gradient norm), the global norm's scratch, the guard's gate and state.
    struct UpdateMonitor {
        UpdateMonitor() = default;
        UpdateMonitor(ops::Device& ops, int stats);
        /// Declares what the constructor allocates.
        static void plan(MemoryPlan& plan, int stats);
        ops::Buffer<float> current, accum, norm_scratch;
        ops::Buffer<int> gate;
        ops::Buffer<nn::GuardState> guard;
        /// The checkpoint tensors guard/state and monitor/accumulators.
        std::vector<StateTensor> state_tensors();
    };

    /// One log interval: the accumulated statistics (then zeroed on the device), the guard, the
    /// updates since the last read (at least 1: a divisor) and their rate.
    struct Interval {
        std::vector<float> sums;
        nn::GuardState guard;
        double updates, updates_per_s;
    };
    /// updates_at_last_log for a trainer logging every `log_interval` updates into the
    /// `accumulators`: the last multiple of it when they hold sums, else `updates` (the line at the
    /// end of a run, or none pending). Synchronises (once, at a resume).
    static long long last_log_point(ops::Device& ops, ops::View<const float> accumulators, long long log_interval,
                                    long long updates);

    /// Synchronises: once per log interval.
    Interval read_interval(ops::Device& ops, ops::View<float> accumulators, ops::View<const nn::GuardState> guard,
                           double seconds);

    long long updates_ = 0, updates_at_log_ = 0;
};

/// What the offline trainers of one network (supervised, dt) share: one flat buffer of weights
/// (the parameters, then the calibration their policy reads), its gradients, one Adam, the
/// monitor (statistic kLoss: the loss the guard reads; kGradNorm: the gradient norm) and the
/// captured update, whose number comes from Adam's step counter in device memory.
class NetworkTrainer : public UpdateCountedTrainer {
public:
    void iterate() override;
    LogLine read_log(double seconds) override;
    std::vector<StateTensor> state_tensors() override;
    ops::View<float> policy_weights() noexcept override { return weights_.view(); }
    const env::EnvParams& env_params() const noexcept override { return env_params_; }
    long long batch_rows() const noexcept override { return batch_; }

protected:
    static constexpr int kLoss = 0, kGradNorm = 1;
    /// `guard_loss` names the loss in the divergence message (throw_if_diverged), `advice` ends it.
    NetworkTrainer(ops::Device& ops, const config::Profile& profile, int market_dim, int batch, const char* guard_loss,
                   const char* advice);

    /// Declares trainer E's weights (`params` floats, then `calibration`), gradients and Adam.
    template <class E>
    static void plan_network(MemoryPlan& plan, std::uint64_t params, std::uint64_t calibration) {
        plan.add<E, float>("weights", {&E::weights_}, params + calibration, 0.0f);
        plan.add<E, float>("gradients", {&E::grads_}, params, 0.0f);
        AdamState::plan(plan, "", params);
    }
    /// Once the plan is allocated: the parameters of `layout` initialised from run.seed, the
    /// calibration after them, Adam, and the monitor of `stats` statistics.
    void init_network(const nn::ParamLayout& layout, const std::vector<float>& calibration, int stats);

    /// The trainer's ops of update `update` before the guard: its batch, forward, backward, the
    /// statistics of the monitor's current row but kGradNorm.
    virtual void update_ops(ops::CounterValue update) = 0;
    /// The learning rate Adam reads from device memory, or none (training.learning_rate).
    virtual ops::View<const float> learning_rate() const { return {}; }
    /// The trainer's part of a metrics line from the interval's means of the statistics: the count
    /// after "updates", the keys after the loss and their text before the gradient norm.
    struct LogValues {
        io::json::Member count;
        io::json::Object json;
        std::string text;
    };
    virtual LogValues log_values(const std::vector<double>& mean) const = 0;

    ops::View<float> params() noexcept { return weights_.view().subview(0, param_floats_); }

    ops::Device& ops_;
    config::Profile profile_;
    env::EnvParams env_params_;
    int batch_;
    std::size_t param_floats_ = 0;
    ops::Buffer<float> weights_, grads_;  ///< weights_: parameters, then the calibration
    AdamState adam_;
    UpdateMonitor monitor_;

private:
    void restore_optimizer_steps(long long steps) override { adam_.restore_steps(ops_, steps); }
    long long updates_at_last_log(long long updates) override {
        return last_log_point(ops_, monitor_.accum.cview(), profile_.run.log_interval, updates);
    }

    const char *guard_loss_, *advice_;
    ops::OpSequence update_sequence_;
};

/// Throws DivergedError (exit 5) once the guard has skipped `max_bad_updates` updates, naming
/// the first bad quantity and its update, then `advice`. `losses` names the losses the trainer
/// passes to the guard, in order; the gradient norm comes after them (nn::GuardState).
void throw_if_diverged(const nn::GuardState& guard, long long max_bad_updates, std::span<const char* const> losses,
                       const std::string& advice);

/// Called by training_loop: `log(seconds since the last log)` at every log point, and
/// `after_iteration(iterations)` after each iteration (returning false ends the loop there).
struct LoopCallbacks {
    std::function<void(double seconds)> log;
    std::function<bool(long long iterations)> after_iteration;
};

/// training_loop one iteration at a time, so that several trainers can advance side by side (a
/// population): step() does one iteration, its log point and after_iteration, and returns
/// whether the loop goes on. A loop that is done already (a resumed trainer at its budget) does
/// nothing; done() says so before the first step.
class TrainingLoop {
public:
    TrainingLoop(Trainer& trainer, long long total, long long log_interval, LoopCallbacks callbacks);
    bool done() const noexcept { return done_; }
    /// Trainer::prepare_iteration for the next step(), unless the loop is over.
    void prepare() {
        if (!done_) trainer_.prepare_iteration();
    }
    bool step();

private:
    Trainer& trainer_;
    LoopCallbacks callbacks_;
    long long total_iterations_, log_every_;
    std::chrono::steady_clock::time_point t_log_;
    bool done_ = false;
};

/// Iterates until the trainer's progress reaches total (at least one iteration), logging every
/// max(1, log_interval / progress_per_iteration) iterations and after the last one.
void training_loop(Trainer& trainer, long long total, long long log_interval, const LoopCallbacks& callbacks);

/// The trainer run.trainer names, on the training split of `market` (these three: lookups in the
/// table of trainers, registry.hpp).
std::unique_ptr<Trainer> make_trainer(ops::Device& ops, const config::Profile& profile,
                                      const env::DeviceMarket& market);

/// The layout of run.trainer's parameters in this version ("dqn/2", "ppo/1", "iql/1"): stored in
/// checkpoints, so that one written by a version with another layout is refused by name.
std::string parameter_layout(const config::Profile& profile);

/// The greedy policy of run.trainer's network for observations of state_dim floats.
std::unique_ptr<GreedyPolicy> make_greedy_policy(const config::Profile& profile, int state_dim);

}  // namespace fh::trainers
