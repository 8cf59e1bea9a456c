/// @file backtest_records.hpp
/// @brief Two backtests' bar records compared byte for byte over the bars each segment traded.
#pragma once

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstring>
#include <vector>

#include "backtest/backtest.hpp"

namespace fh::test {

/// The two reports traded the same bars per segment and wrote the same bytes for each: the
/// policy's records, or (`buy_and_hold`) the baseline's.
inline void require_same_traded_records(const backtest::BacktestReport& a, const backtest::BacktestReport& b,
                                        bool buy_and_hold = false) {
    const auto& bars_a = buy_and_hold ? a.buy_and_hold_segment_bars : a.segment_bars;
    const auto& bars_b = buy_and_hold ? b.buy_and_hold_segment_bars : b.segment_bars;
    const auto& ra = buy_and_hold ? a.buy_and_hold_records : a.records;
    const auto& rb = buy_and_hold ? b.buy_and_hold_records : b.records;
    REQUIRE(bars_a == bars_b);
    REQUIRE(ra.size() == rb.size());
    for (std::size_t s = 0; s < a.segments.size(); ++s)
        for (int i = 0; i < bars_a[s]; ++i) {
            const std::size_t j = static_cast<std::size_t>(a.segments[s].offset + i);
            REQUIRE(std::memcmp(&ra[j], &rb[j], sizeof(backtest::BarRecord)) == 0);
        }
}

}  // namespace fh::test
