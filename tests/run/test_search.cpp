/// @file test_search.cpp
/// @brief A search inside a population (src/run/search.hpp, docs/sweeps.md "Searching"): search
///        spaces and their seeded draws, refused spaces naming file:line:column, PBT's exploit
///        (bit for bit the copied agent's weights, target, Adam state and replay; CPU, and a [gpu]
///        twin) and explore, and whole searches: the same command twice the same lineage and bits,
///        a search resumed after a crash the uninterrupted one.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "config/profile.hpp"
#include "config/schema.hpp"
#include "data/load.hpp"
#include "env/vec_env.hpp"
#include "io/json.hpp"
#include "io/safetensors.hpp"
#include "device/cpu_device.hpp"
#include "run/halving.hpp"
#include "run/population.hpp"
#include "run/search.hpp"
#include "support/gpu.hpp"
#include "support/shell.hpp"
#include "support/trainer_support.hpp"
#include "trainers/dqn/engine.hpp"
#include "trainers/population.hpp"
#include "trainers/setup.hpp"
#include "util/errors.hpp"

using namespace fh;
namespace fs = std::filesystem;
namespace json = fh::io::json;

namespace {

fs::path scratch(const std::string& name) {
    return fh::test::scratch_dir("fh-search", name);
}

run::Distribution dist(const std::string& key, const std::string& text) {
    auto p = run::parse_distribution(key, text);
    INFO(text << ": " << p.problem);
    REQUIRE(p.distribution);
    return *p.distribution;
}

/// Exploit between trainers `dst` and `src` (on `dst_ops`, `src_ops`): afterwards dst's weights,
/// target, Adam moments (and replay when `replay`) are src's bytes, its environments its own.
void check_exploit(ops::Device& dst_ops, trainers::Trainer& dst, ops::Device& src_ops, trainers::Trainer& src,
                   bool replay) {
    REQUIRE(dst.updates() > 0);
    REQUIRE(dst.updates() == src.updates());  // Adam's step: the same update count
    std::vector<std::pair<std::string, std::vector<std::byte>>> before;
    for (const auto& t : dst.state_tensors()) before.emplace_back(t.name, dst_ops.to_host<std::byte>(t.bytes));
    const auto copied = run::copy_agent_state(dst_ops, dst, src_ops, src, replay);
    const std::set<std::string> names(copied.begin(), copied.end());
    for (const char* must : {"params/online", "adam/m", "adam/v"}) CHECK(names.count(must) == 1);
    for (const auto& t : dst.state_tensors())  // DQN's and IQL's target network (PPO has none)
        if (t.name == "params/target") CHECK(names.count(t.name) == 1);
    CHECK(names.count("replay/states") == (replay ? 1u : 0u));
    CHECK(dst.updates() == src.updates());
    for (const auto& [name, old] : before) {
        INFO(name);
        const auto now = test::tensor_bytes(dst_ops, dst, name);
        const auto theirs = test::tensor_bytes(src_ops, src, name);
        const bool copy =
            name.starts_with("params/") || name.starts_with("adam/") || (replay && trainers::replay_memory(name));
        if (copy) {
            CHECK(now == theirs);
            if (name == "params/online" || name == "adam/m" || name == "replay/states")
                CHECK(old != theirs);  // the agents differed: the check above is not vacuous
        } else {
            CHECK(now == old);  // its own environments, guard and monitoring
        }
    }
}

/// A batched engine of three DQN agents (their own seeds and learning rates) trained 48 iterations
/// (the replay ring wrapped), then agent 2 copies agent 0.
void batched_exploit(ops::Device& ops, bool replay) {
    std::vector<config::Profile> agents;
    std::vector<std::unique_ptr<env::DeviceMarket>> markets;
    std::vector<const env::DeviceMarket*> views;
    for (const char* lr : {"0.001", "0.0005", "0.002"}) {
        agents.push_back(test::small_dqn_profile(
            {std::string("training.learning_rate=") + lr, "run.seed=" + std::to_string(3 + agents.size())}));
        markets.push_back(
            std::make_unique<env::DeviceMarket>(ops, data::load_market(trainers::data_options(agents.back()))));
        views.push_back(markets.back().get());
    }
    const auto engine = std::make_shared<trainers::DqnEngine>(ops, agents, views);
    std::vector<std::unique_ptr<trainers::Trainer>> members;
    for (int i = 0; i < 3; ++i) members.push_back(engine->agent(i));
    for (int k = 0; k < 48; ++k) engine->iterate();
    check_exploit(ops, *members[2], ops, *members[0], replay);
    // The copy trains on, with agent 0's learning rate: its keys changed on the device.
    config::Profile p = agents[2];
    p.training.learning_rate = agents[0].training.learning_rate;
    members[2]->set_agent_keys(p);
    CHECK(engine->profile(2).training.learning_rate == agents[0].training.learning_rate);
    for (int k = 0; k < 4; ++k) engine->iterate();
    // A key an agent cannot change while it trains is refused.
    config::Profile shape = agents[2];
    shape.replay_buffer.batch_size = 16;
    CHECK_THROWS_AS(members[2]->set_agent_keys(shape), UsageError);
}

/// A batched engine of three agents of a shipped profile (own seeds and learning rates; `own`,
/// another per-agent key of each) after `rounds` iterations: agent 2 copies agent 0, then trains
/// on with agent 0's keys.
void batched_profile_exploit(ops::Device& ops, const std::string& profile, const std::vector<std::string>& own,
                             int rounds) {
    const std::string file = config::locate_profile(profile);
    std::vector<config::Profile> agents;
    std::vector<std::unique_ptr<env::DeviceMarket>> markets;
    std::vector<const env::DeviceMarket*> views;
    for (const char* lr : {"0.001", "0.0005", "0.002"}) {
        agents.push_back(config::resolve_profile_file(
            file, {std::string("training.learning_rate=") + lr, "run.seed=" + std::to_string(3 + agents.size()),
                   "run.population_batching=on", own[agents.size()]}));
        markets.push_back(
            std::make_unique<env::DeviceMarket>(ops, data::load_market(trainers::data_options(agents.back()))));
        views.push_back(markets.back().get());
    }
    const auto engine = trainers::make_batched_population(ops, agents, views);
    std::vector<std::unique_ptr<trainers::Trainer>> members;
    for (int i = 0; i < 3; ++i) members.push_back(engine->agent(i));
    const auto round = [&] {  // the agents advance together, as a population runs them
        for (auto& m : members) m->iterate();
    };
    for (int k = 0; k < rounds; ++k) round();
    check_exploit(ops, *members[2], ops, *members[0], false);
    config::Profile p = agents[0];
    p.run.seed = agents[2].run.seed;
    members[2]->set_agent_keys(p);
    for (int k = 0; k < 2; ++k) round();
}

/// A batched IQL engine of three agents (own seeds, datasets and learning rates) after 30 updates:
/// agent 2 copies agent 0, then trains on with agent 0's keys.
void batched_iql_exploit(ops::Device& ops) {
    const std::string file = config::locate_profile("iql-smoketest");
    std::vector<config::Profile> agents;
    std::vector<std::unique_ptr<env::DeviceMarket>> markets;
    std::vector<const env::DeviceMarket*> views;
    for (const char* lr : {"0.001", "0.0005", "0.002"}) {
        agents.push_back(config::resolve_profile_file(
            file, {std::string("training.learning_rate=") + lr, "run.seed=" + std::to_string(3 + agents.size()),
                   "iql.expectile=0." + std::to_string(6 + agents.size())}));
        markets.push_back(
            std::make_unique<env::DeviceMarket>(ops, data::load_market(trainers::data_options(agents.back()))));
        views.push_back(markets.back().get());
    }
    const auto engine = trainers::make_batched_population(ops, agents, views);
    std::vector<std::unique_ptr<trainers::Trainer>> members;
    for (int i = 0; i < 3; ++i) members.push_back(engine->agent(i));
    const auto round = [&] {  // the agents advance together, as a population runs them
        for (auto& m : members) m->iterate();
    };
    for (int k = 0; k < 30; ++k) round();
    check_exploit(ops, *members[2], ops, *members[0], false);
    config::Profile p = agents[0];
    p.run.seed = agents[2].run.seed;
    members[2]->set_agent_keys(p);
    for (int k = 0; k < 4; ++k) round();
}

std::string slurp(const fs::path& p) {
    return fh::test::slurp(p);
}

json::Value parse(const std::string& text) {
    return json::parse(text, json::Limits{64u << 20, 64, true});
}

std::string last_line(const std::string& text) {
    std::string t = text;
    while (!t.empty() && t.back() == '\n') t.pop_back();
    const auto nl = t.rfind('\n');
    return nl == std::string::npos ? t : t.substr(nl + 1);
}

void check_same_tensors(const fs::path& a, const fs::path& b) {
    const auto fa = fh::io::TensorFile::read(a.string());
    const auto fb = fh::io::TensorFile::read(b.string());
    REQUIRE(fa.names() == fb.names());
    for (const auto& name : fa.names()) {
        const auto ta = fa.tensor(name), tb = fb.tensor(name);
        INFO(a.string() << " tensor " << name);
        REQUIRE(ta.bytes.size() == tb.bytes.size());
        CHECK(std::equal(ta.bytes.begin(), ta.bytes.end(), tb.bytes.begin()));
    }
}

/// Two population directories hold the same search: population.json's agents (their keys and
/// lineage), each agent's lineage.jsonl, eval.jsonl, config.toml's keys and last checkpoint.
void check_same_search(const fs::path& a, const fs::path& b) {
    const auto ja = parse(slurp(a / "population.json"));
    const auto jb = parse(slurp(b / "population.json"));
    const auto& agents = ja.find("agents")->as_array();
    REQUIRE(agents.size() == jb.find("agents")->as_array().size());
    for (std::size_t i = 0; i < agents.size(); ++i) {
        const auto& x = agents[i];
        const auto& y = jb.find("agents")->as_array()[i];
        const std::string name = x.find("run")->as_string();
        INFO(name);
        CHECK(y.find("run")->as_string() == name);
        for (const char* key : {"lineage", "keys", "space", "overrides", "best", "test", "status"}) {
            INFO(key);
            REQUIRE(x.find(key) != nullptr);
            CHECK(json::serialize(*x.find(key)) == json::serialize(*y.find(key)));
        }
        CHECK(slurp(a / name / "lineage.jsonl") == slurp(b / name / "lineage.jsonl"));
        CHECK(slurp(a / name / "eval.jsonl") == slurp(b / name / "eval.jsonl"));
        check_same_tensors(a / name / "checkpoints/last.safetensors", b / name / "checkpoints/last.safetensors");
    }
}

/// The search in `pa`, reproduced by `search(out, env, extra)` (its command run into dir/out with
/// `env` before it and `extra` after it): the same command again; crashed at FH_FAULT=`resume_fault`,
/// then `--resume POPDIR`; and, unless `again_fault` is empty, crashed there, then the command again
/// with run.on_exists = "resume" (as scripts/sweep.sh does). Each gives the same search, bit for bit.
/// (`expect_log`, when not empty: a line the resumed runs' logs hold, e.g. that they train batched.)
template <class Search>
void check_reproduced(const fs::path& dir, const fs::path& pa, const std::string& profile, Search&& search,
                      const std::string& resume_fault, const std::string& again_fault = "",
                      const std::string& expect_log = "") {
    const auto b = search("b", "", "");
    INFO(b.err);
    REQUIRE(b.code == 0);
    check_same_search(pa, last_line(b.out));
    const auto c = search("c", "FH_FAULT=" + resume_fault, "");
    INFO(c.err);
    REQUIRE(c.code == 2);
    const fs::path pc = dir / "c" / profile;
    REQUIRE(fs::exists(pc / "population.json"));
    const auto resumed = fh::test::run_shell("\"$EXE\" --resume '" + pc.string() + "' --device cpu", dir);
    INFO(resumed.err);
    REQUIRE(resumed.code == 0);
    CHECK(resumed.err.find(expect_log) != std::string::npos);
    check_same_search(pa, pc);
    if (again_fault.empty()) return;
    REQUIRE(search("d", "FH_FAULT=" + again_fault, "").code == 2);
    const auto d = search("d", "", " --set run.on_exists=resume");
    INFO(d.err);
    REQUIRE(d.code == 0);
    CHECK(d.err.find(expect_log) != std::string::npos);
    check_same_search(pa, dir / "d" / profile);
}

const std::string kGrid = "training.learning_rate=loguniform(1e-4,1e-2) dqn.cql_alpha=uniform(0,1)\n";
// The regular checkpoints fall on the rounds' iterations, written before each round: a resume
// must continue from the checkpoint the round writes after it.
const std::string kSearch =
    "--profile dqn-smoketest --seeds 1,2,3,4 --set run.total_steps=800 --set run.eval_interval=200 "
    "--set run.checkpoint_interval=200 --set run.log_interval=200 --set dqn.hidden=[32] --set run.search=pbt "
    "--set data.seed=5 --set search.fraction=0.25";

}  // namespace

TEST_CASE("search spaces: draws follow their seeds and stay within their bounds", "[search]") {
    const auto lr = dist("training.learning_rate", "loguniform(1e-4,1e-2)");
    const auto cql = dist("dqn.cql_alpha", "uniform(0, 1)");
    const auto period = dist("training.target_update_period", "choice(10,100,1000)");
    std::set<std::string> seen;
    for (std::uint64_t seed = 1; seed <= 50; ++seed) {
        const std::string a = run::draw_value(lr, seed, run::key_stream(lr.key), 0);
        CHECK(a == run::draw_value(lr, seed, run::key_stream(lr.key), 0));  // same seed, same draw
        seen.insert(a);
        const double v = std::stod(a);
        CHECK(v >= 1e-4);
        CHECK(v <= 1e-2);
        const double c = std::stod(run::draw_value(cql, seed, run::key_stream(cql.key), 0));
        CHECK(c >= 0);
        CHECK(c < 1);
        const std::string t = run::draw_value(period, seed, run::key_stream(period.key), 0);
        CHECK((t == "10" || t == "100" || t == "1000"));
    }
    CHECK(seen.size() == 50);  // different seeds, different draws
    // Log-uniform: about half the draws below the geometric middle (1e-3).
    int below = 0;
    for (std::uint64_t seed = 1; seed <= 400; ++seed)
        below += std::stod(run::draw_value(lr, seed, run::key_stream(lr.key), 0)) < 1e-3;
    CHECK(below > 160);
    CHECK(below < 240);
    // An integer key's uniform draws are integers.
    const auto decay = dist("training.epsilon_decay_steps", "uniform(100,1000)");
    CHECK(run::draw_value(decay, 3, 1, 0).find_first_of(".e") == std::string::npos);
}

TEST_CASE("search spaces: PBT's perturbation and resampling follow their seeds", "[search]") {
    const auto lr = dist("training.learning_rate", "loguniform(1e-4,1e-2)");
    std::set<std::string> values;
    int up = 0;
    for (std::uint64_t c = 0; c < 200; ++c) {
        const std::string v = run::perturb_value(lr, 1e-3, 0.8, 1.25, 9, 1, c);
        CHECK(v == run::perturb_value(lr, 1e-3, 0.8, 1.25, 9, 1, c));
        values.insert(v);
        up += v == config::toml_value_text(1e-3 * 1.25);
    }
    CHECK(values == std::set<std::string>{config::toml_value_text(1e-3 * 0.8), config::toml_value_text(1e-3 * 1.25)});
    CHECK(up > 70);
    CHECK(up < 130);
    // Clamped to the space's bounds; a choice moves to a neighbour.
    CHECK(run::perturb_value(lr, 9.9e-3, 1.25, 1.25, 9, 1, 0) == config::toml_value_text(1e-2));
    const auto period = dist("training.target_update_period", "choice(10,100,1000)");
    for (std::uint64_t c = 0; c < 20; ++c) {
        const std::string v = run::perturb_value(period, 100, 0.8, 1.25, 4, 2, c);
        CHECK((v == "10" || v == "1000"));
    }
    // explore_keys: the same seed and round, the same keys; another seed, others.
    const config::Profile p = test::small_dqn_profile({"training.learning_rate=0.001"});
    const run::SearchSpace space{lr, dist("dqn.cql_alpha", "uniform(0,1)")};
    config::SearchConfig s;
    s.resample_probability = 0.5;
    const auto a = run::explore_keys(space, p, s, 1, 3, 2);
    CHECK(a == run::explore_keys(space, p, s, 1, 3, 2));
    CHECK(a != run::explore_keys(space, p, s, 2, 3, 2));
    CHECK(a != run::explore_keys(space, p, s, 1, 4, 2));
    REQUIRE(a.size() == 2);
    CHECK(a[0].starts_with("training.learning_rate="));
    // resample_probability 0: only perturbations of the copied agent's values; 1: only draws.
    s.resample_probability = 0;
    for (std::uint64_t round = 1; round < 20; ++round) {
        const auto k = run::explore_keys({lr}, p, s, 1, round, 0);
        const double v = std::stod(k[0].substr(k[0].find('=') + 1));
        CHECK((v == Approx(p.training.learning_rate * 0.8) || v == Approx(p.training.learning_rate * 1.25)));
    }
    s.resample_probability = 1;
    for (std::uint64_t round = 1; round < 20; ++round) {
        const auto k = run::explore_keys({lr}, p, s, 1, round, 0);
        CHECK(k[0] ==
              "training.learning_rate=" + run::draw_value(lr, 1, run::key_stream(lr.key), ((round << 20) | 0u) + 1));
    }
}

TEST_CASE("PBT's exploit: the bottom agents copy agents drawn from the top, seeded", "[search]") {
    const std::vector<double> metric{0.5, -1.0, 2.0, 0.1, std::nan(""), 1.0, -0.5, 0.0};
    const std::vector<bool> live{true, true, true, true, true, true, true, false};
    // Ranked (live, validated): 2, 5, 0, 3, 6, 1 -> a quarter of 6 = 1: agent 1 copies agent 2.
    auto e = run::plan_exploits(metric, live, 0.25, 1, 1);
    REQUIRE(e.size() == 1);
    CHECK(e[0].agent == 1);
    CHECK(e[0].source == 2);
    // Half: the bottom three (3, 6, 1) each copy one of the top three (2, 5, 0).
    e = run::plan_exploits(metric, live, 0.5, 1, 1);
    REQUIRE(e.size() == 3);
    std::set<int> sources;
    for (const auto& x : e) {
        CHECK((x.agent == 3 || x.agent == 6 || x.agent == 1));
        CHECK((x.source == 2 || x.source == 5 || x.source == 0));
        sources.insert(x.source);
    }
    std::set<int> over_rounds;  // the draw of the source varies with the round and the seed
    for (std::uint64_t round = 1; round < 40; ++round)
        for (const auto& x : run::plan_exploits(metric, live, 0.5, 7, round)) over_rounds.insert(x.source);
    CHECK(over_rounds == std::set<int>{0, 2, 5});
    CHECK(run::plan_exploits({1.0}, {true}, 0.5, 1, 1).empty());
}

TEST_CASE("PBT's exploit copies exactly the source agent's state (CPU, batched and separate engines)", "[search]") {
    ops::CpuDevice ops;
    SECTION("batched, with the replay") {
        batched_exploit(ops, true);
    }
    SECTION("batched, without the replay") {
        batched_exploit(ops, false);
    }
    SECTION("IQL, batched") {
        batched_iql_exploit(ops);
    }
    SECTION("PPO, batched") {
        batched_profile_exploit(ops, "ppo-smoketest", {"ppo.clip=0.1", "ppo.clip=0.2", "ppo.entropy_coef=0.02"}, 2);
    }
    SECTION("separate engines on separate devices") {
        ops::CpuDevice other;
        const auto a = test::small_dqn_profile({"run.seed=3"}),
                   b = test::small_dqn_profile({"run.seed=4", "training.learning_rate=0.003"});
        const env::DeviceMarket ma(ops, data::load_market(trainers::data_options(a)));
        const env::DeviceMarket mb(other, data::load_market(trainers::data_options(b)));
        auto ta = trainers::make_dqn_trainer(ops, a, ma);
        auto tb = trainers::make_dqn_trainer(other, b, mb);
        for (int k = 0; k < 48; ++k) {
            ta->iterate();
            tb->iterate();
        }
        check_exploit(ops, *ta, other, *tb, true);
    }
}

TEST_CASE("PBT's exploit copies exactly the source agent's state (CUDA, batched)", "[gpu][search]") {
    auto& ops = test::gpu_ops();
    batched_exploit(ops, true);
    batched_exploit(ops, false);
    batched_iql_exploit(ops);
    batched_profile_exploit(ops, "ppo-smoketest", {"ppo.clip=0.1", "ppo.clip=0.2", "ppo.entropy_coef=0.02"}, 2);
}

TEST_CASE("search spaces in a grid: each agent draws its point from its seed; bad spaces name file:line:column",
          "[search]") {
    const auto dir = scratch("grid");
    const std::string profile_file = config::locate_profile("dqn-smoketest");
    const auto base = config::resolve_profile_file(profile_file, {"run.population=4"});
    const auto plan_of = [&](const std::string& grid) {
        const fs::path file = dir / "grid.txt";
        std::ofstream(file) << grid;
        run::PopulationRequest r;
        r.grid_file = file.string();
        return run::plan_population(profile_file, base, {"run.population=4"}, r, false);
    };
    const auto a = plan_of(kGrid);
    REQUIRE(a.agents.size() == 4);
    std::set<double> lrs;
    for (const auto& agent : a.agents) {
        CHECK(agent.space.size() == 2);
        lrs.insert(agent.profile.training.learning_rate);
        CHECK(agent.profile.training.learning_rate >= 1e-4);
        CHECK(agent.profile.training.learning_rate <= 1e-2);
        CHECK(agent.profile.dqn.cql_alpha < 1);
    }
    CHECK(lrs.size() == 4);
    const auto b = plan_of(kGrid);  // the same command draws the same points
    for (std::size_t i = 0; i < 4; ++i) CHECK(a.agents[i].grid == b.agents[i].grid);
    // Spaced arguments are one token.
    CHECK(plan_of("dqn.cql_alpha=choice(0, 0.5)\n").agents.size() == 4);
    const auto refused = [&](const std::string& grid, const std::string& where, const std::string& what) {
        INFO(grid);
        try {
            (void)plan_of(grid);
            FAIL("accepted");
        } catch (const config::ProfileError& e) {
            std::string all;
            for (const auto& p : e.problems()) all += p + "\n";
            INFO(all);
            CHECK(all.find((dir / "grid.txt").string() + ":" + where + ":") != std::string::npos);
            CHECK(all.find(what) != std::string::npos);
        }
    };
    refused("training.learning_rate=lognormal(1,2)\n", "1:24", "unknown distribution 'lognormal'");
    refused("dqn.cql_alpha=0.1\ntraining.learning_rate=uniform(0.01,0.001)\n", "2:32",
            "the first bound must be below the second");
    refused("training.learning_rate=loguniform(0,0.1)\n", "1:35", "must be > 0");
    refused("training.learning_rate=loguniform(1e-4,x)\n", "1:40", "'x' is not a number");
    refused("training.learning_rate=uniform(1e-4,1e-3\n", "1:41", "must end with its ')'");
    refused("dqn.hidden=choice(32,64)\n", "1:1", "cannot differ between the agents");
    refused("run.seed=choice(1,2)\n", "1:10", "run.seed cannot be searched");
    refused("training.gamma=uniform(0.9,1.5)\n", "1:1", "a bound of uniform(0.9,1.5)");
    fs::remove_all(dir);
}

TEST_CASE("PBT: the same command twice gives the same lineage and bits; a search resumed after a crash equals it",
          "[search]") {
    const auto dir = scratch("pbt");
    std::ofstream(dir / "grid.txt") << kGrid;
    const auto search = [&](const std::string& out, const std::string& env, const std::string& extra = "") {
        return fh::test::run_shell(env + " \"$EXE\" " + kSearch + " --device cpu" + extra + " --population-grid '" +
                                       (dir / "grid.txt").string() + "' --output '" + (dir / out).string() + "'",
                                   dir);
    };
    for (const std::string batching : {"off", "on"}) {
        SECTION("run.population_batching = " + batching) {
            const std::string extra = " --set run.population_batching=" + batching;
            const auto a = search("a", "", extra);
            INFO(a.err);
            REQUIRE(a.code == 0);
            const fs::path pa = last_line(a.out);
            CHECK((a.err.find("one batched engine") != std::string::npos) == (batching == "on"));
            const auto pop = parse(slurp(pa / "population.json"));
            REQUIRE(pop.find("search") != nullptr);
            // Three rounds (200, 400, 600 env steps), one copy each (a quarter of 4 agents).
            int copies = 0;
            for (const auto& agent : pop.find("agents")->as_array()) {
                copies += static_cast<int>(agent.find("lineage")->as_array().size());
                const std::string name = agent.find("run")->as_string();
                int lines = 0;
                std::istringstream in(slurp(pa / name / "lineage.jsonl"));
                for (std::string line; std::getline(in, line);) ++lines;
                CHECK(lines == 4);  // its keys at the start and after each round
                // config.toml holds the keys it trains with now.
                const auto cfg = config::resolve_profile_file((pa / name / "config.toml").string());
                const auto& keys = agent.find("keys")->as_object();
                for (const auto& [k, v] : keys)
                    if (k == "training.learning_rate") CHECK(cfg.training.learning_rate == v.as_double());
            }
            CHECK(copies == 3);
            // report draws the lineage and each key's trajectory; compare shows the final keys.
            const auto rep = fh::test::run_shell(
                "\"$EXE\" report '" + pa.string() + "' -o '" + (dir / "report.html").string() + "'", dir);
            INFO(rep.err);
            CHECK(rep.code == 0);
            const std::string html = slurp(dir / "report.html");
            for (const char* want :
                 {"<h2>Search</h2>", "Lineage: each agent at its index",
                  "training.learning_rate of each agent over training", "dqn.cql_alpha of each agent over training"})
                CHECK(html.find(want) != std::string::npos);
            const auto cmp = fh::test::run_shell("\"$EXE\" compare '" + pa.string() + "' --format csv", dir);
            CHECK(cmp.code == 0);
            CHECK(cmp.out.find("training.learning_rate") != std::string::npos);
            CHECK(cmp.out.find("dqn.cql_alpha") != std::string::npos);
            // The same command, and crashed after the second round (4 agents x 125 iterations),
            // then resumed: the same search, bit for bit.
            check_reproduced(
                dir, pa, "dqn-smoketest",
                [&](const std::string& o, const std::string& e, const std::string& x) {
                    return search(o, e, extra + x);
                },
                "train-step:500");
        }
    }
    fs::remove_all(dir);
}

/// The same search twice on the GPU (`common` with its grid line `grid`), batched and not: the
/// same lineage, validations and checkpoint tensors.
void gpu_search_twice(const std::string& common, const std::string& grid, const std::string& tag) {
    const auto dir = scratch(tag);
    std::ofstream(dir / "grid.txt") << grid;
    for (const std::string batching : {"off", "on"}) {
        INFO("run.population_batching = " << batching);
        std::vector<fs::path> runs;
        for (const char* name : {"a", "b"}) {
            const auto r =
                fh::test::run_shell("\"$EXE\" " + common + " --device cuda --set run.population_batching=" + batching +
                                        " --population-grid '" + (dir / "grid.txt").string() + "' --output '" +
                                        (dir / (batching + name)).string() + "'",
                                    dir);
            INFO(r.err);
            REQUIRE(r.code == 0);
            runs.push_back(last_line(r.out));
        }
        check_same_search(runs[0], runs[1]);
    }
    fs::remove_all(dir);
}

TEST_CASE("PBT on the GPU: the same command twice gives the same lineage and bits (CUDA)", "[gpu][search]") {
    SECTION("DQN") {
        gpu_search_twice(kSearch, kGrid, "pbt-gpu-dqn");
    }
    SECTION("IQL") {
        gpu_search_twice(
            "--profile iql-smoketest --seeds 1,2,3,4 --set run.total_steps=120 --set run.eval_interval=30 --set "
            "run.checkpoint_interval=30 --set run.log_interval=30 --set run.search=pbt --set data.seed=5",
            "training.learning_rate=loguniform(1e-4,1e-2) iql.expectile=uniform(0.5,0.9)\n", "pbt-gpu-iql");
    }
    SECTION("PPO") {
        gpu_search_twice(
            "--profile ppo-smoketest --seeds 1,2,3,4 --set run.total_steps=1600 --set run.eval_interval=400 --set "
            "run.checkpoint_interval=400 --set run.log_interval=400 --set run.search=pbt --set data.seed=5",
            "training.learning_rate=loguniform(1e-4,1e-2) ppo.entropy_coef=uniform(0,0.05)\n", "pbt-gpu-ppo");
    }
}

TEST_CASE("scripts/sweep.sh: a search space in --set draws one point per seed; run.search reaches every search",
          "[search][sweep]") {
    const auto dir = scratch("sweep");
    const char* src = std::getenv("FH_SOURCE_DIR");
    REQUIRE(src != nullptr);
    std::string sweep = "'";
    sweep += (fs::path(src) / "scripts" / "sweep.sh").string();
    sweep +=
        "' --exe \"$EXE\" --profile dqn-smoketest --cpu --set 'training.learning_rate=loguniform(1e-4, 1e-2)' "
        "--set run.search=pbt --seeds 1,2,3,4";
    const std::string tiny =
        " -- --set run.total_steps=400 --set run.eval_interval=200 --set dqn.hidden=[16] --set data.seed=5";
    // Two job slots: two searches of two agents, each with run.search and its grid of spaces.
    const auto dry = fh::test::run_shell(sweep + " -j 2 --dry-run --output '" + (dir / "sw").string() + "'", dir);
    INFO(dry.out << dry.err);
    REQUIRE(dry.code == 0);
    CHECK(std::count(dry.out.begin(), dry.out.end(), '\n') == 2);
    for (const char* want : {"--set run.search=pbt", "population-0.grid", "population-1.grid"})
        CHECK(dry.out.find(want) != std::string::npos);
    CHECK(dry.out.find("loguniform") == std::string::npos);  // in the populations' grids, not --set
    const auto alone = fh::test::run_shell(sweep + " --no-population --output '" + (dir / "x").string() + "'", dir);
    CHECK(alone.code == 2);
    CHECK(alone.err.find("a population draws it; drop --no-population") != std::string::npos);
    const auto r = fh::test::run_shell(sweep + " -j 2 --output '" + (dir / "sw").string() + "'" + tiny, dir);
    INFO(r.out << r.err);
    REQUIRE(r.code == 0);
    CHECK(r.err.find("(2 at a time; 2 processes)") != std::string::npos);
    std::set<double> lrs;
    int lineages = 0;
    for (const auto& e : fs::directory_iterator(dir / "sw")) {
        if (!fs::exists(e.path() / "config.toml")) continue;
        const auto p = config::resolve_profile_file((e.path() / "config.toml").string());
        CHECK(p.run.search == "pbt");
        lineages += fs::exists(e.path() / "lineage.jsonl");
        lrs.insert(p.training.learning_rate);
    }
    CHECK(lineages == 4);
    CHECK(lrs.size() >= 3);  // four draws (a round may have set one agent's to another's perturbed value)
    fs::remove_all(dir);
}

TEST_CASE("PBT on IQL (rounds in updates): the same command twice, and resumed after a crash, give the same search",
          "[search][iql]") {
    const auto dir = scratch("pbt-iql");
    std::ofstream(dir / "grid.txt") << "training.learning_rate=loguniform(1e-4,1e-2) iql.expectile=uniform(0.5,0.9)\n";
    const auto search = [&](const std::string& out, const std::string& env, const std::string& extra = "") {
        return fh::test::run_shell(
            env + " \"$EXE\" --profile iql-smoketest --device cpu" + extra +
                " --seeds 1,2,3,4 --set "
                "run.total_steps=120 --set run.eval_interval=30 --set run.checkpoint_interval=30 "
                "--set run.log_interval=30 --set run.search=pbt --set data.seed=5 "
                "--population-grid '" +
                (dir / "grid.txt").string() + "' --output '" + (dir / out).string() + "'",
            dir);
    };
    const auto a = search("a", "");
    INFO(a.err);
    REQUIRE(a.code == 0);
    CHECK(a.err.find("one batched engine for the 4 agents") != std::string::npos);
    const fs::path pa = last_line(a.out);
    int copies = 0;
    const auto pop = parse(slurp(pa / "population.json"));
    for (const auto& agent : pop.find("agents")->as_array())
        copies += static_cast<int>(agent.find("lineage")->as_array().size());
    CHECK(copies == 3);  // rounds at 30, 60 and 90 updates
    // Crashed after the second round (4 agents x 75 updates), resumed or continued by the command
    // again (the agents train on with their config.toml's keys, not the grid's draws).
    check_reproduced(dir, pa, "iql-smoketest", search, "train-step:300", "train-step:300");
    fs::remove_all(dir);
}

TEST_CASE(
    "PBT on PPO (rounds of whole rollouts): the same command twice, and resumed after a crash, give the same "
    "search",
    "[search][ppo]") {
    const auto dir = scratch("pbt-ppo");
    std::ofstream(dir / "grid.txt")
        << "training.learning_rate=loguniform(1e-4,1e-2) ppo.entropy_coef=uniform(0,0.05)\n";
    const auto search = [&](const std::string& out, const std::string& env, const std::string& extra = "") {
        return fh::test::run_shell(
            env + " \"$EXE\" --profile ppo-smoketest --device cpu" + extra +
                " --seeds 1,2,3,4 --set run.total_steps=1600 --set "
                "run.eval_interval=400 --set run.checkpoint_interval=400 --set run.log_interval=400 --set "
                "run.search=pbt --set data.seed=5 --set ppo.hidden=[32] --population-grid '" +
                (dir / "grid.txt").string() + "' --output '" + (dir / out).string() + "'",
            dir);
    };
    const auto a = search("a", "");
    INFO(a.err);
    REQUIRE(a.code == 0);
    const fs::path pa = last_line(a.out);
    const auto pop = parse(slurp(pa / "population.json"));
    int copies = 0;
    for (const auto& agent : pop.find("agents")->as_array())
        copies += static_cast<int>(agent.find("lineage")->as_array().size());
    CHECK(copies == 3);                                                   // rounds after rollouts 1, 2 and 3
    check_reproduced(dir, pa, "ppo-smoketest", search, "train-step:11");  // 4 agents x 3 rollouts: after round 2
    fs::remove_all(dir);
}

TEST_CASE("run.search is refused where it cannot search: another trainer, an interval off the validations, one agent",
          "[search]") {
    const auto problems = [](const std::vector<std::string>& overrides) {
        try {
            (void)config::resolve_profile_file(config::locate_profile("ppo-smoketest"), overrides);
        } catch (const config::ProfileError& e) {
            std::string all;
            for (const auto& p : e.problems()) all += p + "\n";
            return all;
        }
        return std::string();
    };
    CHECK(problems({"run.trainer=dt", "run.search=pbt"}).find("trains DQN, IQL and PPO populations, not dt") !=
          std::string::npos);
    CHECK(problems({"run.search=pbt"}).empty());
    CHECK(problems({"run.trainer=dqn", "run.search=pbt", "run.eval_interval=400", "search.interval=600"})
              .find("search.interval = 600 is not a multiple of run.eval_interval = 400") != std::string::npos);
    CHECK(problems({"run.trainer=dqn", "run.search=pbt", "run.eval_interval=0"}).find("needs run.eval_interval > 0") !=
          std::string::npos);
    CHECK(problems({"run.trainer=dqn", "run.search=pbt", "run.eval_interval=400", "search.interval=1200"}).empty());
    const auto dir = scratch("refused");
    // A single run, and a population of one, do not search (exit 2, nothing written).
    const auto single = fh::test::run_shell(
        "\"$EXE\" --profile dqn-smoketest --device cpu --set run.search=pbt --output '" + (dir / "runs").string() + "'",
        dir);
    CHECK(single.code == 2);
    CHECK(single.err.find("searches inside a population") != std::string::npos);
    const auto one =
        fh::test::run_shell("\"$EXE\" --profile dqn-smoketest --device cpu --seeds 1 --set run.search=pbt --output '" +
                                (dir / "runs").string() + "'",
                            dir);
    CHECK(one.code == 2);
    CHECK(one.err.find("needs a population of at least 2 agents, not 1") != std::string::npos);
    CHECK(!fs::exists(dir / "runs"));
    fs::remove_all(dir);
}

TEST_CASE("successive halving: rungs of each agent's own training, the worst (1 - 1/eta) stop, the ranking",
          "[search]") {
    // Rungs at interval x eta^k below the full budget (200 x 1, 3, 9 < 2000; 27 is past it).
    CHECK(run::halving_rung(1, 3, 200, 2000) == 0);
    CHECK(run::halving_rung(3, 3, 200, 2000) == 1);
    CHECK(run::halving_rung(9, 3, 200, 2000) == 2);
    for (long long r : {0LL, 2LL, 4LL, 8LL, 10LL, 27LL}) CHECK(run::halving_rung(r, 3, 200, 2000) == -1);
    CHECK(run::halving_rung(4, 2, 200, 800) == -1);  // 800 is the full budget: the agent completes there
    CHECK(run::halving_top_rung(3, 200, 2000) == 3);
    CHECK(run::halving_top_rung(2, 200, 800) == 2);
    CHECK(run::halving_top_rung(2, 200, 200) == 0);
    const double nan = std::nan("");
    // Four agents reach rung 0 together: the worst 4 - ceil(4/2) = 2 stop; eta 4: all but the best.
    const std::vector<run::RungEntry> first{{0, 0.5, 1, 0}, {0, -3, 1, 1}, {0, -4, 1, 2}, {0, 11, 1, 3}};
    CHECK(run::halving_decisions({}, first, 2) == std::vector<bool>{true, false, false, true});
    CHECK(run::halving_decisions({}, first, 4) == std::vector<bool>{false, false, false, true});
    CHECK(run::halving_decisions({}, first, 3) == std::vector<bool>{true, false, false, true});  // ceil(4/3) = 2 go on
    // Later arrivals rank against every agent that reached the rung (ASHA): of 6, the top 3 go on.
    const std::vector<run::RungEntry> later{{0, 1.3, 2, 4}, {0, -8, 2, 5}, {1, 4.3, 2, 0}, {1, 1.5, 2, 3}};
    CHECK(run::halving_decisions(first, later, 2) == std::vector<bool>{true, false, true, false});
    // No metric ranks last; a tie goes to the earlier round, then the lower index.
    CHECK(run::halving_decisions({}, {{0, nan, 1, 0}, {0, -9, 1, 1}}, 2) == std::vector<bool>{false, true});
    CHECK(run::halving_decisions({{0, 2, 1, 7}}, {{0, 2, 2, 1}}, 2) == std::vector<bool>{false});
    CHECK(run::halving_decisions({}, {{0, 2, 1, 3}, {0, 2, 1, 1}}, 2) == std::vector<bool>{false, true});
    // A new point's line: the space drawn again from its seed, the other keys as the model's.
    const run::SearchSpace space{dist("training.learning_rate", "loguniform(1e-4,1e-2)"),
                                 dist("dqn.cql_alpha", "uniform(0,1)")};
    const auto line = run::halving_point_line(
        {"training.learning_rate=0.001", "training.gamma=0.9", "dqn.cql_alpha=0.5", "run.seed=3"}, space, 9);
    CHECK(line == std::vector<std::string>{
                      "training.learning_rate=" + run::draw_value(space[0], 9, run::key_stream(space[0].key), 0),
                      "training.gamma=0.9",
                      "dqn.cql_alpha=" + run::draw_value(space[1], 9, run::key_stream("dqn.cql_alpha"), 0),
                      "run.seed=9"});
    // The result: by the last rung reached, then the metric there.
    const auto ranked = run::halving_ranking({{0, 0, 5.0}, {1, 2, -1.0}, {2, 1, nan}, {3, 1, 0.5}, {4, -1, 9.0}});
    std::vector<int> order;
    for (const auto& r : ranked) order.push_back(r.index);
    CHECK(order == std::vector<int>{1, 3, 2, 0, 4});
}

namespace {

const std::string kHalving =
    "--profile dqn-smoketest --device cpu --seeds 1,2,3,4 --set run.search=halving --set search.eta=2 "
    "--set search.max_points=6 --set run.total_steps=800 --set run.eval_interval=200 --set "
    "run.checkpoint_interval=200 --set run.log_interval=200 --set dqn.hidden=[32] --set data.seed=5";

/// Each lineage line of a halving search's agents stands at the agent's own progress (`interval`
/// per round since its start, in `unit`); each with a rung holds ASHA's decision (the agent goes on
/// when fewer than ceil(n / eta) of the n agents at the rung up to its round rank ahead of it), and
/// an agent stopped there ends "stopped" at that rung.
void check_halving_decisions(const fs::path& pop_dir, long long eta, long long interval,
                             const std::string& unit = "env_steps") {
    struct Line {
        int index, rung;
        long long round;
        double metric;
        std::string decision;
    };
    std::vector<Line> lines;
    const auto pop = parse(slurp(pop_dir / "population.json"));
    for (const auto& agent : pop.find("agents")->as_array()) {
        const std::string name = agent.find("run")->as_string();
        const int index = static_cast<int>(agent.find("index")->as_i64());
        std::istringstream in(slurp(pop_dir / name / "lineage.jsonl"));
        std::string last_decision;
        for (std::string text; std::getline(in, text);) {
            const auto l = parse(text);
            INFO(name << ": " << text);
            CHECK(l.find(unit)->as_i64() ==
                  (l.find("round")->as_i64() - agent.find("start_round")->as_i64()) * interval);
            if (l.find("rung") == nullptr) continue;
            lines.push_back({index, static_cast<int>(l.find("rung")->as_i64()), l.find("round")->as_i64(),
                             l.find("metric")->as_double(), l.find("decision")->as_string()});
            last_decision = lines.back().decision;
        }
        const auto summary = parse(slurp(pop_dir / name / "summary.json"));
        INFO(name);
        CHECK((summary.find("status")->as_string() == "stopped") == (last_decision == "stopped"));
        if (last_decision == "stopped") CHECK(summary.find("search")->find("rung")->as_i64() == lines.back().rung);
    }
    REQUIRE(!lines.empty());
    for (const auto& a : lines) {
        std::size_t n = 0, ahead = 0;
        for (const auto& b : lines) {
            if (b.rung != a.rung || b.round > a.round) continue;
            ++n;
            ahead += b.metric > a.metric ||
                     (b.metric == a.metric && (b.round < a.round || (b.round == a.round && b.index < a.index)));
        }
        INFO("agent " << a.index << " rung " << a.rung << " round " << a.round);
        CHECK(a.decision == (ahead < (n + static_cast<std::size_t>(eta) - 1) / static_cast<std::size_t>(eta)
                                 ? "continued"
                                 : "stopped"));
    }
}

/// Point `p` (population.json's entry) of the halving search kHalving in `pop_dir` trains as the
/// same point would alone: a single run of its seed and keys, stopped where the search stopped it
/// (a fault after its last iteration), validates the same values and holds the same checkpoint
/// tensors.
void check_point_alone(const fs::path& dir, const fs::path& pop_dir, const json::Value& p) {
    const fs::path point = pop_dir / p.find("run")->as_string();
    const long long steps = parse(slurp(point / "summary.json")).find("env_steps")->as_i64();
    std::string keys = " --set run.seed=" + std::to_string(p.find("seed")->as_i64());
    for (const auto& o : p.find("overrides")->as_array()) keys += " --set " + o.as_string();
    const std::string fault = steps < 800 ? "FH_FAULT=train-step:" + std::to_string(steps / 4 + 1) : "";
    fs::remove_all(dir / "single");
    const auto single = fh::test::run_shell(
        fault + " \"$EXE\" --profile dqn-smoketest --device cpu" + keys +
            " --set run.total_steps=800 --set run.eval_interval=200 --set run.checkpoint_interval=200 --set "
            "run.log_interval=200 --set dqn.hidden=[32] --set data.seed=5 --set run.name=single --output '" +
            (dir / "single").string() + "'",
        dir);
    INFO(single.err);
    CHECK(single.code == (steps < 800 ? 2 : 0));
    CHECK(slurp(point / "eval.jsonl") == slurp(dir / "single" / "single" / "eval.jsonl"));
    check_same_tensors(point / "checkpoints/last.safetensors",
                       dir / "single" / "single" / "checkpoints/last.safetensors");
}

}  // namespace

TEST_CASE(
    "successive halving: the worst stop at each rung, new points fill their slots, the same command twice and "
    "a resumed search give the same bits",
    "[search]") {
    const auto dir = scratch("halving");
    std::ofstream(dir / "grid.txt") << kGrid;
    const auto search = [&](const std::string& out, const std::string& env, const std::string& extra = "") {
        return fh::test::run_shell(env + " \"$EXE\" " + kHalving + extra + " --population-grid '" +
                                       (dir / "grid.txt").string() + "' --output '" + (dir / out).string() + "'",
                                   dir);
    };
    const auto a = search("a", "");
    INFO(a.err);
    REQUIRE(a.code == 0);
    CHECK(a.err.find("each agent its own launches (") != std::string::npos);
    const fs::path pa = last_line(a.out);
    const auto pop = parse(slurp(pa / "population.json"));
    const auto& agents = pop.find("agents")->as_array();
    REQUIRE(agents.size() == 6);  // search.max_points
    // Round 1 (200 env steps): the four agents at rung 0, the worst two stopped there, their
    // slots started points 4 and 5, drawn from seeds 5 and 6 (the population's seed + the index).
    std::vector<std::pair<double, int>> rung0;
    for (int i = 0; i < 4; ++i) {
        std::istringstream in(
            slurp(pa / agents[static_cast<std::size_t>(i)].find("run")->as_string() / "lineage.jsonl"));
        std::string first, second;
        std::getline(in, first);
        std::getline(in, second);
        const auto l = parse(second);
        CHECK(l.find("round")->as_i64() == 1);
        CHECK(l.find("rung")->as_i64() == 0);
        rung0.emplace_back(l.find("metric")->as_double(), i);
    }
    std::sort(rung0.begin(), rung0.end());
    for (std::size_t k = 0; k < 4; ++k)
        CHECK(agents[static_cast<std::size_t>(rung0[k].second)].find("rung")->as_i64() >= (k < 2 ? 0 : 1));
    for (std::size_t k = 0; k < 2; ++k) {
        const auto& worst = agents[static_cast<std::size_t>(rung0[k].second)];
        CHECK(worst.find("status")->as_string() == "stopped");
        CHECK(worst.find("rung")->as_i64() == 0);
    }
    const auto lr = dist("training.learning_rate", "loguniform(1e-4,1e-2)");
    const auto cql = dist("dqn.cql_alpha", "uniform(0,1)");
    for (int j : {4, 5}) {
        const auto& p = agents[static_cast<std::size_t>(j)];
        CHECK(p.find("index")->as_i64() == j);
        CHECK(p.find("seed")->as_i64() == 1 + j);
        CHECK(p.find("start_round")->as_i64() == 1);
        const auto& o = p.find("overrides")->as_array();
        REQUIRE(o.size() == 2);
        CHECK(o[0].as_string() == "training.learning_rate=" + run::draw_value(lr, 1 + j, run::key_stream(lr.key), 0));
        CHECK(o[1].as_string() == "dqn.cql_alpha=" + run::draw_value(cql, 1 + j, run::key_stream(cql.key), 0));
        const auto cfg = config::resolve_profile_file((pa / p.find("run")->as_string() / "config.toml").string());
        CHECK(cfg.run.seed == 1 + j);
    }
    check_halving_decisions(pa, 2, 200);
    // The ranking: by the last rung reached, then the metric there; compare ranks its rows so.
    const auto& ranking = pop.find("search")->find("ranking")->as_array();
    REQUIRE(ranking.size() == 6);
    for (std::size_t k = 1; k < ranking.size(); ++k) {
        const auto r0 = ranking[k - 1].find("rung")->as_i64(), r1 = ranking[k].find("rung")->as_i64();
        CHECK(r0 >= r1);
        if (r0 == r1) CHECK(ranking[k - 1].find("metric")->as_double() >= ranking[k].find("metric")->as_double());
    }
    const auto cmp = fh::test::run_shell("\"$EXE\" compare '" + pa.string() + "' --format csv", dir);
    REQUIRE(cmp.code == 0);
    std::istringstream rows(cmp.out);
    std::string header, top;
    std::getline(rows, header);
    std::getline(rows, top);
    CHECK(header.find("rung,rung_metric") != std::string::npos);
    CHECK(top.find(ranking[0].find("run")->as_string()) != std::string::npos);
    const auto table = fh::test::run_shell("\"$EXE\" compare '" + pa.string() + "'", dir);
    CHECK(table.out.find("6 runs ranked by the last rung of successive halving they reached") != std::string::npos);
    const auto rep =
        fh::test::run_shell("\"$EXE\" report '" + pa.string() + "' -o '" + (dir / "report.html").string() + "'", dir);
    CHECK(rep.code == 0);
    CHECK(slurp(dir / "report.html").find("run.search = &quot;halving&quot;: rungs at 200 x 2^k") != std::string::npos);
    check_point_alone(dir, pa, agents[4]);
    // The same command; crashed in the third round (4 agents x 50 iterations a round, then 2: point
    // 4 resumes from the checkpoint of its first round), then resumed; crashed in the second round
    // (points 4 and 5, their first checkpoint not written yet, start again), then the command again
    // (the points the search added are the population's too): the same search each time.
    check_reproduced(dir, pa, "dqn-smoketest", search, "train-step:430", "train-step:250");
    fs::remove_all(dir);
}

TEST_CASE(
    "successive halving, batched: a stopped agent's slot starts its new point from scratch in the engine, the same "
    "decisions and bits as unbatched, and a resumed search trains batched to the same bits",
    "[search]") {
    const auto dir = scratch("halving-batched");
    std::ofstream(dir / "grid.txt") << kGrid;
    const auto search = [&](const std::string& out, const std::string& env, const std::string& extra = "") {
        return fh::test::run_shell(env + " \"$EXE\" " + kHalving + " --set run.population_batching=on" + extra +
                                       " --population-grid '" + (dir / "grid.txt").string() + "' --output '" +
                                       (dir / out).string() + "'",
                                   dir);
    };
    const std::string batched_log = "population: one batched engine for the ";
    const auto a = search("a", "");
    INFO(a.err);
    REQUIRE(a.code == 0);
    CHECK(a.err.find(batched_log + "4 agents") != std::string::npos);
    const fs::path pa = last_line(a.out);
    // The same command unbatched: the same stops, new points and slots, each point's bits the same.
    const auto u =
        fh::test::run_shell("\"$EXE\" " + kHalving + " --set run.population_batching=off --population-grid '" +
                                (dir / "grid.txt").string() + "' --output '" + (dir / "u").string() + "'",
                            dir);
    INFO(u.err);
    REQUIRE(u.code == 0);
    CHECK(u.err.find("each agent its own launches (run.population_batching = \"off\")") != std::string::npos);
    check_same_search(pa, last_line(u.out));
    const auto pop = parse(slurp(pa / "population.json"));
    const auto& agents = pop.find("agents")->as_array();
    REQUIRE(agents.size() == 6);
    check_halving_decisions(pa, 2, 200);
    // Points 4 and 5 took the slots of agents stopped at round 1: each trains as it would alone.
    for (std::size_t j : {4u, 5u}) {
        INFO("point " << j);
        CHECK(agents[j].find("start_round")->as_i64() == 1);
        check_point_alone(dir, pa, agents[j]);
    }
    // Crashed in the third round (every point resumes from its checkpoint of round 2, point 4 from
    // its own first), then --resume; crashed in the second round (points 4 and 5 start again),
    // then the command again: each trains batched to the same search.
    check_reproduced(dir, pa, "dqn-smoketest", search, "train-step:430", "train-step:250", batched_log);
    fs::remove_all(dir);
}

namespace {

/// A halving search of `profile` (`args`: its seeds and keys, `grid` its space) trained batched
/// (run.population_batching = "on"): one batched engine; the same decisions and bits as the same
/// command unbatched (points 4 and 5 start in the slots of agents stopped at round 1, `interval`
/// per round in `unit`); crashed at `resume_fault` then --resume, and at `again_fault` then the
/// command again, it trains batched to the same search.
void check_batched_halving(const std::string& tag, const std::string& profile, const std::string& args,
                           const std::string& grid, long long interval, const std::string& unit,
                           const std::string& resume_fault, const std::string& again_fault) {
    const auto dir = scratch(tag);
    std::ofstream(dir / "grid.txt") << grid;
    const std::string common = "--profile " + profile + " --device cpu " + args +
                               " --set run.search=halving --set search.eta=2 --set search.max_points=6 "
                               "--set data.seed=5 --population-grid '" +
                               (dir / "grid.txt").string() + "'";
    const auto search = [&](const std::string& out, const std::string& env, const std::string& extra = "") {
        return fh::test::run_shell(env + " \"$EXE\" " + common + " --set run.population_batching=on" + extra +
                                       " --output '" + (dir / out).string() + "'",
                                   dir);
    };
    const std::string batched_log = "population: one batched engine for the ";
    const auto a = search("a", "");
    INFO(a.err);
    REQUIRE(a.code == 0);
    CHECK(a.err.find(batched_log + "4 agents") != std::string::npos);
    const fs::path pa = last_line(a.out);
    const auto u = fh::test::run_shell(
        "\"$EXE\" " + common + " --set run.population_batching=off --output '" + (dir / "u").string() + "'", dir);
    INFO(u.err);
    REQUIRE(u.code == 0);
    check_same_search(pa, last_line(u.out));
    const auto pop = parse(slurp(pa / "population.json"));
    const auto& agents = pop.find("agents")->as_array();
    REQUIRE(agents.size() == 6);
    for (std::size_t j : {4u, 5u}) CHECK(agents[j].find("start_round")->as_i64() == 1);
    check_halving_decisions(pa, 2, interval, unit);
    check_reproduced(dir, pa, profile, search, resume_fault, again_fault, batched_log);
    fs::remove_all(dir);
}

}  // namespace

TEST_CASE(
    "successive halving, batched IQL: a stopped agent's slot builds its new point's dataset and starts it from "
    "scratch in the engine, the same decisions and bits as unbatched, and a resumed search the same bits",
    "[search][iql]") {
    // 4 agents x 30 updates a round: crashed in the third round, then in the second (points 4
    // and 5 start again).
    check_batched_halving("halving-batched-iql", "iql-smoketest",
                          "--seeds 1,2,3,4 --set run.total_steps=120 --set run.eval_interval=30 --set "
                          "run.checkpoint_interval=30 --set run.log_interval=30 --set iql.hidden=[32]",
                          "training.learning_rate=loguniform(1e-4,1e-2) iql.expectile=uniform(0.5,0.9)\n", 30,
                          "updates", "train-step:258", "train-step:150");
}

TEST_CASE(
    "successive halving, batched PPO: a stopped agent's slot starts its new point's environments, rollout and "
    "counts from scratch in the engine, the same decisions and bits as unbatched, and a resumed search the same bits",
    "[search][ppo]") {
    // 4 agents x 2 rollouts a round, one agent left in the third: crashed in the second round after
    // the first agent's first rollout of it, then after every agent's (agents 0 and 3 resume from
    // their checkpoints of round 1, points 4 and 5 start again: one iteration of the search).
    check_batched_halving("halving-batched-ppo", "ppo-smoketest",
                          "--seeds 1,2,3,4 --set run.total_steps=3200 --set run.eval_interval=800 --set "
                          "run.checkpoint_interval=800 --set run.log_interval=800 --set ppo.hidden=[32]",
                          "training.learning_rate=loguniform(1e-4,1e-2) ppo.entropy_coef=uniform(0,0.05)\n", 800,
                          "env_steps", "train-step:10", "train-step:12");
}

TEST_CASE(
    "successive halving, bare: the search keys' defaults (interval = run.eval_interval, eta 3, eta x agents "
    "points), no search space",
    "[search]") {
    const auto dir = scratch("halving-bare");
    const auto r = fh::test::run_shell(
        "\"$EXE\" --profile dqn-smoketest --device cpu --seeds 1,2 --set run.search=halving --set dqn.hidden=[32] "
        "--set run.total_steps=400 --set run.eval_interval=100 --set run.checkpoint_interval=100 --output '" +
            (dir / "runs").string() + "'",
        dir);
    INFO(r.err);
    REQUIRE(r.code == 0);
    const auto pop = parse(slurp(fs::path(last_line(r.out)) / "population.json"));
    const auto* s = pop.find("search");
    REQUIRE(s != nullptr);
    CHECK(s->find("method")->as_string() == "halving");
    CHECK(s->find("interval")->as_i64() == 100);
    CHECK(s->find("eta")->as_i64() == 3);
    CHECK(s->find("max_points")->as_i64() == 6);
    const auto& agents = pop.find("agents")->as_array();
    REQUIRE(agents.size() == 6);
    std::set<std::string> names;
    for (const auto& a : agents) names.insert(a.find("run")->as_string());
    CHECK(names.size() == 6);
    CHECK(agents[5].find("seed")->as_i64() == 6);
    CHECK(names.count("seed=6") == 1);
    fs::remove_all(dir);
}

TEST_CASE(
    "successive halving is refused where it cannot run: too few points, "
    "eta 1",
    "[search]") {
    const auto problems = [](const std::vector<std::string>& overrides) {
        try {
            (void)config::resolve_profile_file(config::locate_profile("dqn-smoketest"), overrides);
        } catch (const config::ProfileError& e) {
            std::string all;
            for (const auto& p : e.problems()) all += p + "\n";
            return all;
        }
        return std::string();
    };
    CHECK(problems({"run.search=halving"}).empty());
    CHECK(problems({"run.search=halving", "run.population_batching=on"}).empty());  // the batched DQN engine
    for (const char* trainer : {"iql", "ppo"})  // the batched IQL and PPO engines too
        CHECK(problems({"run.search=halving", "run.population_batching=on", std::string("run.trainer=") + trainer})
                  .empty());
    CHECK(problems({"run.search=halving", "search.eta=1"}).find("search.eta") != std::string::npos);
    CHECK(problems({"run.search=halving", "run.trainer=dt"}).find("run.search = \"halving\" trains DQN, IQL and PPO") !=
          std::string::npos);
    CHECK(problems({"run.search=halving", "run.eval_interval=300", "search.interval=400"})
              .find("a halving round ranks") != std::string::npos);
    const auto dir = scratch("halving-refused");
    const auto few = fh::test::run_shell(
        "\"$EXE\" --profile dqn-smoketest --device cpu --seeds 1,2,3 --set run.search=halving --set "
        "search.max_points=2 --output '" +
            (dir / "runs").string() + "'",
        dir);
    CHECK(few.code == 2);
    CHECK(few.err.find("search.max_points = 2 is below the population's 3 agents") != std::string::npos);
    CHECK(!fs::exists(dir / "runs"));
    fs::remove_all(dir);
}

TEST_CASE("successive halving on the GPU: the same command twice gives the same search (CUDA)", "[gpu][search]") {
    const auto twice = [](const std::string& common, const std::string& grid, const std::string& tag,
                          long long interval, const std::string& unit, const std::string& expect_log = "") {
        const auto dir = scratch(tag);
        std::ofstream(dir / "grid.txt") << grid;
        std::vector<fs::path> runs;
        for (const char* name : {"a", "b"}) {
            const auto r =
                fh::test::run_shell("\"$EXE\" " + common + " --device cuda --population-grid '" +
                                        (dir / "grid.txt").string() + "' --output '" + (dir / name).string() + "'",
                                    dir);
            INFO(r.err);
            REQUIRE(r.code == 0);
            CHECK(r.err.find(expect_log) != std::string::npos);
            runs.push_back(last_line(r.out));
        }
        check_same_search(runs[0], runs[1]);
        check_halving_decisions(runs[0], 2, interval, unit);
        CHECK(parse(slurp(runs[0] / "population.json")).find("agents")->as_array().size() == 6);
        fs::remove_all(dir);
    };
    SECTION("DQN") {
        std::string common = kHalving;
        common.replace(common.find("--device cpu "), 13, "");
        twice(common, kGrid, "halving-gpu-dqn", 200, "env_steps");
    }
    SECTION("DQN, batched: stopped agents' slots start their new points in the engine") {
        std::string common = kHalving;
        common.replace(common.find("--device cpu "), 13, "");
        twice(common + " --set run.population_batching=on", kGrid, "halving-gpu-dqn-batched", 200, "env_steps",
              "population: one batched engine for the 4 agents");
    }
    SECTION("IQL") {
        twice(
            "--profile iql-smoketest --seeds 1,2,3,4 --set run.total_steps=120 --set run.eval_interval=30 --set "
            "run.checkpoint_interval=30 --set run.log_interval=30 --set run.search=halving --set search.eta=2 --set "
            "search.max_points=6 --set data.seed=5",
            "training.learning_rate=loguniform(1e-4,1e-2) iql.expectile=uniform(0.5,0.9)\n", "halving-gpu-iql", 30,
            "updates");
    }
    SECTION("IQL, batched") {
        twice(
            "--profile iql-smoketest --seeds 1,2,3,4 --set run.total_steps=120 --set run.eval_interval=30 --set "
            "run.checkpoint_interval=30 --set run.log_interval=30 --set run.search=halving --set search.eta=2 --set "
            "search.max_points=6 --set data.seed=5 --set run.population_batching=on",
            "training.learning_rate=loguniform(1e-4,1e-2) iql.expectile=uniform(0.5,0.9)\n", "halving-gpu-iql-batched",
            30, "updates", "population: one batched engine for the 4 agents");
    }
    SECTION("PPO") {
        twice(
            "--profile ppo-smoketest --seeds 1,2,3,4 --set run.total_steps=1600 --set run.eval_interval=400 --set "
            "run.checkpoint_interval=400 --set run.log_interval=400 --set run.search=halving --set search.eta=2 "
            "--set search.max_points=6 --set data.seed=5",
            "training.learning_rate=loguniform(1e-4,1e-2) ppo.entropy_coef=uniform(0,0.05)\n", "halving-gpu-ppo", 400,
            "env_steps");
    }
    SECTION("PPO, batched") {
        twice(
            "--profile ppo-smoketest --seeds 1,2,3,4 --set run.total_steps=1600 --set run.eval_interval=400 --set "
            "run.checkpoint_interval=400 --set run.log_interval=400 --set run.search=halving --set search.eta=2 "
            "--set search.max_points=6 --set data.seed=5 --set run.population_batching=on",
            "training.learning_rate=loguniform(1e-4,1e-2) ppo.entropy_coef=uniform(0,0.05)\n",
            "halving-gpu-ppo-batched", 400, "env_steps", "population: one batched engine for the 4 agents");
    }
}

TEST_CASE("scripts/sweep.sh with successive halving: stopped agents are finished runs, new points named as single runs",
          "[search][sweep]") {
    const auto dir = scratch("halving-sweep");
    const char* src = std::getenv("FH_SOURCE_DIR");
    REQUIRE(src != nullptr);
    const auto r = fh::test::run_shell(
        "'" + (fs::path(src) / "scripts" / "sweep.sh").string() +
            "' --exe \"$EXE\" --profile dqn-smoketest --cpu --set 'training.learning_rate=loguniform(1e-4, 1e-2)' "
            "--set run.search=halving --seeds 1,2,3,4 --output '" +
            (dir / "sw").string() +
            "' -- --set run.total_steps=400 --set run.eval_interval=200 --set dqn.hidden=[16] --set data.seed=5 "
            "--set search.eta=2 --set search.max_points=6",
        dir);
    INFO(r.out << r.err);
    REQUIRE(r.code == 0);
    CHECK(r.out.find("done (stopped by successive halving)") != std::string::npos);
    CHECK(r.err.find("holds 6 runs") != std::string::npos);
    std::set<std::int64_t> seeds;
    for (const auto& e : fs::directory_iterator(dir / "sw")) {
        if (!fs::exists(e.path() / "config.toml")) continue;
        const std::string name = e.path().filename().string();
        INFO(name);
        CHECK(name.rfind("dqn-smoketest,data.seed=5,", 0) == 0);  // --auto-name's form, as the first agents'
        seeds.insert(config::resolve_profile_file((e.path() / "config.toml").string()).run.seed);
    }
    CHECK(seeds == std::set<std::int64_t>{1, 2, 3, 4, 5, 6});
    fs::remove_all(dir);
}
