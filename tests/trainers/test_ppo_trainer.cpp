/// @file test_ppo_trainer.cpp
/// @brief The PPO trainer end to end on the CPU backend: smoke (finite metrics, counters),
///        determinism and exact resume, the guard (learning the planted signal in CI:
///        test_learning_ci.cpp); hidden ("[.learning]", GPU when present): half of the best
///        achievable Sharpe.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "config/profile.hpp"
#include "data/load.hpp"
#include "data/synthetic_market.hpp"
#include "env/vec_env.hpp"
#include "device/cpu_device.hpp"
#include "support/error_model.hpp"
#include "support/gpu.hpp"
#include "support/trainer_support.hpp"
#include "support/policy_eval.hpp"
#include "trainers/ppo/engine.hpp"
#include "trainers/setup.hpp"
#include "util/errors.hpp"
#include "abi/env.h"

using namespace fh;
using test::run_training;
using test::snapshot;

namespace {

config::Profile ppo_profile(const std::vector<std::string>& overrides = {}) {
    return config::resolve_profile_text(R"(
[run]
trainer = "ppo"
seed = 5
total_steps = 1600
log_interval = 400
[data]
synthetic_bars = 3000
cache_dir = ""
[env]
position_levels = 15
[experience]
gpu_n_episodes = 8
gpu_timesteps_per_episode = 25
[ppo]
hidden = [32, 32]
epochs = 2
minibatches = 4
diversity_window = 10
diversity_coef = 0.05
)",
                                        "ppo-test-profile", overrides);
}

struct Fixture {
    ops::Device& ops;
    config::Profile p;
    data::MarketData market;
    env::DeviceMarket dm;
    Fixture(ops::Device& o, config::Profile profile)
        : ops(o), p(std::move(profile)), market(data::load_market(trainers::data_options(p))), dm(o, market) {}
};

}  // namespace

TEST_CASE("PPO smoke run on the CPU: finite metrics, counters, 45 actions", "[trainers][ppo]") {
    ops::CpuDevice ops;
    Fixture f(ops, ppo_profile());
    const auto trainer_owner = trainers::make_ppo_trainer(ops, f.p, f.dm);
    trainers::PpoAgent& trainer = *trainer_owner;
    REQUIRE(env::num_actions(trainer.env_params()) == 45);
    const auto lines = run_training(trainer, f.p);
    CHECK(trainer.iterations() == 8);  // 1600 / (8 x 25)
    CHECK(trainer.env_steps() == 1600);
    CHECK(trainer.updates() == 8 * 2 * 4);
    REQUIRE(lines.size() == 4);
    for (const auto& l : lines) {
        INFO(io::json::serialize(l.json));
        CHECK(io::json::serialize(l.json).find("null") == std::string::npos);  // every metric finite
        CHECK(std::isfinite(l.loss));
    }
}

namespace {
double field(const io::json::Value& json, const std::string& key) {
    const auto* v = json.find(key);
    REQUIRE(v != nullptr);
    return v->as_double();
}
}  // namespace

TEST_CASE("PPO action-diversity penalty: a one-action policy pays diversity_coef once the window is full",
          "[trainers][ppo]") {
    ops::CpuDevice ops;
    // A policy that always takes action 0 (its logit's bias +100: the softmax is saturated and
    // the updates cannot move it), so every window's share is 1.
    auto concentrate = [&](trainers::PpoAgent& t) {
        auto w = ops.to_host(ops::View<const float>(t.policy_weights()));
        w[t.network().actor.layers().back().bias.offset] = 100.0f;
        ops.upload<float>(t.policy_weights(), w);
    };
    Fixture f(ops, ppo_profile());
    const auto trainer_owner = trainers::make_ppo_trainer(ops, f.p, f.dm);
    trainers::PpoAgent& trainer = *trainer_owner;
    concentrate(trainer);
    const auto lines = run_training(trainer, f.p);  // 4 lines of 2 rollouts x 25 steps; window 10
    REQUIRE(lines.size() == 4);
    CHECK(field(lines[0].json, "rollout/diversity_penalty") == Approx(0.05 * 41.0 / 50.0));  // steps 9..49 pay
    CHECK(field(lines[3].json, "rollout/diversity_penalty") == Approx(0.05));
    // The penalty is in the reward trained on: env reward - penalty.
    Fixture g(ops, ppo_profile({"ppo.diversity_coef=0"}));
    const auto without_owner = trainers::make_ppo_trainer(ops, g.p, g.dm);
    trainers::PpoAgent& without = *without_owner;
    concentrate(without);
    const auto plain = run_training(without, g.p);
    CHECK(field(plain[3].json, "rollout/diversity_penalty") == 0.0);
    CHECK(field(lines[3].json, "rollout/reward") == Approx(field(plain[3].json, "rollout/reward") - 0.05).margin(1e-6));
}

TEST_CASE("PPO with curiosity and constant learning rate runs with finite metrics", "[trainers][ppo]") {
    ops::CpuDevice ops;
    Fixture f(ops, ppo_profile({"ppo.curiosity=true", "ppo.curiosity_coef=0.1", "ppo.lr_schedule=\"constant\"",
                                "ppo.clip_value=false"}));
    const auto trainer_owner = trainers::make_ppo_trainer(ops, f.p, f.dm);
    trainers::PpoAgent& trainer = *trainer_owner;
    const auto lines = run_training(trainer, f.p);
    for (const auto& l : lines) {
        INFO(io::json::serialize(l.json));
        CHECK(io::json::serialize(l.json).find("null") == std::string::npos);
        CHECK(field(l.json, "rollout/curiosity") != 0.0);  // a non-zero prediction error
    }
    CHECK(trainer.learning_rate() == Approx(f.p.training.learning_rate));
}

TEST_CASE("PPO learning rate decays linearly over the run", "[trainers][ppo]") {
    ops::CpuDevice ops;
    Fixture f(ops, ppo_profile());
    const auto trainer_owner = trainers::make_ppo_trainer(ops, f.p, f.dm);
    trainers::PpoAgent& trainer = *trainer_owner;
    const double lr = f.p.training.learning_rate;
    CHECK(trainer.learning_rate() == Approx(lr));
    trainer.iterate();
    trainer.iterate();
    CHECK(trainer.learning_rate() == Approx(lr * (1.0 - 2.0 / 8.0)));
}

static void check_resume_equivalence(ops::Device& ops) {
    Fixture f(ops, ppo_profile({"ppo.curiosity=true"}));
    const auto straight_owner = trainers::make_ppo_trainer(ops, f.p, f.dm);
    trainers::PpoAgent& straight = *straight_owner;
    run_training(straight, f.p);

    const auto first_owner = trainers::make_ppo_trainer(ops, f.p, f.dm);
    trainers::PpoAgent& first = *first_owner;
    for (int i = 0; i < 3; ++i) first.iterate();
    const auto state = snapshot(ops, first);
    const auto counters = first.counter_values();

    const auto resumed_owner = trainers::make_ppo_trainer(ops, f.p, f.dm);
    trainers::PpoAgent& resumed = *resumed_owner;
    const auto tensors = resumed.state_tensors();
    REQUIRE(tensors.size() == state.size());
    for (std::size_t i = 0; i < tensors.size(); ++i) ops.upload<std::byte>(tensors[i].bytes, state[i]);
    resumed.restore_counter_values(counters);
    run_training(resumed, f.p);
    CHECK(resumed.updates() == straight.updates());
    const auto a = snapshot(ops, straight), b = snapshot(ops, resumed);
    const auto names = straight.state_tensors();
    for (std::size_t i = 0; i < a.size(); ++i) {
        INFO(names[i].name);
        CHECK(a[i] == b[i]);
    }
    // Counters that do not fit the profile are refused.
    std::vector<std::int64_t> bad = counters;
    bad[2] += 1;
    CHECK_THROWS_AS(resumed.restore_counter_values(bad), UsageError);
}

TEST_CASE("PPO resumed from its saved state equals an uninterrupted run (CPU, exact)", "[trainers][ppo][resume]") {
    ops::CpuDevice ops;
    check_resume_equivalence(ops);
}

TEST_CASE("PPO resumed from its saved state equals an uninterrupted run (GPU, exact)", "[gpu][trainers][ppo][resume]") {
    check_resume_equivalence(test::gpu_ops());
}

TEST_CASE("PPO on the GPU: the captured rollout and updates equal every op issued alone (exact)",
          "[gpu][trainers][ppo]") {
    auto& ops = test::gpu_ops();
    // Curiosity and the diversity penalty on, the linear schedule: every counter-derived value.
    Fixture f(ops, ppo_profile({"ppo.curiosity=true", "ppo.curiosity_coef=0.1"}));
    const auto r =
        test::run_captured_and_one_by_one(ops, f.p, [&] { return trainers::make_ppo_trainer(ops, f.p, f.dm); });
    REQUIRE(r.captured_log.size() == 4);  // 1600 env steps, a line every 400
    r.check_equal();
}

// Two rollouts without updates (the critic fixed), then the second checked against the critic
// run anew on every observation of a replayed environment: V(s_t), and the next value of every
// step GAE reads (the observation after it: terminal where the episode was truncated, s_{t+1} where
// it goes on). A bankruptcy threshold near 1 ends episodes in the first rollout at varied steps,
// so the second has truncations in the middle (episodes last T steps) as well as at its end.
// exact: the CPU's rows do not depend on how many share a pass; the GPU's may (its passes differ):
// within the critic's chain of reordered sums (fh::test::mlp_bounds, per value from the
// observation and the weights).
static void check_bootstrap_values(ops::Device& ops, bool exact) {
    Fixture f(ops, ppo_profile({"env.bankruptcy_fraction=0.9995"}));
    const auto trainer_owner = trainers::make_ppo_trainer(ops, f.p, f.dm);
    trainers::PpoAgent& trainer = *trainer_owner;
    trainer.bench_collect();
    const auto first_actions = ops.to_host(trainer.rollout_actions());
    trainer.bench_collect();
    const auto actions = ops.to_host(trainer.rollout_actions());
    const auto values = ops.to_host(trainer.rollout_values());
    const auto next_values = ops.to_host(trainer.rollout_next_values());
    const auto done = ops.to_host(trainer.rollout_done());

    const int n = static_cast<int>(f.p.experience.gpu_n_episodes);
    const int T = static_cast<int>(f.p.experience.gpu_timesteps_per_episode);
    const std::size_t un = static_cast<std::size_t>(n);
    env::VecEnv replay(ops, f.dm, env::Split::train, trainer.env_params(), n);
    replay.reset_all();
    auto step_actions = ops.alloc<int>(un);
    const auto& critic = trainer.network().critic;
    auto ws = critic.make_workspace(ops, n);
    const auto params = ops::View<const float>(trainer.policy_weights());
    const auto value_of = [&](ops::View<const float> states) {
        return ops.to_host(critic.infer(ops, params, states, n, ws));
    };
    for (int t = 0; t < T; ++t) {
        ops.upload<int>(step_actions.view(),
                        std::span<const int>(first_actions).subspan(static_cast<std::size_t>(t) * un, un));
        replay.step(step_actions.cview());
    }
    int mid_truncations = 0, checked = 0;
    const auto weights = ops.to_host(ops::View<const float>(trainer.policy_weights()));
    const auto bounds_of = [&](ops::View<const float> states) {
        return exact ? fh::test::Bounds(un, 0.0)
                     : fh::test::mlp_bounds(critic.layers(), weights, ops.to_host(states), n).out_bound;
    };
    const auto same = [&](float got, float want, double bound) {
        return std::abs(static_cast<double>(got) - want) <= bound;
    };
    for (int t = 0; t < T; ++t) {
        const std::size_t row = static_cast<std::size_t>(t) * un;
        const auto v_now = value_of(replay.states());
        const auto b_now = bounds_of(replay.states());
        ops.upload<int>(step_actions.view(), std::span<const int>(actions).subspan(row, un));
        replay.step(step_actions.cview());
        const auto replay_done = ops.to_host(replay.done());
        const auto v_next = value_of(replay.next_states());
        const auto b_next = bounds_of(replay.next_states());
        for (std::size_t e = 0; e < un; ++e) {
            INFO("step " << t << ", environment " << e);
            REQUIRE(done[row + e] == replay_done[e]);
            CHECK(same(values[row + e], v_now[e], b_now[e]));
            if (done[row + e] == env::kTerminated) continue;  // GAE does not bootstrap
            CHECK(same(next_values[row + e], v_next[e], b_next[e]));
            ++checked;
            if (done[row + e] == env::kTruncated && t + 1 < T) ++mid_truncations;
        }
    }
    INFO("mid-rollout truncations " << mid_truncations);
    CHECK(mid_truncations >= 2);
    CHECK(checked > n * T / 2);
}

TEST_CASE("PPO's next values: the critic on the observation after each step, terminal where truncated (CPU, exact)",
          "[trainers][ppo]") {
    ops::CpuDevice ops;
    check_bootstrap_values(ops, true);
}

TEST_CASE("PPO's next values: the critic on the observation after each step, terminal where truncated (GPU)",
          "[gpu][trainers][ppo]") {
    check_bootstrap_values(test::gpu_ops(), false);
}

TEST_CASE("PPO guard: an injected NaN update is skipped, too many exit 5 naming the quantity",
          "[trainers][ppo][guard]") {
    ops::CpuDevice ops;
    Fixture f(ops, ppo_profile());
    SECTION("a skipped update leaves weights and Adam moments untouched") {
        const auto trainer_owner = trainers::make_ppo_trainer(ops, f.p, f.dm);
        trainers::PpoAgent& trainer = *trainer_owner;
        trainer.inject_nan_at_updates({1, 2, 3, 4, 5, 6, 7, 8});  // the whole first rollout
        const auto before = snapshot(ops, trainer);
        trainer.iterate();
        const auto after = snapshot(ops, trainer);
        const auto names = trainer.state_tensors();
        for (std::size_t i = 0; i < names.size(); ++i)
            if (names[i].name == "params/online" || names[i].name.rfind("adam/", 0) == 0) {
                INFO(names[i].name);
                CHECK(before[i] == after[i]);
            }
        const auto line = trainer.read_log(1.0);
        CHECK(line.json.find("charts/skipped_updates")->as_i64() == 8);
    }
    SECTION("max_bad_updates reached: DivergedError (exit 5) names the policy loss") {
        Fixture g(ops, ppo_profile({"training.max_bad_updates=3"}));
        const auto trainer_owner = trainers::make_ppo_trainer(ops, g.p, g.dm);
        trainers::PpoAgent& trainer = *trainer_owner;
        trainer.inject_nan_at_updates({2, 3, 4});
        trainer.iterate();
        try {
            (void)trainer.read_log(1.0);
            FAIL("expected DivergedError");
        } catch (const DivergedError& e) {
            CHECK(std::string(e.what()).find("the policy loss at update 2") != std::string::npos);
            CHECK(e.code() == ExitCode::diverged);
        }
    }
}

namespace {
config::Profile learning_profile(bool gpu) {
    return config::resolve_profile_text(
        R"(
[run]
trainer = "ppo"
seed = 3
[data]
planted_signal = 0.5
synthetic_bars = 20000
cache_dir = ""
[instrument]
commission = 0.0
slippage_ticks = 0.0
[env]
position_levels = 15
urgency_levels = 1
[training]
learning_rate = 1e-3
gamma = 0.9
grad_clip_norm = 0.5
[ppo]
hidden = [64, 64]
epochs = 4
entropy_coef = 0.003
diversity_coef = 0.0
lr_schedule = "constant"
)",
        "ppo-learning-profile",
        gpu ? std::vector<std::string>{"run.total_steps=6000000", "run.log_interval=100000000",
                                       "experience.gpu_n_episodes=256", "experience.gpu_timesteps_per_episode=128",
                                       "ppo.minibatches=8", "data.planted_signal=0.3", "data.synthetic_bars=40000"}
            : std::vector<std::string>{"run.total_steps=96000", "run.log_interval=100000000",
                                       "experience.gpu_n_episodes=16", "experience.gpu_timesteps_per_episode=64",
                                       "ppo.minibatches=4"});
}
}  // namespace

TEST_CASE("PPO reaches half of the planted signal's best Sharpe", "[.learning]") {
    const bool gpu = test::gpu_available();
    std::unique_ptr<ops::CpuDevice> cpu;
    ops::Device* ops =
        gpu ? static_cast<ops::Device*>(&test::gpu_ops()) : (cpu = std::make_unique<ops::CpuDevice>()).get();
    Fixture f(*ops, learning_profile(gpu));
    const auto trainer_owner = trainers::make_ppo_trainer(*ops, f.p, f.dm);
    trainers::PpoAgent& trainer = *trainer_owner;
    const auto t0 = std::chrono::steady_clock::now();
    run_training(trainer, f.p);
    ops->synchronize();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double sharpe =
        test::validation_sharpe(*ops, f.dm, trainer.env_params(),
                                [&](ops::View<int> a, ops::View<const float> s, int n) { trainer.act(*ops, a, s, n); });
    const auto oracle =
        data::planted_oracle(f.market.bars, f.market.val, f.p.data.planted_signal, f.market.bars_per_year);
    std::printf(
        "ppo learning (%s): %lld env steps, %lld updates in %.1f s; validation Sharpe per bar %.4f, oracle "
        "%.4f (ratio %.2f)\n",
        ops->description().c_str(), trainer.env_steps(), trainer.updates(), seconds, sharpe, oracle.sharpe_per_bar,
        sharpe / oracle.sharpe_per_bar);
    CHECK(sharpe >= 0.5 * oracle.sharpe_per_bar);
}
