/// @file test_backtest_gpu.cpp
/// @brief [gpu][eval] The CUDA backtest (env, gather and metrics kernels) equals the CPU twin.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "config/profile.hpp"
#include "backtest/backtest.hpp"
#include "device/cpu_device.hpp"
#include "support/gpu.hpp"
#include "support/backtest_records.hpp"
#include "support/compare.hpp"
#include "support/market_fixture.hpp"
#include "trainers/trainer.hpp"

using namespace fh;
using Approx = Catch::Detail::Approx;

namespace {

/// A policy of the states (downloaded) so that the gathered states are compared too.
backtest::Policy state_policy(ops::Device& ops, int num_actions, int state_dim) {
    return [&ops, num_actions, state_dim](ops::View<int> actions, ops::View<const float> states, int n) {
        const auto s = ops.to_host(states);
        std::vector<int> a(static_cast<std::size_t>(n));
        for (int i = 0; i < n; ++i) {
            const float* row = s.data() + static_cast<std::size_t>(i) * state_dim;
            const double v = std::abs(row[0]) * 7.0 + std::abs(row[state_dim - 7]) * 5.0 + row[state_dim - 8] * 2.0;
            a[static_cast<std::size_t>(i)] = static_cast<int>(std::floor(std::abs(v) * 10.0)) % num_actions;
        }
        ops.upload<int>(actions, a);
    };
}

void require_same(const backtest::Metrics& c, const backtest::Metrics& g) {
    INFO("cpu " << backtest::metrics_json(c) << "\ngpu " << backtest::metrics_json(g));
    CHECK(c.total_return == g.total_return);
    CHECK(c.sharpe == g.sharpe);
    CHECK(c.sortino == g.sortino);
    CHECK(c.max_drawdown == g.max_drawdown);
    // growth^(bars_per_year / n) - 1 (backtest::metrics): the same double inputs; pow within 2 ulp
    // on the device and 1 in glibc (6 x 2^-53 of the power), then the subtraction's and, for
    // calmar, the division's rounding on each side.
    const double ud = 0x1p-53, d_annual = 6 * ud * std::abs(1 + c.annual_return) + 2 * ud * std::abs(c.annual_return);
    CHECK(std::abs(c.annual_return - g.annual_return) <= d_annual);
    if (c.max_drawdown > 0)
        CHECK(std::abs(c.calmar - g.calmar) <= d_annual / c.max_drawdown + 2 * ud * std::abs(c.calmar));
    else
        CHECK(c.calmar == g.calmar);
    CHECK(c.trades == g.trades);
    CHECK(c.win_rate == g.win_rate);
    CHECK(c.profit_factor == g.profit_factor);
    CHECK(c.exposure == g.exposure);
    CHECK(c.turnover == g.turnover);
    CHECK(c.action_histogram == g.action_histogram);
}

}  // namespace

TEST_CASE("the CUDA backtest equals the CPU backtest", "[gpu][eval]") {
    ops::CpuDevice cpu;
    auto& gpu = test::gpu_ops();
    auto md = test::random_walk_market(20011, 23, 42, {0, 7001, 13007, 17003});
    md.bars_per_year = 252.0 * 78;
    auto p = test::es_params(42, 15, 7);
    p.bankruptcy_fraction = 0.97;  // some segments go bankrupt and stop
    env::DeviceMarket cm(cpu, md), gm(gpu, md);
    const int A = env::num_actions(p);
    for (int segments : {1, 7, 64}) {
        INFO("segments " << segments);
        const auto c =
            backtest::backtest(cpu, cm, md, env::Split::test, p, state_policy(cpu, A, p.state_dim), segments, true);
        const auto g =
            backtest::backtest(gpu, gm, md, env::Split::test, p, state_policy(gpu, A, p.state_dim), segments, true);
        test::require_same_traded_records(c, g);
        require_same(c.strategy, g.strategy);
        require_same(c.buy_and_hold, g.buy_and_hold);
    }
}

TEST_CASE(
    "a CUDA backtest whose steps are captured (buy-and-hold beside the policy) equals the same backtest "
    "issued op by op, one pass after the other (DQN and softmax policies)",
    "[gpu][eval]") {
    auto& gpu = test::gpu_ops();
    auto md = test::random_walk_market(20011, 23, 42, {0, 7001, 13007, 17003});
    md.bars_per_year = 252.0 * 78;
    const auto p = test::es_params(42, 15, 7);
    env::DeviceMarket gm(gpu, md);
    // DQN, DQN with HER (the policy appends the evaluation goal's features first), PPO.
    for (const auto& [trainer, her] : {std::pair{"dqn", false}, {"dqn", true}, {"ppo", false}}) {
        INFO("trainer " << trainer << (her ? " with HER" : ""));
        const auto profile = config::resolve_profile_text(
            std::string("[run]\ntrainer = \"") + trainer + "\"\n[dqn]\nhidden = [32, 32]\n[ppo]\nhidden = [32, 32]\n",
            "capture-test", {"env.position_levels=15", "env.urgency_levels=3", her ? "dqn.her=true" : "dqn.her=false"});
        const auto policy = trainers::make_greedy_policy(profile, p.state_dim);
        REQUIRE(policy->capture_safe());
        // Random weights that make the actions vary from bar to bar.
        const auto w = test::random_floats(policy->weights_size(), 5, -0.5f, 0.5f);
        const auto weights = gpu.from_host<float>(w);
        const backtest::Policy act = [&](ops::View<int> a, ops::View<const float> s, int n) {
            policy->act(gpu, weights.cview(), a, s, n);
        };
        for (int segments : {1, 2, 3, 5, 7}) {
            INFO("segments " << segments);
            const auto direct = backtest::backtest(gpu, gm, md, env::Split::test, p, act, segments, true, false);
            const auto captured = backtest::backtest(gpu, gm, md, env::Split::test, p, act, segments, true, true);
            test::require_same_traded_records(direct, captured);
            require_same(direct.strategy, captured.strategy);
            require_same(direct.buy_and_hold, captured.buy_and_hold);
            test::require_same_traded_records(direct, captured, true);
            CHECK(direct.strategy.action_histogram.size() > 1);
        }
    }
}
