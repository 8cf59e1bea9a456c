/// @file test_metrics.cpp
/// @brief [eval] The metrics of docs/metrics.md against values computed by hand on small
///        equity curves (flat, monotone, one drawdown, all losses, an open winner).
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "backtest/backtest.hpp"

using fh::backtest::Metrics;
using Approx = Catch::Detail::Approx;

namespace {

fh::backtest::BarRecord bar(double equity, int position, int fill = 0, double price = 0.0, double commission = 0.0,
                            int action = 0) {
    fh::backtest::BarRecord r{};
    r.equity = equity;
    r.position = position;
    r.filled_contracts = fill;
    r.fill_price = fill ? price : 0.0;
    r.commission = commission;
    r.order_type = fill ? fh::env::kMarket : fh::env::kNoOrder;
    r.action = action;
    return r;
}

}  // namespace

TEST_CASE("metrics of a flat curve are all zero", "[eval]") {
    const Metrics m = fh::backtest::curve_metrics({100, 100, 100, 100}, 252);
    CHECK(m.total_return == 0);
    CHECK(m.annual_return == 0);
    CHECK(m.sharpe == 0);
    CHECK(m.sortino == 0);
    CHECK(m.max_drawdown == 0);
    CHECK(m.calmar == 0);
    CHECK(m.trades == 0);
    CHECK(m.win_rate == 0);
    CHECK(m.profit_factor == 0);
    CHECK(m.exposure == 0);
    CHECK(m.turnover == 0);
}

TEST_CASE("metrics of a monotone curve", "[eval]") {
    // returns 0.1, 0.1: no dispersion (Sharpe 0 by convention), no downside, no drawdown.
    // A gain without downside or drawdown: Sortino and Calmar are +infinity (JSON null), so early
    // stopping on val_sortino never prefers a losing run to it (0 used to rank below every gain).
    const Metrics m = fh::backtest::curve_metrics({100, 110, 121}, 2);
    CHECK(m.total_return == Approx(0.21).epsilon(1e-12));
    CHECK(m.annual_return == Approx(0.21).epsilon(1e-12));  // 1.21^(2/2) - 1
    CHECK(m.sharpe == 0);
    CHECK(m.sortino == std::numeric_limits<double>::infinity());
    CHECK(m.max_drawdown == 0);
    CHECK(m.calmar == std::numeric_limits<double>::infinity());
    const auto json = fh::backtest::metrics_json(m);
    CHECK(json.find("\"sortino\":null") != std::string::npos);
    CHECK(json.find("\"calmar\":null") != std::string::npos);
    // a losing curve always has a downside and a drawdown: finite, negative
    const Metrics loss = fh::backtest::curve_metrics({100, 99, 98}, 2);
    CHECK(loss.sortino < 0);
    CHECK(loss.calmar < 0);
    CHECK(std::isfinite(loss.sortino));
}

TEST_CASE("metrics of a curve with one drawdown", "[eval]") {
    // returns 0.2, -0.25, 0.2; mean 0.05; sample variance 0.135 / 2; downside 0.0625 / 3.
    const Metrics m = fh::backtest::curve_metrics({100, 120, 90, 108}, 3);
    CHECK(m.total_return == Approx(0.08).epsilon(1e-12));
    CHECK(m.annual_return == Approx(0.08).epsilon(1e-12));
    CHECK(m.sharpe == Approx(0.05 / std::sqrt(0.0675) * std::sqrt(3.0)).epsilon(1e-12));
    CHECK(m.sharpe == Approx(1.0 / 3.0).epsilon(1e-12));
    CHECK(m.sortino == Approx(0.6).epsilon(1e-12));
    CHECK(m.max_drawdown == Approx(0.25).epsilon(1e-12));
    CHECK(m.calmar == Approx(0.32).epsilon(1e-12));
    CHECK(m.exposure == 0);
}

TEST_CASE("metrics of two losing round trips", "[eval]") {
    // closes 100, 100, 99, 100, 98; multiplier 1; $1 a contract a side; initial 1000.
    // buy 1 @100 -> sell 1 @99 (P&L -1 - 2 = -3); buy 1 @100 -> sell 1 @98 (-2 - 2 = -4).
    const std::vector<double> close{100, 100, 99, 100, 98};
    const std::vector<fh::backtest::BarRecord> r{bar(1000, 0, 0, 0, 0, -1), bar(999, 1, 1, 100, 1, 2),
                                                 bar(997, 0, -1, 99, 1, 1), bar(996, 1, 1, 100, 1, 2),
                                                 bar(993, 0, -1, 98, 1, 1)};
    const Metrics m = fh::backtest::compute_metrics(r, {{0, 5, 0}}, {5}, close, {1.0, 1000.0, 4.0, 3});
    CHECK(m.total_return == Approx(-0.007).epsilon(1e-12));
    CHECK(m.trades == 2);
    CHECK(m.win_rate == 0);
    CHECK(m.profit_factor == 0);  // no gross profit
    CHECK(m.exposure == 0.5);     // long at 2 of 4 closes
    CHECK(m.turnover == Approx((100 + 99 + 100 + 98) / 1000.0 * 4.0 / 4.0).epsilon(1e-12));
    CHECK(m.max_drawdown == Approx(0.007).epsilon(1e-12));
    CHECK(m.sharpe < 0);
    CHECK(m.sortino < 0);
    REQUIRE(m.action_histogram.size() == 3);
    CHECK(m.action_histogram[0] == 0);
    CHECK(m.action_histogram[1] == 2);
    CHECK(m.action_histogram[2] == 2);
}

TEST_CASE("a position open at the segment end is a trade closed at the last close", "[eval]") {
    // buy 2 @100 ($1 a side), never sold: marked at the last close 103 it made 2 * 3 - 2 = 4.
    // One winner and no loser: profit factor +infinity (null in JSON).
    const std::vector<double> close{100, 101, 103};
    const std::vector<fh::backtest::BarRecord> r{bar(1000, 0, 0, 0, 0, -1), bar(1000, 2, 2, 100, 2, 2),
                                                 bar(1004, 2, 0, 0, 0, 2)};
    const Metrics m = fh::backtest::compute_metrics(r, {{0, 3, 0}}, {3}, close, {1.0, 1000.0, 252.0, 3});
    CHECK(m.trades == 1);
    CHECK(m.win_rate == 1);
    CHECK(m.profit_factor == std::numeric_limits<double>::infinity());
    CHECK(m.exposure == 1);
    CHECK(fh::backtest::metrics_json(m).find("\"profit_factor\":null") != std::string::npos);
}

TEST_CASE("a reversal closes one trade and opens the next", "[eval]") {
    // long 1 @100, sell 2 @104 (closes +4 - 1 - 1, opens short 1 with $1), cover @106 (-2 - 1 - 1).
    const std::vector<double> close{100, 100, 104, 106};
    const std::vector<fh::backtest::BarRecord> r{bar(1000, 0, 0, 0, 0, -1), bar(999, 1, 1, 100, 1, 2),
                                                 bar(1001, -1, -2, 104, 2, 0), bar(998, 0, 1, 106, 1, 1)};
    const Metrics m = fh::backtest::compute_metrics(r, {{0, 4, 0}}, {4}, close, {1.0, 1000.0, 252.0, 3});
    CHECK(m.trades == 2);
    CHECK(m.win_rate == 0.5);
    CHECK(m.profit_factor == Approx(2.0 / 4.0).epsilon(1e-12));
    CHECK(m.total_return == Approx(-0.002).epsilon(1e-12));
}

TEST_CASE("a break-even trade is neither a win nor a loss, whatever the rounding", "[eval]") {
    // buy 1 @4000.2, sell 1 @4000.3, multiplier 50, $2.5 a side: 0.1 * 50 - 5 = 0 exactly, but
    // +1.8e-11 in doubles (4000.3 - 4000.2 is not 0.1), which used to count as a win.
    const auto trade = [](double buy, double sell) {
        const std::vector<fh::backtest::BarRecord> r{bar(100000, 0, 0, 0, 0, -1), bar(99997.5, 1, 1, buy, 2.5, 2),
                                                     bar(100000, 0, -1, sell, 2.5, 1)};
        return fh::backtest::compute_metrics(r, {{0, 3, 0}}, {3}, {buy, buy, sell}, {50.0, 100000.0, 252.0, 3});
    };
    REQUIRE(-2.5 + ((4000.3 - 4000.2) * 50 - 2.5) > 0.0);  // the rounding noise the tolerance is for
    Metrics m = trade(4000.2, 4000.3);
    CHECK(m.trades == 1);
    CHECK(m.win_rate == 0);       // not a win
    CHECK(m.profit_factor == 0);  // not a loss either: no gross profit, no gross loss
    m = trade(4000.1, 4000.2);    // the same break-even, rounded the other way (-4.5e-12)
    CHECK(m.win_rate == 0);
    CHECK(m.profit_factor == 0);
    // a quarter point more is a win, a quarter point less a loss
    CHECK(trade(4000.2, 4000.55).win_rate == 1);
    CHECK(trade(4000.2, 4000.05).profit_factor == 0);
    CHECK(trade(4000.2, 4000.05).trades == 1);
}
