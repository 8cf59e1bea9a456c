/// @file population.hpp
/// @brief A batched population: many agents of one trainer and network shape trained as one
///        engine (docs/sweeps.md, "Batched populations"), every buffer laid out [agents][...] and
///        every op one launch for all agents. What the population runner and `bench` use of one,
///        whichever trainer it runs (trainers::DqnEngine, trainers::IqlEngine,
///        trainers::PpoEngine).
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "abi/core_vector.h"
#include "config/profile.hpp"
#include "env/vec_env.hpp"
#include "device/device.hpp"
#include "trainers/memory_plan.hpp"
#include "trainers/trainer.hpp"
#include "util/errors.hpp"

namespace fh::trainers {

class BatchedPopulation {
public:
    virtual ~BatchedPopulation() = default;

    virtual int agents() const noexcept = 0;
    /// Rows of one agent's gradient update.
    virtual long long batch_rows() const noexcept = 0;
    /// Environment steps one iteration collects per agent (0: an offline trainer, IQL).
    virtual long long env_steps_per_iteration() const noexcept = 0;
    /// Gradient updates of each agent in one update() (PPO: a rollout's epochs x minibatches).
    virtual long long updates_per_update() const noexcept { return 1; }

    /// One iteration of every agent (the trainer's iteration: DqnEngine's collection step and
    /// updates, IqlEngine's update).
    virtual void iterate() = 0;
    /// Bench: brings every agent to training's steady state; one collection phase alone (nothing
    /// for an offline trainer); one update of every agent alone.
    virtual void prepare() = 0;
    virtual void collect() = 0;
    virtual void update() = 0;

    /// Agent i as a Trainer (its logs, evaluations, checkpoints and summary a single run's). The
    /// agents advance together: the first of a round to iterate runs the population's iteration.
    virtual std::unique_ptr<Trainer> agent(int i) = 0;
    /// Slot `agent` starts a new agent of `profile` (its shape the first agent's) on `market` from
    /// scratch, exactly as a single run of it starts, while the others train on (successive
    /// halving's new points): between iterations, before agent(agent) makes its Trainer (the
    /// slot's old one gone). Engines whose agents share counters refuse (std::logic_error; the
    /// trainer's TrainerKind::batched_refill_unit is null).
    virtual void reset_agent(int agent, const config::Profile& profile, const env::DeviceMarket& market) {
        (void)agent, (void)profile, (void)market;
        throw std::logic_error("this batched engine cannot start a new agent in a slot");
    }
    /// An offline trainer's dataset collection rate over every agent, env steps/s; 0 otherwise.
    virtual double dataset_collection_env_steps_per_s() const noexcept { return 0; }
};

/// What a batched population's agents (its Trainers) share: they advance in rounds, the first agent
/// of a round (its own count equal to the population's) running the population's iteration for
/// every agent, the others (one behind it) counting it; and the live ones are asked which updates
/// a test spoils with a NaN loss. `Agent` has agent() and injects_nan_at(update).
template <class Agent>
class PopulationAgents {
public:
    void join(const Agent* a) { live_.push_back(a); }
    void leave(const Agent* a) { live_.erase(std::remove(live_.begin(), live_.end(), a), live_.end()); }
    /// One agent's step of a round: `population_at` the population's iterations, `own` the agent's.
    static void advance(BatchedPopulation& population, long long population_at, long long own) {
        if (population_at == own)
            population.iterate();
        else if (population_at != own + 1)
            throw std::logic_error("the agents of a batched population advance one iteration a round");
    }
    /// Bit a set for each live agent a < 32 whose Trainer asked for a NaN loss at update `u` (tests).
    std::uint32_t nan_mask(long long u) const {
        return nan_mask([u](int) { return u; });
    }
    /// The same where each agent a is at its own update `update_of(a)`.
    template <class UpdateOf>
    std::uint32_t nan_mask(UpdateOf&& update_of) const {
        std::uint32_t mask = 0;
        for (const Agent* a : live_)
            if (a->agent() < 32 && a->injects_nan_at(update_of(a->agent()))) mask |= 1u << a->agent();
        return mask;
    }

private:
    std::vector<const Agent*> live_;
};

/// Agent `agent` of a batched engine (DqnEngine, PpoEngine, IqlEngine) as a Trainer (`Base`:
/// Trainer, or UpdateCountedTrainer for an offline trainer), with its own logs, evaluations,
/// checkpoints and summary. The agents advance together (PopulationAgents, the engine's members_):
/// the first of a round to iterate runs the engine's iteration for every agent. What every
/// engine's agent shares: its engine and index, its environment, its place in the engine's rounds
/// and what it forwards to the engine; the trainer's own counters and state are the derived class's.
template <class Engine, class Base = Trainer>
class EngineAgent : public Base {
public:
    EngineAgent(const EngineAgent&) = delete;
    EngineAgent& operator=(const EngineAgent&) = delete;
    ~EngineAgent() override { engine_->members_.leave(this); }

    const env::EnvParams& env_params() const noexcept override { return env_params_; }
    void set_agent_keys(const config::Profile& profile) override { engine_->set_agent_keys(agent_, profile); }
    long long batch_rows() const noexcept override { return engine_->batch_rows(); }
    int agent() const noexcept { return agent_; }
    Engine& engine() noexcept { return *engine_; }
    /// Whether a test asked for a NaN loss at update u of this agent.
    bool injects_nan_at(long long u) const noexcept { return this->nan_injected(u); }

protected:
    /// Agent `agent` of `engine`, at `own` iterations of its own.
    EngineAgent(std::shared_ptr<Engine> engine, int agent, long long own)
        : engine_(std::move(engine)),
          agent_(agent),
          env_params_(engine_->env_params(agent)),
          start_(engine_->iterations() - own) {
        engine_->members_.join(this);
    }
    /// This agent's iteration after `own` of its own: the first agent of a round runs the engine's.
    void advance(long long own) {
        PopulationAgents<EngineAgent>::advance(*engine_, engine_->iterations(), start_ + own);
    }
    /// Whether this agent, after `own` iterations of its own, is the first of its round (its
    /// iterate() runs the engine's iteration).
    bool first_of_round(long long own) const { return engine_->iterations() == start_ + own; }
    /// A resume: the agent goes on from `own` iterations of its own.
    void restart_at(long long own) { start_ = engine_->iterations() - own; }
    /// Bench runs an engine of one through its agent (a population is benched as one, bench_population).
    void require_alone() const {
        if (engine_->agents() != 1)
            throw std::logic_error("bench the engine (bench_population), not one of its agents");
    }

    std::shared_ptr<Engine> engine_;
    int agent_;
    env::EnvParams env_params_;

private:
    long long start_;  ///< the engine's iteration at which this agent's first was (its own count from there)
};

/// A single run of `profile` on `market`'s training split: agent 0 of an Engine of one (as a `Result`).
template <class Result, class Agent, class Engine>
std::unique_ptr<Result> single_run(ops::Device& ops, const config::Profile& profile, const env::DeviceMarket& market) {
    return std::make_unique<Agent>(std::make_shared<Engine>(ops, std::vector<config::Profile>{profile},
                                                            std::vector<const env::DeviceMarket*>{&market}),
                                   0);
}

/// The checks of an engine's reset_agent: slot `agent` of `profiles` (the first agent's first)
/// can start `next` on `market` (std::out_of_range, or UsageError naming what
/// `unsupported(next, first)`, the engine's, finds, or a market of other features than
/// `market_dim`). `engine` names it ("a DQN engine").
template <class Unsupported>
void check_new_agent(const std::vector<config::Profile>& profiles, int agent, const config::Profile& next,
                     const env::DeviceMarket& market, int market_dim, Unsupported&& unsupported, const char* engine) {
    if (agent < 0 || static_cast<std::size_t>(agent) >= profiles.size())
        throw std::out_of_range("reset_agent: no such agent");
    if (const std::string why = unsupported(next, profiles.front()); !why.empty())
        throw UsageError("a new agent cannot train in slot " + std::to_string(agent) + " of " + engine + ": " + why);
    if (market.market_dim() != market_dim)
        throw UsageError("a new agent's market has " + std::to_string(market.market_dim()) +
                         " features, the engine's " + std::to_string(market_dim));
}

/// The checks of an engine's set_agent_keys: agent `agent`'s profile in `profiles` becomes `next`
/// where its run.seed is the same (else UsageError `keeps_seed`) and `unsupported(next, current)`,
/// the engine's, names no problem (else UsageError). Returns the agent's index.
template <class Unsupported>
std::size_t replace_agent_keys(std::vector<config::Profile>& profiles, int agent, const config::Profile& next,
                               Unsupported&& unsupported, const char* keeps_seed) {
    if (agent < 0 || static_cast<std::size_t>(agent) >= profiles.size())
        throw std::out_of_range("set_agent_keys: no such agent");
    auto& current = profiles[static_cast<std::size_t>(agent)];
    if (next.run.seed != current.run.seed) throw UsageError(keeps_seed);
    if (const std::string why = unsupported(next, current); !why.empty())
        throw UsageError("agent " + std::to_string(agent) + ": its keys cannot change while it trains: " + why);
    current = next;
    return static_cast<std::size_t>(agent);
}

/// Agent a's entry of an engine's per-agent vector of parts (e.g. curiosity models): appended
/// while the constructor starts its agents in order, replaced when reset_agent starts a slot again.
template <class T>
void put_agent(std::vector<T>& parts, std::size_t a, T&& part) {
    if (a < parts.size())
        parts[a] = std::move(part);
    else if (a == parts.size())
        parts.push_back(std::move(part));
    else
        throw std::logic_error("put_agent: the agents start in order");
}

/// Agent a's slice of an engine buffer laid out [agents][values.size()] set to `values`.
template <class T>
void upload_agent(ops::Device& ops, ops::Buffer<T>& buffer, std::size_t a, const std::vector<T>& values) {
    ops.upload<T>(buffer.view().subview(a * values.size(), values.size()), values);
}

/// Issues `issue` as the captured `sequence`, or uncaptured where a test injects a NaN loss.
template <class Issue>
void run_unless_injected(ops::Device& ops, ops::OpSequence& sequence, bool inject, Issue&& issue) {
    if (inject)
        issue();  // tests: never captured
    else
        ops.run_sequence(sequence, issue);
}

/// The ops::counter_value of each agent's own counter: counters[a] * scale + offset (one counter an agent).
inline ops::CounterValue agent_counter(ops::View<const long long> counters, long long scale = 1, long long offset = 0) {
    ops::CounterValue value = ops::counter_value(counters.subview(0, 1), scale, offset);
    value.agent_stride = 1;
    return value;
}

/// Tests: the statistic `stat` (one float an agent) of each agent a < 32 of `mask` (bit a) set to NaN.
inline void inject_nan_at(ops::Device& ops, ops::View<float> stat, std::uint32_t mask) {
    for (std::size_t a = 0; a < stat.size() && a < 32; ++a)
        if (mask & (1u << a)) ops::run(ops, ops::Fill{stat.subview(a, 1), std::numeric_limits<float>::quiet_NaN()});
}

/// The first agent's profile, once there is one and a market for each agent (else UsageError,
/// naming the `trainer`'s engine).
inline const config::Profile& first_agent(const std::vector<config::Profile>& agents,
                                          const std::vector<const env::DeviceMarket*>& markets, const char* trainer) {
    if (agents.empty() || markets.size() != agents.size() ||
        std::any_of(markets.begin(), markets.end(), [](const env::DeviceMarket* m) { return m == nullptr; }))
        throw UsageError(std::string("a batched ") + trainer +
                         " population needs at least one agent and a market for each");
    return agents.front();
}

/// The checks of an engine's constructor, agent by agent: `require(agent)` (the trainer's own
/// rules), then UsageError "agent i cannot train in `engine`: why" where `unsupported(agent,
/// first)` names a problem, or where its market has other features than the first agent's.
template <class Unsupported, class Require>
void check_agents(const std::vector<config::Profile>& agents, const std::vector<const env::DeviceMarket*>& markets,
                  const char* engine, Unsupported&& unsupported, Require&& require) {
    for (std::size_t i = 0; i < agents.size(); ++i) {
        require(agents[i]);
        if (const std::string why = unsupported(agents[i], agents.front()); !why.empty())
            throw UsageError("agent " + std::to_string(i) + " cannot train in " + engine + ": " + why);
        if (markets[i]->market_dim() != markets.front()->market_dim())
            throw UsageError("agent " + std::to_string(i) + "'s market has " +
                             std::to_string(markets[i]->market_dim()) + " features, the first agent's " +
                             std::to_string(markets.front()->market_dim()));
    }
}

/// What every batched engine (DqnEngine, PpoEngine, IqlEngine) keeps: its device, its agents'
/// profiles, the plan its buffers are allocated from (MemoryPlan::allocate), its iterations, and
/// its agents as Trainers (`Agent`, an EngineAgent<Engine, AgentBase>) that advance together.
template <class Engine, class Agent, class AgentBase = Trainer>
class BatchedEngine : public BatchedPopulation, public std::enable_shared_from_this<Engine> {
public:
    int agents() const noexcept override { return agents_; }
    std::unique_ptr<Trainer> agent(int i) override { return std::make_unique<Agent>(this->shared_from_this(), i); }
    /// The engine's iterations (an iteration of every agent each); an agent's own counters count
    /// from its own start (a slot reset_agent started again, or a resume).
    long long iterations() const noexcept { return iterations_; }
    const config::Profile& profile(int agent) const { return profiles_.at(static_cast<std::size_t>(agent)); }
    ops::Device& device() noexcept { return ops_; }

protected:
    /// An engine of `agents`, agent i on markets[i] (UsageError where first_agent finds none,
    /// naming the `trainer`).
    BatchedEngine(ops::Device& ops, const std::vector<config::Profile>& agents,
                  const std::vector<const env::DeviceMarket*>& markets, const char* trainer)
        : ops_(ops),
          profiles_(agents),
          agents_((first_agent(agents, markets, trainer), static_cast<int>(agents.size()))) {}

    ops::Device& ops_;
    std::vector<config::Profile> profiles_;
    MemoryPlan plan_;  ///< the engine's buffers, their starting values
    int agents_;
    long long iterations_ = 0;
    friend class EngineAgent<Engine, AgentBase>;
    PopulationAgents<EngineAgent<Engine, AgentBase>> members_;
};

/// Why `agent` cannot train in a batched population whose first agent is `first` ("" when it can):
/// the conditions of the trainer's engine (its TrainerKind, registry.hpp), or a trainer without a
/// batched engine.
std::string batched_population_unsupported(const config::Profile& agent, const config::Profile& first);
/// Why a successive halving search of `first`'s agents (rounds every `interval` progress units)
/// cannot train as one batched engine ("" when it can): the engine cannot start a new point in a
/// slot (TrainerKind::batched_refill_unit), or the rounds do not fall on its iterations.
std::string batched_halving_unsupported(const config::Profile& first, long long interval);
/// The progress units of one iteration of `first`'s batched engine where it can start a new agent
/// in a slot (TrainerKind::batched_refill_unit); 0 where it cannot.
long long batched_refill_unit(const config::Profile& first);
/// With run.population_batching = "auto": why agents of `first`'s shape run faster on their own
/// launches, measured per trainer ("" when they batch).
std::string auto_batching_declined(const config::Profile& first);

/// The batched engine of `agents` (each unsupported() == ""), agent i on markets[i]'s training split.
std::shared_ptr<BatchedPopulation> make_batched_population(ops::Device& ops, const std::vector<config::Profile>& agents,
                                                           const std::vector<const env::DeviceMarket*>& markets);

}  // namespace fh::trainers
