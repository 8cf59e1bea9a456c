/// @file backtest.cpp
#include "backtest/backtest.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <stdexcept>
#include <utility>

#include "data/csv_bars.hpp"
#include "io/run_directory.hpp"
#include "util/errors.hpp"
#include "abi/backtest.h"

namespace fh::backtest {

namespace {

data::SplitRange split_range(const data::MarketData& md, env::Split split) {
    return split == env::Split::train ? md.train : split == env::Split::val ? md.val : md.test;
}

Metrics to_metrics(const backtest::MetricsOut& m, std::vector<long long> histogram) {
    Metrics out;
    static_cast<backtest::MetricsOut&>(out) = m;
    out.action_histogram = std::move(histogram);
    return out;
}

/// One policy's pass over the segments: its state, records and per-bar buffers.
struct PolicyRun {
    PolicyRun(ops::Device& ops, const env::EnvParams& params, ops::View<const backtest::Segment> segments,
              std::size_t total_bars, const Policy& policy)
        : state(ops.alloc<backtest::SegmentState>(segments.size())),
          records(ops.alloc<backtest::BarRecord>(total_bars)),
          states(ops.alloc<float>(segments.size() * static_cast<std::size_t>(params.state_dim))),
          actions(ops.alloc<int>(segments.size())),
          policy(policy) {
        fh::ops::run(ops, fh::ops::BacktestReset{state.view(), records.view(), segments, params});
    }
    /// One bar: the observations, the policy's actions, the step.
    void bar(ops::Device& ops, const env::MarketView& market, const env::EnvParams& params,
             ops::View<const backtest::Segment> segments) {
        fh::ops::run(ops, fh::ops::BacktestGather{states.view(), state.cview(), market, params});
        policy(actions.view(), states.cview(), static_cast<int>(segments.size()));
        fh::ops::run(ops,
                     fh::ops::BacktestStep{state.view(), records.view(), segments, actions.cview(), market, params});
    }
    ops::Buffer<backtest::SegmentState> state;
    ops::Buffer<backtest::BarRecord> records;  // the bars of segment s from Segment::offset
    ops::Buffer<float> states;
    ops::Buffer<int> actions;
    const Policy& policy;
};

/// Runs `bar` for every step: the first on its own (a policy sizes its workspace then), the
/// others kBacktestBarsPerSequence at a time as one captured sequence when `capture_steps`
/// (the remainder as another).
void run_bars(ops::Device& ops, int max_steps, bool capture_steps, const std::function<void()>& bar) {
    if (!capture_steps) {
        for (int step = 0; step < max_steps; ++step) bar();
        return;
    }
    if (max_steps > 0) bar();
    const auto bars = [&](int count) {
        for (int i = 0; i < count; ++i) bar();
    };
    ops::OpSequence chunk, rest;
    int left = max_steps - 1;
    for (; left >= kBacktestBarsPerSequence; left -= kBacktestBarsPerSequence)
        ops.run_sequence(chunk, [&] { bars(kBacktestBarsPerSequence); });
    if (left > 0) ops.run_sequence(rest, [&] { bars(left); });
    ops.synchronize();  // the sequences' last launches finish before they are released
}

PolicyRun run_policy(ops::Device& ops, const env::MarketView& market, const env::EnvParams& params,
                     ops::View<const backtest::Segment> segments, std::size_t total_bars, int max_steps,
                     const Policy& policy, bool capture_steps) {
    PolicyRun p(ops, params, segments, total_bars, policy);
    run_bars(ops, max_steps, capture_steps, [&] { p.bar(ops, market, params, segments); });
    return p;
}

/// Two policies' passes side by side, bar by bar: each bar's two chains are branches of a
/// captured sequence (Device::run_concurrently: two streams on the GPU, which overlap; nothing is
/// shared between the passes, so each gives what it gives alone). Both policies capture-safe.
std::pair<PolicyRun, PolicyRun> run_policies(ops::Device& ops, const env::MarketView& market,
                                             const env::EnvParams& params, ops::View<const backtest::Segment> segments,
                                             std::size_t total_bars, int max_steps, const Policy& first,
                                             const Policy& second) {
    PolicyRun a(ops, params, segments, total_bars, first), b(ops, params, segments, total_bars, second);
    run_bars(ops, max_steps, true, [&] {
        ops.run_concurrently([&] { a.bar(ops, market, params, segments); },
                             [&] { b.bar(ops, market, params, segments); });
    });
    return {std::move(a), std::move(b)};
}

Metrics device_metrics(ops::Device& ops, const PolicyRun& run, ops::View<const backtest::Segment> segments,
                       const env::MarketView& market, const backtest::MetricsParams& mp) {
    auto out = ops.alloc<backtest::MetricsOut>(1);
    auto histogram = ops.alloc<long long>(static_cast<std::size_t>(mp.num_actions));
    fh::ops::run(ops, fh::ops::BacktestMetrics{out.view(), histogram.view(), run.records.cview(), run.state.cview(),
                                               segments, market, mp});
    const auto m = ops.to_host(out.cview());
    return to_metrics(m[0], ops.to_host(histogram.cview()));
}

}  // namespace

std::vector<backtest::Segment> backtest_segments(const data::MarketData& md, data::SplitRange split, int segments) {
    if (segments < 1) throw std::invalid_argument(fmt::format("backtest: segments must be >= 1, got {}", segments));
    const auto& b = md.bars;
    const std::size_t end = std::min(split.end, b.size());
    const std::size_t begin = std::min(split.begin, end);
    const std::size_t len = end - begin;
    std::vector<backtest::Segment> out;
    int offset = 0;
    for (int part = 0; part < segments; ++part) {
        const std::size_t pb = begin + len * static_cast<std::size_t>(part) / static_cast<std::size_t>(segments);
        const std::size_t pe = begin + len * static_cast<std::size_t>(part + 1) / static_cast<std::size_t>(segments);
        for (std::size_t k = 0; k < b.segment_starts.size(); ++k) {
            const std::size_t seg_begin = b.segment_starts[k];
            const std::size_t seg_end = k + 1 < b.segment_starts.size() ? b.segment_starts[k + 1] : b.size();
            const std::size_t first = std::max({seg_begin + md.warmup_bars, pb});
            const std::size_t last = std::min(seg_end, pe);
            if (first + 1 >= last) continue;  // needs a bar to decide at and one to execute in
            out.push_back(backtest::Segment{static_cast<int>(first), static_cast<int>(last), offset});
            offset += static_cast<int>(last - first);
        }
    }
    return out;
}

BacktestReport backtest(ops::Device& ops, const env::DeviceMarket& market, const data::MarketData& md, env::Split split,
                        const env::EnvParams& params, const Policy& policy, int segments, bool keep_records,
                        bool capture_steps) {
    if (!(md.bars_per_year > 0))
        throw std::invalid_argument("backtest: MarketData::bars_per_year must be positive (annualisation)");
    const env::MarketView view = market.view(split);  // throws DataError for an empty split
    const auto segs = backtest_segments(md, split_range(md, split), segments);
    if (segs.empty()) throw DataError("backtest: the split has no bar to trade after the feature warm-up");
    std::size_t total_bars = 0;
    int max_steps = 0;
    for (const auto& s : segs) {
        total_bars += static_cast<std::size_t>(s.end - s.start);
        max_steps = std::max(max_steps, s.end - s.start - 1);
    }
    const auto dev_segs = ops.from_host<backtest::Segment>(segs);
    const backtest::MetricsParams mp{params.multiplier, params.initial_equity, md.bars_per_year,
                                     env::num_actions(params)};

    BacktestReport report;
    report.initial_equity = params.initial_equity;
    report.multiplier = params.multiplier;
    report.bars_per_year = md.bars_per_year;
    report.segments = segs;

    // Buy-and-hold: the extreme long level by a market order at every decision (one fill at the
    // first bar's next open, then the target equals the position: no further orders). It runs
    // beside the policy's pass when the policy can be captured, else after it.
    const int hold = (params.position_levels - 1) * params.urgency_levels;
    const auto hold_actions = ops.from_host<int>(std::vector<int>(segs.size(), hold));
    const Policy buy_and_hold = [&](ops::View<int> actions, ops::View<const float>, int) {
        ops.copy_raw(actions, hold_actions.cview());
    };
    std::pair<PolicyRun, PolicyRun> runs =
        capture_steps ? run_policies(ops, view, params, dev_segs.cview(), total_bars, max_steps, policy, buy_and_hold)
                      : std::pair<PolicyRun, PolicyRun>{
                            run_policy(ops, view, params, dev_segs.cview(), total_bars, max_steps, policy, false),
                            run_policy(ops, view, params, dev_segs.cview(), total_bars, max_steps, buy_and_hold, true)};
    // A pass's metrics, then its bars per segment (when `bars`) and its records (keep_records).
    const auto collect = [&](const PolicyRun& run, Metrics& metrics, std::vector<int>& segment_bars, bool bars,
                             std::vector<backtest::BarRecord>& records) {
        metrics = device_metrics(ops, run, dev_segs.cview(), view, mp);
        if (bars)
            for (const auto& s : ops.to_host(run.state.cview())) segment_bars.push_back(s.bars);
        if (keep_records) records = ops.to_host(run.records.cview());
    };
    collect(runs.first, report.strategy, report.segment_bars, true, report.records);
    collect(runs.second, report.buy_and_hold, report.buy_and_hold_segment_bars, keep_records,
            report.buy_and_hold_records);
    return report;
}

Metrics compute_metrics(const std::vector<backtest::BarRecord>& records, const std::vector<backtest::Segment>& segments,
                        const std::vector<int>& segment_bars, const std::vector<double>& close,
                        const backtest::MetricsParams& params) {
    if (segment_bars.size() != segments.size())
        throw std::invalid_argument("compute_metrics: one bar count per segment");
    std::vector<backtest::SegmentState> state(segments.size());
    for (std::size_t s = 0; s < segments.size(); ++s) {
        if (segment_bars[s] < 1 || segment_bars[s] > segments[s].end - segments[s].start ||
            static_cast<std::size_t>(segments[s].offset + segment_bars[s]) > records.size() ||
            static_cast<std::size_t>(segments[s].end) > close.size())
            throw std::invalid_argument("compute_metrics: a segment lies outside the records or bars");
        state[s].bars = segment_bars[s];
    }
    backtest::MetricsOut out{};
    std::vector<long long> histogram(static_cast<std::size_t>(std::max(0, params.num_actions)));
    backtest::compute_metrics(out, histogram.data(), records.data(), state.data(), segments.data(),
                              static_cast<int>(segments.size()), close.data(), params);
    return to_metrics(out, std::move(histogram));
}

Metrics curve_metrics(const std::vector<double>& equity, double bars_per_year) {
    if (equity.empty()) throw std::invalid_argument("curve_metrics: empty curve");
    backtest::BarRecord flat{};
    flat.order_type = env::kNoOrder;
    flat.action = -1;
    std::vector<backtest::BarRecord> records(equity.size(), flat);
    for (std::size_t i = 0; i < equity.size(); ++i) records[i].equity = equity[i];
    const int n = static_cast<int>(equity.size());
    const std::vector<backtest::Segment> segs{{0, n, 0}};
    const std::vector<double> close(equity.size(), 0.0);
    return compute_metrics(records, segs, {n}, close, backtest::MetricsParams{1.0, equity[0], bars_per_year, 1});
}

void write_equity_csv(const std::string& path, const BacktestReport& r, const data::MarketData& md) {
    std::string out = "segment,bar,time,close,action,position,equity,drawdown,buy_and_hold_equity\n";
    const bool have_hold = r.buy_and_hold_segment_bars.size() == r.segments.size();
    for (std::size_t s = 0; s < r.segments.size(); ++s) {
        const auto& seg = r.segments[s];
        double peak = 0;
        for (int i = 0; i < r.segment_bars[s]; ++i) {
            const auto& rec = r.records.at(static_cast<std::size_t>(seg.offset + i));
            const auto bar = static_cast<std::size_t>(seg.start + i);
            peak = i == 0 ? rec.equity : std::max(peak, rec.equity);
            out += fmt::format("{},{},{},{},{},{},{},{},", s, bar, data::format_time(md.bars.time.at(bar)),
                               md.bars.close.at(bar), rec.action, rec.position, rec.equity, (peak - rec.equity) / peak);
            if (have_hold && i < r.buy_and_hold_segment_bars[s])
                out += fmt::format("{}", r.buy_and_hold_records.at(static_cast<std::size_t>(seg.offset + i)).equity);
            out += '\n';
        }
    }
    io::write_file_atomically(path, out);
}

void write_trades_csv(const std::string& path, const BacktestReport& r, const data::MarketData& md) {
    std::string out = "segment,bar,time,side,contracts,price,order_type,commission\n";
    for (std::size_t s = 0; s < r.segments.size(); ++s) {
        const auto& seg = r.segments[s];
        for (int i = 0; i < r.segment_bars[s]; ++i) {
            const auto& rec = r.records.at(static_cast<std::size_t>(seg.offset + i));
            if (rec.filled_contracts == 0) continue;
            const auto bar = static_cast<std::size_t>(seg.start + i);
            out += fmt::format("{},{},{},{},{},{},{},{}\n", s, bar, data::format_time(md.bars.time.at(bar)),
                               rec.filled_contracts > 0 ? "buy" : "sell", std::abs(rec.filled_contracts),
                               rec.fill_price, order_type_name(rec.order_type), rec.commission);
        }
    }
    io::write_file_atomically(path, out);
}

const char* order_type_name(int type) noexcept {
    static constexpr const char* kNames[] = {"market", "passive_limit", "far_limit"};  // index: env::OrderType
    return type >= env::kMarket && type <= env::kFarLimit ? kNames[type] : "none";
}

io::json::Value metrics_value(const Metrics& m) {
    return io::json::object({{"total_return", m.total_return},
                             {"annual_return", m.annual_return},
                             {"sharpe", m.sharpe},
                             {"sortino", m.sortino},
                             {"max_drawdown", m.max_drawdown},
                             {"calmar", m.calmar},
                             {"trades", m.trades},
                             {"win_rate", m.win_rate},
                             {"profit_factor", m.profit_factor},
                             {"exposure", m.exposure},
                             {"turnover", m.turnover},
                             {"action_histogram", io::json::array_of<long long>(m.action_histogram)}});
}

std::string metrics_json(const Metrics& m) {
    return io::json::serialize(metrics_value(m));
}

io::json::Value report_value(const BacktestReport& r) {
    return io::json::object({{"strategy", metrics_value(r.strategy)}, {"buy_and_hold", metrics_value(r.buy_and_hold)}});
}

}  // namespace fh::backtest
