/// @file dt/trainer.cpp
/// @brief The Decision Transformer, top to bottom (docs/dt.md): the dataset (once: collected or
///        read, rebuilt into episodes, labelled with return-to-go tokens, uploaded), then per
///        update: the warm-up learning rate, a batch of windows, the forward, the action loss,
///        backward, guard, Adam.
#include "trainers/dt/trainer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "trainers/offline_dataset.hpp"
#include "trainers/setup.hpp"
#include "util/errors.hpp"
#include "util/log.hpp"
#include "abi/core_vector.h"

namespace fh::trainers {
namespace {

// The monitor's statistics after NetworkTrainer's kLoss and kGradNorm (monitor_.current: this
// update's; monitor_.accum: their sums over the log interval).
constexpr int kAccuracy = 2, kLearningRate = 3, kStats = 4;

}  // namespace

DtEpisodes dt_episodes(const io::ReplayDump& d) {
    DtEpisodes ep;
    ep.state_dim = d.state_dim;
    const long long held = std::min<long long>(d.pushed_steps, d.capacity_steps);
    const bool wrapped = d.pushed_steps > d.capacity_steps;
    const long long first_slot = wrapped ? d.pushed_steps % d.capacity_steps : 0;
    const std::size_t S = static_cast<std::size_t>(d.state_dim);
    for (int e = 0; e < d.n_envs; ++e) {
        // A wrapped ring lost the start of each column's first episode: it is not a whole episode.
        bool whole = !wrapped;
        int start = static_cast<int>(ep.actions.size());
        for (long long k = 0; k < held; ++k) {
            const long long slot = (first_slot + k) % d.capacity_steps;
            const std::size_t row = static_cast<std::size_t>(slot * d.n_envs + e);
            ep.states.insert(ep.states.end(), d.states.begin() + static_cast<std::ptrdiff_t>(row * S),
                             d.states.begin() + static_cast<std::ptrdiff_t>((row + 1) * S));
            ep.actions.push_back(d.actions[row]);
            ep.rewards.push_back(static_cast<double>(d.rewards[row]));
            ep.episode_start.push_back(start);
            const bool last_of_column = k + 1 == held;
            if (d.done[row] != 0 || last_of_column) {
                // The episode [start, end): its rates to go, from the end backwards.
                const int end = static_cast<int>(ep.actions.size());
                ep.rate.resize(static_cast<std::size_t>(end));
                double sum = 0;
                for (int n = end - 1; n >= start; --n) {
                    sum += ep.rewards[static_cast<std::size_t>(n)];
                    ep.rate[static_cast<std::size_t>(n)] = sum / static_cast<double>(end - n);
                }
                if (d.done[row] != 0 && whole) ep.episode_rates.push_back(ep.rate[static_cast<std::size_t>(start)]);
                whole = true;
                start = end;
            }
        }
    }
    return ep;
}

DtCalibration dt_calibration(const DtEpisodes& ep, double q) {
    DtCalibration c;
    if (ep.rate.empty()) return c;
    double mean = 0;
    for (double r : ep.rate) mean += r;
    mean /= static_cast<double>(ep.rate.size());
    double var = 0;
    for (double r : ep.rate) var += (r - mean) * (r - mean);
    const double sd = std::sqrt(var / static_cast<double>(ep.rate.size()));
    c.scale = sd > 0 && std::isfinite(sd) ? sd : 1.0;
    std::vector<double> v = ep.episode_rates.empty() ? ep.rate : ep.episode_rates;
    std::sort(v.begin(), v.end());
    const double pos = std::clamp(q, 0.0, 1.0) * static_cast<double>(v.size() - 1);
    const std::size_t lo = static_cast<std::size_t>(std::floor(pos));
    const std::size_t hi = std::min(lo + 1, v.size() - 1);
    c.target_rate = v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
    return c;
}

void DtPolicy::act(ops::Device& ops, ops::View<const float> weights, ops::View<int> actions,
                   ops::View<const float> states, int n) {
    if (weights.size() != weights_size())
        throw std::invalid_argument(fmt::format("DtPolicy: {} weights, expected {}", weights.size(), weights_size()));
    if (&ops != owner_ || n != ws_.n) {  // another device or number of environments: new, empty histories
        ws_ = net_.make_act_workspace(ops, n);
        owner_ = &ops;
    }
    const std::size_t P = net_.layout().total();
    net_.act(ops, weights.subview(0, P), weights.subview(P, 1), actions.subview(0, static_cast<std::size_t>(n)),
             states.subview(0, static_cast<std::size_t>(n) * static_cast<std::size_t>(net_.shape().state_dim)), ws_);
}

MemoryPlan DtTrainer::plan(const config::Profile& profile, int, const PlanInputs& in) {
    const DtShape shape = dt_shape(profile, trainers::env_params(profile, in.market_dim).state_dim);
    const DtNetwork net(shape);
    const std::uint64_t P = net.layout().total(), B = static_cast<std::uint64_t>(profile.dt.batch_size),
                        K = static_cast<std::uint64_t>(shape.context), S = static_cast<std::uint64_t>(shape.state_dim);
    using E = DtTrainer;
    MemoryPlan plan;
    // The dataset as IQL's (a replay ring, freed once read back), then its steps in order.
    const std::uint64_t rows = plan_offline_dataset(plan, profile, shape.state_dim, profile.dt.dataset,
                                                    profile.dt.dataset_size, "dt", in, 1, true);
    const std::string key = profile.dt.dataset == "behaviour" ? "dt.dataset_size" : "dt.dataset";
    plan.consumer(fmt::format("the dataset's episodes ({} steps x {} B)", rows, S * 4 + 12), key);
    plan.add("episode states", {&E::ds_states_}, rows * S);
    plan.add("episode returns to go", {&E::ds_rtg_}, rows);
    plan.add("episode actions and starts", {&E::ds_actions_, &E::ds_episode_start_}, rows);
    // The host: the ring read back (and a dump read), its episodes (states, action, start, reward, rate).
    plan.host("the dataset read back and rebuilt into episodes",
              rows * (2 * S * 4 + 9) * (profile.dt.dataset == "behaviour" ? 1 : 2) + rows * (S * 4 + 24), key);
    plan.consumer(fmt::format("transformer ({} parameters, with gradients and Adam moments)", P), "dt.embedding");
    plan_network<E>(plan, P, dt::kCalibrationFloats);
    plan.add("learning rate", {&E::lr_}, 1, 0.0f);
    plan.consumer(fmt::format("batch and workspaces ({} windows of {} tokens)", B, shape.tokens()), "dt.batch_size");
    plan.add("workspace", net.workspace_size(static_cast<int>(B)));
    plan.add("batch states", {&E::b_states_}, B * K * S);
    plan.add("batch returns to go", {&E::b_rtg_}, B * K);
    plan.add("batch actions", {&E::b_actions_}, B * K);
    plan.add("batch lengths", {&E::b_lengths_}, B);
    plan.add("losses and accuracies", {&E::loss_, &E::correct_}, B);
    plan.add("logit gradients", {&E::d_logits_}, B * static_cast<std::uint64_t>(shape.tokens() * shape.num_actions));
    UpdateMonitor::plan(plan, kStats);
    const auto segments = static_cast<int>(profile.eval.segments);
    plan.consumer(fmt::format("acting workspace and KV cache ({} segments)", segments), "eval.segments");
    plan.add("acting workspace", net.act_workspace_size(segments));
    plan.host("the host copy a checkpoint is written from", 3 * P * 4, "dt.embedding");
    return plan;
}

DtTrainer::DtTrainer(ops::Device& ops, const config::Profile& profile, const env::DeviceMarket& market)
    : NetworkTrainer(ops, profile, market.market_dim(), static_cast<int>(profile.dt.batch_size),
                     "the action loss (cross-entropy)", "Lower training.learning_rate or raise dt.warmup_updates."),
      shape_(dt_shape(profile, env_params_.state_dim)),
      policy_(shape_) {
    DtEpisodes episodes;
    {
        OfflineDataset ds =
            build_offline_dataset(ops, profile, market, env_params_, profile.dt.dataset, profile.dt.dataset_size, "dt");
        dataset_transitions_ = ds.transitions;
        collection_seconds_ = ds.collection_seconds;
        episodes = dt_episodes(ds.ring.dump(ops, shape_.num_actions));
    }
    dataset_steps_ = episodes.steps();
    if (dataset_steps_ < 1) throw DataError("dt: the dataset holds no transitions");
    calibration_ = dt_calibration(episodes, profile.dt.target_quantile);
    std::vector<float> rtg(episodes.rate.size());
    for (std::size_t n = 0; n < rtg.size(); ++n) rtg[n] = static_cast<float>(episodes.rate[n] / calibration_.scale);
    PlanInputs inputs;
    inputs.market_dim = market.market_dim();
    inputs.dump_rows = static_cast<std::uint64_t>(dataset_steps_);
    DtTrainer::plan(profile, 1, inputs).allocate(ops, *this);
    ops.upload<float>(ds_states_.view(), episodes.states);
    ops.upload<float>(ds_rtg_.view(), rtg);
    ops.upload<int>(ds_actions_.view(), episodes.actions);
    ops.upload<int>(ds_episode_start_.view(), episodes.episode_start);

    // The weights: the parameters, then the calibration (math/dt.h).
    init_network(policy_.network().layout(),
                 {calibration_.target_token(), static_cast<float>(calibration_.scale),
                  static_cast<float>(calibration_.target_rate)},
                 kStats);
    ws_ = policy_.network().make_workspace(ops, batch_);
    log::info(
        "dt dataset: {} steps in {} finished episodes; return-to-go scale {:.3g} per step, target {:.3g} per "
        "step (quantile {} of the {}), token {:.3f}; {} parameters",
        dataset_steps_, episodes.episode_rates.size(), calibration_.scale, calibration_.target_rate,
        profile.dt.target_quantile, episodes.episode_rates.empty() ? "steps' rates" : "finished episodes",
        calibration_.target_token(), param_floats_);
}

double DtTrainer::dataset_collection_env_steps_per_s() const noexcept {
    return collection_seconds_ > 0 ? static_cast<double>(dataset_transitions_) / collection_seconds_ : 0;
}

void DtTrainer::update_ops(ops::CounterValue update) {
    const auto cur = monitor_.current.view();

    // 1. The learning rate of this update, and a batch of windows (each ends at a uniform step).
    ops::run(ops_,
             ops::DtLearningRate{lr_.view(), profile_.training.learning_rate, profile_.dt.warmup_updates, update});
    ops::run(ops_, ops::DtGather{
                       b_states_.view(), b_rtg_.view(), b_actions_.view(), b_lengths_.view(),
                       ops::DtDatasetViews{ds_states_.cview(), ds_rtg_.cview(), ds_actions_.cview(),
                                           ds_episode_start_.cview(), shape_.state_dim},
                       dt::WindowParams{static_cast<std::uint64_t>(profile_.run.seed), update, 0, 1, shape_.context}});
    // 2. Forward, the action loss at the state tokens, backward.
    const DtBatch in{b_states_.cview(), b_rtg_.cview(), b_actions_.cview()};
    const auto logits = policy_.network().forward(ops_, params(), in, ws_);
    ops::run(ops_, ops::DtActionLoss{loss_.view(), correct_.view(), d_logits_.view(), logits, b_actions_.cview(),
                                     b_lengths_.cview(), shape_.context, shape_.num_actions});
    policy_.network().backward(ops_, params(), grads_.view(), d_logits_.view(), in, ws_);
    // The windows' terms sum to the batch means: their mean times B.
    ops::run(ops_, ops::Mean{cur.subview(kLoss, 1), loss_.cview()});
    ops::run(ops_, ops::Scale{cur.subview(kLoss, 1), static_cast<float>(batch_)});
    ops::run(ops_, ops::Mean{cur.subview(kAccuracy, 1), correct_.cview()});
    ops::run(ops_, ops::Scale{cur.subview(kAccuracy, 1), static_cast<float>(batch_)});
    ops::run(ops_, ops::Copy{cur.subview(kLearningRate, 1), lr_.cview()});
}

NetworkTrainer::LogValues DtTrainer::log_values(const std::vector<double>& mean) const {
    return {{"dataset_transitions", dataset_transitions_},
            {{"charts/accuracy", mean[kAccuracy]}, {"charts/learning_rate", mean[kLearningRate]}},
            fmt::format("accuracy {:.3f} | lr {:.3g}", mean[kAccuracy], mean[kLearningRate])};
}

}  // namespace fh::trainers
