/// @file synthetic_market.hpp
/// @brief The embedded synthetic futures market (docs/data.md "Synthetic market"): seeded,
///        regime-switching GARCH returns, consistent OHLC and volume, and an optional planted
///        momentum component whose strength is planted_signal, with its oracle policy.
#pragma once

#include <cstdint>

#include "data/market_data.hpp"

namespace fh::data {

/// Bumped when the generating process changes (part of the fxcache key of synthetic data).
constexpr std::uint32_t kSyntheticVersion = 1;

struct SyntheticOptions {
    std::int64_t bars = 100000;  ///< number of hourly bars (>= 2)
    std::uint64_t seed = 1;      ///< same seed, same market, on every platform
    double planted_signal = 0;   ///< k in (-1, 1): corr(next standardized shock, sign of last return)
};

/// Generates the market (one segment named "synthetic"). UsageError for bad options.
BarSeries generate_synthetic(const SyntheticOptions& options);

/// The planted observable at bar t: sign(ln(close_t / close_{t-1})) in {-1, 0, +1}; 0 at a
/// segment start. It equals the sign of core42's raw ret_1.
int planted_observable(const BarSeries& bars, std::size_t t) noexcept;

/// Result of the oracle policy position_t = sign(k) * planted_observable(t) (sign(0) = +1), held over bar t+1
/// (entered at open(t+1) = close(t), no costs), over the episode starts of a split.
struct OracleResult {
    std::size_t bars = 0;          ///< bars t with t and t+1 in the split and segment
    double mean_return = 0;        ///< mean per-bar log return of the policy
    double stddev_return = 0;      ///< population stddev of the per-bar log return
    double sharpe_per_bar = 0;     ///< mean / stddev
    double sharpe_annualized = 0;  ///< sharpe_per_bar * sqrt(bars_per_year)
    double hit_rate = 0;           ///< fraction of bars whose return sign matches the position
    double expected_hit_rate = 0;  ///< Phi(|k| / sqrt(1 - k^2)), ignoring the small regime drift
};

/// Evaluates the oracle policy on bars [split.begin, split.end) of `bars`.
OracleResult planted_oracle(const BarSeries& bars, const SplitRange& split, double planted_signal,
                            double bars_per_year);

}  // namespace fh::data
