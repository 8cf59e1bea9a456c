/// @file supervised/trainer.cpp
/// @brief The supervised forecaster, top to bottom (docs/supervised.md): the samples and labels of
///        the training and validation splits (once, on the host), then per update: a uniform
///        batch of training bars, the forecaster's forward, the loss and its gradient, backward,
///        guard, Adam. The validation loss runs the forecaster over the validation split in
///        fixed chunks; evaluation runs it on the states' market columns and the signal adapter.
#include "trainers/supervised/trainer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "abi/supervised_signal.h"
#include "util/errors.hpp"
#include "util/log.hpp"
#include "abi/core_vector.h"

namespace fh::trainers {
namespace {

// The monitor's statistics after NetworkTrainer's kLoss and kGradNorm (monitor_.current: this
// update's; monitor_.accum: their sums over the log interval).
constexpr int kPrediction = 2, kLabel = 3, kStats = 4;

int target_code(const config::Profile& p) {
    return p.supervised.target == "direction" ? supervised::kDirection : supervised::kReturn;
}

int urgency_of(const std::string& order_type) {
    if (order_type == "far_limit") return env::kFarLimit;
    if (order_type == "passive_limit") return env::kPassiveLimit;
    return env::kMarket;
}

}  // namespace

SupervisedNetwork::SupervisedNetwork(const config::Profile& p, int market_dim)
    : layout(),
      net(layout, "forecaster", nn::MlpConfig::stack(market_dim, p.supervised.hidden, 1, ops::Activation::relu)) {}

supervised::SignalParams signal_params(const config::Profile& p, int market_dim) {
    supervised::SignalParams s{};
    s.target = target_code(p);
    s.sizing = p.supervised.sizing == "magnitude" ? supervised::kMagnitude : supervised::kFixed;
    s.volatility_sizing = p.supervised.volatility_sizing ? 1 : 0;
    // A market without rv_32's column (tests' small markets) has no calibration: ratio 1.
    s.vol_feature = market_dim > kSupervisedVolatilityFeature ? kSupervisedVolatilityFeature : 0;
    s.market_dim = market_dim;
    s.state_dim = market_dim + env::kPortfolioFeatures;
    s.position_levels = static_cast<int>(p.env.position_levels);
    s.urgency_levels = static_cast<int>(p.env.urgency_levels);
    s.max_contracts = static_cast<int>(p.instrument.max_contracts);
    s.urgency = urgency_of(p.supervised.order_type);
    s.entry_threshold = static_cast<float>(p.supervised.entry_threshold);
    s.exit_threshold = static_cast<float>(p.supervised.exit_threshold);
    s.full_score = static_cast<float>(p.supervised.full_score);
    s.volatility_floor = static_cast<float>(p.supervised.volatility_floor);
    return s;
}

SupervisedSamples supervised_samples(const std::vector<double>& close, const env::EpisodeStarts& starts, int horizon) {
    SupervisedSamples s;
    for (std::size_t i = 0; i < starts.starts.size(); ++i) {
        const long long t = starts.starts[i];
        // ends[i]: the exclusive end of the bars usable from t (its segment's and split's end).
        if (t + horizon >= starts.ends[i]) continue;
        s.bars.push_back(static_cast<int>(t));
        s.returns.push_back(
            std::log(close[static_cast<std::size_t>(t + horizon)] / close[static_cast<std::size_t>(t)]));
    }
    return s;
}

std::vector<float> supervised_labels(const std::vector<double>& returns, int target, double label_scale) {
    std::vector<float> y(returns.size());
    for (std::size_t i = 0; i < returns.size(); ++i) {
        const double r = returns[i];
        y[i] = target == supervised::kDirection ? (r > 0   ? 1.0f
                                                   : r < 0 ? 0.0f
                                                           : 0.5f)
                                                : static_cast<float>(r / label_scale);
    }
    return y;
}

void SupervisedSignalPolicy::act(ops::Device& ops, ops::View<const float> weights, ops::View<int> actions,
                                 ops::View<const float> states, int n) {
    if (&ops != owner_ || n > ws_.max_batch()) {  // evaluation batch sizes vary
        ws_ = net_.make_workspace(ops, n);
        x_ = ops.alloc<float>(static_cast<std::size_t>(n) * static_cast<std::size_t>(params_.market_dim));
        owner_ = &ops;
    }
    if (weights.size() != weights_size())
        throw std::invalid_argument(
            fmt::format("SupervisedSignalPolicy: {} weights, expected {}", weights.size(), weights_size()));
    const std::size_t rows = static_cast<std::size_t>(n);
    const auto x = x_.view().subview(0, rows * static_cast<std::size_t>(params_.market_dim));
    // The market columns of the states (the portfolio features are not the forecaster's input).
    ops::GatherSource src;
    src.rows = states.subview(0, rows * static_cast<std::size_t>(params_.state_dim));
    src.stride = params_.state_dim;
    src.cols = params_.market_dim;
    ops::run(ops, ops::SupervisedGather{x, {}, src, supervised::GatherParams{0, 0, 0, 0}});
    const auto pred = net_.forward(ops, weights.subview(0, param_floats_), x, n, ws_);
    ops::run(ops, ops::SupervisedSignal{actions.subview(0, rows), pred, src.rows,
                                        weights.subview(param_floats_, supervised::kCalibrationFloats), params_});
}

void SupervisedTrainer::check_data(const config::Profile& p, const data::MarketData& md) {
    if (supervised_samples(md.bars.close, env::episode_starts(md.bars, md.warmup_bars, md.train),
                           static_cast<int>(p.supervised.horizon))
            .bars.empty())
        throw DataError(
            fmt::format("{}: the training split [{}, {}) has no bar with supervised.horizon = {} bars "
                        "after it inside the split (lower supervised.horizon or give more data)",
                        md.source, md.train.begin, md.train.end, p.supervised.horizon));
}

MemoryPlan SupervisedTrainer::plan(const config::Profile& profile, int, const PlanInputs& in) {
    const SupervisedNetwork net(profile, in.market_dim);
    const int batch = static_cast<int>(profile.supervised.batch_size),
              segments = static_cast<int>(profile.eval.segments);
    const std::uint64_t P = net.layout.total(), B = static_cast<std::uint64_t>(batch),
                        M = static_cast<std::uint64_t>(in.market_dim);
    const std::uint64_t chunk = std::min<std::uint64_t>(in.val_samples, kValidationChunk);
    using E = SupervisedTrainer;
    MemoryPlan plan;
    plan.consumer(
        fmt::format("training and validation samples ({} and {} bars x 8 B)", in.train_samples, in.val_samples),
        profile.data.path.empty() ? "data.synthetic_bars" : "data.path");
    plan.add("training bars", {&E::train_index_}, in.train_samples);
    plan.add("training labels", {&E::train_labels_}, in.train_samples);
    if (in.val_samples > 0) {
        plan.add("validation bars", {&E::val_index_}, in.val_samples);
        plan.add("validation labels and losses", {&E::val_labels_, &E::val_loss_rows_}, in.val_samples);
    }
    plan.consumer(fmt::format("forecaster ({} parameters, with gradients and Adam moments)", P), "supervised.hidden");
    plan_network<E>(plan, P, supervised::kCalibrationFloats);
    plan.consumer(fmt::format("batch and workspaces ({} rows, validation chunks of {})", B, chunk),
                  "supervised.batch_size");
    plan.add("batch workspace", net.net.workspace_size(batch));
    plan.add("batch features", {&E::x_}, B * M);
    plan.add("batch labels, losses and gradients", {&E::y_, &E::loss_, &E::d_pred_}, B);
    if (in.val_samples > 0) {
        plan.add("validation workspace", net.net.workspace_size(static_cast<int>(chunk)));
        plan.add("validation features", {&E::val_x_}, chunk * M);
        plan.add("validation chunk labels", {&E::val_y_}, chunk);
        plan.add("validation mean", {&E::val_mean_}, 1);
    }
    UpdateMonitor::plan(plan, kStats);
    plan.consumer(fmt::format("the backtests' policy ({} segments)", segments), "eval.segments");
    plan.add("policy workspace and features",
             net.net.workspace_size(segments).add(static_cast<std::size_t>(segments) * M));
    plan.host("the host copy a checkpoint is written from", 3 * P * 4, "supervised.hidden");
    return plan;
}

SupervisedTrainer::SupervisedTrainer(ops::Device& ops, const config::Profile& profile, const env::DeviceMarket& market)
    : NetworkTrainer(ops, profile, market.market_dim(), static_cast<int>(profile.supervised.batch_size),
                     "the forecaster's loss", "Lower training.learning_rate, or check the data for extreme returns."),
      market_dim_(market.market_dim()),
      target_(target_code(profile)),
      net_(profile, market_dim_),
      policy_(net_.net, net_.layout.total(), signal_params(profile, market_dim_)) {
    const int horizon = static_cast<int>(profile.supervised.horizon);
    const auto& close = market.host_close();
    const auto train = supervised_samples(close, market.host_starts(env::Split::train), horizon);
    if (train.bars.empty())
        throw DataError(
            fmt::format("the training split has no bar with supervised.horizon = {} bars after it inside "
                        "the split (lower supervised.horizon or give more data)",
                        horizon));
    const auto val = supervised_samples(close, market.host_starts(env::Split::val), horizon);
    n_train_ = train.bars.size();
    n_val_ = val.bars.size();
    PlanInputs inputs;
    inputs.market_dim = market_dim_;
    inputs.train_samples = n_train_;
    inputs.val_samples = n_val_;
    SupervisedTrainer::plan(profile, 1, inputs).allocate(ops, *this);
    double sq = 0;
    for (double r : train.returns) sq += r * r;
    label_scale_ = std::sqrt(sq / static_cast<double>(n_train_));
    if (!(label_scale_ > 0) || !std::isfinite(label_scale_)) label_scale_ = 1.0;

    features_ =
        ops::View<const float>(market.view(env::Split::train).features,
                               static_cast<std::size_t>(market.n_bars()) * static_cast<std::size_t>(market_dim_));
    ops.upload<int>(train_index_.view(), train.bars);
    ops.upload<float>(train_labels_.view(), supervised_labels(train.returns, target_, label_scale_));
    if (n_val_ > 0) {
        ops.upload<int>(val_index_.view(), val.bars);
        ops.upload<float>(val_labels_.view(), supervised_labels(val.returns, target_, label_scale_));
    }

    // The weights: the parameters, then the adapter's calibration (math/supervised.h).
    std::vector<float> calibration(supervised::kCalibrationFloats, 0.0f);
    const auto& names = market.feature_names();
    const auto& norm = market.normalization();
    const auto v = static_cast<std::size_t>(kSupervisedVolatilityFeature);
    if (names.size() > v && names[v] == "rv_32" && norm.mean.size() > v && norm.stddev.size() > v) {
        calibration[0] = norm.mean[v];
        calibration[1] = norm.stddev[v];
    } else if (profile.supervised.volatility_sizing) {
        throw UsageError(
            fmt::format("supervised.volatility_sizing = true needs the feature rv_32 at column {} "
                        "(data.feature_set = \"core42\")",
                        kSupervisedVolatilityFeature));
    }
    calibration[2] = static_cast<float>(label_scale_);
    calibration[3] = static_cast<float>(horizon);
    init_network(net_.layout, calibration, kStats);
    ws_ = net_.net.make_workspace(ops, batch_);
    if (n_val_ > 0) ws_val_ = net_.net.make_workspace(ops, static_cast<int>(std::min(n_val_, kValidationChunk)));
    log::info("supervised samples: {} training, {} validation bars (horizon {}, target {}, label RMS {:.3g})", n_train_,
              n_val_, horizon, profile.supervised.target, label_scale_);
}

// A split's samples: the rows of the market's features at its bars, and their labels.
ops::GatherSource SupervisedTrainer::samples(const ops::Buffer<int>& index, const ops::Buffer<float>& labels) const {
    ops::GatherSource src;
    src.rows = features_;
    src.stride = market_dim_;
    src.cols = market_dim_;
    src.index = index.cview();
    src.labels = labels.cview();
    return src;
}

void SupervisedTrainer::update_ops(ops::CounterValue update) {
    // 1. A uniform batch of training bars: their features and labels.
    ops::run(ops_, ops::SupervisedGather{
                       x_.view(), y_.view(), samples(train_index_, train_labels_),
                       supervised::GatherParams{static_cast<std::uint64_t>(profile_.run.seed), update, 0, 1}});
    // 2. Forward, loss, backward.
    const auto pred = net_.net.forward(ops_, params(), x_.cview(), batch_, ws_);
    ops::run(ops_, ops::SupervisedLoss{loss_.view(), d_pred_.view(), pred, y_.cview(), target_});
    net_.net.backward(ops_, params(), grads_.view(), d_pred_.view(), {}, batch_, ws_, false);
    const auto cur = monitor_.current.view();
    ops::run(ops_, ops::Mean{cur.subview(kLoss, 1), loss_.cview()});
    ops::run(ops_, ops::Mean{cur.subview(kPrediction, 1), pred});
    ops::run(ops_, ops::Mean{cur.subview(kLabel, 1), y_.cview()});
}

std::optional<double> SupervisedTrainer::validation_loss() {
    if (n_val_ == 0) return std::nullopt;
    const std::size_t M = static_cast<std::size_t>(market_dim_);
    const std::size_t chunk = static_cast<std::size_t>(ws_val_.max_batch());
    const ops::GatherSource src = samples(val_index_, val_labels_);
    for (std::size_t first = 0; first < n_val_; first += chunk) {
        const std::size_t c = std::min(chunk, n_val_ - first);
        const auto x = val_x_.view().subview(0, c * M);
        const auto y = val_y_.view().subview(0, c);
        ops::run(ops_,
                 ops::SupervisedGather{x, y, src, supervised::GatherParams{0, 0, static_cast<long long>(first), 0}});
        const auto pred = net_.net.forward(ops_, params(), x, static_cast<int>(c), ws_val_);
        ops::run(ops_, ops::SupervisedLoss{val_loss_rows_.view().subview(first, c), {}, pred, y, target_});
    }
    ops::run(ops_, ops::Mean{val_mean_.view(), val_loss_rows_.cview()});
    return static_cast<double>(ops_.to_host(val_mean_.cview())[0]);
}

NetworkTrainer::LogValues SupervisedTrainer::log_values(const std::vector<double>& mean) const {
    return {{"training_samples", static_cast<long long>(n_train_)},
            {{"values/prediction", mean[kPrediction]}, {"values/label", mean[kLabel]}},
            fmt::format("prediction {:+.4f} (label {:+.4f})", mean[kPrediction], mean[kLabel])};
}

}  // namespace fh::trainers
