/// @file supervised/trainer.hpp
/// @brief The supervised forecaster baseline (docs/supervised.md): an MLP on a bar's market
///        features predicts the next supervised.horizon bars' log return (regression) or its
///        direction (classification), trained on uniformly sampled bars of the training split,
///        with its loss on the validation split for early stopping (early_stopping.metric =
///        "val_loss"); a signal adapter turns each forecast into one of the environment's actions
///        (a target position level and an order type), so the backtest evaluator, the run
///        directory, metrics and report are those of the RL trainers. One iteration = one
///        gradient update; no host synchronisation inside.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/profile.hpp"
#include "data/market_data.hpp"
#include "env/vec_env.hpp"
#include "math/supervised.h"
#include "nn/mlp.hpp"
#include "nn/param_layout.hpp"
#include "abi/supervised_forecast.h"
#include "device/device.hpp"
#include "trainers/memory_plan.hpp"
#include "trainers/trainer.hpp"

namespace fh::trainers {

/// Column of core42's rv_32 (docs/features.md), the adapter's volatility feature.
constexpr int kSupervisedVolatilityFeature = 10;

/// The forecaster: market features (market_dim) -> hidden layers (ReLU) -> one output.
struct SupervisedNetwork {
    nn::ParamLayout layout;
    nn::Mlp net;
    SupervisedNetwork(const config::Profile& profile, int market_dim);
};

/// The adapter's settings from the profile, for observations of market_dim + portfolio features.
supervised::SignalParams signal_params(const config::Profile& profile, int market_dim);

/// The training samples of one split: the bars t whose label ln(close[t + horizon] / close[t])
/// lies inside the split and t's segment (t a valid episode start, t + horizon < its end), and
/// those log returns. Only bars t..t + horizon of the split are read for sample t.
struct SupervisedSamples {
    std::vector<int> bars;
    std::vector<double> returns;
};
SupervisedSamples supervised_samples(const std::vector<double>& close, const env::EpisodeStarts& starts, int horizon);

/// The labels the network is trained on: return: r / label_scale; direction: 1 (r > 0),
/// 0 (r < 0), 0.5 (r = 0).
std::vector<float> supervised_labels(const std::vector<double>& returns, int target, double label_scale);

/// Evaluation: the forecaster on the market columns of each state, then the signal adapter. The
/// weights are the network's parameters followed by the calibration (kCalibrationFloats).
class SupervisedSignalPolicy final : public GreedyPolicy {
public:
    SupervisedSignalPolicy(nn::Mlp net, std::size_t param_floats, supervised::SignalParams params)
        : net_(std::move(net)), param_floats_(param_floats), params_(params) {}
    std::size_t weights_size() const override { return param_floats_ + supervised::kCalibrationFloats; }
    void act(ops::Device& ops, ops::View<const float> weights, ops::View<int> actions, ops::View<const float> states,
             int n) override;

private:
    nn::Mlp net_;
    std::size_t param_floats_;
    supervised::SignalParams params_;
    nn::Mlp::Workspace ws_;
    ops::Buffer<float> x_;
    ops::Device* owner_ = nullptr;
};

class SupervisedTrainer final : public NetworkTrainer {
public:
    /// Builds the samples and labels of the training and validation splits (DataError, exit 3,
    /// when the training split has no bar with `horizon` bars after it).
    SupervisedTrainer(ops::Device& ops, const config::Profile& profile, const env::DeviceMarket& market);
    /// What the trainer allocates (TrainerKind::plan; one agent); the constructor allocates from it.
    static MemoryPlan plan(const config::Profile& profile, int agents, const PlanInputs& in);
    /// Its rule that needs the data (TrainerKind::check_data), checked before anything is allocated:
    /// DataError (exit 3) when the training split has no sample (a bar with supervised.horizon bars
    /// after it inside its segment).
    static void check_data(const config::Profile& profile, const data::MarketData& market);
    /// Rows of one validation chunk (the validation loss runs the forecaster on the validation
    /// split in chunks of this many samples).
    static constexpr std::size_t kValidationChunk = 4096;

    /// The training split's samples (the trainer steps no environment).
    long long env_steps() const noexcept override { return static_cast<long long>(n_train_); }
    GreedyPolicy& policy() noexcept override { return policy_; }
    std::optional<double> validation_loss() override;

    std::size_t training_samples() const noexcept { return n_train_; }
    std::size_t validation_samples() const noexcept { return n_val_; }
    double label_scale() const noexcept { return label_scale_; }
    const SupervisedNetwork& network() const noexcept { return net_; }

private:
    void update_ops(ops::CounterValue update) override;
    LogValues log_values(const std::vector<double>& mean) const override;
    ops::GatherSource samples(const ops::Buffer<int>& index, const ops::Buffer<float>& labels) const;

    int market_dim_, target_;
    SupervisedNetwork net_;
    SupervisedSignalPolicy policy_;
    double label_scale_ = 1.0;

    ops::View<const float> features_;  ///< the market's features (n_bars, market_dim), on the device
    std::size_t n_train_ = 0, n_val_ = 0;
    ops::Buffer<int> train_index_, val_index_;
    ops::Buffer<float> train_labels_, val_labels_;

    nn::Mlp::Workspace ws_, ws_val_;
    ops::Buffer<float> x_, y_, loss_, d_pred_;
    ops::Buffer<float> val_x_, val_y_, val_loss_rows_, val_mean_;
};

}  // namespace fh::trainers
