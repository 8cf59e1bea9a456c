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
#include "device/cpu_device.hpp"
#include "support/compare.hpp"
#include "support/gpu.hpp"
#include "support/engine_agents.hpp"
#include "support/trainer_support.hpp"
#include "trainers/iql/engine.hpp"
#include "trainers/setup.hpp"
#include "util/errors.hpp"

using namespace fh;
using fh::test::as_floats;
using fh::test::movement_fraction;
using fh::test::relative_l2;
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

/// How far the agents part from their single runs: `bits` whether every float tensor below is the
/// same bytes; the largest movement_fraction of the online and target weights, relative_l2 of
/// Adam's moments, and the worst element of the monitor's accumulators in units of a 1% relative
/// bound (they sum the updates' losses; NaN where both runs logged a NaN loss).
struct Parting {
    bool bits = true;
    double online = 0, target = 0, m = 0, v = 0, monitor = 0;
};

/// Trains the agents as one population and each alone for `updates` (with NaN losses at
/// `nan_updates` of agent 1 in both). The guard states must be equal; the logged losses are
/// compared bit for bit when `exact` (the CPU), else within 1e-3.
Parting population_against_single_runs(ops::Device& ops, const std::vector<config::Profile>& agents, int updates,
                                       const std::vector<long long>& nan_updates = {}, bool exact = true) {
    const test::AgentMarkets markets(ops, agents);
    auto population = std::make_shared<trainers::IqlEngine>(ops, agents, markets.views);
    std::vector<std::unique_ptr<trainers::Trainer>> members;
    for (std::size_t i = 0; i < agents.size(); ++i) members.push_back(population->agent(static_cast<int>(i)));
    members[1]->inject_nan_at_updates(nan_updates);
    for (int k = 0; k < updates; ++k)
        for (auto& m : members) m->iterate();
    REQUIRE(population->iterations() == updates);
    Parting worst;
    std::vector<float> first_online;
    for (std::size_t i = 0; i < agents.size(); ++i) {
        INFO("agent " << i);
        const auto alone = trainers::make_iql_trainer(ops, agents[i], *markets.views[i]);
        trainers::Trainer& single = *alone;
        if (i == 1) single.inject_nan_at_updates(nan_updates);
        const auto start_online = as_floats(tensor_bytes(ops, single, "params/online")),
                   start_target = as_floats(tensor_bytes(ops, single, "params/target"));
        for (int k = 0; k < updates; ++k) single.iterate();
        REQUIRE(members[i]->updates() == single.updates());
        CHECK(members[i]->env_steps() == single.env_steps());
        const auto got = [&](const char* name) { return as_floats(tensor_bytes(ops, *members[i], name)); };
        const auto ref = [&](const char* name) { return as_floats(tensor_bytes(ops, single, name)); };
        for (const char* name : {"params/online", "params/target", "adam/m", "adam/v", "monitor/accumulators"})
            worst.bits = worst.bits && test::same_bits(got(name), ref(name));
        worst.online =
            std::max(worst.online, movement_fraction(got("params/online"), ref("params/online"), start_online));
        worst.target =
            std::max(worst.target, movement_fraction(got("params/target"), ref("params/target"), start_target));
        worst.m = std::max(worst.m, relative_l2(got("adam/m"), ref("adam/m")));
        worst.v = std::max(worst.v, relative_l2(got("adam/v"), ref("adam/v")));
        worst.monitor =
            std::max(worst.monitor, test::compare_close(got("monitor/accumulators"), ref("monitor/accumulators"),
                                                        test::Tol{0, 1e-2}, test::Nan::both_match)
                                        .worst);
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
        if (exact)
            CHECK(std::memcmp(&la.loss, &lb.loss, sizeof la.loss) == 0);
        else
            CHECK(test::close_value(lb.loss, la.loss, test::Tol{0, 1e-3}, test::Nan::both_match));
        const auto online = as_floats(tensor_bytes(ops, *members[i], "params/online"));
        if (i == 0)
            first_online = online;
        else
            CHECK(online != first_online);  // own seeds or hyperparameters: not copies
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
        CHECK(population_against_single_runs(ops, agents, 30).bits);
    }
    SECTION("periodic targets; a NaN loss skips agent 1's update 5 alone") {
        CHECK(population_against_single_runs(ops, three_agents({"training.tau=0", "training.target_update_period=4"}),
                                             30, {5})
                  .bits);
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
    // A resume continues each agent from its own update.
    auto population =
        std::make_shared<trainers::IqlEngine>(ops, std::vector<config::Profile>{first, agent_profile({"run.seed=8"})},
                                              std::vector<const env::DeviceMarket*>{&market, &market});
    auto a = population->agent(0), b = population->agent(1);
    a->restore_counter_values(std::vector<std::int64_t>{5});
    b->restore_counter_values(std::vector<std::int64_t>{6});
    CHECK(population->updates(0) == 5);
    a->iterate();
    b->iterate();
    CHECK(population->iterations() == 1);
    CHECK(a->updates() == 6);
    CHECK(b->updates() == 7);
    CHECK(population->updates(1) == 7);
    // A slot starts again only with an agent of the engine's shape.
    b.reset();
    CHECK_THROWS_AS(population->reset_agent(1, agent_profile({"iql.hidden=[32, 32]"}), market), UsageError);
}

namespace {

bool same_state(ops::Device& ops, trainers::Trainer& a, trainers::Trainer& b) {
    const auto ta = a.state_tensors(), tb = b.state_tensors();
    bool same = ta.size() == tb.size() && a.counter_values() == b.counter_values() && a.env_steps() == b.env_steps();
    for (std::size_t k = 0; same && k < ta.size(); ++k) {
        INFO(ta[k].name);
        same = ta[k].name == tb[k].name && ops.to_host<std::byte>(ta[k].bytes) == ops.to_host<std::byte>(tb[k].bytes);
        CHECK(same);
    }
    return same;
}

}  // namespace

TEST_CASE(
    "An IQL engine's slot started again (reset_agent) trains as a single run of its new agent, the others on "
    "(CPU)",
    "[trainers][iql][population][search]") {
    ops::CpuDevice ops;
    std::vector<std::string> shared;
    SECTION("soft targets") {}
    SECTION("periodic targets") {
        shared = {"training.tau=0", "training.target_update_period=4"};
    }
    const auto agents = three_agents(shared);
    auto fresh = shared;
    // Its own seed (dataset, weights, sampling) and keys, and a market of its own.
    for (const char* o : {"run.seed=21", "training.learning_rate=0.002", "iql.expectile=0.8", "data.seed=9"})
        fresh.emplace_back(o);
    const config::Profile point = agent_profile(fresh);
    const test::AgentMarkets markets(ops, agents);
    const env::DeviceMarket point_market(ops, data::load_market(trainers::data_options(point)));
    test::EngineAgents members(std::make_shared<trainers::IqlEngine>(ops, agents, markets.views));
    // 13 updates, then agent 1's slot starts the new point (a NaN loss at its update 3: the guard
    // counts from its own start), 20 more.
    constexpr int kBefore = 13, kAfter = 20;
    members.rounds(kBefore);
    members.restart(1, point, point_market).inject_nan_at_updates({3});
    CHECK(members[1].iterations() == 0);
    CHECK(members[1].updates() == 0);
    members.rounds(kAfter);
    CHECK(members[1].updates() == kAfter);
    CHECK(members[0].updates() == kBefore + kAfter);
    auto alone = trainers::make_iql_trainer(ops, point, point_market);
    alone->inject_nan_at_updates({3});
    for (int k = 0; k < kAfter; ++k) alone->iterate();
    CHECK(same_state(ops, members[1], *alone));
    const auto got = members[1].read_log(1.0), want = alone->read_log(1.0);
    CHECK(std::memcmp(&got.loss, &want.loss, sizeof got.loss) == 0);
    for (int i : {0, 2}) {  // the other agents train on as they would alone
        INFO("agent " << i);
        auto single = trainers::make_iql_trainer(ops, agents[static_cast<std::size_t>(i)],
                                                 *markets.views[static_cast<std::size_t>(i)]);
        for (int k = 0; k < kBefore + kAfter; ++k) single->iterate();
        CHECK(same_state(ops, members[static_cast<std::size_t>(i)], *single));
    }
}

TEST_CASE("A batched IQL population's agents against their single runs on the GPU (N = 8)",
          "[gpu][trainers][iql][population]") {
    auto& ops = test::gpu_ops();
    std::vector<config::Profile> agents;
    for (int i = 0; i < 8; ++i)
        agents.push_back(agent_profile({"run.seed=" + std::to_string(20 + i), "iql.hidden=[256, 256]",
                                        "replay_buffer.batch_size=256",
                                        "training.learning_rate=" + std::to_string(0.0002 * (1 + i % 3))}));
    const auto r = population_against_single_runs(ops, agents, 40, {7}, false);
    // Error model: the population's products are strided batches of 8 networks where a single run
    // multiplies one network or its twin pair: cuBLAS may pick other algorithms and round
    // differently (a relative ~1e-6 per product). The dataset and the sampled batches are the same
    // integers, so the runs part only through those roundings, carried through 40 Adam updates
    // (each moves a weight by about the learning rate whatever the rounding). Bounded: 1% of the
    // weights' movement; Adam's moments within 1% (m) and 2% (v: squares) of their norm; the
    // monitor's sums of losses within 1% each.
    WARN("GPU IQL population against single runs, fraction of the movement: online "
         << r.online << ", target " << r.target << "; Adam's m " << r.m << ", v " << r.v << "; monitor (units of 1%) "
         << r.monitor);
    CHECK(r.online <= 0.01);
    CHECK(r.target <= 0.01);
    CHECK(r.m <= 0.01);
    CHECK(r.v <= 0.02);
    CHECK(r.monitor <= 1);
}
