/// @file test_env.cpp
/// @brief The environment rules (math/env.h) on hand-checked scenarios, and invariants
///        over long random action sequences, on the CPU.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "math/env.h"
#include "env/vec_env.hpp"
#include "device/cpu_device.hpp"
#include "support/market_fixture.hpp"
#include "abi/env.h"

using namespace fh::env;
using fh::test::Bar;
using fh::test::es_params;
using fh::test::make_market;

namespace {

/// A single environment driven directly through the shared per-environment functions.
struct OneEnv {
    fh::data::MarketData data;
    std::vector<int> starts{0}, ends;
    MarketView m{};
    EnvParams p;
    EnvState s{};
    StepInfo info{};
    std::uint8_t done = 0;

    OneEnv(std::vector<Bar> bars, EnvParams params) : data(make_market(bars, 3, 2.0)), p(params) {
        ends = {static_cast<int>(bars.size())};
        m = MarketView{data.bars.open.data(),
                       data.bars.high.data(),
                       data.bars.low.data(),
                       data.bars.close.data(),
                       data.atr.data(),
                       data.features.data(),
                       starts.data(),
                       ends.data(),
                       1,
                       static_cast<int>(bars.size())};
        reset_env(s, 0, m, p);
    }
    /// action = level * urgency_levels + urgency
    float step(int level, int urgency) { return step_env(s, level * p.urgency_levels + urgency, m, p, info, done); }
};

// Bars are {open, high, low, close}. With 3 levels and max_contracts 2 the targets are -2, 0, +2.
constexpr int kShort = 0, kFlat = 1, kLong = 2;
constexpr int kPassive = 1, kFar = 2;  // urgency 0 is fh::env::kMarket

}  // namespace

TEST_CASE("target positions are the levels scaled to max_contracts", "[env]") {
    EnvParams p = es_params(3, 5, 2);  // 5 levels: -2 -1 0 1 2
    CHECK(target_contracts(0, p) == -2);
    CHECK(target_contracts(1, p) == -1);
    CHECK(target_contracts(2, p) == 0);
    CHECK(target_contracts(4, p) == 2);
    p = es_params(3, 15, 10);  // 15 levels over 10 contracts: k * 10 / 7 rounded half away
    CHECK(target_contracts(14, p) == 10);
    CHECK(target_contracts(8, p) == 1);   // 10/7 = 1.43
    CHECK(target_contracts(10, p) == 4);  // 30/7 = 4.29
    CHECK(target_contracts(3, p) == -6);  // -40/7 = -5.71
    p = es_params(3, 1, 3);
    CHECK(target_contracts(0, p) == 0);
}

TEST_CASE("market buy fills at the next open plus slippage and marks to the close", "[env]") {
    OneEnv e({{99, 101, 98, 100}, {101, 103, 100.5, 102}, {102, 103, 101, 102}}, es_params(3));
    const float r = e.step(kLong, kMarket);
    CHECK(e.info.fill_price == 101.25);  // open 101 + 1 tick against the buyer
    CHECK(e.info.filled_contracts == 2);
    CHECK(e.info.commission == 4.0);                              // 2 contracts x $2
    CHECK(e.s.equity == 100000.0 + 2 * (102 - 101.25) * 50 - 4);  // 100071
    CHECK(r == Approx(71.0 / 100000.0));
    CHECK(e.s.position == 2);
    CHECK(e.s.avg_entry_price == 101.25);
    CHECK(e.info.bar == 1);
    CHECK(e.s.t == 1);
}

TEST_CASE("passive limit buy fills at the limit when the bar trades through it", "[env]") {
    OneEnv e({{99, 101, 98, 100}, {100.2, 100.5, 99.0, 100}, {100, 101, 99, 100}}, es_params(3));
    e.step(kLong, kPassive);  // limit 100 - 2 ticks = 99.5; low 99.0 <= 99.5
    CHECK(e.info.order_type == kPassiveLimit);
    CHECK(e.info.fill_price == 99.5);
    CHECK(e.s.equity == 100000.0 + 2 * (100 - 99.5) * 50 - 4);
}

TEST_CASE("a limit the bar does not reach is cancelled unfilled", "[env]") {
    OneEnv e({{99, 101, 98, 100}, {100.2, 100.5, 99.6, 100}, {100, 101, 99, 100}}, es_params(3));
    e.step(kLong, kPassive);  // limit 99.5, low 99.6
    CHECK(e.info.filled_contracts == 0);
    CHECK(e.info.commission == 0.0);
    CHECK(e.s.position == 0);
    CHECK(e.s.equity == 100000.0);
    CHECK(e.s.last_fill_side == 0);
    // The sell side mirrors it: limit 100.5 above the close, high 100.4 does not reach it.
    OneEnv s({{99, 101, 98, 100}, {100.0, 100.4, 99.0, 100}, {100, 101, 99, 100}}, es_params(3));
    s.step(kShort, kPassive);
    CHECK(s.info.filled_contracts == 0);
}

TEST_CASE("a gap through the limit fills at the open, never better than the open", "[env]") {
    OneEnv buy({{99, 101, 98, 100}, {99.0, 99.8, 98.5, 99.5}, {100, 101, 99, 100}}, es_params(3));
    buy.step(kLong, kPassive);  // limit 99.5, the bar opens below it at 99.0
    CHECK(buy.info.fill_price == 99.0);
    OneEnv sell({{99, 101, 98, 100}, {101.0, 101.5, 100.8, 101}, {100, 101, 99, 100}}, es_params(3));
    sell.step(kShort, kPassive);  // limit 100.5, the bar opens above it at 101.0
    CHECK(sell.info.fill_price == 101.0);
    CHECK(sell.info.filled_contracts == -2);
}

TEST_CASE("the far limit sits limit_atr_mult ATRs from the close", "[env]") {
    // ATR is 2.0 in the fixture and limit_atr_mult 0.5: the buy limit is 100 - 1.0 = 99.0.
    OneEnv hit({{99, 101, 98, 100}, {99.5, 100, 98.9, 99.5}, {100, 101, 99, 100}}, es_params(3));
    hit.step(kLong, kFar);
    CHECK(hit.info.order_type == kFarLimit);
    CHECK(hit.info.fill_price == 99.0);
    OneEnv miss({{99, 101, 98, 100}, {99.5, 100, 99.1, 99.5}, {100, 101, 99, 100}}, es_params(3));
    miss.step(kLong, kFar);
    CHECK(miss.info.filled_contracts == 0);
}

TEST_CASE("a reversal from long to short is one order for the whole difference", "[env]") {
    OneEnv e({{99, 101, 98, 100}, {100, 101, 99, 100}, {102, 103, 101, 101}, {101, 102, 100, 101}}, es_params(3));
    e.step(kLong, kMarket);  // buy 2 at 100.25
    REQUIRE(e.s.position == 2);
    const double equity_before = e.s.equity;
    e.step(kShort, kMarket);  // sell 4 at 102 - 0.25 = 101.75
    CHECK(e.info.filled_contracts == -4);
    CHECK(e.info.fill_price == 101.75);
    CHECK(e.info.commission == 8.0);
    CHECK(e.s.position == -2);
    CHECK(e.s.avg_entry_price == 101.75);                   // the new short opened at the fill
    CHECK(e.s.realized_pnl == 2 * (101.75 - 100.25) * 50);  // the long was closed at the fill
    // Held 2 long from close 100 to 101, then -4 from 101.75 to close 101.
    CHECK(e.s.equity == equity_before + (2 * (101 - 100) + (-4) * (101 - 101.75)) * 50 - 8);
    CHECK(e.s.bars_in_position == 1);
    CHECK(e.s.last_fill_side == -1);
}

TEST_CASE("commission is charged on the contracts that change, per side", "[env]") {
    OneEnv e({{99, 101, 98, 100}, {100, 101, 99, 100}, {100, 101, 99, 100}, {100, 101, 99, 100}},
             es_params(3, 5, 2));  // levels -2 -1 0 1 2
    e.step(4, kMarket);            // 0 -> +2
    CHECK(e.info.commission == 4.0);
    e.step(3, kMarket);  // +2 -> +1
    CHECK(e.info.commission == 2.0);
    CHECK(e.info.filled_contracts == -1);
    CHECK(e.s.fees == 6.0);
    e.step(3, kMarket);  // +1 -> +1: no order at all
    CHECK(e.info.order_type == kNoOrder);
    CHECK(e.info.commission == 0.0);
    CHECK(e.s.bars_in_position == 3);
}

TEST_CASE("falling below bankruptcy_fraction terminates the episode", "[env]") {
    EnvParams p = es_params(3, 3, 100);  // 100 contracts x $50: a 11-point drop loses $55,000
    OneEnv e({{99, 101, 98, 100}, {100, 101, 99, 100}, {90, 91, 88, 89}, {89, 90, 88, 89}}, p);
    e.step(kLong, kMarket);
    CHECK(e.done == kRunning);
    e.step(kLong, kMarket);
    CHECK(e.s.equity < 0.5 * p.initial_equity);
    CHECK(e.done == kTerminated);
}

TEST_CASE("the episode is truncated at its length and at the data end", "[env]") {
    std::vector<Bar> bars(10, Bar{100, 101, 99, 100});
    EnvParams p = es_params(3);
    p.episode_length = 3;
    OneEnv e(bars, p);
    e.step(kFlat, kMarket);
    e.step(kFlat, kMarket);
    CHECK(e.done == kRunning);
    e.step(kFlat, kMarket);
    CHECK(e.done == kTruncated);

    p.episode_length = 100;
    OneEnv end(std::vector<Bar>(4, Bar{100, 101, 99, 100}), p);
    end.step(kFlat, kMarket);  // t = 1
    end.step(kFlat, kMarket);  // t = 2: bar 3 is the last, so one more step is possible
    CHECK(end.done == kRunning);
    end.step(kFlat, kMarket);  // t = 3: no next bar
    CHECK(end.done == kTruncated);
}

TEST_CASE("the drawdown penalty charges only increases of the drawdown", "[env]") {
    EnvParams p = es_params(3);
    p.drawdown_penalty = 2.0;
    OneEnv e({{99, 101, 98, 100}, {100, 101, 99, 100}, {99, 100, 98, 99}, {99, 101, 98, 100}}, p);
    e.step(kLong, kMarket);  // buy 2 at 100.25, close 100: equity 100000 - 25 - 4
    const double eq1 = 100000.0 - 2 * 0.25 * 50 - 4;
    CHECK(e.s.equity == eq1);
    const float r2 = e.step(kLong, kMarket);  // hold, close 99: -100
    const double eq2 = eq1 - 100;
    const double dd1 = (100000.0 - eq1) / 100000.0, dd2 = (100000.0 - eq2) / 100000.0;
    CHECK(r2 == Approx((eq2 - eq1) / 100000.0 - 2.0 * (dd2 - dd1)));
    const float r3 = e.step(kLong, kMarket);  // close 100: +100, drawdown shrinks: no penalty
    CHECK(r3 == Approx(100.0 / 100000.0));
}

TEST_CASE("VecEnv resets finished episodes at a fresh start and reports the terminal state", "[env]") {
    fh::ops::CpuDevice ops;
    const auto market = fh::test::random_walk_market(400, 3, 4);
    DeviceMarket dm(ops, market);
    EnvParams p = es_params(4);
    p.episode_length = 5;
    VecEnv env(ops, dm, Split::train, p, 8);
    env.reset_all();
    auto actions = ops.alloc<int>(8);
    for (int step = 1; step <= 12; ++step) {
        fh::ops::run(ops,
                     fh::ops::EnvRandomActions{actions.view(), 99, static_cast<std::uint64_t>(step), num_actions(p)});
        env.step(actions.cview());
        const auto done = ops.to_host(env.done());
        const auto st = ops.to_host(env.state());
        const auto next = ops.to_host(env.next_states());
        const auto states = ops.to_host(env.states());
        for (int e = 0; e < 8; ++e) {
            INFO("step " << step << " env " << e);
            if (step % 5 == 0) {
                CHECK(done[e] == kTruncated);
                CHECK(st[e].steps == 0);  // already reset
                CHECK(st[e].equity == p.initial_equity);
                CHECK(st[e].episode == static_cast<unsigned>(step / 5 + 1));
                // time-left feature: 0 in the terminal observation, 1 after the reset
                CHECK(next[e * p.state_dim + 4 + 6] == 0.0f);
                CHECK(states[e * p.state_dim + 4 + 6] == 1.0f);
            } else {
                CHECK(done[e] == kRunning);
                CHECK(st[e].steps == step % 5);
            }
            // Episodes start only at valid bars of the train split, after the warm-up.
            CHECK(st[e].start_bar >= static_cast<int>(market.warmup_bars));
            CHECK(st[e].start_bar + 1 < static_cast<int>(market.train.end));
        }
    }
}

TEST_CASE("episode starts respect warm-up, splits and segment (contract) boundaries", "[env]") {
    auto market = fh::test::random_walk_market(100, 1, 4, {0, 40, 70});
    market.warmup_bars = 5;
    const auto st = episode_starts(market.bars, market.warmup_bars, {30, 80});
    REQUIRE_FALSE(st.starts.empty());
    for (std::size_t i = 0; i < st.starts.size(); ++i) {
        const int t = st.starts[i];
        const int end = st.ends[i];
        INFO("start " << t << " end " << end);
        CHECK(t >= 30);
        CHECK(t + 1 < end);
        const bool first_segment = t < 40, second = t >= 40 && t < 70;
        if (first_segment) CHECK(end == 40);
        if (second) {
            CHECK(t >= 45);
            CHECK(end == 70);
        }
        if (t >= 70) {
            CHECK(t >= 75);
            CHECK(end == 80);
        }
    }
    CHECK(st.starts.front() == 30);
    CHECK(st.starts.back() == 78);
}

TEST_CASE("accounting invariants hold over long random action sequences", "[env]") {
    fh::ops::CpuDevice ops;
    const auto market = fh::test::random_walk_market(3000, 17, 6);
    DeviceMarket dm(ops, market);
    EnvParams p = es_params(6, 7, 5);
    p.episode_length = 200;
    p.drawdown_penalty = 0.5;
    const int n = 64;
    VecEnv env(ops, dm, Split::train, p, n);
    env.reset_all();
    auto actions = ops.alloc<int>(n);
    long fills = 0, limit_fills = 0;
    for (int step = 0; step < 2000; ++step) {
        fh::ops::run(ops,
                     fh::ops::EnvRandomActions{actions.view(), 5, static_cast<std::uint64_t>(step), num_actions(p)});
        env.step(actions.cview());
        const auto info = ops.to_host(env.info());
        for (int e = 0; e < n; ++e) {
            const StepInfo& f = info[e];
            const int bar = f.bar;
            if (f.filled_contracts != 0) {
                ++fills;
                const double lo = market.bars.low[bar], hi = market.bars.high[bar];
                if (f.order_type == kMarket) {
                    const double slip = (f.filled_contracts > 0 ? 1 : -1) * p.slippage_ticks * p.tick_size;
                    REQUIRE(f.fill_price == market.bars.open[bar] + slip);
                } else {
                    ++limit_fills;
                    REQUIRE(f.fill_price >= lo);
                    REQUIRE(f.fill_price <= hi);
                }
                REQUIRE(f.commission == std::abs(f.filled_contracts) * p.commission);
            }
        }
        // equity = initial + realized + unrealized - fees after every step (environments whose
        // episode just ended were already reset: their invariant is trivially at its start).
        const auto after = ops.to_host(env.state());
        for (int e = 0; e < n; ++e) {
            const EnvState& s = after[e];
            if (s.steps == 0) continue;
            const double unrealized = s.position * (market.bars.close[s.t] - s.avg_entry_price) * p.multiplier;
            const double expected = p.initial_equity + s.realized_pnl + unrealized - s.fees;
            REQUIRE(s.equity == Approx(expected).epsilon(1e-9));
            REQUIRE(info[e].equity == s.equity);
            REQUIRE(s.peak_equity >= s.equity);
            REQUIRE(std::abs(s.position) <= p.max_contracts);
        }
    }
    CHECK(fills > 10000);
    CHECK(limit_fills > 1000);
}

TEST_CASE("random actions are a pure function of (seed, env, step)", "[env]") {
    fh::ops::CpuDevice ops;
    auto a = ops.alloc<int>(1000);
    fh::ops::run(ops, fh::ops::EnvRandomActions{a.view(), 7, 3, 9});
    const auto x = ops.to_host(a.cview());
    fh::ops::run(ops, fh::ops::EnvRandomActions{a.view(), 7, 3, 9});
    CHECK(ops.to_host(a.cview()) == x);
    std::vector<int> hist(9, 0);
    for (int v : x) {
        REQUIRE(v >= 0);
        REQUIRE(v < 9);
        ++hist[v];
    }
    for (int h : hist) CHECK(h > 70);  // ~111 each
    fh::ops::run(ops, fh::ops::EnvRandomActions{a.view(), 7, 4, 9});
    CHECK(ops.to_host(a.cview()) != x);
}
