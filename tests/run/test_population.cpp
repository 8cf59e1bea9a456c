/// @file test_population.cpp
/// @brief A population (run.population, --seeds, --population-grid): each agent's run directory
///        equals a single run's with its seed and overrides (CPU in CI; CUDA with [gpu]), a
///        diverged agent stops alone, interrupt and resume, refused grids.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "config/profile.hpp"
#include "config/schema.hpp"
#include "io/json.hpp"
#include "io/safetensors.hpp"
#include "support/shell.hpp"
#include "run/population.hpp"
#include "trainers/trainer.hpp"
#include "util/errors.hpp"

namespace fs = std::filesystem;
namespace json = fh::io::json;

namespace {

fs::path scratch(const std::string& name) {
    return fh::test::scratch_dir("fh-population", name);
}

using Result = fh::test::ShellResult;
using fh::test::slurp;
Result sh(const std::string& script, const fs::path& dir) {
    return fh::test::run_shell(script, dir);
}

std::string last_line(const std::string& text) {
    std::string t = text;
    while (!t.empty() && t.back() == '\n') t.pop_back();
    const auto nl = t.rfind('\n');
    return nl == std::string::npos ? t : t.substr(nl + 1);
}

json::Value parse(const std::string& text) {
    return json::parse(text, json::Limits{64u << 20, 64, true});
}

/// metrics.jsonl without what depends on time (perf/*).
std::vector<std::string> metrics_without_timing(const fs::path& file) {
    std::vector<std::string> out;
    std::istringstream in(slurp(file));
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty()) continue;
        json::Object kept;
        const json::Value value = parse(line);
        for (const auto& [k, v] : value.as_object())
            if (k.rfind("perf/", 0) != 0) kept.emplace_back(k, v);
        out.push_back(json::serialize(json::Value::object(std::move(kept))));
    }
    return out;
}

std::string member(const fs::path& summary, const char* key) {
    const auto v = parse(slurp(summary));
    const auto* m = v.find(key);
    return m == nullptr ? "<missing>" : json::serialize(*m);
}

/// Every tensor of two checkpoints, byte for byte.
void check_same_tensors(const fs::path& a, const fs::path& b) {
    const auto fa = fh::io::TensorFile::read(a.string());
    const auto fb = fh::io::TensorFile::read(b.string());
    REQUIRE(fa.names() == fb.names());
    for (const auto& name : fa.names()) {
        const auto ta = fa.tensor(name), tb = fb.tensor(name);
        INFO(a.string() << " tensor " << name);
        CHECK(ta.shape == tb.shape);
        REQUIRE(ta.bytes.size() == tb.bytes.size());
        CHECK(std::equal(ta.bytes.begin(), ta.bytes.end(), tb.bytes.begin()));
    }
}

/// config.toml's settings without the lines that place it (run.output_dir, run.name) and without
/// the comments (aligned after the longest setting of a section, the name's included).
std::string config_without_output_dir(const fs::path& file) {
    std::istringstream in(slurp(file));
    std::string line, out;
    while (std::getline(in, line)) {
        if (line.rfind("output_dir", 0) == 0 || line.rfind("name =", 0) == 0) continue;
        if (const auto comment = line.find("  #"); comment != std::string::npos) line.resize(comment);
        while (!line.empty() && line.back() == ' ') line.pop_back();
        out += line + "\n";
    }
    return out;
}

/// The agent's run directory equals the single run's: metrics (less timing), validation, test
/// and best results, the backtest files and every checkpoint tensor.
void check_agent_equals_single(const fs::path& agent, const fs::path& single) {
    INFO("agent " << agent.string() << " vs single run " << single.string());
    REQUIRE(fs::exists(agent / "summary.json"));
    REQUIRE(fs::exists(single / "summary.json"));
    CHECK(metrics_without_timing(agent / "metrics.jsonl") == metrics_without_timing(single / "metrics.jsonl"));
    CHECK(slurp(agent / "eval.jsonl") == slurp(single / "eval.jsonl"));
    CHECK(config_without_output_dir(agent / "config.toml") == config_without_output_dir(single / "config.toml"));
    for (const char* key : {"status", "env_steps", "updates", "best", "validation", "test", "seed"})
        CHECK(member(agent / "summary.json", key) == member(single / "summary.json", key));
    for (const char* f : {"backtest/equity.csv", "backtest/trades.csv", "backtest/val_equity.csv"})
        CHECK(slurp(agent / f) == slurp(single / f));
    check_same_tensors(agent / "checkpoints/last.safetensors", single / "checkpoints/last.safetensors");
    check_same_tensors(agent / "checkpoints/best.safetensors", single / "checkpoints/best.safetensors");
}

/// A population of `profile` with `population_args`, then one single run per (seed, extra
/// overrides) with --auto-name; each agent's directory (same name) must equal its single run's.
void population_equals_single_runs(const std::string& device, const std::string& common,
                                   const std::string& population_args, const std::vector<std::string>& singles,
                                   const std::string& tag) {
    const auto dir = scratch(tag);
    const auto pop = sh(
        "\"$EXE\" " + common + " --device " + device + " --output '" + (dir / "pop").string() + "' " + population_args,
        dir);
    INFO(pop.err);
    REQUIRE(pop.code == 0);
    const fs::path popdir = last_line(pop.out);
    REQUIRE(fs::exists(popdir / "population.json"));
    const auto listing = parse(slurp(popdir / "population.json"));
    const json::Array agents = listing.find("agents")->as_array();
    REQUIRE(agents.size() == singles.size());
    for (const auto& a : agents) CHECK(a.find("status")->as_string() == "completed");
    for (std::size_t i = 0; i < singles.size(); ++i) {
        const auto r = sh("\"$EXE\" " + common + " --device " + device + " --output '" + (dir / "single").string() +
                              "' --auto-name " + singles[i],
                          dir);
        INFO(r.err);
        REQUIRE(r.code == 0);
        const fs::path single = last_line(r.out);
        const fs::path agent = popdir / agents[i].find("run")->as_string();
        // Named by what differs between the agents: the seed, and the grid line's keys.
        CHECK(agent.filename().string().rfind("seed=") != std::string::npos);
        CHECK(agent.filename().string().find("smoketest") == std::string::npos);        // the population's name has it
        CHECK(agent.filename().string().find("run.total_steps") == std::string::npos);  // shared: not in the name
        check_agent_equals_single(agent, single);
    }
    // compare reads the population directory as a folder of runs.
    const auto c = sh("\"$EXE\" compare '" + popdir.string() + "' --format csv", dir);
    INFO(c.err);
    CHECK(c.code == 0);
    CHECK(static_cast<std::size_t>(std::count(c.out.begin(), c.out.end(), '\n')) == singles.size() + 1);
    // Each agent and its single run are the same run: compared together, each is counted once.
    const auto both =
        sh("\"$EXE\" compare '" + popdir.string() + "' '" + (dir / "single").string() + "' --format json", dir);
    INFO(both.err);
    CHECK(both.code == 0);
    const auto j = parse(both.out);
    CHECK(j.find("rows")->as_array().size() == singles.size());
    CHECK(j.find("duplicates")->as_array().size() == singles.size());
    fs::remove_all(dir);
}

const std::string kDqn =
    "--profile dqn-smoketest --set run.total_steps=800 --set run.eval_interval=400 "
    "--set run.checkpoint_interval=400";
const std::string kIql =
    "--profile iql-smoketest --set run.total_steps=120 --set run.eval_interval=60 "
    "--set run.checkpoint_interval=60 --set run.log_interval=30";
const std::string kPpo =
    "--profile ppo-smoketest --set run.total_steps=1600 --set run.eval_interval=800 "
    "--set run.checkpoint_interval=800";

/// Two runs of the same batched population of 8 agents (`common`) on the GPU: every agent's
/// metrics, evaluation, equity and checkpoint tensors the same bits.
void batched_population_is_reproducible(const std::string& common, const std::string& tag) {
    const auto dir = scratch(tag);
    std::vector<fs::path> runs;
    for (const char* name : {"a", "b"}) {
        const auto r = sh("\"$EXE\" " + common +
                              " --device cuda --set run.population_batching=on --seeds 1,2,3,4,5,6,7,8 --output '" +
                              (dir / name).string() + "'",
                          dir);
        INFO(r.err);
        REQUIRE(r.code == 0);
        CHECK(r.err.find("one batched engine for the 8 agents") != std::string::npos);
        runs.push_back(last_line(r.out));
    }
    const auto agents = parse(slurp(runs[0] / "population.json")).find("agents")->as_array();
    REQUIRE(agents.size() == 8);
    for (const auto& a : agents) {
        CHECK(a.find("status")->as_string() == "completed");
        const std::string name = a.find("run")->as_string();
        INFO(name);
        CHECK(metrics_without_timing(runs[0] / name / "metrics.jsonl") ==
              metrics_without_timing(runs[1] / name / "metrics.jsonl"));
        CHECK(slurp(runs[0] / name / "eval.jsonl") == slurp(runs[1] / name / "eval.jsonl"));
        CHECK(slurp(runs[0] / name / "backtest/equity.csv") == slurp(runs[1] / name / "backtest/equity.csv"));
        check_same_tensors(runs[0] / name / "checkpoints/last.safetensors",
                           runs[1] / name / "checkpoints/last.safetensors");
    }
    fs::remove_all(dir);
}

}  // namespace

TEST_CASE("population: each of 3 DQN agents (seeds, a grid with another learning rate) equals its single run (CPU)",
          "[population]") {
    const auto grid_dir = scratch("grid");
    const fs::path grid = grid_dir / "grid.txt";
    std::ofstream(grid) << "# seeds and one other learning rate\nrun.seed=1\nrun.seed=2\n\n"
                           "run.seed=2   training.learning_rate=0.002  # faster\n";
    // The batched engine (dqn-smoketest's agents are small enough for "auto" to leave them unbatched;
    // the 8 agents on the GPU below test each agent's own launches).
    population_equals_single_runs("cpu", kDqn + " --set run.population_batching=on",
                                  "--population-grid '" + grid.string() + "'",
                                  {"--seed 1", "--seed 2", "--seed 2 --set training.learning_rate=0.002"}, "dqn3");
    fs::remove_all(grid_dir);
}

TEST_CASE(
    "population: 2 DQN agents with HER (another relabelling ratio and goal reward) equal their single runs "
    "(CPU)",
    "[population][her]") {
    const auto grid_dir = scratch("her-grid");
    const fs::path grid = grid_dir / "grid.txt";
    std::ofstream(grid) << "run.seed=1\nrun.seed=1 dqn.her_ratio=0.5 dqn.her_reward=0.1\n";
    // Batched: the engine's HER ops take both agents in one launch.
    population_equals_single_runs("cpu", kDqn + " --set dqn.her=true --set run.population_batching=on",
                                  "--population-grid '" + grid.string() + "'",
                                  {"--seed 1", "--seed 1 --set dqn.her_ratio=0.5 --set dqn.her_reward=0.1"}, "her2");
    fs::remove_all(grid_dir);
}

TEST_CASE(
    "population: 3 batched IQL agents (seeds, a grid with another expectile and beta) equal their single runs "
    "(CPU)",
    "[population][iql]") {
    const auto grid_dir = scratch("iql-grid");
    const fs::path grid = grid_dir / "grid.txt";
    std::ofstream(grid) << "run.seed=1\nrun.seed=2\nrun.seed=2 iql.expectile=0.9 iql.beta=1.0\n";
    population_equals_single_runs(
        "cpu", kIql + " --set run.population_batching=on", "--population-grid '" + grid.string() + "'",
        {"--seed 1", "--seed 2", "--seed 2 --set iql.expectile=0.9 --set iql.beta=1.0"}, "iql3");
    fs::remove_all(grid_dir);
}

TEST_CASE("population: 2 PPO agents from --seeds equal their single runs (CPU, own launches)", "[population]") {
    population_equals_single_runs("cpu", kPpo + " --set run.population_batching=off", "--seeds 3,5",
                                  {"--seed 3", "--seed 5"}, "ppo2");
}

TEST_CASE(
    "population: 3 batched PPO agents (seeds, a grid with another clip, entropy and lambda) equal their single "
    "runs (CPU)",
    "[population][ppo]") {
    const auto grid_dir = scratch("ppo-grid");
    const fs::path grid = grid_dir / "grid.txt";
    std::ofstream(grid) << "run.seed=1\nrun.seed=2\nrun.seed=2 ppo.clip=0.1 ppo.entropy_coef=0.05 ppo.gae_lambda=0.9\n";
    population_equals_single_runs(
        "cpu", kPpo + " --set run.population_batching=on", "--population-grid '" + grid.string() + "'",
        {"--seed 1", "--seed 2", "--seed 2 --set ppo.clip=0.1 --set ppo.entropy_coef=0.05 --set ppo.gae_lambda=0.9"},
        "ppo3");
    fs::remove_all(grid_dir);
}

TEST_CASE("population: run.population = 3 gives seeds run.seed + i; check lists the agents", "[population]") {
    const auto dir = scratch("check");
    const auto r = sh("\"$EXE\" check dqn-smoketest --set run.population=3 --seed 4", dir);
    INFO(r.err);
    REQUIRE(r.code == 0);
    CHECK(r.out.find("# Population: 3 agents") != std::string::npos);
    CHECK(r.out.find(" seed=4\n") != std::string::npos);  // the agents named by what differs: the seed
    CHECK(r.out.find(" seed=6\n") != std::string::npos);
    // Whether the agents train as one batched engine, and why not.
    CHECK(r.out.find("# Each agent its own launches: run.population_batching = \"auto\"") != std::string::npos);
    const auto on = sh("\"$EXE\" check dqn-smoketest --set run.population=3 --set run.population_batching=on", dir);
    CHECK(on.out.find("# Batched: one engine for every agent") != std::string::npos);
    const auto her =
        sh("\"$EXE\" check dqn-smoketest --set run.population=3 --set run.population_batching=on "
           "--set dqn.her=true",
           dir);
    CHECK(her.out.find("# Batched: one engine for every agent") != std::string::npos);  // every option batches
    // IQL agents batch under "auto" whatever their sizes; PPO agents where their networks are narrow
    // and their rollouts not tiny (curiosity included: each agent's forward model in the one engine);
    // DT has no batched engine.
    const auto iql = sh("\"$EXE\" check iql-smoketest --set run.population=3", dir);
    CHECK(iql.out.find("# Batched: one engine for every agent") != std::string::npos);
    const auto ppo = sh("\"$EXE\" check ppo-smoketest --set run.population=2", dir);
    CHECK(ppo.out.find("# Each agent its own launches: run.population_batching = \"auto\": a rollout") !=
          std::string::npos);
    const auto ppo_big =
        sh("\"$EXE\" check ppo-smoketest --set run.population=2 --set experience.gpu_n_episodes=64", dir);
    CHECK(ppo_big.out.find("# Batched: one engine for every agent") != std::string::npos);
    const auto ppo_mid =
        sh("\"$EXE\" check ppo-smoketest --set run.population=2 --set experience.gpu_n_episodes=64 "
           "--set ppo.hidden=[256,256]",
           dir);
    CHECK(ppo_mid.out.find("# Batched: one engine for every agent") != std::string::npos);
    const auto ppo_wide =
        sh("\"$EXE\" check ppo-smoketest --set run.population=2 --set experience.gpu_n_episodes=64 "
           "--set ppo.hidden=[512,512]",
           dir);
    CHECK(ppo_wide.out.find("widest ppo.hidden layer is 512 > 256") != std::string::npos);
    const auto curious =
        sh("\"$EXE\" check ppo-smoketest --set run.population=2 --set run.population_batching=on "
           "--set ppo.curiosity=true",
           dir);
    CHECK(curious.out.find("# Batched: one engine for every agent") != std::string::npos);
    const auto dt = sh("\"$EXE\" check dt-smoketest --set run.population=2", dir);
    INFO(dt.out << dt.err);
    CHECK(dt.out.find("# Each agent its own launches: agent 0: run.trainer = \"dt\" has no batched engine") !=
          std::string::npos);
    fs::remove_all(dir);
}

TEST_CASE("population: grids with shape keys, unknown keys or bad values are refused naming file:line:column",
          "[population]") {
    const auto dir = scratch("refuse");
    const fs::path grid = dir / "grid.txt";
    struct Case {
        std::string text, expect;
    };
    const std::vector<Case> cases{
        {"run.seed=1\nrun.seed=2 dqn.hidden=[32,32]\n", ":2:12: dqn.hidden cannot differ"},
        {"training.learning_rate=0.001\ntraining.learning_rate=0.01\ntraning.gamma=0.9\n", ":3:1: unknown key"},
        {"training.gamma=0.9\n\n  training.gamma=1.5\n", ":3:3:"},
        {"run.seed=1\nrun.seed\n", ":2:1: 'run.seed' is not KEY=VALUE"},
        {"replay_buffer.batch_size=64\n",
         ":1:1: replay_buffer.batch_size cannot differ between the agents of one population: it changes a shape"},
    };
    for (const auto& c : cases) {
        std::ofstream(grid) << c.text;
        for (const std::string sub : {"check dqn-smoketest", "--profile dqn-smoketest"}) {
            const auto r = sh("\"$EXE\" " + sub + " --device cpu --output '" + (dir / "runs").string() +
                                  "' --population-grid '" + grid.string() + "'",
                              dir);
            INFO(sub << " with grid:\n" << c.text << "\nstderr: " << r.err);
            CHECK(r.code == 2);
            CHECK(r.err.find(grid.string() + c.expect) != std::string::npos);
        }
    }
    CHECK_FALSE(fs::exists(dir / "runs"));  // refused before anything was written
    const auto seeds = sh("\"$EXE\" --profile dqn-smoketest --device cpu --seeds 1,x", dir);
    CHECK(seeds.code == 2);
    CHECK(seeds.err.find("--seeds") != std::string::npos);
    const auto same =
        sh("\"$EXE\" --profile dqn-smoketest --device cpu --seeds 1,1 --output '" + (dir / "runs").string() + "'", dir);
    CHECK(same.code == 2);
    CHECK(same.err.find("same run") != std::string::npos);
    const auto many = sh("\"$EXE\" check dqn-smoketest --set run.population=257", dir);
    CHECK(many.code == 2);
    fs::remove_all(dir);
}

TEST_CASE("population: a diverged agent stops alone, its summary says so; the others finish", "[population]") {
    std::string batching;
    SECTION("each agent its own launches") {
        batching = "off";
    }
    SECTION("the batched engine") {
        batching = "on";
    }
    const auto dir = scratch("diverged");
    const std::string file = fh::config::locate_profile("dqn-smoketest");
    const std::vector<std::string> overrides{"run.total_steps=800",
                                             "run.eval_interval=400",
                                             "run.device=\"cpu\"",
                                             "training.max_bad_updates=3",
                                             "run.output_dir=\"" + dir.string() + "\"",
                                             "run.population_batching=\"" + batching + "\""};
    const auto profile = fh::config::resolve_profile_file(file, overrides);
    fh::run::PopulationRequest request{{1, 2, 3}, ""};
    const auto plan = fh::run::plan_population(file, profile, overrides, request, false);
    REQUIRE(plan.agents.size() == 3);
    fh::run::set_agent_hook_for_tests([](int agent, fh::trainers::Trainer& t) {
        if (agent == 1) t.inject_nan_at_updates({1, 2, 3, 4, 5, 6, 7, 8});
    });
    CHECK_THROWS_AS(fh::run::train_population(plan, false), fh::DivergedError);
    fh::run::set_agent_hook_for_tests({});
    const fs::path popdir = dir / "dqn-smoketest";
    const auto listing = parse(slurp(popdir / "population.json"));
    const auto& agents = listing.find("agents")->as_array();
    REQUIRE(agents.size() == 3);
    CHECK(agents[0].find("status")->as_string() == "completed");
    CHECK(agents[1].find("status")->as_string() == "diverged");
    CHECK(agents[2].find("status")->as_string() == "completed");
    const std::string diverged = slurp(popdir / agents[1].find("run")->as_string() / "summary.json");
    CHECK(diverged.find("\"status\":\"diverged\"") != std::string::npos);
    CHECK(diverged.find("training diverged") != std::string::npos);
    CHECK(fs::exists(popdir / agents[2].find("run")->as_string() / "backtest/equity.csv"));
    fs::remove_all(dir);
}

/// A batched population of 3 agents (`common`) trained to `half`, then resumed to `total`: it
/// resumes batched, and each agent's run equals the same population's resumed with each agent's
/// own launches (which equal their single runs: the tests above). The first part's agents are
/// marked interrupted there (summary.json's status), as an interrupt at the end of a round leaves
/// them, so that --resume continues them from their checkpoints of one iteration. `updates` >= 0:
/// every agent's summary.json counts that many updates at the end.
void batched_resume_equals_unbatched(const std::string& common, long long half, long long total, const std::string& tag,
                                     long long updates = -1) {
    const auto dir = scratch(tag);
    std::vector<fs::path> pops;
    for (const char* how : {"on", "off"}) {
        const auto first = sh("\"$EXE\" " + common +
                                  " --device cpu --set run.population_batching=on --seeds 1,2,3 "
                                  "--set run.total_steps=" +
                                  std::to_string(half) + " --output '" + (dir / how).string() + "'",
                              dir);
        INFO(first.err);
        REQUIRE(first.code == 0);
        const fs::path popdir = last_line(first.out);
        const auto listing = parse(slurp(popdir / "population.json"));
        for (const auto& a : listing.find("agents")->as_array()) {
            const fs::path summary = popdir / a.find("run")->as_string() / "summary.json";
            std::string text = slurp(summary);
            const std::string done = "\"status\":\"completed\"";
            REQUIRE(text.find(done) != std::string::npos);
            text.replace(text.find(done), done.size(), "\"status\":\"interrupted\"");
            std::ofstream(summary) << text;
        }
        const auto resumed = sh("\"$EXE\" --resume '" + popdir.string() + "' --device cpu --set run.total_steps=" +
                                    std::to_string(total) + " --set run.population_batching=" + how,
                                dir);
        INFO(resumed.err);
        REQUIRE(resumed.code == 0);
        CHECK((resumed.err.find("one batched engine for the 3 agents") != std::string::npos) ==
              (std::string(how) == "on"));
        pops.push_back(popdir);
    }
    const auto listing = parse(slurp(pops[0] / "population.json"));
    const auto& agents = listing.find("agents")->as_array();
    REQUIRE(agents.size() == 3);
    for (const auto& a : agents) {
        CHECK(a.find("status")->as_string() == "completed");
        const std::string name = a.find("run")->as_string();
        INFO(name);
        CHECK(metrics_without_timing(pops[0] / name / "metrics.jsonl") ==
              metrics_without_timing(pops[1] / name / "metrics.jsonl"));
        CHECK(slurp(pops[0] / name / "eval.jsonl") == slurp(pops[1] / name / "eval.jsonl"));
        CHECK(slurp(pops[0] / name / "backtest/equity.csv") == slurp(pops[1] / name / "backtest/equity.csv"));
        check_same_tensors(pops[0] / name / "checkpoints/last.safetensors",
                           pops[1] / name / "checkpoints/last.safetensors");
        CHECK(member(pops[0] / name / "summary.json", "updates") == member(pops[1] / name / "summary.json", "updates"));
        if (updates >= 0) CHECK(member(pops[0] / name / "summary.json", "updates") == std::to_string(updates));
    }
    fs::remove_all(dir);
}

TEST_CASE("population: a batched population resumes batched, each agent as it would alone (CPU)", "[population]") {
    SECTION("DQN") {
        batched_resume_equals_unbatched(
            "--profile dqn-smoketest --set run.eval_interval=400 --set run.checkpoint_interval=400", 400, 800,
            "resume-dqn");
    }
    // Without the replay in the checkpoints: the agents resume batched, each ring refilling from
    // empty (updates 84 at 400 env steps, then none for the 16 steps that refill 64 transitions:
    // 84 + 100 - 16), each as it would alone.
    SECTION("DQN, checkpoint.keep_replay = false") {
        batched_resume_equals_unbatched(
            "--profile dqn-smoketest --set run.eval_interval=400 --set "
            "run.checkpoint_interval=400 --set checkpoint.keep_replay=false",
            400, 800, "resume-dqn-lean", 168);
    }
    SECTION("IQL") {
        batched_resume_equals_unbatched(kIql, 60, 120, "resume-iql");
    }
    SECTION("PPO") {
        batched_resume_equals_unbatched(kPpo, 800, 1600, "resume-ppo");
    }
}

// A batched population's agents read the interrupt latched at the start of each round: they stop
// after the same iteration, so the population resumes batched, and each agent as it would alone.
TEST_CASE("population: SIGINT stops a batched population's agents at one iteration; it resumes batched",
          "[population][iql]") {
    const auto dir = scratch("sigint-batched");
    const fs::path popdir = dir / "runs" / "iql-smoketest";
    const std::string name = "seed=";
    const std::string metrics = (popdir / (name + "3") / "metrics.jsonl").string();
    const auto r = sh("\"$EXE\" --profile iql-smoketest --device cpu --output '" + (dir / "runs").string() +
                          "' --seeds 1,2,3 --set run.total_steps=100000000 --set run.log_interval=50 & pid=$!; "
                          "for i in $(seq 600); do [ -s '" +
                          metrics +
                          "' ] && break; sleep 0.1; done; "
                          "kill -INT $pid; wait $pid",
                      dir);
    INFO(r.err);
    REQUIRE(r.code == 130);
    std::vector<std::string> updates;
    for (int seed = 1; seed <= 3; ++seed)
        updates.push_back(member(popdir / (name + std::to_string(seed)) / "summary.json", "updates"));
    CHECK(updates[1] == updates[0]);
    CHECK(updates[2] == updates[0]);
    REQUIRE(std::stoll(updates[0]) < 1000);
    const auto resumed = sh("\"$EXE\" --resume '" + popdir.string() + "' --device cpu --set run.total_steps=1000", dir);
    INFO(resumed.err);
    REQUIRE(resumed.code == 0);
    CHECK(resumed.err.find("one batched engine for the 3 agents") != std::string::npos);
    for (const int seed : {1, 3}) {
        const auto single = sh("\"$EXE\" --profile iql-smoketest --device cpu --output '" + (dir / "single").string() +
                                   "' --set run.total_steps=1000 --set run.log_interval=50 --seed " +
                                   std::to_string(seed) + " --auto-name",
                               dir);
        INFO(single.err);
        REQUIRE(single.code == 0);
        const fs::path one = last_line(single.out), agent = popdir / (name + std::to_string(seed));
        INFO(agent.string());
        CHECK(slurp(agent / "eval.jsonl") == slurp(one / "eval.jsonl"));
        for (const char* key : {"updates", "best", "validation", "test"})
            CHECK(member(agent / "summary.json", key) == member(one / "summary.json", key));
        check_same_tensors(agent / "checkpoints/last.safetensors", one / "checkpoints/last.safetensors");
    }
    fs::remove_all(dir);
}

TEST_CASE("population: SIGINT checkpoints every agent (exit 130); --resume POPDIR finishes them all", "[population]") {
    const auto dir = scratch("sigint");
    const fs::path popdir = dir / "runs" / "dqn-smoketest";
    const std::string metrics = (popdir / "seed=2" / "metrics.jsonl").string();
    const auto r = sh("\"$EXE\" --profile dqn-smoketest --device cpu --output '" + (dir / "runs").string() +
                          "' --seeds 1,2 --set run.total_steps=100000000 --set run.log_interval=400 & pid=$!; "
                          "for i in $(seq 600); do [ -s '" +
                          metrics +
                          "' ] && break; sleep 0.1; done; "
                          "kill -INT $pid; wait $pid",
                      dir);
    INFO(r.err);
    REQUIRE(r.code == 130);
    const auto listing = parse(slurp(popdir / "population.json"));
    for (const auto& a : listing.find("agents")->as_array()) {
        CHECK(a.find("status")->as_string() == "interrupted");
        CHECK(fs::exists(popdir / a.find("run")->as_string() / "checkpoints/last.safetensors"));
    }
    const auto resumed = sh("\"$EXE\" --resume '" + popdir.string() + "' --device cpu --set run.total_steps=2400", dir);
    INFO(resumed.err);
    REQUIRE(resumed.code == 0);
    CHECK(last_line(resumed.out) == popdir.string());
    const auto final_listing = parse(slurp(popdir / "population.json"));
    for (const auto& a : final_listing.find("agents")->as_array()) {
        CHECK(a.find("status")->as_string() == "completed");
        CHECK(slurp(popdir / a.find("run")->as_string() / "summary.json").find("\"status\":\"completed\"") !=
              std::string::npos);
    }
    // The resumed agents equal uninterrupted single runs: validation, results, the last checkpoint.
    for (const int seed : {1, 2}) {
        const auto single = sh("\"$EXE\" --profile dqn-smoketest --device cpu --output '" + (dir / "single").string() +
                                   "' --set run.total_steps=2400 --set run.log_interval=400 --seed " +
                                   std::to_string(seed) + " --auto-name",
                               dir);
        INFO(single.err);
        REQUIRE(single.code == 0);
        const fs::path one = last_line(single.out);
        const fs::path agent = popdir / ("seed=" + std::to_string(seed));
        INFO(agent.string());
        CHECK(slurp(agent / "eval.jsonl") == slurp(one / "eval.jsonl"));
        for (const char* key : {"env_steps", "updates", "best", "validation", "test"})
            CHECK(member(agent / "summary.json", key) == member(one / "summary.json", key));
        check_same_tensors(agent / "checkpoints/last.safetensors", one / "checkpoints/last.safetensors");
    }
    // A second resume: every agent is finished, nothing is touched (exit 2, as for a finished run).
    const auto again = sh("\"$EXE\" --resume '" + popdir.string() + "' --device cpu --set run.total_steps=2400", dir);
    CHECK(again.code == 2);
    fs::remove_all(dir);
}

TEST_CASE("population: run.on_exists = resume skips a finished population", "[population]") {
    const auto dir = scratch("onexists");
    const std::string cmd = "\"$EXE\" " + kDqn + " --device cpu --seeds 1,2 --set run.on_exists=resume --output '" +
                            (dir / "runs").string() + "'";
    const auto first = sh(cmd, dir);
    INFO(first.err);
    REQUIRE(first.code == 0);
    const std::string before = slurp(fs::path(last_line(first.out)) / "seed=1" / "summary.json");
    const auto second = sh(cmd, dir);
    INFO(second.err);
    REQUIRE(second.code == 0);
    CHECK(last_line(second.out) == last_line(first.out));
    CHECK(second.err.find("left as it is") != std::string::npos);
    CHECK(slurp(fs::path(last_line(first.out)) / "seed=1" / "summary.json") == before);
    fs::remove_all(dir);
}

TEST_CASE("population: a population directory in use is refused, by --resume and by its command", "[population]") {
    // A process training a population holds its directory's lock (the run directory's flock):
    // neither a --resume of it nor its command with run.on_exists = resume may run there too.
    const auto dir = scratch("locked");
    const fs::path popdir = dir / "runs" / "p";
    fs::create_directories(popdir);
    const std::string record = "{\"population\":2,\"trainer\":\"dqn\",\"agents\":[]}\n";
    std::ofstream(popdir / "population.json") << record;
    const std::string resume = "\"$EXE\" --resume '" + popdir.string() + "' --device cpu";
    const std::string again = "\"$EXE\" " + kDqn +
                              " --device cpu --seeds 1,2 --set run.name=p --set run.on_exists=resume " + "--output '" +
                              (dir / "runs").string() + "'";
    const int fd = ::open(popdir.c_str(), O_RDONLY | O_DIRECTORY);
    REQUIRE(fd >= 0);
    REQUIRE(::flock(fd, LOCK_EX | LOCK_NB) == 0);
    const auto resumed = sh(resume, dir);
    const auto rerun = sh(again, dir);
    ::close(fd);
    for (const auto* r : {&resumed, &rerun}) {
        INFO(r->err);
        CHECK(r->code == 2);
        CHECK(
            r->err.find(popdir.string() + ": another foxhunt-train process is running in this population directory") !=
            std::string::npos);
    }
    CHECK(slurp(popdir / "population.json") == record);
    CHECK(!fs::exists(popdir / "seed=1"));
    // Unlocked, --resume reads the record (this one lists no agent).
    const auto unlocked = sh(resume, dir);
    INFO(unlocked.err);
    CHECK(unlocked.code == 2);
    CHECK(unlocked.err.find("population.json lists no agents") != std::string::npos);
    fs::remove_all(dir);
}

TEST_CASE("population: one written with the earlier naming (agents named as single runs) resumes by its command",
          "[population]") {
    const auto dir = scratch("old-names");
    const std::string cmd = "\"$EXE\" " + kDqn + " --device cpu --seeds 1,2 --set run.on_exists=resume --output '" +
                            (dir / "runs").string() + "'";
    // Interrupted before the end: the first agent finished, the second has a checkpoint only.
    const auto first = sh(cmd + " --set run.total_steps=400", dir);
    INFO(first.err);
    REQUIRE(first.code == 0);
    const fs::path popdir = last_line(first.out);
    // As an earlier version wrote it: each agent's directory named as --auto-name names its single run.
    const std::string old1 =
        "dqn-smoketest,run.checkpoint_interval=400,run.eval_interval=400,run.total_steps=400,seed=1";
    const std::string old2 =
        "dqn-smoketest,run.checkpoint_interval=400,run.eval_interval=400,run.total_steps=400,seed=2";
    fs::rename(popdir / "seed=1", popdir / old1);
    fs::rename(popdir / "seed=2", popdir / old2);
    std::string listing = slurp(popdir / "population.json");
    for (const auto& [now, before] : {std::pair{"\"run\":\"seed=1\"", "\"run\":\"" + old1 + "\""},
                                      std::pair{"\"run\":\"seed=2\"", "\"run\":\"" + old2 + "\""}}) {
        const auto at = listing.find(now);
        REQUIRE(at != std::string::npos);
        listing.replace(at, std::string(now).size(), before);
    }
    std::ofstream(popdir / "population.json") << listing;
    // Agent 2 unfinished: its summary says interrupted, as after a SIGINT.
    {
        std::string s = slurp(popdir / old2 / "summary.json");
        const auto at = s.find("\"status\":\"completed\"");
        REQUIRE(at != std::string::npos);
        s.replace(at, 20, "\"status\":\"interrupted\"");
        std::ofstream(popdir / old2 / "summary.json") << s;
    }
    const auto again = sh(cmd + " --set run.total_steps=800", dir);
    INFO(again.err);
    REQUIRE(again.code == 0);
    CHECK(last_line(again.out) == popdir.string());
    // The recorded directories were used: agent 1 left as it is, agent 2 resumed to 800 steps in its old directory.
    CHECK_FALSE(fs::exists(popdir / "seed=1"));
    CHECK_FALSE(fs::exists(popdir / "seed=2"));
    CHECK(again.err.find("left as it is") != std::string::npos);
    CHECK(member(popdir / old2 / "summary.json", "status") == "\"completed\"");
    CHECK(member(popdir / old2 / "summary.json", "env_steps") == "800");
    const auto agents = parse(slurp(popdir / "population.json")).find("agents")->as_array();
    REQUIRE(agents.size() == 2);
    CHECK(agents[0].find("run")->as_string() == old1);
    CHECK(agents[1].find("run")->as_string() == old2);
    fs::remove_all(dir);
}

// Each agent its own launches (run.population_batching = "off"): its products are its single run's.
TEST_CASE("population on the GPU: each of 8 DQN agents equals its single run (CUDA, exact)", "[gpu][population]") {
    std::vector<std::string> singles;
    for (int s = 1; s <= 8; ++s) singles.push_back("--seed " + std::to_string(s));
    population_equals_single_runs("cuda", kDqn + " --set run.population_batching=off", "--seeds 1,2,3,4,5,6,7,8",
                                  singles, "gpu8");
}

// The batched engine's products are strided batches of 8 networks, which cuBLAS may round otherwise
// than a single run's (tests/trainers/test_dqn_population.cpp bounds the difference); the same
// population gives the same bits every time, and every agent its complete run directory.
TEST_CASE("population on the GPU: a batched population of 8 DQN agents is bit-reproducible (CUDA)",
          "[gpu][population]") {
    batched_population_is_reproducible(kDqn, "gpu8batched");
}

// The same for IQL's batched engine (tests/trainers/test_iql_population.cpp bounds its difference
// from single runs).
TEST_CASE("population on the GPU: a batched population of 8 IQL agents is bit-reproducible (CUDA)",
          "[gpu][population][iql]") {
    batched_population_is_reproducible(kIql, "gpu8iql");
}

// 8 agents with their own launches on a GPU host's workers (a quarter of its cores each): a worker
// issues each of its agents' rollouts before it completes any (Trainer::prepare_iteration).
TEST_CASE("population on the GPU: each of 8 PPO agents equals its single run (CUDA, exact)", "[gpu][population]") {
    std::vector<std::string> singles;
    for (int s = 1; s <= 8; ++s) singles.push_back("--seed " + std::to_string(s));
    population_equals_single_runs("cuda", kPpo + " --set run.population_batching=off", "--seeds 1,2,3,4,5,6,7,8",
                                  singles, "ppo8");
}

// PPO's batched engine (tests/trainers/test_ppo_population.cpp bounds its difference from single
// runs): the same population gives the same bits every time.
TEST_CASE("population on the GPU: a batched population of 8 PPO agents is bit-reproducible (CUDA)",
          "[gpu][population][ppo]") {
    batched_population_is_reproducible(kPpo, "gpu8ppo");
}

TEST_CASE("population: bench --set run.population=2 reports aggregate and per-agent rates", "[population][bench]") {
    const auto dir = scratch("bench");
    const auto r =
        sh("\"$EXE\" bench --profile dqn-smoketest --device cpu --set run.total_steps=80 --set run.population=2", dir);
    INFO(r.err);
    REQUIRE(r.code == 0);
    const auto v = parse(last_line(r.out));
    CHECK(v.find("population")->as_i64() == 2);
    for (const char* key : {"collection_env_steps_per_s", "updates_per_s", "end_to_end_env_steps_per_s",
                            "agent_updates_per_s", "updates_per_s_per_agent", "collection_env_steps_per_s_per_agent",
                            "end_to_end_env_steps_per_s_per_agent", "peak_device_memory_bytes"}) {
        INFO(key);
        REQUIRE(v.find(key) != nullptr);
        CHECK(v.find(key)->as_double() > 0);
    }
    CHECK(v.find("updates_per_s_per_agent")->as_double() * 2 == Approx(v.find("agent_updates_per_s")->as_double()));
    // IQL's batched engine: its updates, the agents' dataset collection; no collection while training.
    const auto iql =
        sh("\"$EXE\" bench --profile iql-smoketest --device cpu --set run.total_steps=40 "
           "--set run.population=2 --set run.population_batching=on",
           dir);
    INFO(iql.err);
    REQUIRE(iql.code == 0);
    const auto vi = parse(last_line(iql.out));
    CHECK(vi.find("batched")->as_bool());
    CHECK(vi.find("trainer")->as_string() == "iql");
    CHECK(vi.find("agent_updates_per_s")->as_double() > 0);
    CHECK(vi.find("collection_env_steps_per_s")->as_double() > 0);
    CHECK(vi.find("end_to_end_env_steps_per_s")->as_double() == 0);
    const auto one = sh("\"$EXE\" bench --profile dqn-smoketest --device cpu --set run.total_steps=80", dir);
    REQUIRE(one.code == 0);
    CHECK(parse(last_line(one.out)).find("population") == nullptr);  // a single trainer's output as before
    fs::remove_all(dir);
}

TEST_CASE("population: scripts/sweep.sh's per-agent keys are agent_keys()", "[population][sweep]") {
    const char* src = std::getenv("FH_SOURCE_DIR");
    REQUIRE(src != nullptr);
    const std::string script = slurp(fs::path(src) / "scripts" / "sweep.sh");
    const auto at = script.find("agent_keys=\"");
    REQUIRE(at != std::string::npos);
    const auto start = at + 12;
    std::istringstream keys(script.substr(start, script.find('"', start) - start));
    std::vector<std::string> listed;
    for (std::string k; keys >> k;) listed.push_back(k);
    CHECK(listed == fh::run::agent_keys());
    // Each is a scalar key of the schema (an integer or a float: nothing with a shape).
    for (const auto& k : fh::run::agent_keys()) {
        INFO(k);
        const auto dot = k.find('.');
        const auto* d = fh::config::find_key(k.substr(0, dot), k.substr(dot + 1));
        REQUIRE(d != nullptr);
        CHECK((d->type == fh::config::KeyType::number || d->type == fh::config::KeyType::integer));
    }
}

TEST_CASE("population: a sweep's populations give the runs --no-population gives, under the same names",
          "[population][sweep]") {
    const auto dir = scratch("sweep");
    const char* src = std::getenv("FH_SOURCE_DIR");
    REQUIRE(src != nullptr);
    const std::string sweep = "'" + (fs::path(src) / "scripts" / "sweep.sh").string() +
                              "' --exe \"$EXE\" --profile "
                              "dqn-smoketest --cpu -j 1 --set training.learning_rate=1e-3,2e-3 --seeds 1,2";
    const std::string tiny =
        " -- --set run.total_steps=400 --set run.eval_interval=200 --set run.checkpoint_interval=200";
    const auto pop = sh(sweep + " --output '" + (dir / "pop").string() + "'" + tiny, dir);
    INFO(pop.out << pop.err);
    REQUIRE(pop.code == 0);
    CHECK(pop.err.find("(1 at a time; 1 processes)") != std::string::npos);
    CHECK(std::count(pop.out.begin(), pop.out.end(), '\n') == 4);
    const auto alone = sh(sweep + " --no-population --output '" + (dir / "alone").string() + "'" + tiny, dir);
    INFO(alone.out << alone.err);
    REQUIRE(alone.code == 0);
    CHECK(alone.err.find("(1 at a time; 4 processes)") != std::string::npos);
    std::set<std::string> names;
    for (const auto& e : fs::directory_iterator(dir / "alone"))
        if (fs::exists(e.path() / "config.toml")) names.insert(e.path().filename().string());
    REQUIRE(names.size() == 4);
    for (const auto& name : names) check_agent_equals_single(dir / "pop" / name, dir / "alone" / name);
    // Again: every run of the population is skipped.
    const auto again = sh(sweep + " --output '" + (dir / "pop").string() + "'" + tiny, dir);
    REQUIRE(again.code == 0);
    std::size_t skipped = 0;
    for (auto at = again.out.find(": skipped "); at != std::string::npos; at = again.out.find(": skipped ", at + 1))
        ++skipped;
    CHECK(skipped == 4);
    fs::remove_all(dir);
}

TEST_CASE("population: Ctrl-C stops a sweep's population with every agent checkpointed; the same command resumes it",
          "[population][sweep]") {
    const auto dir = scratch("sweepint");
    const char* src = std::getenv("FH_SOURCE_DIR");
    REQUIRE(src != nullptr);
    const std::string grid = "'" + (fs::path(src) / "scripts" / "sweep.sh").string() +
                             "' --exe \"$EXE\" --profile dqn-smoketest --cpu -j 1 --output sweep --no-parallel "
                             "--seeds 1,2 -- --set run.total_steps=3000 --set run.log_interval=100";
    const auto r = sh("cd '" + dir.string() + "' && " + fh::test::ctrl_c_once("sweep/*/metrics.jsonl", 2) + grid, dir);
    INFO(r.out << r.err);
    CHECK(r.code == 130);
    CHECK(r.err.find("1 processes") != std::string::npos);
    std::size_t interrupted = 0;
    for (auto at = r.out.find(": interrupted "); at != std::string::npos; at = r.out.find(": interrupted ", at + 1))
        ++interrupted;
    CHECK(interrupted == 2);
    const auto again = sh("cd '" + dir.string() + "' && " + grid, dir);
    INFO(again.out << again.err);
    CHECK(again.code == 0);
    std::size_t resumed = 0;
    for (auto at = again.out.find(": done (resumed) "); at != std::string::npos;
         at = again.out.find(": done (resumed) ", at + 1))
        ++resumed;
    CHECK(resumed == 2);
    for (const auto& e : fs::directory_iterator(dir / "sweep"))
        if (fs::exists(e.path() / "config.toml"))
            CHECK(slurp(e.path() / "summary.json").find("\"status\":\"completed\"") != std::string::npos);
    fs::remove_all(dir);
}
