/// @file test_dqn_trainer.cpp
/// @brief The DQN trainer end to end on the CPU backend: smoke, determinism, the guard (learning
///        the planted signal: test_learning_ci.cpp).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "config/profile.hpp"
#include "data/load.hpp"
#include "env/vec_env.hpp"
#include "nn/init.hpp"
#include "device/cpu_device.hpp"
#include "support/compare.hpp"
#include "support/trainer_support.hpp"
#include "trainers/dqn/engine.hpp"
#include "trainers/setup.hpp"
#include "util/errors.hpp"
#include "abi/env.h"

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
    return config::resolve_profile_text(text, "test-profile",
                                        extra.empty() ? std::vector<std::string>{} : std::vector<std::string>{extra});
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
    auto trainer_engine = trainers::make_dqn_trainer(ops, p, dm);
    auto& trainer = *trainer_engine;
    const auto log = test::run_training(trainer, p);
    REQUIRE(trainer.env_steps() == 2000);
    REQUIRE(log.size() == 5);
    REQUIRE(trainer.updates() > 0);
    long long actions = 0;
    for (const auto& m : log) {
        CHECK(std::isfinite(test::metric(m, "losses/loss")));
        CHECK(std::isfinite(test::metric(m, "q/mean")));
        CHECK(std::isfinite(test::metric(m, "charts/grad_norm")));
        CHECK(test::metric(m, "charts/skipped_updates") == 0);
        for (auto c : test::histogram(m)) actions += c;
    }
    CHECK(actions == 2000);
    CHECK(test::metric(log.back(), "charts/epsilon") < test::metric(log.front(), "charts/epsilon"));
    CHECK(test::metric(log.back(), "losses/loss") > 0);
}

TEST_CASE(
    "DQN variants run: no double DQN, no dueling, periodic target, 101 atoms, 5-step, CQL, scalar head, "
    "curiosity, attention, ensemble, HER",
    "[trainers][dqn]") {
    ops::CpuDevice ops;
    for (const std::vector<std::string>& variant : std::vector<std::vector<std::string>>{
             {"dqn.double_dqn=false"},
             {"dqn.dueling=false"},
             {"training.tau=0"},
             {"dqn.num_atoms=101"},
             {"experience.n_step=5"},
             {"dqn.cql_alpha=0.5"},
             {"dqn.head=mse"},
             {"dqn.head=mse", "dqn.dueling=false"},
             {"dqn.head=mse", "dqn.cql_alpha=0.5"},
             {"dqn.curiosity=true"},
             {"dqn.curiosity=true", "dqn.head=mse", "dqn.cql_alpha=0.5"},
             {"dqn.attention=true"},
             {"dqn.attention=true", "dqn.head=mse", "dqn.curiosity=true"},
             {"dqn.ensemble_size=3"},
             {"dqn.ensemble_size=4", "dqn.head=mse", "dqn.ensemble_ucb=1", "dqn.cql_alpha=0.5"},
             {"dqn.ensemble_size=2", "dqn.ensemble_bootstrap=1", "dqn.double_dqn=false", "dqn.attention=true"},
             {"dqn.her=true"},
             {"dqn.her=true", "dqn.head=mse", "dqn.attention=true", "dqn.curiosity=true"},
             {"dqn.her=true", "dqn.ensemble_size=3", "dqn.her_ratio=0", "experience.n_step=5"},
             {"dqn.her=true", "dqn.head=iqn", "dqn.her_ratio=1"}}) {
        std::string name;
        for (const auto& v : variant) name += v + " ";
        INFO(name);
        auto overrides = variant;
        overrides.insert(overrides.end(), {"run.total_steps=600", "run.log_interval=600"});
        const auto p = with(profile(""), overrides);
        const auto market = data::load_market(trainers::data_options(p));
        env::DeviceMarket dm(ops, market);
        auto trainer_engine = trainers::make_dqn_trainer(ops, p, dm);
        auto& trainer = *trainer_engine;
        const auto log = test::run_training(trainer, p);
        CHECK(trainer.updates() > 0);
        CHECK(std::isfinite(test::metric(log.back(), "losses/loss")));
        CHECK(test::metric(log.back(), "charts/skipped_updates") == 0);
        // The CQL term (logsumexp - Q of the taken action) is positive when on and reported 0 when off.
        if (p.dqn.cql_alpha > 0)
            CHECK(test::metric(log.back(), "losses/cql") > 0);
        else
            CHECK(test::metric(log.back(), "losses/cql") == 0);
        // With attention: one weight per feature group (7 of core42 and the portfolio), a softmax.
        double attention_sum = 0;
        int groups = 0;
        for (const auto& [key, value] : log.back().json.as_object())
            if (key.rfind("attention/", 0) == 0) {
                attention_sum += value.as_double();
                ++groups;
            }
        CHECK(groups == (p.dqn.attention ? 8 : 0));
        if (p.dqn.attention) CHECK(attention_sum == Approx(1.0).epsilon(1e-5));
        // With an ensemble: the heads disagree (their spread at the acting states is logged).
        if (p.dqn.ensemble_size > 1) {
            CHECK(test::metric(log.back(), "q/ensemble_spread") > 0);
            CHECK(std::isfinite(test::metric(log.back(), "q/ensemble_spread")));
        } else {
            CHECK(log.back().json.find("q/ensemble_spread") == nullptr);
        }
        CHECK((log.back().json.find("her/goal_reached") != nullptr) == p.dqn.her);
        if (p.dqn.curiosity)
            CHECK(test::metric(log.back(), "charts/curiosity") > 0);
        else
            CHECK(test::metric(log.back(), "charts/curiosity") == 0);
        if (p.dqn.head == "mse") {  // no distribution: no C51 loss; the loss is the MSE (+ CQL)
            CHECK(test::metric(log.back(), "losses/c51") == 0);
            CHECK(test::metric(log.back(), "losses/loss") ==
                  Approx(test::metric(log.back(), "losses/mse") +
                         p.dqn.cql_alpha * test::metric(log.back(), "losses/cql")));
        }
    }
}

TEST_CASE("DQN curiosity: the stored rewards carry the forward model's bonus, nothing else changes",
          "[trainers][dqn]") {
    // Before updates start, collection acts with the initial weights and epsilon of the step
    // counter alone, so a run with curiosity takes the same actions and visits the same states as
    // one without: the replays differ in their rewards only, by coef * error >= 0.
    ops::CpuDevice ops;
    auto replay_of = [&](const std::vector<std::string>& extra) {
        std::vector<std::string> o{"replay_buffer.min_replay_size=100000", "replay_buffer.buffer_size=100000",
                                   "run.total_steps=800", "run.log_interval=800"};
        o.insert(o.end(), extra.begin(), extra.end());
        const auto p = with(profile(""), o);
        const auto market = data::load_market(trainers::data_options(p));
        env::DeviceMarket dm(ops, market);
        auto trainer_engine = trainers::make_dqn_trainer(ops, p, dm);
        auto& trainer = *trainer_engine;
        const auto log = test::run_training(trainer, p);
        CHECK(trainer.updates() == 0);
        return std::pair{trainer.replay_dump(), test::metric(log.back(), "charts/curiosity")};
    };
    const auto [plain, plain_bonus] = replay_of({});
    const auto [zero, zero_bonus] = replay_of({"dqn.curiosity=true", "dqn.curiosity_coef=0"});
    const auto [bonus, mean_error] = replay_of({"dqn.curiosity=true", "dqn.curiosity_coef=2"});
    // Counts of differing elements in the rows written (the others were never written; the
    // arrays are too long to print).
    REQUIRE(plain.pushed_steps == bonus.pushed_steps);
    const std::size_t written = static_cast<std::size_t>(plain.pushed_steps) * static_cast<std::size_t>(plain.n_envs);
    const std::size_t D = static_cast<std::size_t>(plain.state_dim);
    auto differing = [&](const auto& a, const auto& b, std::size_t per_row = 1) {
        std::ptrdiff_t d = 0;
        for (std::size_t i = 0; i < written * per_row; ++i) d += a.at(i) != b.at(i);
        return d;
    };
    CHECK(plain_bonus == 0);
    CHECK(zero_bonus > 0);  // the model still runs and reports its error
    CHECK(mean_error == zero_bonus);
    CHECK(differing(zero.rewards, plain.rewards) == 0);
    CHECK(differing(bonus.states, plain.states, D) == 0);
    CHECK(differing(bonus.next_states, plain.next_states, D) == 0);
    CHECK(differing(bonus.actions, plain.actions) == 0);
    CHECK(differing(bonus.done, plain.done) == 0);
    REQUIRE(bonus.rewards.size() == plain.rewards.size());
    double added = 0;
    for (std::size_t i = 0; i < written; ++i) {
        REQUIRE(bonus.rewards[i] >= plain.rewards[i]);
        added += bonus.rewards[i] - plain.rewards[i];
    }
    // The mean bonus is coef times the mean error the log reports (float rounding aside).
    CHECK(added / static_cast<double>(written) == Approx(2 * mean_error).epsilon(1e-3));
}

TEST_CASE(
    "DQN HER: the network takes the goal features, the ring keeps each episode's goal, evaluation "
    "conditions on dqn.her_eval_goal",
    "[trainers][dqn][her]") {
    ops::CpuDevice ops;
    const auto p = with(profile(""), {"dqn.her=true", "run.total_steps=600", "run.log_interval=600",
                                      "dqn.her_goal_min=-1", "dqn.her_goal_max=3", "dqn.her_eval_goal=0.5"});
    const auto market = data::load_market(trainers::data_options(p));
    env::DeviceMarket dm(ops, market);
    const int D = trainers::env_params(p, market.market_dim).state_dim;
    const auto config = trainers::network_config(p, D);
    CHECK(config.state_dim == D + 2);
    auto trainer_engine = trainers::make_dqn_trainer(ops, p, dm);
    auto& trainer = *trainer_engine;
    const trainers::QNetwork net(config);
    CHECK(trainer.policy().weights_size() == net.layout().total());
    CHECK(trainer.policy_weights().size() == net.layout().total());
    const auto log = test::run_training(trainer, p);
    CHECK(std::isfinite(test::metric(log.back(), "losses/loss")));
    CHECK(test::metric(log.back(), "charts/skipped_updates") == 0);
    const double reached = test::metric(log.back(), "her/goal_reached");  // a share of the 4 environments
    CHECK(reached >= 0.0);
    CHECK(reached <= 1.0);
    CHECK(reached * 4 == std::round(reached * 4));

    // The ring's goal column: every stored transition's episode goal, in [-1, 3], many episodes.
    std::vector<float> goals;
    for (const auto& t : trainer.state_tensors())
        if (t.name == "her/goals") {
            const auto bytes = ops.to_host(ops::View<const std::byte>(t.bytes));
            goals.resize(bytes.size() / sizeof(float));
            std::memcpy(goals.data(), bytes.data(), bytes.size());
        }
    REQUIRE(goals.size() == 256);  // buffer_size 256 = 64 steps x 4 environments
    for (float g : goals) {
        CHECK(g >= -1.0f);
        CHECK(g <= 3.0f);
    }
    std::sort(goals.begin(), goals.end());
    CHECK(std::unique(goals.begin(), goals.end()) - goals.begin() >= 4);  // at least one episode per environment
    // The replay dump holds the plain observations and the environment's rewards (an IQL dataset).
    CHECK(trainer.replay_dump().state_dim == D);

    // The greedy policy acts on [s | 0.5, 0.5 - achieved(s)].
    const int n = 7;
    const auto states_h = test::random_floats(static_cast<std::size_t>(n * D), 5);
    auto states = ops.from_host<float>(states_h);
    auto actions = ops.alloc<int>(n);
    trainer.policy().act(ops, trainer.policy_weights(), actions.view(), states.cview(), n);
    std::vector<float> rows;
    for (int e = 0; e < n; ++e) {
        rows.insert(rows.end(), states_h.begin() + e * D, states_h.begin() + (e + 1) * D);
        rows.push_back(0.5f);
        rows.push_back(0.5f - states_h[static_cast<std::size_t>(e * D + D - 8 + 2)]);
    }
    auto x = ops.from_host<float>(rows);
    auto want = ops.alloc<int>(n);
    auto ws = net.make_workspace(ops, n);
    net.q_values(ops, trainer.policy_weights(), x.cview(), n, ws, {}, want.view());
    CHECK(ops.to_host(actions.cview()) == ops.to_host(want.cview()));
    // make_greedy_policy (backtests, eval) builds the same goal-conditioned policy.
    const auto policy = trainers::make_greedy_policy(p, D);
    CHECK(policy->weights_size() == net.layout().total());
    auto again = ops.alloc<int>(n);
    policy->act(ops, trainer.policy_weights(), again.view(), states.cview(), n);
    CHECK(ops.to_host(again.cview()) == ops.to_host(want.cview()));
}

TEST_CASE("DQN is deterministic: same seed, same metrics", "[trainers][dqn]") {
    auto run = [](const config::Profile& p) {
        ops::CpuDevice ops;
        const auto market = data::load_market(trainers::data_options(p));
        env::DeviceMarket dm(ops, market);
        auto trainer_engine = trainers::make_dqn_trainer(ops, p, dm);
        auto& trainer = *trainer_engine;
        auto log = test::run_training(trainer, p);
        return std::pair{log, ops.to_host(ops::View<const float>(trainer.policy_weights()))};
    };
    const auto p = profile("");
    const auto [a, wa] = run(p);
    const auto [b, wb] = run(p);
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
        for (const char* key : {"losses/loss", "q/mean", "charts/grad_norm"})
            CHECK(test::metric(a[i], key) == test::metric(b[i], key));
        CHECK(test::histogram(a[i]) == test::histogram(b[i]));
    }
    CHECK(wa == wb);
    const auto [c, wc] = run(with(p, {"run.seed=8"}));
    CHECK(wc != wa);
}

TEST_CASE("the guard skips an injected NaN update, keeps the last good weights, then exits 5",
          "[trainers][dqn][guard]") {
    ops::CpuDevice ops;
    // Updates start once 64 transitions (16 steps of 4 envs) are in the ring, beside the 17th
    // collection step: 17 steps -> 1 update.
    auto p = with(profile(""), {"run.total_steps=68", "run.log_interval=68"});
    const auto market = data::load_market(trainers::data_options(p));
    env::DeviceMarket dm(ops, market);
    const auto layout =
        trainers::QNetwork(trainers::network_config(p, trainers::env_params(p, market.market_dim).state_dim)).layout();
    auto weights = [&](trainers::Trainer& t) { return ops.to_host(ops::View<const float>(t.policy_weights())); };
    {
        auto trainer_engine = trainers::make_dqn_trainer(ops, p, dm);
        auto& trainer = *trainer_engine;
        trainer.inject_nan_at_updates({1});
        const auto log = test::run_training(trainer, p);
        REQUIRE(trainer.updates() == 1);
        CHECK(test::metric(log.back(), "charts/skipped_updates") == 1);
        CHECK(weights(trainer) == nn::initial_params(layout, 7));  // the bad update was not applied
    }
    {
        auto trainer_engine = trainers::make_dqn_trainer(ops, p, dm);
        auto& trainer = *trainer_engine;
        test::run_training(trainer, p);
        CHECK(weights(trainer) != nn::initial_params(layout, 7));
    }
    {
        auto q = with(p, {"run.total_steps=400", "run.log_interval=40", "training.max_bad_updates=3"});
        auto trainer_engine = trainers::make_dqn_trainer(ops, q, dm);
        auto& trainer = *trainer_engine;
        trainer.inject_nan_at_updates({2, 3, 4});
        try {
            test::run_training(trainer, q);
            FAIL("expected DivergedError");
        } catch (const DivergedError& e) {
            CHECK(e.code() == ExitCode::diverged);
            CHECK(std::string(e.what()).find("the C51 loss") != std::string::npos);
            CHECK(std::string(e.what()).find("update 2") != std::string::npos);
        }
    }
}
