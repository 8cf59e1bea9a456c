/// @file test_dt_trainer.cpp
/// @brief The Decision Transformer trainer on the CPU backend: the episodes rebuilt from a replay
///        ring (wrapped, done flags, rates to go), the calibration, a smoke run, exact resume, the
///        guard, a DQN replay dump as the dataset, the evaluation policy from the profile alone,
///        and learning on the planted-signal market against the oracle ([.learning]: five seeds,
///        the table of docs/learning.md); [gpu] resume, the captured update, CPU vs GPU.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "config/profile.hpp"
#include "data/load.hpp"
#include "data/synthetic_market.hpp"
#include "env/vec_env.hpp"
#include "backtest/backtest.hpp"
#include "io/replay_dump.hpp"
#include "device/cpu_device.hpp"
#include "support/gpu.hpp"
#include "support/policy_eval.hpp"
#include "support/trainer_support.hpp"
#include "trainers/dqn/engine.hpp"
#include "trainers/dt/trainer.hpp"
#include "trainers/setup.hpp"
#include "util/errors.hpp"

using namespace fh;
using test::run_training;
using test::snapshot;

namespace {

config::Profile dt_profile(const std::vector<std::string>& overrides = {}) {
    return config::resolve_profile_text(R"(
[run]
trainer = "dt"
seed = 4
total_steps = 40
log_interval = 20
[data]
synthetic_bars = 3000
cache_dir = ""
[experience]
gpu_n_episodes = 8
gpu_timesteps_per_episode = 50
[dt]
context = 5
layers = 2
heads = 2
embedding = 16
batch_size = 8
warmup_updates = 10
dataset_size = 2000
)",
                                        "dt-test-profile", overrides);
}

struct Fixture {
    config::Profile p;
    data::MarketData market;
    env::DeviceMarket dm;
    Fixture(ops::Device& o, config::Profile profile)
        : p(std::move(profile)), market(data::load_market(trainers::data_options(p))), dm(o, market) {}
};

std::string temp_path(const std::string& name) {
    return (std::filesystem::temp_directory_path() / ("fh-dt-" + std::to_string(::getpid()) + "-" + name)).string();
}

void check_resume_equivalence(ops::Device& ops) {
    Fixture f(ops, dt_profile());
    test::check_resume_equivalence(ops, f.p, 17,  // stopped inside the warm-up
                                   [&] { return std::make_unique<trainers::DtTrainer>(ops, f.p, f.dm); });
}

/// The planted-signal comparison with the oracle (as the supervised trainer's, docs/learning.md):
/// no costs, market orders, one contract long or short, episodes of 200 bars; the behaviour
/// dataset (a quarter of its environments trade the oracle's rule, with 20 % random actions).
std::vector<std::string> planted_overrides(int seed, int updates) {
    return {"run.seed=" + std::to_string(seed),
            "data.synthetic_bars=40000",
            "data.planted_signal=0.3",
            "run.total_steps=" + std::to_string(updates),
            "run.log_interval=1000000",
            "instrument.commission=0",
            "instrument.slippage_ticks=0",
            "env.urgency_levels=1",
            "experience.gpu_timesteps_per_episode=200",
            "experience.gpu_n_episodes=64",
            "dt.dataset_size=64000",
            "dt.context=10",
            "dt.layers=1",
            "dt.heads=2",
            "dt.embedding=32",
            "dt.batch_size=32",
            "dt.warmup_updates=100",
            "training.learning_rate=1e-3"};
}

struct PlantedResult {
    double sharpe = 0, oracle = 0, backtest = 0, oracle_backtest = 0, accuracy = 0, seconds = 0;
};
PlantedResult planted_run(ops::Device& ops, const std::vector<std::string>& overrides) {
    Fixture f(ops, dt_profile(overrides));
    trainers::DtTrainer trainer(ops, f.p, f.dm);
    const auto t0 = std::chrono::steady_clock::now();
    const auto log = run_training(trainer, f.p);
    PlantedResult r;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.accuracy = log.back().json.find("charts/accuracy")->as_double();
    auto policy = [&](ops::View<int> a, ops::View<const float> s, int n) { trainer.act(ops, a, s, n); };
    r.sharpe = test::validation_sharpe(ops, f.dm, trainer.env_params(), policy, 64, 1000, env::Split::test);
    r.oracle = data::planted_oracle(f.market.bars, f.market.test, 0.3, f.market.bars_per_year).sharpe_per_bar;
    r.backtest = backtest::backtest(ops, f.dm, f.market, env::Split::test, trainer.env_params(), policy, 1, false)
                     .strategy.sharpe;
    r.oracle_backtest = test::oracle_rule_backtest_sharpe(ops, f.dm, f.market, trainer.env_params());
    return r;
}

}  // namespace

TEST_CASE("dt episodes: each environment's column in order, cut after done flags, rates to go", "[trainers][dt]") {
    // 2 environments, a ring of 4 slots that has seen 6 steps (wrapped: slots 2, 3, 0, 1 in order).
    io::ReplayDump d;
    d.state_dim = 1;
    d.n_envs = 2;
    d.capacity_steps = 4;
    d.num_actions = 3;
    d.pushed_steps = 6;
    // Row slot * 2 + env. Env 0 steps (oldest first) 2,3,4,5 with a done after step 3;
    // env 1 with no done.
    d.states = {4, 40, 5, 50, 2, 20, 3, 30};
    d.actions = {1, 2, 0, 1, 2, 0, 1, 2};
    d.rewards = {0.4f, 4.0f, 0.5f, 5.0f, 0.2f, 2.0f, 0.3f, 3.0f};
    d.done = {0, 0, 0, 0, 0, 0, 1, 0};
    d.next_states = d.states;
    const auto ep = trainers::dt_episodes(d);
    REQUIRE(ep.steps() == 8);
    CHECK(ep.states == std::vector<float>{2, 3, 4, 5, 20, 30, 40, 50});
    CHECK(ep.actions == std::vector<int>{2, 1, 1, 0, 0, 2, 2, 1});
    CHECK(ep.episode_start == std::vector<int>{0, 0, 2, 2, 4, 4, 4, 4});
    CHECK(ep.rate[0] == Approx((0.2 + 0.3) / 2));
    CHECK(ep.rate[1] == Approx(0.3));
    CHECK(ep.rate[2] == Approx((0.4 + 0.5) / 2));
    CHECK(ep.rate[4] == Approx((2.0 + 3.0 + 4.0 + 5.0) / 4));
    CHECK(ep.rate[7] == Approx(5.0));
    // The first episode of env 0 lost its start in the wrapped ring; the others have no done:
    // no finished whole episode.
    CHECK(ep.episode_rates.empty());
    d.pushed_steps = 4;  // unwrapped: slots 0..3; env 0's done (slot 3) ends a whole episode
    const auto e2 = trainers::dt_episodes(d);
    REQUIRE(e2.episode_rates.size() == 1);
    CHECK(e2.episode_rates[0] == Approx((0.4 + 0.5 + 0.2 + 0.3) / 4));
}

TEST_CASE("dt calibration: the rates' spread and the target quantile of the finished episodes", "[trainers][dt]") {
    trainers::DtEpisodes ep;
    ep.rate = {1, 3, 1, 3};
    ep.episode_rates = {0, 1, 2, 3, 4};
    auto c = trainers::dt_calibration(ep, 0.9);
    CHECK(c.scale == Approx(1.0));
    CHECK(c.target_rate == Approx(3.6));
    CHECK(c.target_token() == Approx(3.6f));
    CHECK(trainers::dt_calibration(ep, 0.0).target_rate == 0.0);
    ep.episode_rates.clear();  // no finished episode: the quantile of every step's rate
    CHECK(trainers::dt_calibration(ep, 1.0).target_rate == 3.0);
}

TEST_CASE("dt smoke run on the CPU: behaviour dataset, finite metrics, warm-up, every update counted",
          "[trainers][dt]") {
    ops::CpuDevice ops;
    Fixture f(ops, dt_profile());
    trainers::DtTrainer trainer(ops, f.p, f.dm);
    CHECK(trainer.dataset_steps() == 2000);
    const auto log = run_training(trainer, f.p);
    REQUIRE(log.size() == 2);
    CHECK(trainer.updates() == 40);
    for (const auto& l : log) {
        CHECK(std::isfinite(l.loss));
        CHECK(l.loss > 0);
        const double acc = l.json.find("charts/accuracy")->as_double();
        CHECK(acc >= 0);
        CHECK(acc <= 1);
    }
    // Warm-up over 10 updates: the first interval's mean rate is below the second's (the full rate).
    CHECK(log[0].json.find("charts/learning_rate")->as_double() <
          log[1].json.find("charts/learning_rate")->as_double());
    CHECK(log[1].json.find("charts/learning_rate")->as_double() == Approx(f.p.training.learning_rate));
    // The loss falls below log(A) (uniform) as it learns the behaviour's actions.
    CHECK(log[1].loss < std::log(static_cast<double>(f.p.num_actions())));
}

TEST_CASE("dt resumed from its saved state equals an uninterrupted run (CPU, exact)", "[trainers][dt][resume]") {
    ops::CpuDevice ops;
    check_resume_equivalence(ops);
}

TEST_CASE("dt resumed from its saved state equals an uninterrupted run (GPU, exact)", "[gpu][trainers][dt][resume]") {
    check_resume_equivalence(test::gpu_ops());
}

TEST_CASE("dt on the GPU: the captured update equals every op issued alone (exact)", "[gpu][trainers][dt]") {
    auto& ops = test::gpu_ops();
    Fixture f(ops, dt_profile());
    const auto r = test::run_captured_and_one_by_one(
        ops, f.p, [&] { return std::make_unique<trainers::DtTrainer>(ops, f.p, f.dm); });
    r.check_equal();
}

TEST_CASE("dt on the GPU trains close to the CPU reference", "[gpu][trainers][dt]") {
    ops::CpuDevice cpu;
    auto& gpu = test::gpu_ops();
    double loss[2] = {0, 0};
    ops::Device* devices[2] = {&cpu, &gpu};
    for (int d = 0; d < 2; ++d) {
        Fixture f(*devices[d], dt_profile());
        trainers::DtTrainer trainer(*devices[d], f.p, f.dm);
        loss[d] = run_training(trainer, f.p).back().loss;
    }
    CHECK(loss[1] == Approx(loss[0]).epsilon(0.02));  // the same dataset and windows; float rounding differs
}

TEST_CASE("dt guard: injected NaN updates are skipped, too many exit 5 naming the loss", "[trainers][dt][guard]") {
    ops::CpuDevice ops;
    Fixture f(ops, dt_profile({"training.max_bad_updates=2"}));
    trainers::DtTrainer trainer(ops, f.p, f.dm);
    trainer.inject_nan_at_updates({1, 3});
    const auto before = snapshot(ops, trainer);
    trainer.iterate();
    const auto after = snapshot(ops, trainer);
    CHECK(before[0] == after[0]);  // params/online untouched by the skipped update
    trainer.iterate();
    CHECK(snapshot(ops, trainer)[0] != after[0]);
    trainer.iterate();
    try {
        (void)trainer.read_log(1.0);
        FAIL("expected DivergedError");
    } catch (const DivergedError& e) {
        CHECK(std::string(e.what()).find("the action loss (cross-entropy) at update 1") != std::string::npos);
    }
}

TEST_CASE("dt trains from a DQN run's replay dump; the policy from the profile alone acts as the trainer does",
          "[trainers][dt][replay]") {
    ops::CpuDevice ops;
    const std::string path = temp_path("replay.fhreplay");
    test::write_small_dqn_dump(ops, path);

    Fixture f(ops, dt_profile({"dt.dataset=\"" + path + "\"", "run.total_steps=20"}));
    trainers::DtTrainer trainer(ops, f.p, f.dm);
    CHECK(trainer.dataset_steps() == 400);  // the ring: 50 steps x 8 environments, full
    run_training(trainer, f.p);
    CHECK(trainer.updates() == 20);
    // The checkpoint's weights: the parameters, then the calibration.
    const auto policy = trainers::make_greedy_policy(f.p, trainer.env_params().state_dim);
    REQUIRE(policy->weights_size() == trainer.policy_weights().size());
    const auto w = ops.to_host(ops::View<const float>(trainer.policy_weights()));
    const std::size_t P = trainer.network().layout().total();
    CHECK(w[P] == trainer.calibration().target_token());
    CHECK(w[P + 1] == static_cast<float>(trainer.calibration().scale));
    // Same actions over 60 validation steps (episodes of 50: histories start over).
    env::VecEnv venv(ops, f.dm, env::Split::val, trainer.env_params(), 6);
    venv.reset_all();
    auto a = ops.alloc<int>(6), b = ops.alloc<int>(6);
    for (int s = 0; s < 60; ++s) {
        trainer.act(ops, a.view(), venv.states(), 6);
        policy->act(ops, trainer.policy_weights(), b.view(), venv.states(), 6);
        REQUIRE(ops.to_host(a.cview()) == ops.to_host(b.cview()));
        venv.step(a.cview());
    }
    // Another action space than the dump's: refused with a data error naming the file.
    Fixture g(ops, dt_profile({"dt.dataset=\"" + path + "\"", "env.position_levels=5"}));
    try {
        trainers::DtTrainer wrong(ops, g.p, g.dm);
        FAIL("expected DataError");
    } catch (const DataError& e) {
        CHECK(std::string(e.what()).find(path) != std::string::npos);
    }
    std::filesystem::remove(path);
}

TEST_CASE("dt from the behaviour dataset reaches 0.7 of the planted oracle's test Sharpe (CPU)",
          "[trainers][dt][learning]") {
    ops::CpuDevice ops;
    const auto r = planted_run(ops, planted_overrides(1, 1500));
    std::printf(
        "dt planted (CPU, seed 1): test Sharpe per bar %.4f, oracle %.4f (ratio %.3f); backtest Sharpe %.2f, "
        "oracle's rule %.2f (ratio %.3f); accuracy %.3f; %.1f s\n",
        r.sharpe, r.oracle, r.sharpe / r.oracle, r.backtest, r.oracle_backtest, r.backtest / r.oracle_backtest,
        r.accuracy, r.seconds);
    CHECK(r.sharpe >= 0.7 * r.oracle);
    CHECK(r.backtest >= 0.7 * r.oracle_backtest);
}

TEST_CASE("dt reaches 0.7 of the oracle's test Sharpe: median of five seeds (the docs/learning.md table)",
          "[.learning]") {
    const bool gpu = test::gpu_available();
    std::unique_ptr<ops::CpuDevice> cpu;
    ops::Device* ops = nullptr;
    if (gpu)
        ops = &test::gpu_ops();
    else
        ops = (cpu = std::make_unique<ops::CpuDevice>()).get();
    std::printf(
        "| seed | Sharpe per bar | oracle | ratio | backtest Sharpe | oracle's rule | ratio | accuracy | seconds |\n"
        "|---|---|---|---|---|---|---|---|---|\n");
    std::vector<double> ratios, backtest_ratios;
    for (int seed = 1; seed <= 5; ++seed) {
        const auto r = planted_run(*ops, planted_overrides(seed, 1500));
        std::printf("| %d | %.4f | %.4f | %.3f | %.2f | %.2f | %.3f | %.3f | %.1f |\n", seed, r.sharpe, r.oracle,
                    r.sharpe / r.oracle, r.backtest, r.oracle_backtest, r.backtest / r.oracle_backtest, r.accuracy,
                    r.seconds);
        ratios.push_back(r.sharpe / r.oracle);
        backtest_ratios.push_back(r.backtest / r.oracle_backtest);
    }
    std::sort(ratios.begin(), ratios.end());
    std::sort(backtest_ratios.begin(), backtest_ratios.end());
    CHECK(ratios[2] >= 0.7);
    CHECK(backtest_ratios[2] >= 0.7);
}

TEST_CASE("dt from a DQN run's replay dump: median of five seeds against the oracle (the docs/learning.md table)",
          "[.learning]") {
    // Per seed: a DQN trains on the planted market (the same market, costs and episodes as the
    // behaviour-dataset table) and dumps its replay, 64 environments x 1000 steps: its epsilon
    // falls from 1 to 0.05 over the first half, so the data mixes exploration and the DQN's own
    // greedy trading. The DT then trains on that dump alone. On the GPU where there is one.
    std::unique_ptr<ops::CpuDevice> cpu;
    ops::Device& ops = test::gpu_available() ? static_cast<ops::Device&>(test::gpu_ops())
                                             : *(cpu = std::make_unique<ops::CpuDevice>());
    std::printf(
        "| seed | DQN's test Sharpe per bar | DT Sharpe per bar | oracle | ratio | backtest Sharpe | oracle's rule "
        "| ratio | seconds (DQN, DT) |\n|---|---|---|---|---|---|---|---|---|\n");
    std::vector<double> ratios, backtest_ratios;
    for (int seed = 1; seed <= 5; ++seed) {
        const std::string path = temp_path("learning-" + std::to_string(seed) + ".fhreplay");
        const auto dqn = config::resolve_profile_text(
            "[run]\ntrainer = \"dqn\"\n", "dqn-planted",
            {"run.seed=" + std::to_string(seed), "data.synthetic_bars=40000", "data.planted_signal=0.3",
             "data.cache_dir=\"\"", "run.total_steps=64000", "run.log_interval=64000", "run.eval_interval=0",
             "instrument.commission=0", "instrument.slippage_ticks=0", "env.urgency_levels=1",
             "experience.gpu_timesteps_per_episode=200", "experience.gpu_n_episodes=64",
             "replay_buffer.buffer_size=64000", "replay_buffer.min_replay_size=6400", "replay_buffer.batch_size=64",
             "training.epsilon_decay_steps=32000", "dqn.hidden=[64, 64]"});
        const auto t0 = std::chrono::steady_clock::now();
        double dqn_sharpe = 0;
        {
            Fixture f(ops, dqn);
            auto writer_engine = trainers::make_dqn_trainer(ops, f.p, f.dm);
            auto& writer = *writer_engine;
            run_training(writer, f.p);
            io::write_replay_dump(path, writer.replay_dump());
            auto policy = [&](ops::View<int> a, ops::View<const float> st, int n) {
                writer.policy().act(ops, writer.policy_weights(), a, st, n);
            };
            dqn_sharpe = test::validation_sharpe(ops, f.dm, writer.env_params(), policy, 64, 1000, env::Split::test);
        }
        const double dqn_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        auto overrides = planted_overrides(seed, 1500);
        overrides.push_back("dt.dataset=\"" + path + "\"");
        const auto r = planted_run(ops, overrides);
        std::printf("| %d | %.4f | %.4f | %.4f | %.3f | %.2f | %.2f | %.3f | %.0f, %.0f |\n", seed, dqn_sharpe,
                    r.sharpe, r.oracle, r.sharpe / r.oracle, r.backtest, r.oracle_backtest,
                    r.backtest / r.oracle_backtest, dqn_seconds, r.seconds);
        std::fflush(stdout);
        ratios.push_back(r.sharpe / r.oracle);
        backtest_ratios.push_back(r.backtest / r.oracle_backtest);
        std::filesystem::remove(path);
    }
    std::sort(ratios.begin(), ratios.end());
    std::sort(backtest_ratios.begin(), backtest_ratios.end());
    CHECK(ratios[2] >= 0.7);
    CHECK(backtest_ratios[2] >= 0.7);
}
