/// @file registry.hpp
/// @brief The trainers by name (run.trainer): one entry per algorithm says how to build its run,
///        its greedy policy and its parameter layout, and whether and how its agents train as one
///        batched engine. Nothing outside this table branches on the trainer's name to reach an
///        engine (src/trainers/registry.cpp holds the table); the profile's side of each trainer
///        (its section, capabilities and rules) is its entry in config/trainer_profiles.hpp.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "config/profile.hpp"
#include "config/trainer_profiles.hpp"
#include "data/market_data.hpp"
#include "env/vec_env.hpp"
#include "nn/param_layout.hpp"
#include "device/device.hpp"
#include "trainers/memory_plan.hpp"
#include "trainers/population.hpp"
#include "trainers/trainer.hpp"

namespace fh::trainers {

/// An offline trainer's dataset: the key that names it, its value ("behaviour" or the path of a
/// replay dump) and the batch that samples it, with that batch's key.
struct OfflineDataset {
    std::string_view key;
    std::string path;
    long long batch = 0;
    std::string_view batch_key;
};

struct TrainerKind {
    std::string_view name;
    /// Its entry in the profile's table (config/trainer_profiles.hpp): its schema section, what it
    /// can do that other keys ask for, and its own rules between keys.
    const config::TrainerProfile& profile() const;
    /// A single run on `market`'s training split.
    std::unique_ptr<Trainer> (*make)(ops::Device& ops, const config::Profile& profile, const env::DeviceMarket& market);
    /// The greedy policy of the trainer's network for observations of state_dim floats (all `eval` needs).
    std::unique_ptr<GreedyPolicy> (*greedy_policy)(const config::Profile& profile, int state_dim);
    /// The layout of the policy's weights (params/online) for observations of state_dim floats.
    nn::ParamLayout (*weights_layout)(const config::Profile& profile, int state_dim);
    /// The name of that layout in this version ("dqn/2", "ppo/1", ...), stored in checkpoints so that
    /// one written by a version with another layout is refused by name.
    std::string (*layout_version)(const config::Profile& profile);
    /// What `agents` agents of `first`'s shape allocate in one engine (memory_plan.hpp); the
    /// engine allocates from it, `check` and the run's memory checks estimate from it.
    MemoryPlan (*plan)(const config::Profile& first, int agents, const PlanInputs& in);
    /// Why `agent` cannot train in one batched engine with `first` ("" when it can); null: the
    /// trainer has no batched engine.
    std::string (*batched_unsupported)(const config::Profile& agent, const config::Profile& first) = nullptr;
    /// The batched engine of `agents` (each batched_unsupported() == ""), agent i on markets[i].
    std::shared_ptr<BatchedPopulation> (*make_batched)(ops::Device& ops, const std::vector<config::Profile>& agents,
                                                       const std::vector<const env::DeviceMarket*>& markets) = nullptr;
    /// With run.population_batching = "auto": why the agents of `first`'s shape run faster on their
    /// own launches ("" when batching pays; measured, docs/performance.md); null: always batch.
    std::string (*auto_batching_declined)(const config::Profile& first) = nullptr;
    /// An offline trainer's dataset; null: the trainer collects its own experience.
    OfflineDataset (*offline_dataset)(const config::Profile& profile) = nullptr;
    /// The progress units (run.total_steps' unit) of one iteration of the batched engine, whose
    /// BatchedPopulation::reset_agent starts a new agent in a slot while the others train
    /// (successive halving's new points); null: its agents share counters, no slot starts again.
    long long (*batched_refill_unit)(const config::Profile& profile) = nullptr;
    /// The goal its greedy policy is evaluated with (`eval --set dqn.her_eval_goal=` changes it),
    /// none where the profile trains without goals; null: its policy takes no goal.
    std::optional<float> (*eval_goal)(const config::Profile& profile) = nullptr;
    /// The rules of its profile that need the data, shared by `check` and `train` (run_checks.hpp):
    /// DataError (exit 3); null: none.
    void (*check_data)(const config::Profile& profile, const data::MarketData& market) = nullptr;
};

/// A gpu.precision refused for a trainer: it failed the learning parity of docs/learning.md
/// ("Precision parity") for that trainer, and `reason` says with which figures.
struct PrecisionRefusal {
    std::string_view trainer, precision, reason;
};
/// The refusals in force: none today (no precision has failed a parity measurement; one is added
/// here with its figures when a measurement calls for it).
std::span<const PrecisionRefusal> precision_refusals();
/// Why `precision` is refused for `trainer` in `refusals` ("" when it is not).
std::string precision_refusal(std::string_view trainer, std::string_view precision,
                              std::span<const PrecisionRefusal> refusals = precision_refusals());

/// Every trainer, in the order the docs list them.
std::span<const TrainerKind> trainer_kinds();
/// The entry of run.trainer = `name`; UsageError naming the trainers for an unknown one.
const TrainerKind& trainer_kind(std::string_view name);
/// The dataset `profile`'s trainer learns from, if it is an offline trainer.
std::optional<OfflineDataset> offline_dataset(const config::Profile& profile);

}  // namespace fh::trainers
