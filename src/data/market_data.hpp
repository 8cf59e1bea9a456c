/// @file market_data.hpp
/// @brief What the rest of the program gets from the data layer: the bars, their normalised
///        core42 features, the time splits and the statistics a checkpoint must carry.
///        Host-side and device-agnostic; the environment uploads it to the device once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace fh::data {

/// Bars of one instrument in strictly increasing time. A series may hold several contiguous
/// segments (one per CSV file of a contract directory; one for a single file or the synthetic
/// market): an episode never spans a segment boundary.
struct BarSeries {
    std::vector<std::int64_t> time;  ///< bar timestamp, Unix seconds UTC
    std::vector<double> open, high, low, close;
    std::vector<double> volume;  ///< 0 everywhere when the source has no volume
    bool has_volume = false;
    std::vector<std::size_t> segment_starts{0};  ///< first bar of each segment; [0] == 0
    std::vector<std::string> segment_names;      ///< source file per segment, or "synthetic"

    std::size_t size() const noexcept { return close.size(); }
    /// Index one past the last bar of the segment that contains bar i.
    std::size_t segment_end(std::size_t i) const noexcept;
    /// Index of the first bar of the segment that contains bar i.
    std::size_t segment_begin(std::size_t i) const noexcept;
};

/// Bars [begin, end) of the series.
struct SplitRange {
    std::size_t begin = 0;
    std::size_t end = 0;
    std::size_t size() const noexcept { return end - begin; }
};

/// Per-feature statistics of the training split: z = clamp((x - mean) / stddev, -clip, clip).
struct NormalizationStats {
    std::vector<float> mean;
    std::vector<float> stddev;
    float clip = 5.0f;
};

struct MarketData {
    BarSeries bars;
    int market_dim = 0;                      ///< features per bar (42 for core42)
    std::vector<std::string> feature_names;  ///< market_dim names, docs/features.md order
    std::vector<float> features;             ///< (bars, market_dim) row-major, normalised, clipped
    std::vector<double> atr;                 ///< ATR(14) per bar in price units (limit orders)
    std::size_t warmup_bars = 0;             ///< bars at each segment's start lacking full history
    SplitRange train, val, test;
    double bars_per_year = 0;  ///< from the profile, or inferred from spacing
    NormalizationStats norm;
    std::size_t norm_rows = 0;               ///< training bars the statistics summarise (0: given, a checkpoint's)
    std::string norm_computed_on = "given";  ///< "host", "device" (large data on a GPU) or "given"
    std::string source;                      ///< file/directory path, or "synthetic(seed=N)"

    // Added by the data layer (informational; the environment does not need them).
    std::string feature_set = "core42";   ///< name of the feature set in `features`
    bool bars_per_year_inferred = false;  ///< true when bars_per_year came from the spacing
    std::int64_t median_spacing_s = 0;    ///< median time between consecutive bars (seconds)
    bool daily_calendar = false;          ///< calendar features in daily mode (docs/features.md)
    std::string cache_path;               ///< fxcache file used, "" when none
    std::string cache_status;             ///< "reused", "built", "rebuilt (<why>)", "off"
};

/// Prices a data source may have (CSV rows, and the bars of a cache made from them): far from
/// where the double accounting (price x multiplier x contracts) or the float32 rewards overflow.
inline constexpr double kMinPrice = 1e-9;
inline constexpr double kMaxPrice = 1e9;

/// What is wrong with a bar series, or "": the arrays' sizes, segment starts and names, times
/// strictly increasing, OHLC finite and positive (and within [kMinPrice, kMaxPrice] when
/// `price_range`) with low <= open, close <= high, volume finite and >= 0. For data that did not
/// come through the CSV parser's row checks (an fxcache: its checksum proves only that the file
/// is the one written, not that what was written is sane).
std::string check_bar_series(const BarSeries& bars, bool price_range);

/// Remarks on plausible but suspicious data, one line each (at most a few): a gap between
/// consecutive bars of a segment longer than 30 days and 100 median spacings, a close 10 times
/// above or below the previous one, a time range over 100 years. load_market logs them.
std::vector<std::string> sanity_warnings(const BarSeries& bars);

/// True when an episode may start at bar t of the split: t >= segment_begin(t) + warmup_bars
/// and t + 1 is still inside both the split and t's segment.
bool valid_episode_start(const MarketData& md, const SplitRange& split, std::size_t t) noexcept;

/// Number of bars of the split where an episode may start (valid_episode_start).
std::size_t count_episode_starts(const MarketData& md, const SplitRange& split) noexcept;

}  // namespace fh::data
