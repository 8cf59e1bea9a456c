/// @file market_data.cpp
/// @brief Segment lookups of BarSeries and the episode-start rule of MarketData.
#include "data/market_data.hpp"

#include <algorithm>

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

}  // namespace fh::data
