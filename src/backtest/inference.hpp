/// @file inference.hpp
/// @brief What a backtest reports beyond its metrics (docs/metrics.md "Confidence intervals",
///        "Probabilistic and deflated Sharpe ratios"): the per-bar returns of its equity curves,
///        their block-bootstrap intervals and their probabilistic Sharpe ratios, as the JSON
///        object "inference" of summary.json, eval.json and a walk-forward's walk_forward.json.
#pragma once

#include <vector>

#include "config/profile.hpp"
#include "backtest/backtest.hpp"
#include "backtest/bootstrap.hpp"
#include "io/json.hpp"

namespace fh::backtest {

/// The per-bar returns r_i = E_i / E_{i-1} - 1 of each segment's curve, segments in order (a
/// segment's first bar gives none): the strategy's, buy-and-hold's, and both on the bars both
/// have (each segment cut to the shorter curve: a bankruptcy ends one curve early).
struct ReturnSeries {
    std::vector<double> strategy, hold, strategy_paired, hold_paired;
};

/// From per-segment equity curves (hold[s] may be shorter than strategy[s], or empty).
ReturnSeries segment_returns(const std::vector<std::vector<double>>& strategy,
                             const std::vector<std::vector<double>>& hold);
/// From a backtest run with keep_records.
ReturnSeries backtest_returns(const BacktestReport& report);

/// The profile's [eval] bootstrap keys.
BootstrapOptions bootstrap_options(const config::EvalConfig& eval);

/// {"bars", "paired_bars", "bootstrap": {...} or null, "sharpe_per_bar", "skewness", "kurtosis",
/// "buy_and_hold_sharpe_per_bar", "psr_zero", "psr_buy_and_hold"} (docs/metrics.md). Throws
/// UsageError naming eval.bootstrap_block when a fixed block is longer than the series.
io::json::Value inference_value(const ReturnSeries& returns, double bars_per_year, const BootstrapOptions& options);

/// `object` (a JSON object, e.g. report_value's) with the member "inference" of `report`'s curves
/// appended.
io::json::Value with_inference(const io::json::Value& object, const BacktestReport& report,
                               const BootstrapOptions& options);

}  // namespace fh::backtest
