/// @file market_data.cpp
/// @brief Segment lookups of BarSeries and the episode-start rule of MarketData.
#include "data/market_data.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "data/csv_bars.hpp"
#include "data/splits.hpp"

namespace fh::data {

std::size_t BarSeries::segment_begin(std::size_t i) const noexcept {
    // segment_starts is sorted and starts with 0: the last start <= i.
    auto it = std::upper_bound(segment_starts.begin(), segment_starts.end(), i);
    return it == segment_starts.begin() ? 0 : *(it - 1);
}

std::size_t BarSeries::segment_end(std::size_t i) const noexcept {
    auto it = std::upper_bound(segment_starts.begin(), segment_starts.end(), i);
    return it == segment_starts.end() ? size() : *it;
}

bool valid_episode_start(const MarketData& md, const SplitRange& split, std::size_t t) noexcept {
    if (t < split.begin || t + 1 >= split.end || t + 1 >= md.bars.size()) return false;
    if (t < md.bars.segment_begin(t) + md.warmup_bars) return false;
    return t + 1 < md.bars.segment_end(t);
}

std::size_t count_episode_starts(const MarketData& md, const SplitRange& split) noexcept {
    std::size_t n = 0;
    for (std::size_t t = split.begin; t < split.end; ++t) n += valid_episode_start(md, split, t);
    return n;
}

std::string check_bar_series(const BarSeries& b, bool price_range) {
    const std::size_t n = b.time.size();
    for (const auto* v : {&b.open, &b.high, &b.low, &b.close, &b.volume})
        if (v->size() != n) return fmt::format("the price and volume arrays have {} entries for {} bars", v->size(), n);
    if (n == 0) return "no bars";
    if (b.segment_starts.empty() || b.segment_starts.front() != 0) return "the first segment does not start at bar 0";
    if (b.segment_names.size() != b.segment_starts.size())
        return fmt::format("{} segment names for {} segments", b.segment_names.size(), b.segment_starts.size());
    for (std::size_t s = 1; s < b.segment_starts.size(); ++s)
        if (b.segment_starts[s] <= b.segment_starts[s - 1] || b.segment_starts[s] >= n)
            return fmt::format("segment {} starts at bar {}, out of order", s, b.segment_starts[s]);
    for (std::size_t i = 0; i < n; ++i) {
        if (i > 0 && b.time[i] <= b.time[i - 1])
            return fmt::format("bar {}: time {} is not after the previous bar's {}", i, format_time(b.time[i]),
                               format_time(b.time[i - 1]));
        const double o = b.open[i], h = b.high[i], l = b.low[i], c = b.close[i], v = b.volume[i];
        for (const double x : {o, h, l, c}) {
            if (!std::isfinite(x) || !(x > 0)) return fmt::format("bar {}: price {} is not finite and positive", i, x);
            if (price_range && (x < kMinPrice || x > kMaxPrice))
                return fmt::format("bar {}: price {} is outside [{}, {}]", i, x, kMinPrice, kMaxPrice);
        }
        if (!(l <= std::min(o, c)) || !(h >= std::max(o, c)))
            return fmt::format("bar {}: open {} high {} low {} close {} violate low <= open, close <= high", i, o, h, l,
                               c);
        if (!std::isfinite(v) || v < 0) return fmt::format("bar {}: volume {} is not finite and >= 0", i, v);
        if (!b.has_volume && v != 0) return fmt::format("bar {}: volume {} in a series without volume", i, v);
    }
    return "";
}

std::vector<std::string> sanity_warnings(const BarSeries& b) {
    std::vector<std::string> out;
    const std::size_t n = b.size();
    if (n < 2) return out;
    const std::int64_t median = median_spacing(b);
    std::size_t widest = 0, jump = 0;
    std::int64_t widest_gap = 0;
    double jump_ratio = 1;
    for (std::size_t i = 1; i < n; ++i) {
        if (b.segment_begin(i) == i) continue;
        const std::int64_t g = b.time[i] - b.time[i - 1];
        if (g > widest_gap) widest_gap = g, widest = i;
        const double r = b.close[i] / b.close[i - 1];
        const double extreme = std::max(r, 1 / r);
        if (extreme > jump_ratio) jump_ratio = extreme, jump = i;
    }
    constexpr std::int64_t kDay = 86400;
    if (widest > 0 && widest_gap > 30 * kDay && widest_gap > 100 * std::max<std::int64_t>(median, 1))
        out.push_back(fmt::format(
            "a gap of {:.0f} days between bar {} ({}) and bar {} ({}), {:.0f} times the median "
            "spacing of {} s: the time features and bars_per_year assume regular bars (a "
            "mistyped year?)",
            static_cast<double>(widest_gap) / kDay, widest - 1, format_time(b.time[widest - 1]), widest,
            format_time(b.time[widest]),
            static_cast<double>(widest_gap) / static_cast<double>(std::max<std::int64_t>(median, 1)), median));
    if (jump > 0 && jump_ratio >= 10)
        out.push_back(
            fmt::format("bar {} ({}) closes at {} after {}: a {:.0f}-fold move in one bar (a unit change or "
                        "a missing decimal point?)",
                        jump, format_time(b.time[jump]), b.close[jump], b.close[jump - 1], jump_ratio));
    const double years = static_cast<double>(b.time.back() - b.time.front()) / (365.2425 * kDay);
    if (years > 100)
        out.push_back(fmt::format("the bars span {:.0f} years ({} .. {})", years, format_time(b.time.front()),
                                  format_time(b.time.back())));
    return out;
}

}  // namespace fh::data
