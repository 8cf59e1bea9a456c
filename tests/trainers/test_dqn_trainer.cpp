/// @file test_dqn_trainer.cpp
/// @brief The DQN trainer end to end on the CPU backend: smoke, determinism, the guard, and
///        learning the synthetic market's planted signal.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>

#include "config/profile.hpp"
#include "data/load.hpp"
#include "env/vec_env.hpp"
#include "nn/init.hpp"
#include "ops/cpu_device.hpp"
#include "trainers/dqn_trainer.hpp"
#include "trainers/setup.hpp"
#include "util/errors.hpp"
#include "ops/env/ops.hpp"

using namespace fh;

namespace {

config::Profile profile(const std::string& extra) {
    const std::string text = R"(
[run]
trainer = "dqn"
seed = 7
total_steps = 2000
log_interval = 400
[data]
synthetic_bars = 3000
cache_dir = ""
[experience]
gpu_n_episodes = 4
gpu_timesteps_per_episode = 50
[replay_buffer]
buffer_size = 256
min_replay_size = 64
batch_size = 32
[dqn]
hidden = [32, 32]
)";
    return config::resolve_profile_text(text, "test-profile", extra.empty() ? std::vector<std::string>{} : std::vector<std::string>{extra});
}

config::Profile with(config::Profile p, const std::vector<std::string>& overrides) {
    return config::resolve_profile_text(config::to_toml(p), "test-profile", overrides);
}

}  // namespace

TEST_CASE("DQN smoke run on the CPU: finite metrics, every step counted", "[trainers][dqn]") {
    ops::CpuDevice ops;
    const auto p = profile("");
    const auto market = data::load_market(trainers::data_options(p));
    env::DeviceMarket dm(ops, market);
    trainers::DqnTrainer trainer(ops, p, dm);
    const auto result = trainer.train();
    REQUIRE(result.env_steps == 2000);
    REQUIRE(result.log.size() == 5);
    REQUIRE(result.updates > 0);
    unsigned long long actions = 0;
    for (const auto& m : result.log) {
        CHECK(std::isfinite(m.loss));
        CHECK(std::isfinite(m.q_mean));
        CHECK(std::isfinite(m.grad_norm));
        CHECK(m.skipped_updates == 0);
        for (auto c : m.action_histogram) actions += c;
    }
    CHECK(actions == 2000);
    CHECK(result.log.back().epsilon < result.log.front().epsilon);
    CHECK(result.log.back().loss > 0);
}

TEST_CASE("DQN variants run: no double DQN, no dueling, periodic target, 101 atoms, 5-step", "[trainers][dqn]") {
    ops::CpuDevice ops;
    for (const char* variant : {"dqn.double_dqn=false", "dqn.dueling=false", "training.tau=0", "dqn.num_atoms=101",
                                "experience.n_step=5"}) {
        INFO(variant);
        const auto p = with(profile(""), {variant, "run.total_steps=600", "run.log_interval=600"});
        const auto market = data::load_market(trainers::data_options(p));
        env::DeviceMarket dm(ops, market);
        trainers::DqnTrainer trainer(ops, p, dm);
        const auto r = trainer.train();
        CHECK(r.updates > 0);
        CHECK(std::isfinite(r.log.back().loss));
        CHECK(r.log.back().skipped_updates == 0);
    }
}

TEST_CASE("DQN is deterministic: same seed, same metrics", "[trainers][dqn]") {
    auto run = [](const config::Profile& p) {
        ops::CpuDevice ops;
        const auto market = data::load_market(trainers::data_options(p));
        env::DeviceMarket dm(ops, market);
        trainers::DqnTrainer trainer(ops, p, dm);
        auto r = trainer.train();
        return std::pair{r, ops.to_host(trainer.online_params())};
    };
    const auto p = profile("");
    const auto [a, wa] = run(p);
    const auto [b, wb] = run(p);
    REQUIRE(a.log.size() == b.log.size());
    for (std::size_t i = 0; i < a.log.size(); ++i) {
        CHECK(a.log[i].loss == b.log[i].loss);
        CHECK(a.log[i].q_mean == b.log[i].q_mean);
        CHECK(a.log[i].grad_norm == b.log[i].grad_norm);
        CHECK(a.log[i].action_histogram == b.log[i].action_histogram);
    }
    CHECK(wa == wb);
    const auto [c, wc] = run(with(p, {"run.seed=8"}));
    CHECK(wc != wa);
}

TEST_CASE("the guard skips an injected NaN update, keeps the last good weights, then exits 5", "[trainers][dqn][guard]") {
    ops::CpuDevice ops;
    // Updates start once 64 transitions (16 steps of 4 envs) are in the ring: 16 steps -> 1 update.
    auto p = with(profile(""), {"run.total_steps=64", "run.log_interval=64"});
    const auto market = data::load_market(trainers::data_options(p));
    env::DeviceMarket dm(ops, market);
    {
        trainers::DqnHooks hooks;
        hooks.inject_nan_at_updates = {1};
        trainers::DqnTrainer trainer(ops, p, dm, hooks);
        const auto r = trainer.train();
        REQUIRE(r.updates == 1);
        CHECK(r.log.back().skipped_updates == 1);
        const auto initial = nn::initial_params(trainer.network().layout(), 7);
        CHECK(ops.to_host(trainer.online_params()) == initial);  // the bad update was not applied
    }
    {
        trainers::DqnTrainer trainer(ops, p, dm);
        trainer.train();
        CHECK(ops.to_host(trainer.online_params()) != nn::initial_params(trainer.network().layout(), 7));
    }
    {
        auto q = with(p, {"run.total_steps=400", "run.log_interval=40", "training.max_bad_updates=3"});
        trainers::DqnHooks hooks;
        hooks.inject_nan_at_updates = {2, 3, 4};
        trainers::DqnTrainer trainer(ops, q, dm, hooks);
        try {
            trainer.train();
            FAIL("expected DivergedError");
        } catch (const DivergedError& e) {
            CHECK(e.code() == ExitCode::diverged);
            CHECK(std::string(e.what()).find("the C51 loss") != std::string::npos);
            CHECK(std::string(e.what()).find("update 2") != std::string::npos);
        }
    }
}

TEST_CASE("DQN learns the planted signal: validation beats flat and random", "[trainers][dqn][learning]") {
    ops::CpuDevice ops;
    // A strong planted momentum signal and no trading costs, so the best policy is to follow
    // the sign of the last return (docs/data.md).
    auto p = with(profile(""), {"data.planted_signal=0.5", "data.synthetic_bars=6000", "instrument.commission=0",
                                "instrument.slippage_ticks=0", "env.urgency_levels=1", "run.total_steps=48000",
                                "run.log_interval=48000", "experience.gpu_n_episodes=16",
                                "replay_buffer.buffer_size=8000", "replay_buffer.min_replay_size=512",
                                "replay_buffer.batch_size=64", "training.epsilon_decay_steps=20000",
                                "training.learning_rate=0.001", "training.gamma=0.9", "experience.n_step=1",
                                "dqn.hidden=[64]", "dqn.v_min=-5", "dqn.v_max=5"});
    const auto market = data::load_market(trainers::data_options(p));
    env::DeviceMarket dm(ops, market);
    trainers::DqnTrainer trainer(ops, p, dm);
    trainer.train();
    const auto params = trainers::env_params(p, market.market_dim);
    const int n = 16, steps = 400;
    const double learned = trainers::mean_step_reward(ops, dm, env::Split::val, params, n, steps,
        [&](ops::View<int> a, ops::View<const float> s, int k) { trainer.greedy_actions(a, s, k); });
    const double flat = trainers::mean_step_reward(ops, dm, env::Split::val, params, n, steps,
        [&](ops::View<int> a, ops::View<const float>, int k) {
            ops.upload<int>(a, std::vector<int>(static_cast<std::size_t>(k), params.position_levels / 2 * params.urgency_levels));
        });
    long long step = 0;
    const double random = trainers::mean_step_reward(ops, dm, env::Split::val, params, n, steps,
        [&](ops::View<int> a, ops::View<const float>, int) { fh::ops::env_random_actions(ops, a, 99, step++, env::num_actions(params)); });
    std::printf("planted-signal validation reward per step: dqn %.5f, flat %.5f, random %.5f\n", learned, flat, random);
    CHECK(flat == 0.0);
    CHECK(learned > random + 0.01);
    CHECK(learned > 0.01);
}
