/// @file registry.cpp
/// @brief The table of trainers (registry.hpp): each algorithm's entry points, in one place.
#include "trainers/registry.hpp"

#include <fmt/format.h>

#include <array>
#include <stdexcept>

#include "trainers/checkpoint.hpp"
#include "trainers/dqn/engine.hpp"
#include "trainers/dt/network.hpp"
#include "trainers/dt/trainer.hpp"
#include "trainers/iql/engine.hpp"
#include "trainers/ppo/engine.hpp"
#include "trainers/dqn/network.hpp"
#include "trainers/supervised/trainer.hpp"
#include "util/errors.hpp"

namespace fh::trainers {
namespace {

/// TrainerKind::make of a trainer constructed from (ops, profile, market): a single run.
template <class T>
std::unique_ptr<Trainer> make_run(ops::Device& ops, const config::Profile& p, const env::DeviceMarket& m) {
    return std::make_unique<T>(ops, p, m);
}

/// TrainerKind::make_batched of an engine.
template <class Engine>
std::shared_ptr<BatchedPopulation> make_engine(ops::Device& ops, const std::vector<config::Profile>& agents,
                                               const std::vector<const env::DeviceMarket*>& markets) {
    return std::make_shared<Engine>(ops, agents, markets);
}

// DQN, PPO and IQL: one engine each; a single run is an engine of one agent.
const TrainerKind kDqn{
    "dqn",
    &single_run<Trainer, DqnAgent, DqnEngine>,
    [](const config::Profile& p, int state_dim) -> std::unique_ptr<GreedyPolicy> {
        return std::make_unique<DqnGreedyPolicy>(network_config(p, state_dim), eval_goal(p));
    },
    [](const config::Profile& p, int state_dim) { return QNetwork(network_config(p, state_dim)).layout(); },
    [](const config::Profile& p) -> std::string { return p.dqn.head == "iqn" ? kIqnNetworkLayout : kQNetworkLayout; },
    &DqnEngine::plan,
    &DqnEngine::unsupported,
    &make_engine<DqnEngine>,
    &DqnEngine::auto_batching_declined,
    nullptr,
    [](const config::Profile& p) -> long long { return p.experience.gpu_n_episodes; },
    &eval_goal,
};

const TrainerKind kPpo{
    "ppo",
    &single_run<Trainer, PpoAgent, PpoEngine>,
    [](const config::Profile& p, int state_dim) -> std::unique_ptr<GreedyPolicy> {
        const ActorCritic net(p, state_dim, static_cast<int>(p.num_actions()));
        return std::make_unique<SoftmaxGreedyPolicy>(net.actor, net.layout.total());
    },
    [](const config::Profile& p, int state_dim) {
        return ActorCritic(p, state_dim, static_cast<int>(p.num_actions())).layout;
    },
    [](const config::Profile&) -> std::string { return "ppo/1"; },
    &PpoEngine::plan,
    &PpoEngine::unsupported,
    &make_engine<PpoEngine>,
    &PpoEngine::auto_batching_declined,
    nullptr,
    [](const config::Profile& p) -> long long {  // an iteration: one rollout of every environment
        return p.experience.gpu_n_episodes * p.experience.gpu_timesteps_per_episode;
    },
};

const TrainerKind kIql{
    "iql",
    &single_run<Trainer, IqlAgent, IqlEngine>,
    [](const config::Profile& p, int state_dim) -> std::unique_ptr<GreedyPolicy> {
        const IqlNetworks net(p, state_dim, static_cast<int>(p.num_actions()));
        return std::make_unique<SoftmaxGreedyPolicy>(net.policy, net.layout.total());
    },
    [](const config::Profile& p, int state_dim) {
        return IqlNetworks(p, state_dim, static_cast<int>(p.num_actions())).layout;
    },
    [](const config::Profile&) -> std::string { return "iql/1"; },
    &IqlEngine::plan,
    &IqlEngine::unsupported,
    &make_engine<IqlEngine>,
    nullptr,  // measured faster batched at every size
    [](const config::Profile& p) {
        return OfflineDataset{"iql.dataset", p.iql.dataset, p.replay_buffer.batch_size, "replay_buffer.batch_size"};
    },
    [](const config::Profile&) -> long long { return 1; },  // an iteration: one update
};

// The supervised baseline and the Decision Transformer: no batched engine (docs/architecture.md).
const TrainerKind kSupervised{
    .name = "supervised",
    .make = &make_run<SupervisedTrainer>,
    .greedy_policy = [](const config::Profile& p, int state_dim) -> std::unique_ptr<GreedyPolicy> {
        const int market_dim = state_dim - env::kPortfolioFeatures;
        const SupervisedNetwork net(p, market_dim);
        return std::make_unique<SupervisedSignalPolicy>(net.net, net.layout.total(), signal_params(p, market_dim));
    },
    // The forecaster's slices; the adapter's calibration follows them (docs/supervised.md).
    .weights_layout = [](const config::Profile& p,
                         int state_dim) { return SupervisedNetwork(p, state_dim - env::kPortfolioFeatures).layout; },
    .layout_version = [](const config::Profile&) -> std::string { return "supervised/1"; },
    .plan = &SupervisedTrainer::plan,
    // No offline_dataset: it learns from the bars themselves.
    .check_data = &SupervisedTrainer::check_data,
};

const TrainerKind kDt{
    .name = "dt",
    .make = &make_run<DtTrainer>,
    .greedy_policy = [](const config::Profile& p, int state_dim) -> std::unique_ptr<GreedyPolicy> {
        return std::make_unique<DtPolicy>(dt_shape(p, state_dim));
    },
    // The transformer's slices; the return-to-go calibration follows them (docs/dt.md).
    .weights_layout = [](const config::Profile& p,
                         int state_dim) { return DtNetwork(dt_shape(p, state_dim)).layout(); },
    .layout_version = [](const config::Profile&) -> std::string { return "dt/1"; },
    .plan = &DtTrainer::plan,
    .offline_dataset =
        [](const config::Profile& p) {
            return OfflineDataset{"dt.dataset", p.dt.dataset, p.dt.batch_size, "dt.batch_size"};
        },
};

const std::array<TrainerKind, 5> kTrainers{kDqn, kPpo, kIql, kSupervised, kDt};

}  // namespace

const config::TrainerProfile& TrainerKind::profile() const {
    if (const config::TrainerProfile* p = config::find_trainer_profile(name)) return *p;
    throw std::logic_error(fmt::format("trainer '{}' has no entry in config/trainer_profiles.cpp", name));
}

std::span<const TrainerKind> trainer_kinds() {
    return kTrainers;
}

const TrainerKind& trainer_kind(std::string_view name) {
    for (const auto& k : kTrainers)
        if (k.name == name) return k;
    throw UsageError(fmt::format("unknown trainer '{}' (dqn, ppo, iql, supervised or dt)", name));
}

// The entry points the run uses, each a lookup in the table.

std::unique_ptr<Trainer> make_trainer(ops::Device& ops, const config::Profile& p, const env::DeviceMarket& market) {
    return trainer_kind(p.run.trainer).make(ops, p, market);
}

std::string parameter_layout(const config::Profile& p) {
    return trainer_kind(p.run.trainer).layout_version(p);
}

std::optional<OfflineDataset> offline_dataset(const config::Profile& p) {
    const TrainerKind& kind = trainer_kind(p.run.trainer);
    if (!kind.offline_dataset) return std::nullopt;
    return kind.offline_dataset(p);
}

std::string auto_batching_declined(const config::Profile& first) {
    const TrainerKind& kind = trainer_kind(first.run.trainer);
    return kind.auto_batching_declined ? kind.auto_batching_declined(first) : "";
}

std::unique_ptr<GreedyPolicy> make_greedy_policy(const config::Profile& p, int state_dim) {
    return trainer_kind(p.run.trainer).greedy_policy(p, state_dim);
}

nn::ParamLayout policy_weights_layout(const config::Profile& p, int state_dim) {
    return trainer_kind(p.run.trainer).weights_layout(p, state_dim);
}

std::span<const PrecisionRefusal> precision_refusals() {
    return {};  // none in force (docs/learning.md, "Precision parity")
}

std::string precision_refusal(std::string_view trainer, std::string_view precision,
                              std::span<const PrecisionRefusal> refusals) {
    for (const PrecisionRefusal& r : refusals)
        if (r.trainer == trainer && r.precision == precision)
            return fmt::format(
                "gpu.precision = \"{}\" is refused for run.trainer = \"{}\": {} (docs/learning.md, \"Precision "
                "parity\"); use \"fp32\" or \"tf32\"",
                precision, trainer, r.reason);
    return "";
}

std::string batched_population_unsupported(const config::Profile& agent, const config::Profile& first) {
    const TrainerKind& kind = trainer_kind(first.run.trainer);
    if (!kind.batched_unsupported)
        return fmt::format("run.trainer = \"{}\" has no batched engine (dqn, iql and ppo have)", first.run.trainer);
    if (agent.run.trainer != first.run.trainer)
        return fmt::format("run.trainer = \"{}\" (only {})", agent.run.trainer, first.run.trainer);
    return kind.batched_unsupported(agent, first);
}

long long batched_refill_unit(const config::Profile& first) {
    const TrainerKind& kind = trainer_kind(first.run.trainer);
    return kind.batched_refill_unit ? kind.batched_refill_unit(first) : 0;
}

std::string batched_halving_unsupported(const config::Profile& first, long long interval) {
    const TrainerKind& kind = trainer_kind(first.run.trainer);
    if (!kind.batched_refill_unit)
        return fmt::format(
            "run.search = \"halving\": the batched {} engine cannot start a new point in a stopped agent's slot",
            first.run.trainer);
    if (const long long unit = kind.batched_refill_unit(first); unit > 0 && interval % unit != 0)
        return fmt::format(
            "run.search = \"halving\": search.interval = {} is not a multiple of the engine's iteration ({} progress "
            "units), so a new point's rounds would not fall on the others' iterations",
            interval, unit);
    return "";
}

std::shared_ptr<BatchedPopulation> make_batched_population(ops::Device& ops, const std::vector<config::Profile>& agents,
                                                           const std::vector<const env::DeviceMarket*>& markets) {
    if (agents.empty()) throw UsageError("a batched population needs at least one agent");
    const TrainerKind& kind = trainer_kind(agents.front().run.trainer);
    if (!kind.make_batched) throw UsageError(batched_population_unsupported(agents.front(), agents.front()));
    return kind.make_batched(ops, agents, markets);
}

}  // namespace fh::trainers
