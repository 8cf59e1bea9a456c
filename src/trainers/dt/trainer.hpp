/// @file dt/trainer.hpp
/// @brief The Decision Transformer, offline (docs/dt.md): the offline dataset of IQL (behaviour
///        collection or a DQN replay dump) rebuilt into episodes in order, each step labelled with
///        its return-to-go token (the mean reward per step over the rest of its episode, over the
///        dataset's spread); a causal transformer over (return-to-go, state, action) tokens
///        trained by cross-entropy on the actions of windows of K timesteps; acting conditions on
///        a target return token, one timestep per call, with a KV cache. One iteration = one
///        gradient update; no host synchronisation inside.
#pragma once

#include <cstdint>
#include <vector>

#include "config/profile.hpp"
#include "env/vec_env.hpp"
#include "io/replay_dump.hpp"
#include "device/device.hpp"
#include "abi/dt_train.h"
#include "trainers/dt/network.hpp"
#include "trainers/memory_plan.hpp"
#include "trainers/trainer.hpp"

namespace fh::trainers {

/// The dataset's transitions as episodes in order (host): step n's state, action, reward and the
/// first step of its episode. Each environment's column of the ring is read oldest first and cut
/// after every done flag; its steps after the last done form an unfinished episode.
struct DtEpisodes {
    int state_dim = 0;
    std::vector<float> states;
    std::vector<int> actions, episode_start;
    std::vector<double> rewards;
    /// rate[n]: the mean reward per step from step n to its episode's last step in the data.
    std::vector<double> rate;
    /// Mean reward per step of every finished episode (ended by a done flag).
    std::vector<double> episode_rates;
    long long steps() const noexcept { return static_cast<long long>(actions.size()); }
};
DtEpisodes dt_episodes(const io::ReplayDump& dump);

/// What fixes the return-to-go tokens: scale = the standard deviation of the rates (1 when it is
/// 0), target = the quantile q of the finished episodes' rates (of all steps' rates when no
/// episode finished), linearly interpolated.
struct DtCalibration {
    double scale = 1, target_rate = 0;
    float target_token() const noexcept { return static_cast<float>(target_rate / scale); }
};
DtCalibration dt_calibration(const DtEpisodes& episodes, double target_quantile);

/// Evaluation: the network acting with its KV cache; the weights are the parameters followed by
/// the calibration (dt::kCalibrationFloats). The histories follow the states: one starts over
/// where an observation's time-left feature is 1, and a new workspace (another device or number
/// of environments) starts them all empty.
class DtPolicy final : public GreedyPolicy {
public:
    explicit DtPolicy(const DtShape& shape) : net_(shape) {}
    std::size_t weights_size() const override { return net_.layout().total() + dt::kCalibrationFloats; }
    void act(ops::Device& ops, ops::View<const float> weights, ops::View<int> actions, ops::View<const float> states,
             int n) override;
    const DtNetwork& network() const noexcept { return net_; }

private:
    DtNetwork net_;
    DtNetwork::ActWorkspace ws_;
    ops::Device* owner_ = nullptr;
};

class DtTrainer final : public NetworkTrainer {
public:
    /// What the trainer allocates (TrainerKind::plan; one agent); the constructor allocates from it.
    static MemoryPlan plan(const config::Profile& profile, int agents, const PlanInputs& in);
    /// Builds the dataset (build_offline_dataset), its episodes and calibration, the network.
    DtTrainer(ops::Device& ops, const config::Profile& profile, const env::DeviceMarket& market);

    long long env_steps() const noexcept override { return dataset_transitions_; }
    GreedyPolicy& policy() noexcept override { return policy_; }
    double dataset_collection_env_steps_per_s() const noexcept override;

    const DtNetwork& network() const noexcept { return policy_.network(); }
    const DtCalibration& calibration() const noexcept { return calibration_; }
    long long dataset_steps() const noexcept { return dataset_steps_; }

private:
    void update_ops(ops::CounterValue update) override;
    ops::View<const float> learning_rate() const override { return lr_.cview(); }
    LogValues log_values(const std::vector<double>& mean) const override;

    DtShape shape_;
    DtPolicy policy_;
    long long dataset_transitions_ = 0, dataset_steps_ = 0;
    double collection_seconds_ = 0;
    DtCalibration calibration_;

    // The dataset's episodes in order, on the device.
    ops::Buffer<float> ds_states_, ds_rtg_;
    ops::Buffer<int> ds_actions_, ds_episode_start_;

    ops::Buffer<float> lr_;
    DtNetwork::Workspace ws_;
    ops::Buffer<float> b_states_, b_rtg_, loss_, correct_, d_logits_;
    ops::Buffer<int> b_actions_, b_lengths_;
};

}  // namespace fh::trainers
