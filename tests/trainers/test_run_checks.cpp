/// @file test_run_checks.cpp
/// @brief `check` and `train` share one validation (issue 16, item 8): every profile `train`
///        refuses is refused by `check` with the same exit code, before anything is written or
///        allocated; the data-dependent rules (splits, eval.segments, replay dumps, the instrument
///        against the prices), the kernels' int index range and the memory estimates.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "config/memory_estimate.hpp"
#include "config/profile.hpp"
#include "data/load.hpp"
#include "io/replay_dump.hpp"
#include "support/shell.hpp"
#include "trainers/dqn/engine.hpp"
#include "trainers/memory_plan.hpp"
#include "trainers/registry.hpp"
#include "trainers/run_checks.hpp"
#include "trainers/setup.hpp"
#include "util/errors.hpp"

namespace fs = std::filesystem;
using fh::trainers::check_run;
using fh::trainers::RunCheckOptions;

namespace {

fs::path scratch(const std::string& name) {
    return fh::test::scratch_dir("fh-runchecks", name);
}

using fh::test::slurp;
using Result = fh::test::ShellResult;

/// The executable with `args`.
Result run(const std::string& args, const fs::path& dir) {
    return fh::test::run_shell("\"$EXE\" " + args, dir);
}

fh::config::Profile profile(const std::vector<std::string>& overrides) {
    return fh::config::resolve_profile_text("[run]\ntrainer = \"dqn\"\n[data]\nsynthetic_bars = 3000\n", "p.toml",
                                            overrides);
}

int code_of(const std::function<void()>& f, std::string* message = nullptr) {
    try {
        f();
    } catch (const fh::Error& e) {
        if (message) *message = e.what();
        return static_cast<int>(e.code());
    }
    return 0;
}

/// Daily bars around `price` with a daily range of `range`, as CSV.
std::string daily_csv(double price, double range, int n = 600) {
    std::string csv = "timestamp,open,high,low,close\n";
    char buf[200];
    for (int i = 0; i < n; ++i) {
        const double c = price * (1 + 0.01 * std::sin(i * 0.05));
        std::snprintf(buf, sizeof buf, "%lld,%.8g,%.8g,%.8g,%.8g\n", 1'600'000'000LL + i * 86'400LL, c, c + range / 2,
                      c - range / 2, c);
        csv += buf;
    }
    return csv;
}

}  // namespace

TEST_CASE("run checks: check and train refuse the same profiles with the same exit code, train before writing",
          "[trainers][run_checks]") {
    const auto dir = scratch("parity");
    const std::string fx = (dir / "fx.csv").string();
    std::ofstream(fx) << daily_csv(1.4, 0.01);
    struct Case {
        const char* what;
        std::string args;
        int code;
        const char* says;
    };
    const std::vector<Case> cases = {
        {"an ensemble past the kernels' shared memory",
         "--set dqn.ensemble_size=32 --set env.position_levels=101 --set env.urgency_levels=3", 2, "more than 48 KB"},
        {"IQN head with an ensemble", "--set dqn.head=iqn --set dqn.ensemble_size=2", 2,
         "the ensemble has C51 and scalar heads only"},
        {"IQN loss scratch past shared memory",
         "--set dqn.head=iqn --set dqn.iqn_quantiles=64 --set env.position_levels=101 --set env.urgency_levels=3", 2,
         "exceeds 384, the floats per sample the IQN loss kernel keeps in shared memory"},
        {"HER goals drawn from an empty range",
         "--set dqn.her=true --set dqn.her_goal_min=3 --set dqn.her_goal_max=1 --set dqn.her_eval_goal=2", 2,
         "dqn.her_goal_min = 3 exceeds dqn.her_goal_max = 1"},
        {"HER evaluated at a goal it never trained on", "--set dqn.her=true --set dqn.her_eval_goal=10", 2,
         "dqn.her_eval_goal = 10 lies outside the training goals [-2, 4]"},
        {"HER's reward past the C51 support", "--set dqn.her=true --set dqn.her_reward=1", 2,
         "more than the whole C51 support"},
        {"sampled evaluation", "--set eval.deterministic=false", 2, "eval.deterministic = false"},
        {"sampled evaluation, PPO", "--set run.trainer=ppo --set env.position_levels=15 --set eval.deterministic=false",
         2, "eval.deterministic = false"},
        {"no validation and no test split",
         "--set data.train_fraction=1 --set data.val_fraction=0 --set data.test_fraction=0", 2,
         "data.test_fraction = 0 leaves no test split"},
        {"v_min out of float range", "--set dqn.v_min=-1.7e308", 2, "dqn.v_min must be [-1000000, 1000000]"},
        {"a replay smaller than the environments", "--set experience.gpu_n_episodes=1024", 2,
         "the replay would silently grow to 4096 transitions"},
        {"a network past the int index range",
         "--set "
         "dqn.hidden=[16384,16384,16384,16384,16384,16384,16384,16384,16384,16384,16384,16384,16384,16384,16384,16384]",
         2, "networks and targets (8071939068 x 4 B): 8071939068 elements in one array"},
        {"too many evaluation segments", "--set eval.segments=4096", 2,
         "eval.segments = 4096 is more than half of the validation split's"},
        {"a test split with nothing to trade", "--set data.test_fraction=0.0002", 3, "the test split"},
        {"an E-mini instrument on FX prices", "--data '" + fx + "'", 2, "the instrument does not fit the prices"},
    };
    for (const auto& c : cases) {
        INFO(c.what);
        const auto out = dir / "runs";
        fs::remove_all(out);
        const auto chk = run("check dqn-smoketest --device cpu " + c.args, dir);
        INFO("check: " << chk.err);
        CHECK(chk.code == c.code);
        CHECK_THAT(chk.err, Catch::Contains(c.says));
        CHECK(chk.out.empty());  // nothing claims the profile is valid
        const auto trn = run("--profile dqn-smoketest --device cpu --output '" + out.string() + "' " + c.args, dir);
        INFO("train: " << trn.err);
        CHECK(trn.code == c.code);
        CHECK_THAT(trn.err, Catch::Contains(c.says));
        CHECK_FALSE(fs::exists(out / "dqn-smoketest"));  // refused before the run directory
    }
    // --force overrides the instrument refusal (with warnings), in check as in train
    const auto forced = run("check dqn-smoketest --device cpu --force --data '" + fx + "'", dir);
    INFO(forced.err);
    CHECK(forced.code == 0);
    CHECK_THAT(forced.err, Catch::Contains("--force: training although the instrument does not fit"));
    fs::remove_all(dir);
}

TEST_CASE("run checks: splits and eval.segments against the data", "[trainers][run_checks]") {
    auto p = profile({});
    auto md = fh::data::load_market(fh::trainers::data_options(p));
    RunCheckOptions o;
    o.host_backend = true;
    CHECK(code_of([&] { check_run(p, md, o); }) == 0);
    // 450 validation bars: at most 225 segments
    p = profile({"eval.segments=225"});
    CHECK(code_of([&] { check_run(p, md, o); }) == 0);
    p = profile({"eval.segments=226"});
    std::string m;
    CHECK(code_of([&] { check_run(p, md, o); }, &m) == 2);
    CHECK_THAT(m, Catch::Contains("set eval.segments <= 225"));
    // without validation backtests the validation split is not needed
    p = profile({"eval.segments=4096", "run.eval_interval=0", "early_stopping.patience=0"});
    CHECK(code_of([&] { check_run(p, md, o); }) == 0);
    // a validation split (120 bars) inside the 128-bar warm-up of a new contract has nothing to trade
    p = profile({"data.val_fraction=0.04"});
    md = fh::data::load_market(fh::trainers::data_options(p));
    md.bars.segment_starts = {0, md.val.begin};
    md.bars.segment_names = {"a", "b"};
    CHECK(code_of([&] { check_run(p, md, o); }, &m) == 3);
    CHECK_THAT(m, Catch::Contains("the validation split"));
    CHECK_THAT(m, Catch::Contains("raise data.val_fraction"));
}

TEST_CASE("run checks: an IQL replay dump must fit the profile and hold a batch", "[trainers][run_checks][replay]") {
    const auto dir = scratch("dump");
    const std::string path = (dir / "d.fhreplay").string();
    auto write = [&](int state_dim, int actions, int rows) {
        fh::io::ReplayDump d;
        d.state_dim = state_dim;
        d.n_envs = rows;
        d.capacity_steps = 1;
        d.num_actions = actions;
        d.pushed_steps = 1;
        d.states.assign(static_cast<std::size_t>(rows * state_dim), 0.f);
        d.next_states = d.states;
        d.rewards.assign(static_cast<std::size_t>(rows), 0.f);
        d.actions.assign(static_cast<std::size_t>(rows), 0);
        d.done.assign(static_cast<std::size_t>(rows), 0);
        fh::io::write_replay_dump(path, d);
    };
    const std::string use = "iql.dataset=\"" + path + "\"";
    auto p = fh::config::resolve_profile_text("[run]\ntrainer = \"iql\"\n[data]\nsynthetic_bars = 3000\n", "p.toml",
                                              {use, "replay_buffer.batch_size=64"});
    const auto md = fh::data::load_market(fh::trainers::data_options(p));
    RunCheckOptions o;
    o.host_backend = true;
    std::string m;
    write(50, 9, 4);  // a dump of 4 transitions with batch 64
    CHECK(code_of([&] { check_run(p, md, o); }, &m) == 3);
    CHECK_THAT(m, Catch::Contains("holds 4 transitions, fewer than one batch (replay_buffer.batch_size = 64)"));
    write(50, 9, 64);
    CHECK(code_of([&] { check_run(p, md, o); }) == 0);
    // The dump checked, as check prints it: its key, its path and its rows.
    const auto sizes = check_run(p, md, o);
    CHECK(sizes.dump_key == "iql.dataset");
    CHECK(sizes.dump_path == path);
    CHECK(sizes.inputs.dump_rows == 64);
    std::ofstream(dir / "p.toml") << "[run]\ntrainer = \"iql\"\n[data]\nsynthetic_bars = 3000\n";
    const auto checked = fh::test::run_shell("\"$EXE\" check --device cpu --profile '" + (dir / "p.toml").string() +
                                                 "' --set '" + use + "' --set replay_buffer.batch_size=64",
                                             dir);
    INFO(checked.err);
    CHECK(checked.code == 0);
    CHECK_THAT(checked.out, Catch::Contains("#   iql.dataset:    " + path + " (verified: 64 rows allocated)"));
    write(49, 9, 64);
    CHECK(code_of([&] { check_run(p, md, o); }, &m) == 3);
    CHECK_THAT(m, Catch::Contains("states have 49 features, this profile's data gives 50"));
    write(50, 45, 64);
    CHECK(code_of([&] { check_run(p, md, o); }, &m) == 3);
    CHECK_THAT(m, Catch::Contains("has 45 actions, this profile's environment has 9"));
    fs::remove_all(dir);
}

TEST_CASE("run checks: the instrument against the prices", "[trainers][run_checks]") {
    const auto dir = scratch("instrument");
    const std::string csv = (dir / "bars.csv").string();
    auto fit_of = [&](const std::string& text, const std::vector<std::string>& overrides) {
        std::ofstream(csv) << text;
        auto o = overrides;
        o.push_back("data.path=\"" + csv + "\"");
        o.push_back("data.cache_dir=\"" + (dir / "cache").string() + "\"");
        const auto p = profile(o);
        return fh::trainers::instrument_fit(p, fh::data::load_market(fh::trainers::data_options(p)).bars);
    };
    // An E-mini at 4000 with 40-point days fits its own defaults.
    auto fit = fit_of(daily_csv(4000, 40), {});
    CHECK(fit.refusals.empty());
    CHECK(fit.warnings.empty());
    // EUR/USD prices with the E-mini defaults: the tick is 18% of the price, costs 60 bar ranges.
    fit = fit_of(daily_csv(1.4, 0.01), {});
    REQUIRE(fit.refusals.size() == 3);
    CHECK_THAT(fit.refusals[0], Catch::Contains("instrument.tick_size = 0.25 is 17.8% of the median close"));
    CHECK_THAT(fit.refusals[1], Catch::Contains("60 times the typical bar's range"));
    CHECK_THAT(fit.refusals[2], Catch::Contains("CME E-mini S&P 500's"));
    // ... and the EUR/USD future's own values (docs/data.md) fit.
    fit = fit_of(daily_csv(1.4, 0.01),
                 {"instrument.tick_size=0.00005", "instrument.multiplier=125000", "instrument.commission=2.5"});
    CHECK(fit.refusals.empty());
    // a stock at 50 with a one-cent tick and 1-dollar days
    fit = fit_of(daily_csv(50, 1), {"instrument.tick_size=0.01", "instrument.multiplier=1",
                                    "instrument.commission=0.005", "instrument.max_contracts=100"});
    CHECK(fit.refusals.empty());
    CHECK(fit.warnings.empty());
    // warnings: a tick of 1% of the price; a round trip of 2 bar ranges
    fit =
        fit_of(daily_csv(25, 10), {"instrument.tick_size=0.25", "instrument.multiplier=1", "instrument.commission=0"});
    REQUIRE(fit.warnings.size() == 1);
    CHECK_THAT(fit.warnings[0], Catch::Contains("% of the median close 25.0"));
    fit = fit_of(daily_csv(4000, 0.5), {});
    CHECK(fit.refusals.empty());
    REQUIRE(fit.warnings.size() == 1);
    CHECK_THAT(fit.warnings[0], Catch::Contains("1.2 times the typical bar's range"));
    fs::remove_all(dir);
}

TEST_CASE("run checks: the int index range with the real number of bars, and the memory refusal (exit 4)",
          "[trainers][run_checks][memory]") {
    const auto p = profile({});
    fh::config::SizeInputs in;
    in.bars = 60'000'000;  // 60M bars x 42 features > 2^31 - 1
    auto problems = fh::trainers::index_range_problems(p, in);
    REQUIRE(problems.size() == 1);
    CHECK(problems[0].key == "data.synthetic_bars");
    CHECK_THAT(problems[0].message,
               Catch::Contains("the market features (60000000 bars x 42 floats): 2520000000 elements"));
    in.bars_known = false;  // a CSV before it is read: not judged
    CHECK(fh::trainers::index_range_problems(p, in).empty());
    // PPO rollouts: gpu_n_episodes x gpu_timesteps_per_episode x 50 floats
    fh::config::Profile ppo;
    ppo.run.trainer = "ppo";
    ppo.experience.gpu_n_episodes = 65536;
    ppo.experience.gpu_timesteps_per_episode = 1000;
    problems = fh::trainers::index_range_problems(ppo, {});
    REQUIRE(problems.size() == 2);  // the rollout's observations, a minibatch's activations
    CHECK(problems[0].key == "experience.gpu_timesteps_per_episode");
    CHECK_THAT(problems[0].message, Catch::Contains("rollout buffer (1 agents x 65536000 steps): the rollout's "
                                                    "observations (3276800000 x 4 B): 3276800000 elements"));
    CHECK(problems[1].key == "ppo.minibatches");
    // ... and check_run refuses it before anything is allocated (exit 2)
    std::string m;
    ppo = profile(
        {"run.trainer=\"ppo\"", "experience.gpu_n_episodes=65536", "experience.gpu_timesteps_per_episode=1000"});
    CHECK(code_of([&] { check_run(ppo, fh::data::load_market(fh::trainers::data_options(ppo)), {}); }, &m) == 2);
    CHECK_THAT(m, Catch::Contains("the run's arrays do not fit the kernels' int index range"));
    CHECK_THAT(m, Catch::Contains("lower experience.gpu_timesteps_per_episode"));
    // memory beyond what is available: a DeviceError (exit 4) naming the consumers and keys
    const auto items = fh::trainers::estimate_host_memory(p, {});
    CHECK(code_of([&] { fh::config::require_memory(items, 1000, "host memory", "test"); }, &m) == 4);
    CHECK_THAT(m, Catch::Contains("of host memory but 1000 B is available (test); the biggest consumers:"));
    CHECK_THAT(m, Catch::Contains("(change data.synthetic_bars)"));
    CHECK(code_of([&] { fh::config::require_memory(items, fh::config::total_bytes(items), "host memory", "t"); }) == 0);
    // the CPU backend counts the "device" buffers in host memory too
    in = {};
    in.host_backend = true;
    CHECK(fh::config::total_bytes(fh::trainers::estimate_host_memory(p, in)) > fh::config::total_bytes(items));
    CHECK(fh::config::available_host_memory() > 0);  // /proc/meminfo is readable here
}

TEST_CASE("run checks: a CSV too large for the host is refused before it is read (exit 4)",
          "[trainers][run_checks][memory]") {
    const auto dir = scratch("size");
    const std::string csv = (dir / "big.csv").string();
    std::ofstream(csv) << std::string(4 << 20, 'x');  // 4 MB that are not even a CSV
    const auto p = profile({"data.path=\"" + csv + "\""});
    RunCheckOptions o;
    o.host_backend = true;
    o.host_memory = 8 << 20;  // 8 MB available: 4 MB of text is about 100,000 rows, too many
    std::string m;
    CHECK(code_of([&] { fh::trainers::check_data_size(p, o); }, &m) == 4);  // not 3: the file was not read
    CHECK_THAT(m, Catch::Contains("estimated before reading"));
    CHECK_THAT(m, Catch::Contains("(change data.path)"));
    o.host_memory = std::uint64_t{1} << 40;
    CHECK(code_of([&] { fh::trainers::check_data_size(p, o); }) == 0);
    // the synthetic market is bounded by the schema instead
    CHECK(code_of([] { profile({"data.synthetic_bars=50000000"}); }, &m) == 2);
    CHECK_THAT(m, Catch::Contains("data.synthetic_bars must be [1000, 1000000]"));
    fs::remove_all(dir);
}

TEST_CASE("run checks: checkpoint.keep_replay = false takes the replay out of the checkpoint's host copy",
          "[trainers][run_checks][memory][keep_replay]") {
    const auto copy = [](const std::string& keep) {
        const auto p = fh::config::resolve_profile_file(fh::config::locate_profile("dqn-full"),
                                                        {"checkpoint.keep_replay=" + keep});
        for (const auto& item : fh::trainers::estimate_host_memory(p, {}))
            if (item.consumer == "the host copy a checkpoint is written from") return item;
        FAIL("no checkpoint item");
        return fh::config::MemoryItem{};
    };
    const auto kept = copy("true"), lean = copy("false");
    CHECK(kept.bytes > (780ull << 20));  // 2 million transitions of 409 B
    CHECK(lean.bytes < (12ull << 20));   // weights, target, Adam, environments
    const auto full = fh::config::resolve_profile_file(fh::config::locate_profile("dqn-full"));
    CHECK(kept.bytes - lean.bytes ==
          static_cast<std::uint64_t>(fh::trainers::dqn_replay_steps(full).capacity * full.experience.gpu_n_episodes) *
              409);
    CHECK(kept.key == "replay_buffer.buffer_size");
    CHECK(lean.key == "dqn.hidden");
}

TEST_CASE("run checks: a precision refused for a trainer names the trainer, the precision and why; none is in force",
          "[trainers][run_checks][precision]") {
    using fh::trainers::PrecisionRefusal;
    const PrecisionRefusal table[] = {{"iql", "bf16", "median test / oracle 0.80 of fp32's (goal 0.97)"}};
    const std::string why = fh::trainers::precision_refusal("iql", "bf16", table);
    CHECK(why.find("gpu.precision = \"bf16\" is refused for run.trainer = \"iql\"") != std::string::npos);
    CHECK(why.find("0.80 of fp32's") != std::string::npos);
    CHECK(fh::trainers::precision_refusal("iql", "tf32", table).empty());
    CHECK(fh::trainers::precision_refusal("dqn", "bf16", table).empty());
    // Off until a parity measurement calls for a refusal (docs/learning.md, "Precision parity"):
    // every trainer runs in every precision.
    CHECK(fh::trainers::precision_refusals().empty());
    for (const char* trainer : {"dqn", "ppo", "iql", "supervised", "dt"})
        for (const char* precision : {"fp32", "tf32", "bf16"})
            CHECK(fh::trainers::precision_refusal(trainer, precision).empty());
}
