/// @file features.hpp
/// @brief The core42 feature set (docs/features.md): 42 causal features per bar, computed per
///        segment from bars <= t of that segment only. Host code, plain loops from the formulas.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "data/market_data.hpp"

namespace fh::data {

constexpr int kCore42Dim = 42;
/// Longest lookback of any core42 feature (bars of history before t): the warm-up.
constexpr std::size_t kCore42Warmup = 128;
/// Bumped whenever a formula changes: part of the fxcache key.
constexpr std::uint32_t kFeatureCodeVersion = 2;  // 2: close_pos of a zero-range bar is 0, not -1

/// What, besides the bars, determines the feature values (part of the fxcache key).
struct FeatureConfig {
    std::string feature_set = "core42";
    /// Calendar mode: daily bars encode day of year + day of week, intraday bars time of day +
    /// day of week. Decided once per data set from the median spacing (>= 20 h is daily).
    bool daily_calendar = false;
};

/// The feature names in column order (docs/features.md).
const std::vector<std::string>& core42_names();

/// A contiguous run of feature columns [begin, end): a section of docs/features.md, what feature
/// attention (dqn.attention) weighs as one.
struct FeatureGroup {
    std::string name;
    int begin = 0, end = 0;
};

/// core42's groups in column order: returns, volatility, trend, oscillators, range, volume,
/// calendar.
const std::vector<FeatureGroup>& core42_groups();

/// Un-normalised features: values (bars, dim) row-major; atr = ATR(14) per bar (price units).
struct RawFeatures {
    int dim = 0;
    std::vector<float> values;
    std::vector<double> atr;
};

/// Computes core42 for every bar. Every value is finite (partial windows during the warm-up).
RawFeatures compute_core42(const BarSeries& bars, const FeatureConfig& config);

/// Dispatches on config.feature_set ("core42" only today); UsageError for an unknown set.
RawFeatures compute_features(const BarSeries& bars, const FeatureConfig& config);

}  // namespace fh::data
