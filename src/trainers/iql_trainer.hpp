/// @file iql_trainer.hpp
/// @brief Implicit Q-learning, offline: a fixed dataset of
///        transitions (collected on the training split by the documented behaviour policy, or a
///        DQN run's replay dump), twin Q networks with target copies trained towards
///        r + gamma * (1 - terminated) * V(s'), V by expectile regression on the target twin
///        minimum, and a softmax policy extracted by advantage-weighted regression. One
///        iteration = one gradient update of all four networks; no host synchronisation inside.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "math/iql.h"
#include "abi/nn_guard.h"
#include "config/profile.hpp"
#include "env/vec_env.hpp"
#include "nn/mlp.hpp"
#include "nn/param_layout.hpp"
#include "ops/device.hpp"
#include "trainers/softmax_policy.hpp"
#include "trainers/adam_state.hpp"
#include "trainers/replay_ring.hpp"
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

/// One log line of an IQL run from its interval's statistics sums (iql_stats order), guard and
/// counts (IqlTrainer's and a batched population's agents'); throws DivergedError as read_log.
LogLine iql_log_line(const config::Profile& profile, const std::vector<float>& sums, const nn::GuardState& guard,
                     double updates_in_interval, double updates_per_s, long long updates, long long dataset_transitions);

/// The behaviour policy that collects the dataset (docs/iql.md) in environments of `params`.
iql::BehaviourParams behaviour_params(const env::EnvParams& params, std::uint64_t seed);


class IqlTrainer final : public UpdateCountedTrainer {
public:
    /// Builds the dataset first: collects it with the behaviour policy, or reads iql.dataset.
    IqlTrainer(ops::Device& ops, const config::Profile& profile, const env::DeviceMarket& market);

    long long env_steps() const noexcept override { return dataset_transitions_; }
    void iterate() override;
    LogLine read_log(double seconds) override;
    std::vector<StateTensor> state_tensors() override;
    ops::View<float> policy_weights() noexcept override { return params_.view(); }
    GreedyPolicy& policy() noexcept override { return policy_; }
    const env::EnvParams& env_params() const noexcept override { return env_params_; }
    long long batch_rows() const noexcept override { return batch_; }
    double dataset_collection_env_steps_per_s() const noexcept override;

    /// Transitions in the dataset, and where they came from ("behaviour" or the dump's path).
    long long dataset_transitions() const noexcept { return dataset_transitions_; }
    const IqlNetworks& networks() const noexcept { return net_; }

private:
    /// One update's ops, issued as one captured sequence (update_sequence_) or, with a NaN
    /// injected (tests), one by one.
    void update_ops(bool inject_nan);
    void restore_optimizer_steps(long long steps) override { adam_.restore_steps(ops_, steps); }
    long long updates_at_last_log(long long updates) override {
        return last_log_point(ops_, monitor_, profile_.run.log_interval, updates);
    }

    ops::Device& ops_;
    config::Profile profile_;
    env::EnvParams env_params_;
    int num_actions_, state_dim_, batch_;
    IqlNetworks net_;
    SoftmaxGreedyPolicy policy_;

    // The dataset: a ring of capacity_steps x ds_envs_ transitions (the replay layout, sampled
    // with n = 1 by the n-step sampler).
    ReplayRing dataset_;
    long long dataset_transitions_ = 0;
    double collection_seconds_ = 0;

    ops::Buffer<float> params_, target_, grads_;
    AdamState adam_;
    /// q2's parameters are q1's shifted by this many floats (the twins are registered one after
    /// the other), so both run as one batched forward (online pair, target pair).
    std::size_t twin_stride_ = 0;
    nn::Mlp::Workspace ws_q_pair_, ws_q_target_pair_, ws_v_, ws_policy_;

    // One batch.
    ReplayBatch batch_buf_;  ///< returns = rewards and discounts = gamma (1 - terminated) at n = 1
    ops::Buffer<float> loss_v_, loss_q_, loss_pi_, awr_weights_, d_v_, d_q1_, d_q2_, d_logits_;

    // Guard, statistics, scratch.
    UpdateMonitor monitor_;
    ops::OpSequence update_sequence_;
};

}  // namespace fh::trainers
