/// @file backtest.hpp
/// @brief The backtest evaluator (docs/metrics.md): a policy run from flat over a split in
///        contiguous segments stepping in lock-step on the backend, buy-and-hold on the same
///        segments, the metrics of docs/metrics.md computed on the backend, and the CSV/JSON
///        outputs (backtest/equity.csv, backtest/trades.csv).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "math/backtest.h"
#include "data/market_data.hpp"
#include "env/vec_env.hpp"
#include "io/json.hpp"
#include "device/device.hpp"

namespace fh::backtest {

/// The metrics of docs/metrics.md: the metrics kernel's (zero until computed) and the action counts.
struct Metrics : backtest::MetricsOut {
    Metrics() : MetricsOut{} {}
    std::vector<long long> action_histogram;  ///< num_actions counts of the actions taken
};

/// What a backtest returns. records are filled only when keep_records was asked for.
struct BacktestReport {
    Metrics strategy, buy_and_hold;
    double initial_equity = 0, multiplier = 0, bars_per_year = 0;
    std::vector<backtest::Segment> segments;                ///< the segments evaluated, in order
    std::vector<int> segment_bars;                          ///< bars recorded per segment (shorter on bankruptcy)
    std::vector<backtest::BarRecord> records;               ///< the strategy's per-bar records (Segment::offset)
    std::vector<int> buy_and_hold_segment_bars;             ///< keep_records: buy-and-hold's bars per segment
    std::vector<backtest::BarRecord> buy_and_hold_records;  ///< keep_records: buy-and-hold's per-bar records
};

/// Chooses n actions (device memory) from n states (n, state_dim) (device memory).
using Policy = std::function<void(ops::View<int> actions, ops::View<const float> states, int n)>;

/// The segments of a backtest over `split`: `segments` equal contiguous parts of the split, each
/// further cut at contract (BarSeries segment) boundaries and starting after the feature warm-up;
/// parts with fewer than 2 bars are dropped. segments == 1 gives one exact sequential pass.
std::vector<backtest::Segment> backtest_segments(const data::MarketData& md, data::SplitRange split, int segments);

/// Bars per captured sequence of a backtest (capture_steps): one graph launch for several bars
/// saves host launches and the gaps between graphs (dqn-smoketest on the H200: 16 seeds in one
/// process 1.15 to 1.19 s with 4 bars, 1.23 to 1.25 s with 1, 1.28 to 1.40 s with 16 or 64,
/// whose larger graphs cost more to instantiate, as every backtest captures its own). The same
/// bits whatever the count.
inline constexpr int kBacktestBarsPerSequence = 4;

/// Runs `policy` greedily over `split` from flat (each segment starts flat at initial equity),
/// then buy-and-hold (long max_contracts by a market order at the first decision) on the same
/// segments, and computes both metrics on the backend. No host synchronisation per step beyond
/// what the policy does. Throws DataError when the split has no bar to trade.
/// `capture_steps`: the policy issues the same ops with the same arguments on every call after its
/// first (GreedyPolicy::capture_safe): the bars' gathers, policy passes and steps then run
/// kBacktestBarsPerSequence bars to a captured sequence (a CUDA Graph: one launch instead of
/// several per bar), with the same results, and buy-and-hold's pass runs beside the policy's (two
/// streams on the GPU) instead of after it.
BacktestReport backtest(ops::Device& ops, const env::DeviceMarket& market, const data::MarketData& md, env::Split split,
                        const env::EnvParams& params, const Policy& policy, int segments, bool keep_records,
                        bool capture_steps = false);

/// The metrics of host-side records (the CPU twin of the metrics kernel; for tests and tools).
Metrics compute_metrics(const std::vector<backtest::BarRecord>& records, const std::vector<backtest::Segment>& segments,
                        const std::vector<int>& segment_bars, const std::vector<double>& close,
                        const backtest::MetricsParams& params);

/// The metrics of one equity curve without fills (equity[0] is the start).
Metrics curve_metrics(const std::vector<double>& equity, double bars_per_year);

/// backtest/equity.csv: segment,bar,time,close,action,position,equity,drawdown,buy_and_hold_equity
/// (docs/metrics.md); the last column is empty where buy-and-hold went bankrupt earlier.
void write_equity_csv(const std::string& path, const BacktestReport& report, const data::MarketData& md);
/// backtest/trades.csv: segment,bar,time,side,contracts,price,order_type,commission per fill.
void write_trades_csv(const std::string& path, const BacktestReport& report, const data::MarketData& md);
/// trades.csv's name of an order type (env::OrderType): market, passive_limit or far_limit; none.
const char* order_type_name(int type) noexcept;
/// Every metric as one JSON object (NaN/infinity as null), and its text.
io::json::Value metrics_value(const Metrics& m);
std::string metrics_json(const Metrics& m);
/// {"strategy": metrics, "buy_and_hold": metrics}.
io::json::Value report_value(const BacktestReport& r);

}  // namespace fh::backtest
