/// @file splits.hpp
/// @brief Time splits (train, then validation, then test), bars_per_year inference and the
///        training-split normalisation of the features (docs/data.md "Splits").
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/features.hpp"
#include "data/market_data.hpp"

namespace fh::data {

/// Fractions of the bars, in time order. Each >= 0, train > 0, sum <= 1 (UsageError otherwise).
/// With a sum of 1 (within 1e-9) the test split runs to the last bar.
struct SplitFractions {
    double train = 0.7;
    double val = 0.15;
    double test = 0.15;
};

/// Sets md.train/val/test from the fractions over md.bars.size() bars.
void make_splits(MarketData& md, const SplitFractions& f);

/// Median time between consecutive bars of the same segment (seconds); 0 for < 2 bars.
std::int64_t median_spacing(const BarSeries& bars);

/// Bars per year: bars / years covered (summed over segments) when the data covers at least
/// 90 days, otherwise from the median spacing (docs/data.md "bars_per_year").
double infer_bars_per_year(const BarSeries& bars);

/// Computes mean (dim) and m2 (dim, the sums of squared deviations from the mean) of the rows
/// `rows` of values (bars, dim), in the fixed order of math/statistics.h, and returns where
/// ("host" or "device"). The default runs on the host; a run with a GPU passes one that computes
/// the same bits on the device for large data (run::Session).
using ColumnMoments =
    std::function<std::string(const std::vector<float>& values, int dim, const std::vector<long long>& rows,
                              std::vector<double>& mean, std::vector<double>& m2)>;

/// The host's ColumnMoments (statistics::column_moments_serial).
std::string host_column_moments(const std::vector<float>& values, int dim, const std::vector<long long>& rows,
                                std::vector<double>& mean, std::vector<double>& m2);

/// Mean and population stddev of every feature over the training split's bars past the
/// warm-up (all training bars if none is), in double in the order of math/statistics.h
/// (computed by `moments`, or on the host when it is empty). A stddev below 1e-8 becomes 1
/// (constant feature). `where` (optional) receives the rows used and where they were summed.
struct StatisticsSource {
    std::size_t rows = 0;
    std::string computed_on;  ///< "host" or "device"
};
NormalizationStats training_stats(const RawFeatures& raw, const BarSeries& bars, const SplitRange& train,
                                  std::size_t warmup, float clip, const ColumnMoments& moments = {},
                                  StatisticsSource* where = nullptr);

/// z = clamp((x - mean) / stddev, -clip, clip), (bars, dim) row-major.
std::vector<float> normalize(const RawFeatures& raw, const NormalizationStats& stats);

/// The same, in place on a (bars, stats.mean.size()) row-major matrix.
void normalize_in_place(std::vector<float>& values, const NormalizationStats& stats);

}  // namespace fh::data
