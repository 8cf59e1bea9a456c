/// @file test_ppo_population.cpp
/// @brief The PPO engine of N agents (trainers::PpoEngine): agent i's weights, Adam moments,
///        environments, diversity windows, curiosity model, guard, log sums and histogram after some
///        rollouts equal an engine of one's (a single run) with agent i's profile: bit for bit on
///        the CPU; on the GPU within a bound the test reports.
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
#include "io/json.hpp"
#include "device/cpu_device.hpp"
#include "support/compare.hpp"
#include "support/gpu.hpp"
#include "support/engine_agents.hpp"
#include "support/trainer_support.hpp"
#include "trainers/ppo/engine.hpp"
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
trainer = "ppo"
seed = 5
total_steps = 1600
[data]
synthetic_bars = 3000
cache_dir = ""
[env]
position_levels = 15
[experience]
gpu_n_episodes = 6
gpu_timesteps_per_episode = 20
[ppo]
hidden = [32, 16]
epochs = 2
minibatches = 3
diversity_window = 8
diversity_coef = 0.05
)";
    return config::resolve_profile_text(text, "test-profile", overrides);
}

/// Trains the agents as one population and each alone for `rollouts` (with NaN policy losses at
/// `nan_updates` of agent 1 in both). exact (the CPU): every checkpoint tensor and the logged loss
/// bit for bit (the result's fields stay 0). Otherwise returns how far the agents part from their
/// single runs: the largest movement_fraction of the weights and relative_l2 of Adam's moments.
struct Parting {
    double params = 0, m = 0, v = 0;
};
Parting population_against_single_runs(ops::Device& ops, const std::vector<config::Profile>& agents, int rollouts,
                                       const std::vector<long long>& nan_updates = {}, bool exact = true) {
    const test::AgentMarkets markets(ops, agents);
    auto population = std::make_shared<trainers::PpoEngine>(ops, agents, markets.views);
    std::vector<std::unique_ptr<trainers::Trainer>> members;
    for (std::size_t i = 0; i < agents.size(); ++i) members.push_back(population->agent(static_cast<int>(i)));
    members[1]->inject_nan_at_updates(nan_updates);
    for (int k = 0; k < rollouts; ++k)
        for (auto& m : members) m->iterate();
    REQUIRE(population->iterations() == rollouts);
    Parting worst;
    std::vector<float> first_params;
    for (std::size_t i = 0; i < agents.size(); ++i) {
        INFO("agent " << i);
        const auto alone = trainers::make_ppo_trainer(ops, agents[i], *markets.views[i]);  // an engine of one
        trainers::Trainer& single = *alone;
        if (i == 1) single.inject_nan_at_updates(nan_updates);
        const auto start = as_floats(tensor_bytes(ops, single, "params/online"));
        for (int k = 0; k < rollouts; ++k) single.iterate();
        REQUIRE(members[i]->updates() == single.updates());
        CHECK(members[i]->env_steps() == single.env_steps());
        CHECK(members[i]->iterations() == single.iterations());
        CHECK(members[i]->counter_values() == single.counter_values());
        // The same names, shapes and order as a single run's checkpoint.
        const auto a = single.state_tensors(), b = members[i]->state_tensors();
        REQUIRE(a.size() == b.size());
        for (std::size_t k = 0; k < a.size(); ++k) {
            INFO(a[k].name);
            CHECK(a[k].name == b[k].name);
            CHECK(a[k].shape == b[k].shape);
            CHECK(a[k].dtype == b[k].dtype);
            if (exact) CHECK(ops.to_host<std::byte>(a[k].bytes) == ops.to_host<std::byte>(b[k].bytes));
        }
        if (!exact) {
            const auto got = [&](const char* name) { return as_floats(tensor_bytes(ops, *members[i], name)); };
            const auto ref = [&](const char* name) { return as_floats(tensor_bytes(ops, single, name)); };
            worst.params = std::max(worst.params, movement_fraction(got("params/online"), ref("params/online"), start));
            worst.m = std::max(worst.m, relative_l2(got("adam/m"), ref("adam/m")));
            worst.v = std::max(worst.v, relative_l2(got("adam/v"), ref("adam/v")));
        }
        // The log lines: the same loss (a NaN one too) and the same JSON on the CPU.
        const auto la = single.read_log(1.0), lb = members[i]->read_log(1.0);
        if (exact) {
            CHECK(std::memcmp(&la.loss, &lb.loss, sizeof la.loss) == 0);
            CHECK(io::json::serialize(la.json) == io::json::serialize(lb.json));
        } else {
            // The loss of the last update, from weights that part by the bound below: 1%.
            CHECK(test::close_value(lb.loss, la.loss, test::Tol{0, 1e-2}, test::Nan::both_match));
        }
        const auto params = as_floats(tensor_bytes(ops, *members[i], "params/online"));
        if (i == 0)
            first_params = params;
        else
            CHECK(params != first_params);  // own seeds or hyperparameters: not copies
    }
    return worst;
}

/// Three agents: their own seeds, and a grid's scalars.
std::vector<config::Profile> three_agents(const std::vector<std::string>& shared) {
    std::vector<config::Profile> agents;
    const std::vector<std::vector<std::string>> own{
        {"run.seed=3"},
        {"run.seed=11", "training.learning_rate=0.0005", "training.gamma=0.95", "ppo.gae_lambda=0.9",
         "ppo.entropy_coef=0.02"},
        {"run.seed=12", "ppo.clip=0.1", "ppo.value_coef=0.25", "training.learning_rate=0.002",
         "ppo.diversity_coef=0.2"}};
    for (const auto& o : own) {
        auto overrides = shared;
        overrides.insert(overrides.end(), o.begin(), o.end());
        agents.push_back(agent_profile(overrides));
    }
    return agents;
}

}  // namespace

TEST_CASE("A batched PPO population's agents equal their single runs bit for bit (CPU, N = 3)",
          "[trainers][ppo][population]") {
    ops::CpuDevice ops;
    SECTION(
        "each agent's seed, learning rate, gamma, lambda, clip and coefficients (diversity too); a linear schedule") {
        CHECK(population_against_single_runs(ops, three_agents({"training.grad_clip_norm=1"}), 3).params == 0.0);
    }
    SECTION("truncations in the middle of rollouts; no diversity penalty; a NaN loss skips agent 1's update 5 alone") {
        auto agents = three_agents({"env.bankruptcy_fraction=0.9995", "ppo.lr_schedule=\"constant\""});
        for (auto& a : agents) a.ppo.diversity_coef = 0;
        CHECK(population_against_single_runs(ops, agents, 3, {5}).params == 0.0);
    }
    SECTION("curiosity: each agent's forward model and its curiosity_coef") {
        auto agents = three_agents({"ppo.curiosity=true", "ppo.curiosity_coef=0.1"});
        agents[2].ppo.curiosity_coef = 0.3;
        CHECK(population_against_single_runs(ops, agents, 3).params == 0.0);
    }
}

TEST_CASE("A batched PPO population refuses what it does not batch, naming it", "[trainers][ppo][population]") {
    const auto first = agent_profile({});
    CHECK(trainers::PpoEngine::unsupported(agent_profile({"run.seed=9", "ppo.clip=0.3"}), first).empty());
    CHECK(trainers::PpoEngine::unsupported(agent_profile({"ppo.hidden=[32, 32]"}), first).find("shape") !=
          std::string::npos);
    CHECK(trainers::PpoEngine::unsupported(agent_profile({"ppo.epochs=3"}), first).find("shape") != std::string::npos);
    CHECK(trainers::PpoEngine::unsupported(agent_profile({"ppo.curiosity=true"}), first).find("ppo.curiosity") !=
          std::string::npos);  // with and without curiosity: not one engine
    CHECK(trainers::PpoEngine::unsupported(agent_profile({"ppo.curiosity=true", "run.seed=4"}),
                                           agent_profile({"ppo.curiosity=true", "ppo.curiosity_coef=0.5"}))
              .empty());
    CHECK(trainers::PpoEngine::unsupported(agent_profile({"ppo.diversity_coef=0.3"}), first).empty());
    CHECK(trainers::PpoEngine::unsupported(agent_profile({"ppo.diversity_coef=0"}), first).find("diversity") !=
          std::string::npos);
    CHECK(trainers::PpoEngine::unsupported(agent_profile({"env.reward_scale=2"}), first).find("environment") !=
          std::string::npos);
    ops::CpuDevice ops;
    env::DeviceMarket market(ops, data::load_market(trainers::data_options(first)));
    auto iql = first;
    iql.run.trainer = "iql";
    CHECK_THROWS_AS(trainers::PpoEngine(ops, {first, iql}, {&market, &market}), UsageError);
    CHECK_THROWS_AS(trainers::PpoEngine(ops, {first}, {}), UsageError);
    // A resume continues each agent from its own rollout (consistent counters).
    auto population =
        std::make_shared<trainers::PpoEngine>(ops, std::vector<config::Profile>{first, agent_profile({"run.seed=8"})},
                                              std::vector<const env::DeviceMarket*>{&market, &market});
    auto a = population->agent(0), b = population->agent(1);
    const long long per = first.ppo.epochs * first.ppo.minibatches;
    const long long T = first.experience.gpu_timesteps_per_episode;
    a->restore_counter_values(std::vector<std::int64_t>{2, 2 * T, 2 * per, 0});
    CHECK(population->rollouts(0) == 2);
    CHECK_THROWS_AS(b->restore_counter_values(std::vector<std::int64_t>{2, 2 * T, 2 * per + 1, 0}), UsageError);
    b->restore_counter_values(std::vector<std::int64_t>{3, 3 * T, 3 * per, 0});
    a->iterate();
    b->iterate();
    CHECK(population->iterations() == 1);
    CHECK(a->updates() == 3 * per);
    CHECK(b->updates() == 4 * per);
    // A slot starts again only with an agent of the engine's shape.
    b.reset();
    CHECK_THROWS_AS(population->reset_agent(1, agent_profile({"ppo.hidden=[32, 32]"}), market), UsageError);
}

TEST_CASE(
    "A PPO engine's slot started again (reset_agent) trains as a single run of its new agent, the others on "
    "(CPU)",
    "[trainers][ppo][population][search]") {
    ops::CpuDevice ops;
    std::vector<std::string> shared;
    SECTION("the diversity penalty, a linear schedule, truncations") {
        shared = {"env.bankruptcy_fraction=0.9995"};
    }
    SECTION("curiosity") {
        shared = {"ppo.curiosity=true", "ppo.curiosity_coef=0.1"};
    }
    const auto agents = three_agents(shared);
    auto fresh = shared;
    // Its own seed (environments, weights, sampling, minibatches), keys and market.
    for (const char* o : {"run.seed=21", "training.learning_rate=0.002", "ppo.entropy_coef=0.03", "data.seed=9"})
        fresh.emplace_back(o);
    const config::Profile point = agent_profile(fresh);
    const test::AgentMarkets markets(ops, agents);
    const env::DeviceMarket point_market(ops, data::load_market(trainers::data_options(point)));
    test::EngineAgents members(std::make_shared<trainers::PpoEngine>(ops, agents, markets.views));
    // 2 rollouts, then agent 1's slot starts the new point (a NaN loss at its update 4: the
    // guard counts from its own start), 3 more; each round issued ahead as training does.
    constexpr int kBefore = 2, kAfter = 3;
    members.rounds(kBefore);
    members.restart(1, point, point_market).inject_nan_at_updates({4});
    CHECK(members[1].iterations() == 0);
    CHECK(members[1].updates() == 0);
    members.rounds(kAfter);
    CHECK(members[1].iterations() == kAfter);
    CHECK(members[0].iterations() == kBefore + kAfter);
    const auto same = [&](trainers::Trainer& got, trainers::Trainer& want) {
        CHECK(got.counter_values() == want.counter_values());
        const auto a = want.state_tensors(), b = got.state_tensors();
        REQUIRE(a.size() == b.size());
        for (std::size_t k = 0; k < a.size(); ++k) {
            INFO(a[k].name);
            CHECK(a[k].name == b[k].name);
            CHECK(ops.to_host<std::byte>(a[k].bytes) == ops.to_host<std::byte>(b[k].bytes));
        }
        const auto la = want.read_log(1.0), lb = got.read_log(1.0);
        CHECK(io::json::serialize(la.json) == io::json::serialize(lb.json));
    };
    auto alone = trainers::make_ppo_trainer(ops, point, point_market);
    alone->inject_nan_at_updates({4});
    for (int k = 0; k < kAfter; ++k) alone->iterate();
    same(members[1], *alone);
    for (int i : {0, 2}) {  // the other agents train on as they would alone
        INFO("agent " << i);
        auto single = trainers::make_ppo_trainer(ops, agents[static_cast<std::size_t>(i)],
                                                 *markets.views[static_cast<std::size_t>(i)]);
        for (int k = 0; k < kBefore + kAfter; ++k) single->iterate();
        same(members[static_cast<std::size_t>(i)], *single);
    }
}

TEST_CASE("A batched PPO population's agents against their single runs on the GPU (N = 8)",
          "[gpu][trainers][ppo][population]") {
    auto& ops = test::gpu_ops();
    std::vector<config::Profile> agents;
    for (int i = 0; i < 8; ++i)
        agents.push_back(agent_profile({"run.seed=" + std::to_string(20 + i), "ppo.hidden=[64, 64]",
                                        "experience.gpu_n_episodes=64", "experience.gpu_timesteps_per_episode=32",
                                        "training.learning_rate=" + std::to_string(0.0002 * (1 + i % 3))}));
    const auto r = population_against_single_runs(ops, agents, 3, {7}, false);
    // Error model: the population's products are strided batches of 8 networks where a single run
    // multiplies one network: cuBLAS may pick other algorithms and round differently (a relative
    // ~1e-6 per product), carried through 3 rollouts x 6 Adam steps (each moves a weight by about
    // the learning rate, 2e-4 to 6e-4, whatever the rounding); and a sampled action whose uniform
    // draw falls within that rounding of a boundary may differ, changing one environment's (of
    // 64) transitions from there on: a few percent of a minibatch's gradient at most. Bounded:
    // 5% of the weights' movement (the bound was 1e-2 absolute: the whole movement); Adam's
    // moments within 5% (m) and 10% (v: squares, twice the gradients' relative error) of their norm.
    WARN("GPU PPO population against single runs, fraction of the movement: " << r.params << "; Adam's m " << r.m
                                                                              << ", v " << r.v);
    CHECK(r.params <= 0.05);
    CHECK(r.m <= 0.05);
    CHECK(r.v <= 0.1);
}
