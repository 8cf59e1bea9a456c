/// @file load.hpp
/// @brief The data layer's entry point: DataOptions (filled from the profile's [data],
///        [instrument] bars_per_year and [run] seed) -> MarketData, and its printable summary.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "data/market_data.hpp"
#include "data/splits.hpp"

namespace fh::data {

/// Everything load_market needs. Profile keys in brackets.
struct DataOptions {
    std::string path;                      ///< [data] path: CSV file or directory of contract CSVs; "" = synthetic
    std::string format = "auto";           ///< [data] format: "auto" or "csv"
    double train_fraction = 0.7;           ///< [data] train_fraction (time order: train, val, test)
    double val_fraction = 0.15;            ///< [data] val_fraction
    double test_fraction = 0.15;           ///< [data] test_fraction
    std::string feature_set = "core42";    ///< [data] feature_set
    std::string cache_dir;                 ///< [data] cache_dir: "" = next to the data (synthetic: no cache)
    std::int64_t synthetic_bars = 100000;  ///< [data] synthetic_bars
    double planted_signal = 0;             ///< [data] planted_signal in (-1, 1) (synthetic only)
    std::uint64_t seed = 1;                ///< [data] seed, or [run] seed when -1 (synthetic market)
    double bars_per_year = 0;              ///< [instrument] bars_per_year: 0 = infer from the data
    float norm_clip = 5.0f;                ///< clip of the z-scores
    bool use_cache = true;                 ///< false: neither read nor write the fxcache
    /// [walk_forward] folds (0 = off), fold and window (data/walk_forward.hpp): the data ends with
    /// the fold's test block and the splits are the fold's. episode_length ([experience]
    /// gpu_timesteps_per_episode) is the shortest training window a fold may have past the warm-up.
    int walk_forward_folds = 0;
    int walk_forward_fold = 0;
    bool walk_forward_sliding = false;
    std::size_t episode_length = 0;
    /// Normalise with these statistics instead of the training split's: a checkpoint's, so that
    /// `eval` on other data normalises exactly as its training did. Must have one entry per feature.
    std::optional<NormalizationStats> normalization;
    /// `eval --split all|FROM:TO`: the test split is these bars instead of the fractions' (end 0 =
    /// every bar to the last; UsageError when past the data or empty, DataError when it has no
    /// bar past the warm-up). With `normalization` given, the training split then needs no
    /// episode start.
    std::optional<SplitRange> test_range;
    /// Computes the normalisation statistics' moments (training_stats) when set; a run with a GPU
    /// sets one that uses the device for large data (same bits as the host's).
    ColumnMoments column_moments;
    /// The look-ahead audit's (run/audit.hpp): alters the bars after they are read or generated and
    /// before anything is computed from them (features, calendar mode, splits, statistics); the
    /// fxcache is then neither read nor written. It must leave a valid series of the same length.
    std::function<void(BarSeries&)> alter_bars;
};

/// Loads (or generates) the bars, computes or reuses the features through the fxcache, splits
/// by time and normalises with the training split's statistics.
/// Throws DataError (exit 3) for bad data ("<file>:<line>: ..."), UsageError for bad options;
/// a load that fails leaves no fxcache file of its own behind (one it wrote is removed).
MarketData load_market(const DataOptions& options);

/// The fxcache file load_market uses for these options ("" when none).
std::string fxcache_path(const DataOptions& options);

/// Multi-line data summary for `foxhunt-train check`: source, bars, time range, spacing,
/// bars_per_year, features and warm-up, split sizes and episode starts, fxcache status.
std::string describe(const MarketData& md);

}  // namespace fh::data
