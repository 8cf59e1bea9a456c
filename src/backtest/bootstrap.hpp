/// @file bootstrap.hpp
/// @brief The stationary block bootstrap (Politis & Romano 1994) of a backtest's per-bar returns:
///        percentile intervals of the annualised Sharpe ratio, of the total return and of the
///        Sharpe difference against buy-and-hold (paired: the same resampled bars for both).
///        Host-only and deterministic given the seed (Philox, math/rng.h); docs/metrics.md
///        "Confidence intervals" gives every step.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fh::backtest {

/// [eval] bootstrap_resamples, bootstrap_block (0 = automatic), bootstrap_seed, confidence.
struct BootstrapOptions {
    int resamples = 2000;
    std::int64_t block = 0;
    std::uint64_t seed = 1;
    double confidence = 0.95;
    /// A fixed block longer than the series is cut to it (block_rule says so) instead of refused:
    /// for a run's final backtests, whose block was checked against the split before training and
    /// whose series a bankruptcy can shorten.
    bool cut_block_to_series = false;
};

/// The automatic mean block length of a series of n returns: ceil(n^(1/3)), at least 1.
std::int64_t automatic_block_length(std::size_t n);

/// Throws UsageError (exit 2) naming eval.bootstrap_block when a fixed block (> 0) is longer
/// than the series of n returns.
void require_block_fits(std::int64_t block, std::size_t n);

/// The bar indices of resample `resample` of a series of n bars with mean block length `block`:
/// blocks in order, block j drawn from Philox(seed, Purpose::bootstrap, stream = resample,
/// counter = j): start below(w0, n), length 1 + floor(ln(1 - u) / ln(1 - 1/block)) with
/// u = unit_double(w2, w3) (length 1 when block = 1), indices start, start + 1, ... mod n, the
/// last block cut at n indices.
std::vector<std::size_t> bootstrap_indices(std::size_t n, std::int64_t block, std::uint64_t seed, int resample);

/// The percentile of sorted values at fraction q (linear interpolation between order statistics:
/// h = (m - 1) q, x[floor h] + (h - floor h) (x[floor h + 1] - x[floor h])).
double percentile(const std::vector<double>& sorted, double q);

/// The annualised Sharpe ratio of returns r (mean / sample sd * sqrt(bars_per_year); 0 when
/// sd = 0 or fewer than 2 returns), as the backtest's metric.
double annualised_sharpe(const std::vector<double>& r, double bars_per_year);

struct Interval {
    double lo = 0, hi = 0;
};

struct BootstrapResult {
    int resamples = 0;
    std::int64_t block = 0;       ///< the mean block length used
    bool block_automatic = true;  ///< from automatic_block_length
    bool block_cut = false;       ///< a fixed block cut to the series (cut_block_to_series)
    std::uint64_t seed = 0;
    double confidence = 0;
    std::size_t bars = 0;         ///< the strategy's returns
    std::size_t paired_bars = 0;  ///< the bars both the strategy and buy-and-hold have
    Interval sharpe, total_return, sharpe_difference;
};

/// Throws UsageError naming eval.bootstrap_block when a fixed block is longer than a series.
/// `strategy`: the strategy's returns; `strategy_paired` and `hold_paired`: both series on the
/// bars both have (equal lengths). The strategy's Sharpe and total return resample `strategy`
/// (resample b uses bootstrap_indices(n, block, seed, b)); the difference resamples the paired
/// series with one index sequence for both (stream resamples + b, so independent of the
/// first). Needs at least 2 returns in each series (std::invalid_argument otherwise).
BootstrapResult block_bootstrap(const std::vector<double>& strategy, const std::vector<double>& strategy_paired,
                                const std::vector<double>& hold_paired, double bars_per_year,
                                const BootstrapOptions& options);

}  // namespace fh::backtest
