/// @file population.hpp
/// @brief A batched population: many agents of one trainer and network shape trained as one
///        engine (docs/sweeps.md, "Batched populations"), every buffer laid out [agents][...] and
///        every op one launch for all agents. What the population runner and `bench` use of one,
///        whichever trainer it runs (trainers::DqnPopulation, trainers::IqlPopulation).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "config/profile.hpp"
#include "env/vec_env.hpp"
#include "ops/device.hpp"
#include "trainers/trainer.hpp"

namespace fh::trainers {

class BatchedPopulation {
public:
    virtual ~BatchedPopulation() = default;

    virtual int agents() const noexcept = 0;
    /// Rows of one agent's gradient update.
    virtual long long batch_rows() const noexcept = 0;
    /// Environment steps one iteration collects per agent (0: an offline trainer, IQL).
    virtual long long env_steps_per_iteration() const noexcept = 0;

    /// One iteration of every agent (the trainer's iteration: DqnTrainer's collection step and
    /// updates, IqlTrainer's update).
    virtual void iterate() = 0;
    /// Bench: brings every agent to training's steady state; one collection phase alone (nothing
    /// for an offline trainer); one update of every agent alone.
    virtual void prepare() = 0;
    virtual void collect() = 0;
    virtual void update() = 0;

    /// Agent i as a Trainer (its logs, evaluations, checkpoints and summary a single run's). The
    /// agents advance together: the first of a round to iterate runs the population's iteration.
    virtual std::unique_ptr<Trainer> agent(int i) = 0;
    /// An offline trainer's dataset collection rate over every agent, env steps/s; 0 otherwise.
    virtual double dataset_collection_env_steps_per_s() const noexcept { return 0; }
};

/// Why `agent` cannot train in a batched population whose first agent is `first` ("" when it can):
/// the trainer's engine's conditions (DqnPopulation::unsupported, IqlPopulation::unsupported), or a
/// trainer without a batched engine.
std::string batched_population_unsupported(const config::Profile& agent, const config::Profile& first);

/// The batched engine of `agents` (each unsupported() == ""), agent i on markets[i]'s training split.
std::shared_ptr<BatchedPopulation> make_batched_population(ops::Device& ops, const std::vector<config::Profile>& agents,
                                                           const std::vector<const env::DeviceMarket*>& markets);

}  // namespace fh::trainers
