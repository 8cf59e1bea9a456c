/// @file test_supervised_trainer.cpp
/// @brief The supervised forecaster on the CPU backend: smoke (finite metrics, sample counts,
///        both targets), labels without look-ahead (each label inside its split and segment,
///        unchanged by any later bar), exact resume, the guard, the validation loss and early
///        stopping on it, the evaluation policy built from the profile alone, and learning on
///        the planted-signal market against the oracle ([.learning]: several seeds, the table of
///        docs/learning.md); [gpu] resume and the captured update.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "config/profile.hpp"
#include "data/load.hpp"
#include "data/synthetic_market.hpp"
#include "env/vec_env.hpp"
#include "backtest/backtest.hpp"
#include "device/cpu_device.hpp"
#include "support/gpu.hpp"
#include "support/market_fixture.hpp"
#include "support/policy_eval.hpp"
#include "support/trainer_support.hpp"
#include "trainers/early_stopping.hpp"
#include "trainers/setup.hpp"
#include "trainers/supervised/trainer.hpp"
#include "util/errors.hpp"

using namespace fh;
using test::run_training;
using test::snapshot;

namespace {

config::Profile sup_profile(const std::vector<std::string>& overrides = {}) {
    return config::resolve_profile_text(R"(
[run]
trainer = "supervised"
seed = 4
total_steps = 300
log_interval = 100
[data]
synthetic_bars = 3000
cache_dir = ""
planted_signal = 0.3
[supervised]
hidden = [32, 32]
batch_size = 32
[training]
learning_rate = 1e-3
)",
                                        "supervised-test-profile", overrides);
}

struct Fixture {
    config::Profile p;
    data::MarketData market;
    env::DeviceMarket dm;
    Fixture(ops::Device& o, config::Profile profile)
        : p(std::move(profile)), market(data::load_market(trainers::data_options(p))), dm(o, market) {}
};

/// The profile for the planted-signal comparison with the oracle: no costs, market orders, one
/// contract long or short (the oracle's positions), the next bar's return, episodes of 200 bars
/// (as tests/trainers/test_dqn_learning.cpp), a small forecaster (the signal is one feature's sign).
std::vector<std::string> planted_overrides(int seed, int bars, int updates) {
    return {"run.seed=" + std::to_string(seed),
            "data.synthetic_bars=" + std::to_string(bars),
            "run.total_steps=" + std::to_string(updates),
            "run.log_interval=1000000",
            "instrument.commission=0",
            "instrument.slippage_ticks=0",
            "env.urgency_levels=1",
            "experience.gpu_timesteps_per_episode=200",
            "supervised.hidden=[16]",
            "supervised.batch_size=256",
            "training.learning_rate=1e-3"};
}

/// The yardstick of docs/learning.md: the per-bar Sharpe of the policy's rewards on the TEST split
/// (64 environments x 1000 steps, no costs) against the oracle's per-bar Sharpe on that split;
/// also the backtest's annualised Sharpe against the oracle's own policy through the backtest.
struct PlantedResult {
    double sharpe = 0, oracle = 0, backtest = 0, oracle_backtest = 0, val_loss = 0, seconds = 0;
};
PlantedResult planted_run(ops::Device& ops, const std::vector<std::string>& overrides, double k) {
    Fixture f(ops, sup_profile(overrides));
    trainers::SupervisedTrainer trainer(ops, f.p, f.dm);
    const auto t0 = std::chrono::steady_clock::now();
    run_training(trainer, f.p);
    PlantedResult r;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.val_loss = *trainer.validation_loss();
    auto policy = [&](ops::View<int> a, ops::View<const float> s, int n) { trainer.act(ops, a, s, n); };
    r.sharpe = test::validation_sharpe(ops, f.dm, trainer.env_params(), policy, 64, 1000, env::Split::test);
    r.oracle = data::planted_oracle(f.market.bars, f.market.test, k, f.market.bars_per_year).sharpe_per_bar;
    r.backtest = backtest::backtest(ops, f.dm, f.market, env::Split::test, trainer.env_params(), policy, 1, false)
                     .strategy.sharpe;
    r.oracle_backtest = test::oracle_rule_backtest_sharpe(ops, f.dm, f.market, trainer.env_params());
    return r;
}

}  // namespace

TEST_CASE("supervised smoke run on the CPU: finite metrics, every update counted, both targets",
          "[trainers][supervised]") {
    ops::CpuDevice ops;
    for (const char* target : {"return", "direction"}) {
        INFO(target);
        Fixture f(ops, sup_profile({std::string("supervised.target=") + target}));
        trainers::SupervisedTrainer trainer(ops, f.p, f.dm);
        // Every valid episode start of the training split has a next bar: one sample each.
        CHECK(trainer.training_samples() == f.dm.host_starts(env::Split::train).starts.size());
        CHECK(trainer.validation_samples() == f.dm.host_starts(env::Split::val).starts.size());
        CHECK(trainer.label_scale() > 0);
        const double before = *trainer.validation_loss();
        const auto lines = run_training(trainer, f.p);
        CHECK(trainer.updates() == 300);
        REQUIRE(lines.size() == 3);
        for (const auto& l : lines) {
            const std::string text = io::json::serialize(l.json);
            INFO(text);
            CHECK(text.find("null") == std::string::npos);
            CHECK(std::isfinite(l.loss));
        }
        const double after = *trainer.validation_loss();
        CHECK(std::isfinite(after));
        CHECK(after < before);  // the planted signal is learnable: the validation loss falls
        // The direction target's loss is a cross-entropy: near ln 2 for an uninformed forecaster.
        if (std::string(target) == "direction") CHECK(after < 0.75);
    }
}

TEST_CASE("supervised labels: the next horizon bars' log return, inside the split and segment, no look-ahead",
          "[trainers][supervised]") {
    // Two segments (contracts); splits 60/20/20 of 1000 bars; warm-up 5.
    auto m = test::random_walk_market(1000, 9, 6, {0, 450});
    for (int h : {1, 3, 17}) {
        INFO("horizon " << h);
        for (const auto& [split, range] : {std::pair{env::Split::train, m.train}, std::pair{env::Split::val, m.val}}) {
            const auto starts = env::episode_starts(m.bars, m.warmup_bars, range);
            const auto s = trainers::supervised_samples(m.bars.close, starts, h);
            REQUIRE(!s.bars.empty());
            for (std::size_t i = 0; i < s.bars.size(); ++i) {
                const auto t = static_cast<std::size_t>(s.bars[i]);
                CHECK(t >= range.begin);
                CHECK(t + static_cast<std::size_t>(h) < range.end);  // inside the split
                CHECK(m.bars.segment_begin(t) ==
                      m.bars.segment_begin(t + static_cast<std::size_t>(h)));  // and the segment
                CHECK(s.returns[i] == std::log(m.bars.close[t + static_cast<std::size_t>(h)] / m.bars.close[t]));
            }
            // Every start with h bars after it inside the split and segment is a sample.
            std::size_t expected = 0;
            for (std::size_t i = 0; i < starts.starts.size(); ++i)
                expected += starts.starts[i] + h < starts.ends[i] ? 1 : 0;
            CHECK(s.bars.size() == expected);
        }
        // No look-ahead: changing every bar from the validation split on changes no training sample
        // or label (and the features of bar t read bars <= t only: tests/data/test_features.cpp).
        const auto train_starts = env::episode_starts(m.bars, m.warmup_bars, m.train);
        const auto a = trainers::supervised_samples(m.bars.close, train_starts, h);
        auto close = m.bars.close;
        for (std::size_t t = m.train.end; t < close.size(); ++t) close[t] *= 1.5;
        const auto b = trainers::supervised_samples(close, train_starts, h);
        CHECK(a.bars == b.bars);
        CHECK(a.returns == b.returns);
        // ... nor does changing any bar after t + h change sample t's label.
        const std::size_t pick = a.bars.size() / 2;
        const auto t = static_cast<std::size_t>(a.bars[pick]);
        close = m.bars.close;
        for (std::size_t j = t + static_cast<std::size_t>(h) + 1; j < close.size(); ++j) close[j] *= 0.5;
        CHECK(trainers::supervised_samples(close, train_starts, h).returns[pick] == a.returns[pick]);
    }
    // The training labels: returns over their RMS, or the direction.
    const auto y = trainers::supervised_labels({0.02, -0.01, 0.0}, supervised::kReturn, 0.01);
    CHECK(y == std::vector<float>{2.0f, -1.0f, 0.0f});
    const auto d = trainers::supervised_labels({0.02, -0.01, 0.0}, supervised::kDirection, 0.01);
    CHECK(d == std::vector<float>{1.0f, 0.0f, 0.5f});
}

TEST_CASE("supervised: a horizon longer than the training split is a data error", "[trainers][supervised]") {
    ops::CpuDevice ops;
    Fixture f(ops, sup_profile({"supervised.horizon=5000"}));
    try {
        trainers::SupervisedTrainer trainer(ops, f.p, f.dm);
        FAIL("expected DataError");
    } catch (const DataError& e) {
        CHECK(e.code() == ExitCode::data);
        CHECK(std::string(e.what()).find("supervised.horizon") != std::string::npos);
    }
}

static void check_resume_equivalence(ops::Device& ops) {
    Fixture f(ops, sup_profile());
    const auto runs = test::check_resume_equivalence(
        ops, f.p, 120, [&] { return std::make_unique<trainers::SupervisedTrainer>(ops, f.p, f.dm); });
    CHECK(*runs.first->validation_loss() == *runs.second->validation_loss());
}

TEST_CASE("supervised resumed from its saved state equals an uninterrupted run (CPU, exact)",
          "[trainers][supervised][resume]") {
    ops::CpuDevice ops;
    check_resume_equivalence(ops);
}

TEST_CASE("supervised resumed from its saved state equals an uninterrupted run (GPU, exact)",
          "[gpu][trainers][supervised][resume]") {
    check_resume_equivalence(test::gpu_ops());
}

TEST_CASE("supervised on the GPU: the captured update equals every op issued alone (exact)",
          "[gpu][trainers][supervised]") {
    auto& ops = test::gpu_ops();
    Fixture f(ops, sup_profile());
    const auto r = test::run_captured_and_one_by_one(
        ops, f.p, [&] { return std::make_unique<trainers::SupervisedTrainer>(ops, f.p, f.dm); });
    r.check_equal();
}

TEST_CASE("supervised on the GPU trains close to the CPU reference", "[gpu][trainers][supervised]") {
    ops::CpuDevice cpu;
    auto& gpu = test::gpu_ops();
    double loss[2] = {0, 0};
    ops::Device* devices[2] = {&cpu, &gpu};
    for (int d = 0; d < 2; ++d) {
        Fixture f(*devices[d], sup_profile());
        trainers::SupervisedTrainer trainer(*devices[d], f.p, f.dm);
        run_training(trainer, f.p);
        loss[d] = *trainer.validation_loss();
    }
    CHECK(loss[1] == Approx(loss[0]).epsilon(0.02));  // the same samples; float rounding differs
}

TEST_CASE("supervised guard: injected NaN updates are skipped, too many exit 5 naming the loss",
          "[trainers][supervised][guard]") {
    ops::CpuDevice ops;
    Fixture f(ops, sup_profile({"training.max_bad_updates=2"}));
    trainers::SupervisedTrainer trainer(ops, f.p, f.dm);
    trainer.inject_nan_at_updates({1, 3});
    const auto before = snapshot(ops, trainer);
    trainer.iterate();
    const auto after = snapshot(ops, trainer);
    CHECK(before[0] == after[0]);  // params/online untouched by the skipped update
    trainer.iterate();
    CHECK(snapshot(ops, trainer)[0] != after[0]);  // a good update applies
    trainer.iterate();
    try {
        (void)trainer.read_log(1.0);
        FAIL("expected DivergedError");
    } catch (const DivergedError& e) {
        CHECK(std::string(e.what()).find("the forecaster's loss at update 1") != std::string::npos);
    }
}

TEST_CASE("supervised: the evaluation policy from the profile alone acts as the trainer does",
          "[trainers][supervised]") {
    ops::CpuDevice ops;
    Fixture f(ops, sup_profile({"env.position_levels=5", "supervised.sizing=\"magnitude\"", "supervised.full_score=0.5",
                                "supervised.volatility_sizing=true", "supervised.entry_threshold=0.05",
                                "env.urgency_levels=2", "supervised.order_type=\"passive_limit\""}));
    trainers::SupervisedTrainer trainer(ops, f.p, f.dm);
    run_training(trainer, f.p);
    const auto policy = trainers::make_greedy_policy(f.p, trainer.env_params().state_dim);
    REQUIRE(policy->weights_size() == trainer.policy_weights().size());
    // The calibration after the parameters: rv_32's training statistics, the label RMS, the horizon.
    const auto w = ops.to_host(ops::View<const float>(trainer.policy_weights()));
    const std::size_t P = trainer.network().layout.total();
    CHECK(w[P] == f.market.norm.mean[trainers::kSupervisedVolatilityFeature]);
    CHECK(w[P + 1] == f.market.norm.stddev[trainers::kSupervisedVolatilityFeature]);
    CHECK(w[P + 2] == static_cast<float>(trainer.label_scale()));
    CHECK(w[P + 3] == 1.0f);
    CHECK(f.market.feature_names[trainers::kSupervisedVolatilityFeature] == "rv_32");
    // The same actions on validation states, every one a passive limit; several sizes used.
    env::VecEnv venv(ops, f.dm, env::Split::val, trainer.env_params(), 64);
    venv.reset_all();
    auto a = ops.alloc<int>(64), b = ops.alloc<int>(64);
    std::vector<int> levels(5, 0);
    for (int s = 0; s < 30; ++s) {
        trainer.act(ops, a.view(), venv.states(), 64);
        policy->act(ops, trainer.policy_weights(), b.view(), venv.states(), 64);
        const auto ha = ops.to_host(a.cview()), hb = ops.to_host(b.cview());
        REQUIRE(ha == hb);
        for (int x : ha) {
            CHECK(x % 2 == 1);
            ++levels[static_cast<std::size_t>(x / 2)];
        }
        venv.step(a.cview());
    }
    int used = 0;
    for (int c : levels) used += c > 0 ? 1 : 0;
    CHECK(used >= 3);
}

TEST_CASE("early stopping on a loss: lower is better", "[trainers][supervised]") {
    trainers::EarlyStopping es(2, 0.01, 0, true);
    CHECK(es.observe(10, 1.0).improved);
    CHECK(es.observe(20, 0.5).improved);
    CHECK_FALSE(es.observe(30, 0.495).improved);  // within min_delta
    const auto d = es.observe(40, 0.7);
    CHECK_FALSE(d.improved);
    CHECK(d.stop);
    CHECK(*es.best() == 0.5);
    CHECK(es.best_step() == 20);
}

TEST_CASE("supervised forecaster + adapter reaches 0.8 of the planted oracle's test Sharpe (CPU)",
          "[trainers][supervised][learning]") {
    ops::CpuDevice ops;
    const auto r = planted_run(ops, planted_overrides(1, 40000, 2000), 0.3);
    std::printf(
        "supervised planted (CPU, seed 1): test Sharpe per bar %.4f, oracle %.4f (ratio %.3f); backtest %.2f, "
        "oracle's rule %.2f (ratio %.3f); val loss %.4f; %.1f s\n",
        r.sharpe, r.oracle, r.sharpe / r.oracle, r.backtest, r.oracle_backtest, r.backtest / r.oracle_backtest,
        r.val_loss, r.seconds);
    CHECK(r.sharpe >= 0.8 * r.oracle);
    CHECK(r.backtest >= 0.8 * r.oracle_backtest);
}

TEST_CASE("supervised reaches 0.8 of the oracle's test Sharpe on every seed (the docs/learning.md table)",
          "[.learning]") {
    const bool gpu = test::gpu_available();
    std::unique_ptr<ops::CpuDevice> cpu;
    ops::Device* ops = nullptr;
    if (gpu)
        ops = &test::gpu_ops();
    else
        ops = (cpu = std::make_unique<ops::CpuDevice>()).get();
    std::printf(
        "| seed | Sharpe per bar | oracle | ratio | backtest Sharpe | oracle's rule | ratio | validation loss | "
        "seconds |\n|---|---|---|---|---|---|---|---|---|\n");
    for (int seed = 1; seed <= 5; ++seed) {
        const auto r = planted_run(*ops, planted_overrides(seed, 40000, 4000), 0.3);
        std::printf("| %d | %.4f | %.4f | %.3f | %.2f | %.2f | %.3f | %.4f | %.1f |\n", seed, r.sharpe, r.oracle,
                    r.sharpe / r.oracle, r.backtest, r.oracle_backtest, r.backtest / r.oracle_backtest, r.val_loss,
                    r.seconds);
        CHECK(r.sharpe >= 0.8 * r.oracle);
        CHECK(r.backtest >= 0.8 * r.oracle_backtest);
    }
}
