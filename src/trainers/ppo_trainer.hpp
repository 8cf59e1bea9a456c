/// @file ppo_trainer.hpp
/// @brief PPO: an actor-critic over the environment's actions,
///        rollouts of experience.gpu_timesteps_per_episode steps of every environment, GAE(lambda),
///        advantage normalisation, a clipped surrogate with an (optionally clipped) value loss and
///        an entropy bonus over several epochs of shuffled minibatches, global-norm clipping, a
///        learning-rate schedule, the action-diversity penalty and an optional curiosity bonus.
///        Runs on either backend through ops::Device; inside an iteration the host waits once, for
///        the count of the rollout's truncated episodes (prepare_iteration issues the rollout ahead).
#pragma once

#include <cstdint>
#include <iterator>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "abi/nn_guard.h"
#include "config/profile.hpp"
#include "math/ppo.h"
#include "env/vec_env.hpp"
#include "nn/mlp.hpp"
#include "nn/param_layout.hpp"
#include "ops/device.hpp"
#include "ops/host_read.hpp"
#include "trainers/softmax_policy.hpp"
#include "trainers/adam_state.hpp"
#include "trainers/curiosity_model.hpp"
#include "trainers/trainer.hpp"

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
inline constexpr int kAccReward = 6, kAccPenalty = 7, kAccCuriosity = 8, kAccValueMean = 9, kAccReturn = 10;  // per rollout
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

/// The log line of a PPO run (PpoTrainer's, and a batched population's agents'): the monitor's
/// sums `acc` (ppo_monitor::kAccSize) over the interval since `marks`, the guard, the action
/// histogram, the counters now; marks becomes now. Throws TrainingDiverged as the guard says.
LogLine ppo_log_line(const config::Profile& profile, std::span<const float> acc, const nn::GuardState& guard,
                     std::span<const unsigned long long> histogram, const PpoLogMarks& now, int n_envs, double seconds,
                     PpoLogMarks& marks);
/// The rollouts of a run (total_steps over a rollout's env steps, at least 1) and the learning
/// rate of rollout `rollouts` (ppo.lr_schedule: constant, or linear from lr down to lr / R).
double ppo_total_rollouts(const config::Profile& profile);
float ppo_scheduled_learning_rate(const config::Profile& profile, long long rollouts);

class PpoTrainer final : public Trainer {
public:
    PpoTrainer(ops::Device& ops, const config::Profile& profile, const env::DeviceMarket& market);

    long long progress_per_iteration() const noexcept override { return static_cast<long long>(n_envs_) * horizon_; }
    long long iterations() const noexcept override { return rollouts_; }
    long long env_steps() const noexcept override { return steps_ * n_envs_; }
    long long updates() const noexcept override { return updates_; }
    /// One rollout of every environment, then ppo.epochs x ppo.minibatches updates.
    void iterate() override;
    /// Issues the rollout's captured steps and the read of its truncated episodes' count.
    void prepare_iteration() override;
    LogLine read_log(double seconds) override;
    std::vector<StateTensor> state_tensors() override;
    std::vector<std::int64_t> counter_values() const override { return {rollouts_, steps_, updates_, curiosity_ ? curiosity_->steps() : 0}; }
    void restore_counter_values(std::span<const std::int64_t> values) override;
    ops::View<float> policy_weights() noexcept override { return params_.view(); }
    GreedyPolicy& policy() noexcept override { return policy_; }
    const env::EnvParams& env_params() const noexcept override { return env_params_; }
    long long bench_collect() override;
    long long bench_update() override;
    long long batch_rows() const noexcept override { return batch_; }

private:
    /// The two phases of an iteration, each one captured sequence (ops::OpSequence): their step,
    /// epoch and update numbers derive from the rollout count in device memory (rollouts_dev_),
    /// which the update phase advances last. The host's counters follow after each phase.
    void collect_rollout();
    void update_from_rollout();
    /// The ops of each phase; inject_nan (tests): the NaN injections of this iteration's updates.
    /// A rollout is two captured sequences: its T steps, then GAE and statistics; between them
    /// the critic values the truncated episodes' terminal observations (their count read by the
    /// host). issue_rollout() issues the steps and the count's read (prepare_iteration may do it
    /// ahead of collect_rollout).
    void issue_rollout();
    void rollout_ops();
    void bootstrap_truncated();
    void advantage_ops();
    void update_ops(bool inject_nan);

public:

    const ActorCritic& network() const noexcept { return net_; }
    /// Tests: replace the policy loss with NaN at these update numbers (1-based); the guard must
    /// skip them.
    /// The learning rate of the next update (the schedule).
    float learning_rate() const noexcept;

    /// Rollout buffers (T rows of n_envs), for tests.
    ops::View<const float> rollout_rewards() const noexcept { return r_rewards_.cview(); }
    ops::View<const float> rollout_advantages() const noexcept { return r_adv_.cview(); }
    ops::View<const float> rollout_values() const noexcept { return r_values_.cview(); }
    /// V of the observation after each step (terminal where the episode was truncated); rows of
    /// terminated steps hold V(s_{t+1}) of the next episode, which GAE never reads.
    ops::View<const float> rollout_next_values() const noexcept { return r_next_values_.cview(); }
    ops::View<const int> rollout_actions() const noexcept { return r_actions_.cview(); }
    ops::View<const std::uint8_t> rollout_done() const noexcept { return r_done_.cview(); }

private:
    ops::CounterValue collection_step(int t) const;
    void sample_actions(int t);
    void rollout_step(int t);
    void minibatch_update(int epoch, int minibatch, bool inject_nan);
    void curiosity_step(int t);
    long long updates_per_rollout() const noexcept;
    double total_rollouts() const noexcept;

    ops::Device& ops_;
    config::Profile profile_;
    env::EnvParams env_params_;
    env::VecEnv env_;
    int n_envs_, horizon_, num_actions_, state_dim_, batch_, window_;
    ActorCritic net_;
    SoftmaxGreedyPolicy policy_;
    std::optional<CuriosityModel> curiosity_;  ///< ppo.curiosity: the forward model (n_envs rows per step)
    long long rollouts_ = 0, steps_ = 0, updates_ = 0;
    PpoLogMarks log_marks_;

    ops::Buffer<float> params_, grads_;
    AdamState adam_;
    nn::Mlp::Workspace ws_actor_step_, ws_critic_step_, ws_actor_mb_, ws_critic_mb_;

    // The rollout: (T, n) rows, row t * n + e.
    ops::Buffer<float> r_states_, r_logp_, r_values_, r_next_values_, r_rewards_, r_adv_, r_returns_, r_penalty_,
        r_curiosity_;
    ops::Buffer<int> r_actions_;
    ops::Buffer<std::uint8_t> r_done_;
    // The rollout's truncated episodes (ops::ppo_collect_truncated): rollout row, bar and
    // portfolio features of each, up to one per rollout row; their count; their observations
    // rebuilt for the critic, n rows at a time.
    ops::Buffer<int> trunc_rows_, trunc_bars_, trunc_count_;
    ops::Buffer<float> trunc_portfolio_, trunc_states_;
    ops::HostRead<int> trunc_read_;
    bool rollout_issued_ = false;  ///< issue_rollout ran; collect_rollout completes the rollout

    // Diversity windows: each environment's last ppo.diversity_window actions and their counts.
    ops::Buffer<int> div_window_, div_counts_;

    // One minibatch.
    ops::Buffer<float> mb_states_, mb_old_logp_, mb_adv_, mb_returns_, mb_old_values_, mb_stats_, mb_d_logits_,
        mb_d_values_;
    ops::Buffer<int> mb_actions_;

    // Guard, statistics, scratch.
    ops::Buffer<float> current_, norm_scratch_, normalize_scratch_, accum_;
    ops::Buffer<int> gate_;
    ops::Buffer<nn::GuardState> guard_;
    ops::Buffer<unsigned long long> histogram_;

    // Device-side counters of captured phases: rollouts done (= rollouts_ between iterations) and
    // the rollout's learning rate.
    ops::Buffer<long long> rollouts_dev_;
    ops::Buffer<float> lr_dev_;
    ops::OpSequence rollout_sequence_, advantage_sequence_, update_sequence_;
};

}  // namespace fh::trainers
