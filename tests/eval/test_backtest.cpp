/// @file test_backtest.cpp
/// @brief [eval] A backtest on a small random-walk market: equity.csv and trades.csv alone (plus
///        the profile's multiplier, initial equity and bars_per_year) recompute the equity bar by
///        bar and every metric, independently of the evaluator's code; every fill follows the
///        order rules of docs/environment.md computed from the bars (not from the fills' own
///        prices); segments = k equals k separate sequential passes.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "backtest/backtest.hpp"
#include "device/cpu_device.hpp"
#include "support/backtest_records.hpp"
#include "support/market_fixture.hpp"
#include "abi/env.h"

using namespace fh;
using Approx = Catch::Detail::Approx;

namespace {

std::vector<std::vector<std::string>> read_csv(const std::string& path, std::string& header) {
    std::ifstream in(path);
    REQUIRE(in.good());
    std::getline(in, header);
    std::vector<std::vector<std::string>> rows;
    std::string line;
    while (std::getline(in, line)) {
        std::vector<std::string> cells;
        std::stringstream ss(line);
        std::string cell;
        while (std::getline(ss, cell, ',')) cells.push_back(cell);
        rows.push_back(cells);
    }
    return rows;
}

/// A policy of the state alone: the same state gives the same action on any segment.
backtest::Policy state_policy(ops::Device& ops, int num_actions, int state_dim) {
    return [&ops, num_actions, state_dim](ops::View<int> actions, ops::View<const float> states, int n) {
        const auto s = ops.to_host(states);
        std::vector<int> a(static_cast<std::size_t>(n));
        for (int i = 0; i < n; ++i) {
            const float* row = s.data() + static_cast<std::size_t>(i) * state_dim;
            const double v = std::abs(row[0]) * 7.0 + std::abs(row[1]) * 3.0 + row[state_dim - 8] * 2.0;
            a[static_cast<std::size_t>(i)] = static_cast<int>(std::floor(v * 10.0)) % num_actions;
        }
        ops.upload<int>(actions, a);
    };
}

/// Random actions from the counter RNG (a function of segment index and step).
backtest::Policy random_policy(ops::Device& ops, int num_actions) {
    auto step = std::make_shared<std::uint64_t>(0);
    return [&ops, num_actions, step](ops::View<int> actions, ops::View<const float>, int) {
        fh::ops::run(ops, fh::ops::EnvRandomActions{actions, 99, (*step)++, num_actions});
    };
}

/// The metrics of docs/metrics.md recomputed from the CSVs only (written from the docs).
struct Recomputed {
    double total_return = 0, annual_return = 0, sharpe = 0, sortino = 0, max_drawdown = 0, calmar = 0;
    long long trades = 0, wins = 0;
    double gross_profit = 0, gross_loss = 0, exposure = 0, turnover = 0;
    std::vector<long long> histogram;
};

}  // namespace

TEST_CASE("equity.csv and trades.csv recompute the equity and every metric", "[eval]") {
    ops::CpuDevice cpu;
    // Contract boundary inside the test split (bars 2400..3001), warm-up 5 bars.
    auto md = test::random_walk_market(3001, 7, 6, {0, 2700});
    md.bars_per_year = 252.0 * 78;
    auto p = test::es_params(6, 5, 3);
    p.bankruptcy_fraction = 0.0;
    env::DeviceMarket market(cpu, md);
    const int A = env::num_actions(p);
    const auto segments = GENERATE(1, 3);
    const auto report = backtest::backtest(cpu, market, md, env::Split::test, p, random_policy(cpu, A), segments, true);
    REQUIRE(report.segments.size() >= 2);  // the contract boundary cuts the split

    const auto dir = std::filesystem::temp_directory_path() / ("fh_eval_csv_" + std::to_string(segments));
    std::filesystem::create_directories(dir);
    backtest::write_equity_csv((dir / "equity.csv").string(), report, md);
    backtest::write_trades_csv((dir / "trades.csv").string(), report, md);
    std::string eh, th;
    const auto eq = read_csv((dir / "equity.csv").string(), eh);
    const auto tr = read_csv((dir / "trades.csv").string(), th);
    CHECK(eh == "segment,bar,time,close,action,position,equity,drawdown,buy_and_hold_equity");
    CHECK(th == "segment,bar,time,side,contracts,price,order_type,commission");
    REQUIRE(!tr.empty());

    // fills by (segment, bar)
    struct Fill {
        int qty;
        double price, commission;
    };
    std::map<std::pair<int, long>, Fill> fills;
    for (const auto& r : tr) {
        REQUIRE(r.size() == 8);
        const int q = std::stoi(r[4]) * (r[3] == "buy" ? 1 : -1);
        CHECK((r[6] == "market" || r[6] == "passive_limit" || r[6] == "far_limit"));
        fills[{std::stoi(r[0]), std::stol(r[1])}] = Fill{q, std::stod(r[5]), std::stod(r[7])};
    }

    const double mult = p.multiplier, E0 = p.initial_equity, bpy = md.bars_per_year;
    Recomputed rc;
    rc.histogram.assign(static_cast<std::size_t>(A), 0);
    std::vector<double> returns;
    double growth = 1, peak = 1, traded = 0;
    long long exposed = 0;
    int seg = -1, pos = 0;
    double prev_close = 0, prev_equity = 0, trade_cash = 0, seg_peak = 0;
    auto close_at_end = [&](double last_close) {
        if (pos == 0) return;
        const double pnl = trade_cash + pos * last_close * mult;
        rc.trades += 1;
        if (pnl > 0) {
            rc.wins += 1;
            rc.gross_profit += pnl;
        } else
            rc.gross_loss -= pnl;
    };
    double last_close = 0;
    double hold_growth = 1, prev_hold = 0;  // buy-and-hold's compounded curve from its column
    for (const auto& r : eq) {
        REQUIRE(r.size() == 9);
        const double hold = std::stod(r[8]);
        if (std::stoi(r[0]) != seg)
            CHECK(hold == E0);
        else
            hold_growth *= hold / prev_hold;
        prev_hold = hold;
        const int s = std::stoi(r[0]);
        const long bar = std::stol(r[1]);
        const double close = std::stod(r[3]);
        const int action = std::stoi(r[4]);
        const int position = std::stoi(r[5]);
        const double equity = std::stod(r[6]);
        const double drawdown = std::stod(r[7]);
        CHECK(close == md.bars.close[static_cast<std::size_t>(bar)]);
        if (s != seg) {  // a segment starts flat at the initial equity
            close_at_end(last_close);
            seg = s;
            pos = 0;
            trade_cash = 0;
            CHECK(equity == E0);
            CHECK(position == 0);
            CHECK(action == -1);
            CHECK(fills.count({s, bar}) == 0);
            prev_close = close;
            prev_equity = equity;
            seg_peak = equity;
            last_close = close;
            continue;
        }
        // equity bar by bar: held position earns the close change, the fill earns close - price
        double pnl = pos * (close - prev_close);
        double commission = 0;
        const auto f = fills.find({s, bar});
        if (f != fills.end()) {
            const Fill& fl = f->second;
            pnl += fl.qty * (close - fl.price);
            commission = fl.commission;
            traded += std::abs(fl.qty) * fl.price * mult;
            // trade accounting by cash flows; a reversal splits the fill pro rata
            const int q = pos, d = fl.qty;
            if (q != 0 && (q > 0) != (d > 0) && std::abs(d) >= std::abs(q)) {
                const double share = fl.commission * std::abs(q) / std::abs(d);
                const double closing = trade_cash + q * fl.price * mult - share;  // -(-q) * price
                rc.trades += 1;
                if (closing > 0) {
                    rc.wins += 1;
                    rc.gross_profit += closing;
                } else
                    rc.gross_loss -= closing;
                trade_cash = -(d + q) * fl.price * mult - (fl.commission - share);
            } else {
                trade_cash += -d * fl.price * mult - fl.commission;
            }
            pos += d;
        }
        const double expected = prev_equity + pnl * mult - commission;
        REQUIRE(equity == Approx(expected).epsilon(1e-12));
        CHECK(position == pos);
        seg_peak = std::max(seg_peak, equity);
        CHECK(drawdown == Approx((seg_peak - equity) / seg_peak).margin(1e-12));
        REQUIRE(action >= 0);
        REQUIRE(action < A);
        rc.histogram[static_cast<std::size_t>(action)] += 1;
        const double ret = equity / prev_equity - 1.0;
        returns.push_back(ret);
        growth *= 1 + ret;
        peak = std::max(peak, growth);
        rc.max_drawdown = std::max(rc.max_drawdown, (peak - growth) / peak);
        exposed += pos != 0;
        prev_close = close;
        prev_equity = equity;
        last_close = close;
    }
    close_at_end(last_close);

    const double n = static_cast<double>(returns.size());
    double mean = 0;
    for (double r : returns) mean += r;
    mean /= n;
    double var = 0, down = 0;
    for (double r : returns) {
        var += (r - mean) * (r - mean);
        if (r < 0) down += r * r;
    }
    const double sd = std::sqrt(var / (n - 1)), dd = std::sqrt(down / n);
    rc.total_return = growth - 1;
    rc.annual_return = std::pow(growth, bpy / n) - 1;
    rc.sharpe = mean / sd * std::sqrt(bpy);
    rc.sortino = mean / dd * std::sqrt(bpy);
    rc.calmar = rc.annual_return / rc.max_drawdown;
    rc.exposure = exposed / n;
    rc.turnover = traded / E0 * bpy / n;

    const auto& m = report.strategy;
    INFO(backtest::metrics_json(m));
    CHECK(report.buy_and_hold.total_return == Approx(hold_growth - 1).epsilon(1e-9));
    CHECK(m.total_return == Approx(rc.total_return).epsilon(1e-9));
    CHECK(m.annual_return == Approx(rc.annual_return).epsilon(1e-9));
    CHECK(m.sharpe == Approx(rc.sharpe).epsilon(1e-9));
    CHECK(m.sortino == Approx(rc.sortino).epsilon(1e-9));
    CHECK(m.max_drawdown == Approx(rc.max_drawdown).epsilon(1e-9));
    CHECK(m.calmar == Approx(rc.calmar).epsilon(1e-9));
    CHECK(m.trades == rc.trades);
    CHECK(m.win_rate == Approx(static_cast<double>(rc.wins) / rc.trades).epsilon(1e-12));
    CHECK(m.profit_factor == Approx(rc.gross_profit / rc.gross_loss).epsilon(1e-9));
    CHECK(m.exposure == Approx(rc.exposure).epsilon(1e-12));
    CHECK(m.turnover == Approx(rc.turnover).epsilon(1e-9));
    CHECK(m.action_histogram == rc.histogram);
    CHECK(rc.trades > 10);
    std::filesystem::remove_all(dir);
}

namespace {

/// Contracts of position level `level` (docs/environment.md, "Target position"): level i of L is
/// k = i - (L-1)/2, the target k x max_contracts / ((L-1)/2) rounded half away from zero.
int target_of_level(int level, const env::EnvParams& p) {
    const int half = (p.position_levels - 1) / 2;
    const double t = static_cast<double>(level - half) * p.max_contracts / half;
    return static_cast<int>(t < 0 ? -std::floor(-t + 0.5) : std::floor(t + 0.5));
}

}  // namespace

// The fills against the rules of docs/environment.md ("Actions"), computed from the bars and the
// action of the bar before, not from the fills themselves: whether an order fills, its side,
// size, type, price and commission.
TEST_CASE("every fill of trades.csv follows docs/environment.md's order rules, from the bars", "[eval]") {
    ops::CpuDevice cpu;
    auto md = test::random_walk_market(3001, 7, 6, {0, 2700});
    md.bars_per_year = 252.0 * 78;
    auto p = test::es_params(6, 5, 3);  // levels -3, -2, 0, 2, 3 (1.5 rounds away from zero)
    p.bankruptcy_fraction = 0.0;
    p.limit_atr_mult = 0.3;  // far limits that fill on some bars and not on others
    env::DeviceMarket market(cpu, md);
    const int A = env::num_actions(p);
    const auto report = backtest::backtest(cpu, market, md, env::Split::test, p, random_policy(cpu, A), 1, true);
    REQUIRE(report.segments.size() == 2);  // the contract boundary at bar 2700 cuts the test split
    const auto dir = std::filesystem::temp_directory_path() / "fh_eval_fill_rules";
    std::filesystem::create_directories(dir);
    backtest::write_equity_csv((dir / "equity.csv").string(), report, md);
    backtest::write_trades_csv((dir / "trades.csv").string(), report, md);
    std::string eh, th;
    const auto eq = read_csv((dir / "equity.csv").string(), eh);
    const auto tr = read_csv((dir / "trades.csv").string(), th);
    std::filesystem::remove_all(dir);
    struct Row {
        int qty;
        double price, commission;
        std::string type;
    };
    std::map<std::pair<int, long>, Row> fills;
    for (const auto& r : tr) {
        REQUIRE(r.size() == 8);
        fills[{std::stoi(r[0]), std::stol(r[1])}] = Row{std::stoi(r[4]) * (r[3] == "buy"    ? 1
                                                                           : r[3] == "sell" ? -1
                                                                                            : 0),
                                                        std::stod(r[5]), std::stod(r[7]), r[6]};
    }
    const char* const kType[] = {"market", "passive_limit", "far_limit"};
    const auto& bars = md.bars;
    long long seen[3][2] = {};  // [urgency][filled]
    int seg = -1, pos = 0;
    long prev_bar = -1;
    std::size_t matched = 0;
    for (const auto& r : eq) {
        const int s = std::stoi(r[0]);
        const long bar = std::stol(r[1]);
        const int action = std::stoi(r[4]);
        const auto f = fills.find({s, bar});
        if (s != seg) {  // a segment starts flat, with no order
            seg = s;
            pos = 0;
            CHECK(f == fills.end());
            // docs/metrics.md: a piece starts after the feature warm-up of its contract (bars
            // 2400..2700, then 2700 + 5 after the boundary).
            CHECK(bar == (s == 0 ? 2400L : 2705L));
        } else {
            REQUIRE(bar == prev_bar + 1);
            // equity.csv's action on bar t1 is the one decided at the close of t0 = t1 - 1, whose
            // order executes during t1.
            INFO("segment " << s << " bar " << bar << ": action " << action << " at position " << pos);
            REQUIRE(action >= 0);
            const auto t0 = static_cast<std::size_t>(prev_bar), t1 = static_cast<std::size_t>(bar);
            const int urgency = action % p.urgency_levels;
            const int d = target_of_level(action / p.urgency_levels, p) - pos;
            bool filled = false;
            double price = 0;
            if (d != 0 && urgency == 0) {  // market: open(t+1) +/- slippage, against the trader
                filled = true;
                price = bars.open[t1] + (d > 0 ? 1 : -1) * p.slippage_ticks * p.tick_size;
            } else if (d != 0) {  // limits: close(t) -/+ offset, filled when the bar reaches it
                const double offset = urgency == 1 ? p.limit_offset_ticks * p.tick_size : p.limit_atr_mult * md.atr[t0];
                const double limit = d > 0 ? bars.close[t0] - offset : bars.close[t0] + offset;
                filled = d > 0 ? bars.low[t1] <= limit : bars.high[t1] >= limit;
                price = d > 0 ? std::min(limit, bars.open[t1])
                              : std::max(limit, bars.open[t1]);  // never better than the open
                if (filled) {
                    CHECK(price >= bars.low[t1]);
                    CHECK(price <= bars.high[t1]);
                }
            }
            if (d != 0) ++seen[urgency][filled ? 1 : 0];
            CHECK(filled == (f != fills.end()));
            if (filled && f != fills.end()) {
                ++matched;
                CHECK(f->second.qty == d);  // all or nothing, the whole difference
                CHECK(f->second.type == kType[urgency]);
                CHECK(f->second.price == price);
                CHECK(f->second.commission == std::abs(d) * p.commission);
                pos += d;
            }
            CHECK(std::stoi(r[5]) == pos);
        }
        prev_bar = bar;
    }
    CHECK(matched == fills.size());
    // The random policy exercised every rule: market orders, limits filled and limits missed.
    CHECK(seen[0][1] > 10);
    CHECK(seen[0][0] == 0);
    for (int u : {1, 2}) {
        INFO("urgency " << u);
        CHECK(seen[u][1] > 10);
        CHECK(seen[u][0] > 10);
    }
}

TEST_CASE("buy-and-hold: one market buy per segment, held to the end", "[eval]") {
    ops::CpuDevice cpu;
    auto md = test::random_walk_market(2000, 11, 6, {0});
    md.bars_per_year = 1000;
    auto p = test::es_params(6, 3, 2);
    p.bankruptcy_fraction = 0.0;
    env::DeviceMarket market(cpu, md);
    const int hold = (p.position_levels - 1) * p.urgency_levels;
    const auto hold_vec = cpu.from_host<int>(std::vector<int>(1, hold));
    const backtest::Policy hold_policy = [&](ops::View<int> a, ops::View<const float>, int) {
        cpu.copy_raw(a, hold_vec.cview());
    };
    const auto r = backtest::backtest(cpu, market, md, env::Split::val, p, hold_policy, 1, true);
    // the strategy "always long max" is buy-and-hold itself
    CHECK(backtest::metrics_json(r.strategy) == backtest::metrics_json(r.buy_and_hold));
    CHECK(r.buy_and_hold.trades == 1);
    CHECK(r.buy_and_hold.exposure == 1.0);
    // total return = (close_last - fill) * 2 * 50 - 2 * 2 over the initial equity
    const auto& seg = r.segments.at(0);
    const double fill = md.bars.open[static_cast<std::size_t>(seg.start + 1)] + p.tick_size;
    const double expected = ((md.bars.close[static_cast<std::size_t>(seg.end - 1)] - fill) * 2 * 50 - 4) / 1e5;
    CHECK(r.buy_and_hold.total_return == Approx(expected).epsilon(1e-9));
}

TEST_CASE("segments = k equals k sequential passes over the same bars", "[eval]") {
    ops::CpuDevice cpu;
    auto md = test::random_walk_market(2500, 5, 6, {0, 2150});
    md.bars_per_year = 5000;
    auto p = test::es_params(6, 5, 3);
    p.bankruptcy_fraction = 0.0;
    env::DeviceMarket market(cpu, md);
    const int A = env::num_actions(p);
    const auto k = backtest::backtest(cpu, market, md, env::Split::test, p, state_policy(cpu, A, p.state_dim), 4, true);
    REQUIRE(k.segments.size() == 5);  // 4 parts, one cut again at the contract boundary
    std::size_t bars = 0;
    for (const auto& s : k.segments) bars += static_cast<std::size_t>(s.end - s.start);
    const auto one =
        backtest::backtest(cpu, market, md, env::Split::test, p, state_policy(cpu, A, p.state_dim), 1, true);
    REQUIRE(one.segments.size() == 2);  // the contract boundary only
    for (std::size_t s = 0; s < k.segments.size(); ++s) {
        const auto& seg = k.segments[s];
        auto sub = md;
        sub.test = {static_cast<std::size_t>(seg.start), static_cast<std::size_t>(seg.end)};
        env::DeviceMarket sub_market(cpu, sub);
        const auto single =
            backtest::backtest(cpu, sub_market, sub, env::Split::test, p, state_policy(cpu, A, p.state_dim), 1, true);
        REQUIRE(single.segments.size() == 1);
        REQUIRE(single.segments[0].start == seg.start);
        REQUIRE(single.segment_bars[0] == k.segment_bars[s]);
        for (int i = 0; i < k.segment_bars[s]; ++i) {
            const auto& a = k.records[static_cast<std::size_t>(seg.offset + i)];
            const auto& b = single.records[static_cast<std::size_t>(i)];
            REQUIRE(a.equity == b.equity);
            REQUIRE(a.position == b.position);
            REQUIRE(a.action == b.action);
        }
    }
    // the k-run covers the 1-run's bars exactly
    std::size_t one_bars = 0;
    for (const auto& s : one.segments) one_bars += static_cast<std::size_t>(s.end - s.start);
    CHECK(bars == one_bars);
}

// The captured path runs a backtest's bars kBacktestBarsPerSequence to a sequence (the first alone, the remainder
// as a shorter sequence): every count of bars left over must trade every bar exactly as the
// op-by-op path (on the CPU the sequences run their ops directly, so this checks the bar count).
TEST_CASE("a backtest whose steps are captured trades every bar as the op-by-op one, whatever the bars left over",
          "[eval]") {
    ops::CpuDevice cpu;
    auto md = test::random_walk_market(2500, 5, 6, {0, 2150});
    md.bars_per_year = 5000;
    auto p = test::es_params(6, 5, 3);
    env::DeviceMarket market(cpu, md);
    const int A = env::num_actions(p);
    std::vector<bool> residues(backtest::kBacktestBarsPerSequence, false);
    for (int segments = 1; segments <= 12; ++segments) {
        INFO("segments " << segments);
        const auto direct =
            backtest::backtest(cpu, market, md, env::Split::test, p, state_policy(cpu, A, p.state_dim), segments, true);
        const auto captured = backtest::backtest(cpu, market, md, env::Split::test, p,
                                                 state_policy(cpu, A, p.state_dim), segments, true, true);
        int max_steps = 0;
        for (const auto& s : direct.segments) max_steps = std::max(max_steps, s.end - s.start - 1);
        residues[static_cast<std::size_t>((max_steps - 1) % backtest::kBacktestBarsPerSequence)] = true;
        test::require_same_traded_records(direct, captured);
        REQUIRE(direct.strategy.total_return == captured.strategy.total_return);
        REQUIRE(direct.buy_and_hold.total_return == captured.buy_and_hold.total_return);
    }
    CHECK(std::count(residues.begin(), residues.end(), false) == 0);  // every count of bars left over
}
