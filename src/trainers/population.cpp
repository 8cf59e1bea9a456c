/// @file population.cpp
/// @brief Which batched engine trains a population: DqnPopulation for DQN agents, IqlPopulation for
///        IQL, PpoPopulation for PPO.
#include "trainers/population.hpp"

#include <fmt/format.h>

#include "trainers/dqn_population.hpp"
#include "trainers/iql_population.hpp"
#include "trainers/ppo_population.hpp"
#include "util/errors.hpp"

namespace fh::trainers {

std::string batched_population_unsupported(const config::Profile& agent, const config::Profile& first) {
    if (first.run.trainer == "dqn") return DqnPopulation::unsupported(agent, first);
    if (first.run.trainer == "iql") return IqlPopulation::unsupported(agent, first);
    if (first.run.trainer == "ppo") return PpoPopulation::unsupported(agent, first);
    return fmt::format("run.trainer = \"{}\" has no batched engine (dqn, iql and ppo have)", first.run.trainer);
}

std::shared_ptr<BatchedPopulation> make_batched_population(ops::Device& ops, const std::vector<config::Profile>& agents,
                                                           const std::vector<const env::DeviceMarket*>& markets) {
    if (agents.empty()) throw UsageError("a batched population needs at least one agent");
    if (agents.front().run.trainer == "dqn") return std::make_shared<DqnPopulation>(ops, agents, markets);
    if (agents.front().run.trainer == "iql") return std::make_shared<IqlPopulation>(ops, agents, markets);
    if (agents.front().run.trainer == "ppo") return std::make_shared<PpoPopulation>(ops, agents, markets);
    throw UsageError(batched_population_unsupported(agents.front(), agents.front()));
}

}  // namespace fh::trainers
