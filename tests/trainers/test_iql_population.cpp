/// @file test_iql_population.cpp
/// @brief The IQL engine of N agents (trainers::IqlEngine): agent i's weights, target, Adam
///        moments, guard and log sums after a run equal an engine of one's with agent i's profile
///        (a single run): bit for
///        bit on the CPU; on the GPU within a bound the test reports.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "config/profile.hpp"
#include "data/load.hpp"
#include "env/vec_env.hpp"
#include "ops/cpu_device.hpp"
#include "support/compare.hpp"
#include "support/gpu.hpp"
#include "support/trainer_support.hpp"
#include "trainers/iql/engine.hpp"
#include "trainers/setup.hpp"
#include "util/errors.hpp"

using namespace fh;
using fh::test::as_floats;
using fh::test::max_relative_difference;
using fh::test::tensor_bytes;

namespace {

config::Profile agent_profile(const std::vector<std::string>& overrides) {
    const std::string text = R"(
[run]
trainer = "iql"
seed = 7
[data]
synthetic_bars = 3000
cache_dir = ""
[experience]
gpu_n_episodes = 4
gpu_timesteps_per_episode = 40
[replay_buffer]
batch_size = 24
[iql]
hidden = [32, 16]
dataset = "behaviour"
dataset_size = 600
)";
    return config::resolve_profile_text(text, "test-profile", overrides);
}

const char* const kFloatTensors[] = {"params/online", "params/target", "adam/m", "adam/v", "monitor/accumulators"};

/// Trains the agents as one population and each alone for `updates` (with NaN losses at
/// `nan_updates` of agent 1 in both); returns the largest relative difference between any agent's
/// checkpoint tensors and its single run's (0: bit for bit; the guard states must be equal). The
/// logged losses are compared bit for bit when `exact` (the CPU), else within 1e-3.
double population_against_single_runs(ops::Device& ops, const std::vector<config::Profile>& agents, int updates,
                                      const std::vector<long long>& nan_updates = {}, bool exact = true) {
    std::vector<std::unique_ptr<env::DeviceMarket>> markets;
    std::vector<const env::DeviceMarket*> views;
    for (const auto& p : agents) {
        markets.push_back(std::make_unique<env::DeviceMarket>(ops, data::load_market(trainers::data_options(p))));
        views.push_back(markets.back().get());
    }
    auto population = std::make_shared<trainers::IqlEngine>(ops, agents, views);
    std::vector<std::unique_ptr<trainers::Trainer>> members;
    for (std::size_t i = 0; i < agents.size(); ++i) members.push_back(population->agent(static_cast<int>(i)));
    members[1]->inject_nan_at_updates(nan_updates);
    for (int k = 0; k < updates; ++k)
        for (auto& m : members) m->iterate();
    REQUIRE(population->updates() == updates);
    double worst = 0;
    std::vector<float> first_online;
    for (std::size_t i = 0; i < agents.size(); ++i) {
        INFO("agent " << i);
        const auto alone = trainers::make_iql_trainer(ops, agents[i], *markets[i]);
        trainers::Trainer& single = *alone;
        if (i == 1) single.inject_nan_at_updates(nan_updates);
        for (int k = 0; k < updates; ++k) single.iterate();
        REQUIRE(members[i]->updates() == single.updates());
        CHECK(members[i]->env_steps() == single.env_steps());
        for (const char* name : kFloatTensors)
            worst = std::max(worst, max_relative_difference(as_floats(tensor_bytes(ops, single, name)),
                                                            as_floats(tensor_bytes(ops, *members[i], name))));
        CHECK(tensor_bytes(ops, single, "guard/state") == tensor_bytes(ops, *members[i], "guard/state"));
        // The same names, shapes and order as a single run's checkpoint.
        const auto a = single.state_tensors(), b = members[i]->state_tensors();
        REQUIRE(a.size() == b.size());
        for (std::size_t k = 0; k < a.size(); ++k) {
            CHECK(a[k].name == b[k].name);
            CHECK(a[k].shape == b[k].shape);
            CHECK(a[k].dtype == b[k].dtype);
        }
        // The log lines: the same loss (a NaN one too).
        const auto la = single.read_log(1.0), lb = members[i]->read_log(1.0);
        if (exact) CHECK(std::memcmp(&la.loss, &lb.loss, sizeof la.loss) == 0);
        else CHECK((std::isnan(la.loss) ? std::isnan(lb.loss) : lb.loss == Approx(la.loss).epsilon(1e-3)));
        const auto online = as_floats(tensor_bytes(ops, *members[i], "params/online"));
        if (i == 0) first_online = online;
        else CHECK(online != first_online);  // own seeds or hyperparameters: not copies
    }
    return worst;
}

/// Three agents: their own seeds, and a grid's scalars.
std::vector<config::Profile> three_agents(const std::vector<std::string>& shared) {
    std::vector<config::Profile> agents;
    const std::vector<std::vector<std::string>> own{
        {"run.seed=3"},
        {"run.seed=11", "training.learning_rate=0.0005", "training.gamma=0.95", "iql.expectile=0.9"},
        {"run.seed=12", "iql.beta=1.5", "iql.max_weight=20", "training.learning_rate=0.002"}};
    for (const auto& o : own) {
        auto overrides = shared;
        overrides.insert(overrides.end(), o.begin(), o.end());
        agents.push_back(agent_profile(overrides));
    }
    return agents;
}

}  // namespace

TEST_CASE("A batched IQL population's agents equal their single runs bit for bit (CPU, N = 3)",
          "[trainers][iql][population]") {
    ops::CpuDevice ops;
    SECTION("soft targets with each agent's tau") {
        auto agents = three_agents({"training.grad_clip_norm=1"});
        agents[2].training.tau = 0.02;
        CHECK(population_against_single_runs(ops, agents, 30) == 0.0);
    }
    SECTION("periodic targets; a NaN loss skips agent 1's update 5 alone") {
        CHECK(population_against_single_runs(ops, three_agents({"training.tau=0", "training.target_update_period=4"}),
                                             30, {5}) == 0.0);
    }
}

TEST_CASE("A batched IQL population refuses what it does not batch, naming it", "[trainers][iql][population]") {
    const auto first = agent_profile({});
    CHECK(trainers::IqlEngine::unsupported(agent_profile({"run.seed=9", "iql.beta=1"}), first).empty());
    CHECK(trainers::IqlEngine::unsupported(agent_profile({"iql.hidden=[32, 32]"}), first).find("shape") !=
          std::string::npos);
    CHECK(trainers::IqlEngine::unsupported(agent_profile({"training.tau=0"}), first).find("soft target") !=
          std::string::npos);
    CHECK(trainers::IqlEngine::unsupported(agent_profile({"env.reward_scale=2"}), first).find("environment") !=
          std::string::npos);
    ops::CpuDevice ops;
    env::DeviceMarket market(ops, data::load_market(trainers::data_options(first)));
    auto dqn = first;
    dqn.run.trainer = "dqn";
    CHECK_THROWS_AS(trainers::IqlEngine(ops, {first, dqn}, {&market, &market}), UsageError);
    CHECK_THROWS_AS(trainers::IqlEngine(ops, {first}, {}), UsageError);
    // A resume continues every agent from one update: the first sets it, another must match.
    auto population = std::make_shared<trainers::IqlEngine>(
        ops, std::vector<config::Profile>{first, agent_profile({"run.seed=8"})},
        std::vector<const env::DeviceMarket*>{&market, &market});
    auto a = population->agent(0), b = population->agent(1);
    a->restore_counter_values(std::vector<std::int64_t>{5});
    CHECK(population->updates() == 5);
    CHECK_THROWS_AS(b->restore_counter_values(std::vector<std::int64_t>{6}), UsageError);
    b->restore_counter_values(std::vector<std::int64_t>{5});
    a->iterate();
    b->iterate();
    CHECK(population->updates() == 6);
    CHECK(b->updates() == 6);
}

TEST_CASE("A batched IQL population's agents against their single runs on the GPU (N = 8)",
          "[gpu][trainers][iql][population]") {
    auto& ops = test::gpu_ops();
    std::vector<config::Profile> agents;
    for (int i = 0; i < 8; ++i)
        agents.push_back(agent_profile({"run.seed=" + std::to_string(20 + i), "iql.hidden=[256, 256]",
                                        "replay_buffer.batch_size=256",
                                        "training.learning_rate=" + std::to_string(0.0002 * (1 + i % 3))}));
    const double worst = population_against_single_runs(ops, agents, 40, {7}, false);
    // The population's products are strided batches of 8 networks where a single run multiplies
    // one network or its twin pair: cuBLAS may pick other algorithms and round differently.
    WARN("GPU IQL population against single runs: largest relative difference " << worst);
    CHECK(worst < 1e-3);
}
