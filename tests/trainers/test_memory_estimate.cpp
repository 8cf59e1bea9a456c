/// @file test_memory_estimate.cpp
/// @brief Every trainer's memory plan against what its engine really allocates, for every trainer,
///        every option that adds or resizes buffers and batched populations: the plan's bytes are
///        exactly those the device holds once the engine is built, has iterated, computed a
///        validation loss and acted in a backtest, and `check`'s estimate (the plan and the
///        data's sizes) covers the peak. Also the estimate's consumers, keys and sizes.
#include <catch2/catch.hpp>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "config/memory_estimate.hpp"
#include "config/profile.hpp"
#include "data/load.hpp"
#include "device/cpu_device.hpp"
#include "env/vec_env.hpp"
#include "config/support.hpp"
#include "trainers/dqn/engine.hpp"
#include "trainers/memory_plan.hpp"
#include "trainers/population.hpp"
#include "trainers/setup.hpp"
#include "trainers/supervised/trainer.hpp"
#include "trainers/trainer.hpp"

using namespace fh;

namespace {

struct Case {
    const char* profile;
    std::vector<std::string> overrides;
    int agents = 1;  ///< > 1: a batched population of that many agents (their seeds differ)
};

struct Measured {
    std::uint64_t held = 0;  ///< what the trainer held at the end, beside the market
    std::uint64_t peak = 0;  ///< the device's peak, with the market and the test's backtest buffers
    std::uint64_t own = 0;   ///< the market and the test's backtest buffers
    std::uint64_t planned = 0, planned_peak = 0, estimate = 0;
};

Measured measure(const Case& c) {
    std::vector<std::string> overrides = c.overrides;
    overrides.emplace_back("run.device=cpu");
    const auto p = config::resolve_profile_file(config::locate_profile(c.profile), overrides);
    ops::CpuDevice ops;
    const auto market = data::load_market(trainers::data_options(p));
    const env::DeviceMarket dm(ops, market);
    const std::uint64_t base = ops.bytes_in_use();
    Measured m;
    trainers::PlanInputs in;
    in.market_dim = dm.market_dim();
    {
        std::vector<std::unique_ptr<trainers::Trainer>> agents;
        std::shared_ptr<trainers::BatchedPopulation> engine;
        if (c.agents == 1) {
            agents.push_back(trainers::make_trainer(ops, p, dm));
            for (int i = 0; i < 4; ++i) agents[0]->iterate();
        } else {
            std::vector<config::Profile> profiles(static_cast<std::size_t>(c.agents), p);
            for (int i = 0; i < c.agents; ++i) profiles[static_cast<std::size_t>(i)].run.seed += i;
            engine = trainers::make_batched_population(
                ops, profiles, std::vector<const env::DeviceMarket*>(static_cast<std::size_t>(c.agents), &dm));
            for (int i = 0; i < c.agents; ++i) agents.push_back(engine->agent(i));
            for (int i = 0; i < 4; ++i) engine->iterate();
        }
        (void)agents[0]->validation_loss();  // the supervised forecaster's validation chunks
        if (const auto* s = dynamic_cast<const trainers::SupervisedTrainer*>(agents[0].get())) {
            in.train_samples = s->training_samples();
            in.val_samples = s->validation_samples();
        }
        m.held = ops.bytes_in_use() - base;
        // A backtest: every agent acts on environments of the test's.
        const int n = static_cast<int>(p.eval.segments);
        env::VecEnv venv(ops, dm, env::Split::train, agents[0]->env_params(), n);
        venv.reset_all();
        auto actions = ops.alloc<int>(static_cast<std::size_t>(n));
        const std::uint64_t before = ops.bytes_in_use();
        m.own = base + env::VecEnv::device_bytes(1, n, agents[0]->env_params().state_dim) + actions.size() * 4;
        for (auto& a : agents) a->act(ops, actions.view(), venv.states(), n);
        m.held += ops.bytes_in_use() - before;
        m.peak = ops.peak_bytes();
    }
    const trainers::MemoryPlan plan = trainers::memory_plan(p, c.agents, in);
    m.planned = plan.bytes(true);
    m.planned_peak = plan.bytes();
    config::SizeInputs size;
    size.bars = market.bars.size();
    size.host_backend = true;  // no CUDA context: what the CPU backend allocates
    for (const auto& item : trainers::estimate_device_memory(p, size, c.agents))
        if (item.consumer.rfind("backtest records", 0) != 0) m.estimate += item.bytes;
    return m;
}

}  // namespace

TEST_CASE("every trainer's memory plan is what its engine allocates, and check's estimate covers the peak",
          "[memory][trainers]") {
    const std::vector<Case> cases{
        {"dqn-smoketest", {}},
        {"dqn-smoketest", {"dqn.head=\"iqn\""}},
        {"dqn-smoketest", {"dqn.head=\"mse\""}},
        {"dqn-smoketest", {"dqn.her=true"}},
        {"dqn-smoketest", {"dqn.curiosity=true"}},
        {"dqn-smoketest", {"dqn.attention=true"}},
        {"dqn-smoketest", {"dqn.ensemble_size=3"}},
        {"dqn-smoketest", {"dqn.ensemble_size=3", "dqn.ensemble_bootstrap=0.5"}},
        {"dqn-smoketest", {"dqn.cql_alpha=0.3"}},
        {"dqn-smoketest", {"dqn.dueling=false"}},
        {"dqn-smoketest", {"experience.n_step=3", "replay_buffer.batch_size=64"}},
        {"dqn-smoketest",  // the online network on [s; s'] beside the target on s' (batch_size > 512)
         {"replay_buffer.batch_size=600", "replay_buffer.min_replay_size=1024", "replay_buffer.buffer_size=4096"}},
        {"dqn-smoketest", {}, 3},
        {"dqn-smoketest", {"dqn.her=true", "dqn.curiosity=true", "dqn.ensemble_size=2"}, 2},
        {"dqn-smoketest", {"dqn.head=\"iqn\""}, 2},
        {"dqn-smoketest", {"dqn.attention=true"}, 2},
        {"ppo-smoketest", {}},
        {"ppo-smoketest", {"ppo.curiosity=true"}},
        {"ppo-smoketest", {"ppo.curiosity=true"}, 3},
        {"iql-smoketest", {}},
        {"iql-smoketest", {}, 2},
        {"supervised-smoketest", {}},
        {"supervised-smoketest", {"data.val_fraction=0", "run.eval_interval=0"}},
        {"dt-smoketest", {}},
        {"dt-smoketest", {"dt.layers=3", "dt.context=12", "dt.batch_size=40", "eval.segments=4"}},
    };
    for (const auto& c : cases) {
        const Measured m = measure(c);
        std::string what = c.profile;
        for (const auto& o : c.overrides) what += " " + o;
        INFO(what << " (" << c.agents << " agents): held " << m.held << " B, planned " << m.planned << " B; peak "
                  << m.peak << " B, planned " << m.planned_peak << " B, estimated " << m.estimate << " B");
        CHECK(m.planned == m.held);
        CHECK(m.planned_peak + m.own >= m.peak);  // the transients are planned too
        CHECK(m.estimate >= m.peak);
        CHECK(m.estimate <= m.peak + m.peak / 2);
    }
}

namespace {
struct Engine {
    ops::Buffer<float> a, b;
    ops::Buffer<int> c;
};
}  // namespace

TEST_CASE("a memory plan allocates the members it declares, initialised where asked", "[memory][trainers]") {
    ops::CpuDevice ops;
    trainers::MemoryPlan plan;
    plan.consumer("things", "some.key");
    plan.add("a and b", {&Engine::a, &Engine::b}, 10, 1.5f);
    plan.add("c", {&Engine::c}, 3);
    plan.add<double>("a part's", 4);  // allocated by a part of the engine
    CHECK(plan.bytes() == 2 * 40 + 12 + 32);
    Engine e;
    plan.allocate(ops, e);
    CHECK(ops.bytes_in_use() == 2 * 40 + 12);
    CHECK(ops.to_host(e.b.cview()) == std::vector<float>(10, 1.5f));
    CHECK(e.c.size() == 3);
    struct Other {};
    Other other;
    CHECK_THROWS_AS(plan.allocate(ops, other), std::logic_error);  // another engine's plan
    const auto items = plan.device_items();
    REQUIRE(items.size() == 1);
    CHECK(items[0].consumer == "things");
    CHECK(items[0].key == "some.key");
    CHECK(items[0].bytes == 124);
}

namespace {
struct Agents {
    ops::Buffer<float> weights, stats, scratch;
    ops::Buffer<int> counts, shared;
};
}  // namespace

TEST_CASE("a memory plan sets one agent's slices back to their starting values", "[memory][trainers]") {
    ops::CpuDevice ops;
    trainers::MemoryPlan plan(3);
    using PerAgent = trainers::MemoryPlan::PerAgent;
    plan.add("weights", {&Agents::weights}, PerAgent{2}, 0.5f);  // [agents][2]
    plan.add("stats", {&Agents::stats}, PerAgent{1, 2}, 0.0f);   // [2][agents]
    plan.add("scratch", {&Agents::scratch}, PerAgent{2});        // no starting value
    plan.add("counts", {&Agents::counts}, PerAgent{1}, 7);       // not float: uploaded
    plan.add("shared", {&Agents::shared}, 2, 0);                 // the engine's, not an agent's
    CHECK(plan.bytes() == (6 + 6 + 6 + 3 + 2) * 4);
    Agents e;
    plan.allocate(ops, e);
    CHECK(e.weights.size() == 6);
    CHECK(e.stats.size() == 6);
    CHECK(ops.to_host(e.counts.cview()) == std::vector<int>{7, 7, 7});
    ops.upload<float>(e.weights.view(), std::vector<float>{1, 2, 3, 4, 5, 6});
    ops.upload<float>(e.stats.view(), std::vector<float>{1, 2, 3, 4, 5, 6});
    ops.upload<float>(e.scratch.view(), std::vector<float>{1, 2, 3, 4, 5, 6});
    ops.upload<int>(e.counts.view(), std::vector<int>{1, 2, 3});
    ops.upload<int>(e.shared.view(), std::vector<int>{1, 2});
    plan.reset_agent(ops, e, 1);
    CHECK(ops.to_host(e.weights.cview()) == std::vector<float>{1, 2, 0.5f, 0.5f, 5, 6});
    CHECK(ops.to_host(e.stats.cview()) == std::vector<float>{1, 0, 3, 4, 0, 6});
    CHECK(ops.to_host(e.scratch.cview()) == std::vector<float>{1, 2, 3, 4, 5, 6});
    CHECK(ops.to_host(e.counts.cview()) == std::vector<int>{1, 7, 3});
    CHECK(ops.to_host(e.shared.cview()) == std::vector<int>{1, 2});
    CHECK_THROWS_AS(plan.reset_agent(ops, e, 3), std::out_of_range);
}

TEST_CASE("memory estimate: consumers, keys and napkin sizes", "[memory][trainers]") {
    auto o = test::resolve(test::kMinimal + "[replay_buffer]\nbuffer_size = 1000000\n");
    REQUIRE(o.ok);
    config::SizeInputs in;
    in.bars = 100000;
    const auto items = trainers::estimate_device_memory(o.profile, in);
    REQUIRE(!items.empty());
    const auto find = [&](const std::string& key) -> const config::MemoryItem* {
        for (const auto& i : items)
            if (i.key == key) return &i;
        return nullptr;
    };
    // The ring the DQN trainer allocates: whole steps of the 1024 environments, 976 of them
    // (999,424 transitions), each a state and a next state (50 floats), reward, action (4 B)
    // and done flag (1 B): 409 bytes.
    REQUIRE(find("replay_buffer.buffer_size") != nullptr);
    CHECK(trainers::dqn_replay_steps(o.profile).capacity == 976);
    CHECK(find("replay_buffer.buffer_size")->bytes == 976ull * 1024 * 409);
    REQUIRE(find("data.synthetic_bars") != nullptr);
    // open, high, low, close, ATR (doubles), 42 features (floats), an episode start and end (ints)
    CHECK(find("data.synthetic_bars")->bytes == 100000ull * (5 * 8 + 42 * 4 + 2 * 4));
    CHECK(find("dqn.hidden") != nullptr);
    CHECK(find("experience.gpu_n_episodes") != nullptr);
    CHECK(find("replay_buffer.batch_size") != nullptr);
    for (std::size_t i = 1; i < items.size(); ++i) CHECK(items[i - 1].bytes >= items[i].bytes);
    // doubling the buffer doubles its line
    o = test::resolve(test::kMinimal, {"replay_buffer.buffer_size=2000000"});
    REQUIRE(o.ok);
    for (const auto& i : trainers::estimate_device_memory(o.profile, in))
        if (i.key == "replay_buffer.buffer_size") CHECK(i.bytes == 1953ull * 1024 * 409);
    // The IQN head: its update rows (batch_size x iqn_quantiles per network) grow with N.
    const auto iqn_bytes = [&](long long quantiles) {
        auto r = test::resolve(test::kMinimal, {"dqn.head=\"iqn\"", "dqn.iqn_quantiles=" + std::to_string(quantiles)});
        REQUIRE(r.ok);
        return config::total_bytes(trainers::estimate_device_memory(r.profile, in));
    };
    const auto bytes8 = iqn_bytes(8), bytes16 = iqn_bytes(16), bytes24 = iqn_bytes(24);
    CHECK(bytes24 - bytes16 == bytes16 - bytes8);         // linear in N: the update's rows
    CHECK(bytes16 - bytes8 >= 4ull * 8 * 256 * 3 * 256);  // at least B x 8 more rows of three H-wide arrays
    // A batched population's engine: N agents' buffers
    const auto one = trainers::memory_plan(o.profile, 1, trainers::estimate_inputs(o.profile, in)).bytes();
    CHECK(trainers::memory_plan(o.profile, 4, trainers::estimate_inputs(o.profile, in)).bytes() > 3 * one);
    // PPO and IQL name their own consumers
    o = test::resolve("[run]\ntrainer = \"ppo\"\n");
    REQUIRE(o.ok);
    bool rollout = false;
    for (const auto& i : trainers::estimate_device_memory(o.profile, {}))
        rollout |= i.consumer.rfind("rollout buffer", 0) == 0;
    CHECK(rollout);
    o = test::resolve("[run]\ntrainer = \"iql\"\n");
    REQUIRE(o.ok);
    bool dataset = false;
    for (const auto& i : trainers::estimate_device_memory(o.profile, {})) dataset |= i.key == "iql.dataset_size";
    CHECK(dataset);
    CHECK(config::format_bytes(512) == "512 B");
    CHECK(config::format_bytes(3u << 20) == "3.0 MiB");
}
