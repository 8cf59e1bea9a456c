/// @file test_features.cpp
/// @brief core42: hand-computed values per family, causality on truncated data, segments.
#include <catch2/catch.hpp>

#include <cmath>
#include <numbers>
#include <set>

#include "data/csv_bars.hpp"
#include "data/features.hpp"
#include "data/synthetic_market.hpp"

using namespace fh::data;

namespace {

/// Index of a feature by name.
int col(const std::string& name) {
    const auto& n = core42_names();
    for (std::size_t i = 0; i < n.size(); ++i)
        if (n[i] == name) return static_cast<int>(i);
    FAIL("no feature " << name);
    return -1;
}

/// Five daily bars starting Monday 2024-01-01, easy to compute by hand.
BarSeries small_series() {
    BarSeries b;
    b.open = {100, 100, 110, 99, 99};
    b.high = {101, 111, 112, 100, 110};
    b.low = {99, 99, 98, 97, 98};
    b.close = {100, 110, 99, 99, 108.9};
    b.volume = {10, 20, 30, 40, 50};
    b.has_volume = true;
    const std::int64_t monday = days_from_civil(2024, 1, 1) * 86400;
    for (int i = 0; i < 5; ++i) b.time.push_back(monday + i * 86400);
    b.segment_names = {"small"};
    return b;
}

BarSeries prefix(const BarSeries& b, std::size_t k) {
    BarSeries p;
    p.time.assign(b.time.begin(), b.time.begin() + static_cast<std::ptrdiff_t>(k));
    p.open.assign(b.open.begin(), b.open.begin() + static_cast<std::ptrdiff_t>(k));
    p.high.assign(b.high.begin(), b.high.begin() + static_cast<std::ptrdiff_t>(k));
    p.low.assign(b.low.begin(), b.low.begin() + static_cast<std::ptrdiff_t>(k));
    p.close.assign(b.close.begin(), b.close.begin() + static_cast<std::ptrdiff_t>(k));
    p.volume.assign(b.volume.begin(), b.volume.begin() + static_cast<std::ptrdiff_t>(k));
    p.has_volume = b.has_volume;
    p.segment_starts.clear();
    for (std::size_t i = 0; i < b.segment_starts.size(); ++i)
        if (b.segment_starts[i] < k) {
            p.segment_starts.push_back(b.segment_starts[i]);
            p.segment_names.push_back(b.segment_names[i]);
        }
    return p;
}

}  // namespace

TEST_CASE("core42: 42 unique names and finite values", "[data]") {
    const auto& names = core42_names();
    REQUIRE(names.size() == 42);
    CHECK(std::set<std::string>(names.begin(), names.end()).size() == 42);
    const auto b = generate_synthetic({2000, 3, 0.2});
    const auto f = compute_core42(b, {});
    REQUIRE(f.dim == 42);
    REQUIRE(f.values.size() == 2000 * 42);
    for (float x : f.values) REQUIRE(std::isfinite(x));
    for (double a : f.atr) REQUIRE((std::isfinite(a) && a > 0));
}

TEST_CASE("core42: known values on a small series", "[data]") {
    const auto b = small_series();
    const auto f = compute_core42(b, FeatureConfig{"core42", true});
    auto at = [&](std::size_t t, const char* name) { return static_cast<double>(f.values[t * 42 + col(name)]); };
    const double tol = 1e-6;
    using Catch::Detail::Approx;
    auto approx = [&](double x) { return Approx(x).margin(tol).epsilon(1e-6); };

    // Returns (windows clipped at the segment start).
    CHECK(at(0, "ret_1") == 0.0);
    CHECK(at(1, "ret_1") == approx(std::log(1.1)));
    CHECK(at(4, "ret_1") == approx(std::log(108.9 / 99)));
    CHECK(at(4, "ret_2") == approx(std::log(108.9 / 99)));
    CHECK(at(4, "ret_4") == approx(std::log(1.089)));
    CHECK(at(4, "ret_64") == approx(std::log(1.089)));
    CHECK(at(4, "ret_oc") == approx(std::log(108.9 / 99)));
    CHECK(at(2, "gap") == approx(0.0));
    CHECK(at(0, "gap") == 0.0);
    // Volatility.
    const double r1 = std::log(1.1), r2 = std::log(0.9), r4 = std::log(1.1);
    const double rv = std::sqrt((r1 * r1 + r2 * r2 + 0 + r4 * r4) / 4);
    CHECK(at(4, "rv_8") == approx(rv));
    CHECK(at(4, "rv_128") == approx(rv));
    CHECK(at(4, "vol_ratio_8_128") == approx(0.0));
    CHECK(at(0, "parkinson_32") == approx(std::sqrt(std::pow(std::log(101.0 / 99), 2) / (4 * std::log(2.0)))));
    // Trend.
    const double sma5 = (100 + 110 + 99 + 99 + 108.9) / 5;
    CHECK(at(4, "sma_dev_8") == approx(std::log(108.9 / sma5)));
    CHECK(at(4, "sma_dev_128") == approx(std::log(108.9 / sma5)));
    CHECK(at(4, "sma_slope_32") == approx(std::log(sma5 / 100)));
    const double e12 = 100 + 2.0 / 13 * 10, e26 = 100 + 2.0 / 27 * 10;
    CHECK(at(1, "macd") == approx(std::log(e12 / e26)));
    CHECK(at(1, "macd_signal") == approx(0.2 * std::log(e12 / e26)));
    CHECK(at(4, "donchian_32") == approx(2 * (108.9 - 97) / 15 - 1));
    CHECK(at(4, "er_32") == approx(8.9 / (10 + 11 + 0 + 9.9)));
    // Oscillators.
    CHECK(at(4, "rsi_14") == approx((19.9 - 11) / 30.9));
    CHECK(at(4, "stoch_k_14") == approx(2 * (108.9 - 97) / 15 - 1));
    const double tp[5] = {100, 320.0 / 3, 309.0 / 3, 296.0 / 3, 316.9 / 3};
    const double tpm = (tp[0] + tp[1] + tp[2] + tp[3] + tp[4]) / 5;
    double md = 0;
    for (double x : tp) md += std::abs(x - tpm);
    md /= 5;
    CHECK(at(4, "cci_20") == approx((tp[4] - tpm) / (0.015 * md) / 100));
    double var = 0;
    for (double c : b.close) var += (c - sma5) * (c - sma5);
    CHECK(at(4, "boll_z_20") == approx((108.9 - sma5) / std::sqrt(var / 5)));
    CHECK(at(4, "ret_z_32") == approx(r4 / rv));
    // ATR, range, bar shape. True ranges 2, 12, 14, 3, 12.
    CHECK(f.atr[0] == approx(2.0));
    CHECK(f.atr[4] == approx(8.6));
    CHECK(at(4, "atr_14_rel") == approx(8.6 / 108.9));
    CHECK(at(4, "atr_ratio_14_64") == approx(0.0));
    CHECK(at(4, "range_rel") == approx(std::log(110.0 / 98)));
    CHECK(at(4, "range_atr") == approx(12 / 8.6));
    CHECK(at(4, "body") == approx(9.9 / 12));
    CHECK(at(4, "upper_wick") == approx(1.1 / 12));
    CHECK(at(4, "lower_wick") == approx(1.0 / 12));
    CHECK(at(4, "close_pos") == approx(2 * 10.9 / 12 - 1));
    // Volume.
    double lm = 0, lv[5];
    for (int i = 0; i < 5; ++i) lm += (lv[i] = std::log1p(b.volume[static_cast<std::size_t>(i)])) / 5;
    double ls = 0;
    for (double x : lv) ls += (x - lm) * (x - lm) / 5;
    CHECK(at(4, "logvol_z_32") == approx((lv[4] - lm) / std::sqrt(ls)));
    CHECK(at(4, "vol_ratio_8_32") == approx(0.0));
    CHECK(at(4, "signed_vol_32") == approx((20.0 - 30 + 0 + 50) / (20 + 30 + 40 + 50)));
    // Calendar, daily mode: Monday -> dow angle 0; Wednesday -> 2/7 of a turn.
    CHECK(at(0, "dow_sin") == approx(0.0));
    CHECK(at(0, "dow_cos") == approx(1.0));
    CHECK(at(2, "dow_sin") == approx(std::sin(2 * std::numbers::pi * 2 / 7)));
    const double doy = std::fmod(static_cast<double>(b.time[0] / 86400), 365.2425) / 365.2425;
    CHECK(at(0, "cal_cycle_sin") == approx(std::sin(2 * std::numbers::pi * doy)));
    // Intraday mode: time of day 06:00 UTC -> a quarter turn.
    BarSeries i = b;
    for (auto& t : i.time) t += 6 * 3600;
    const auto fi = compute_core42(i, FeatureConfig{"core42", false});
    CHECK(fi.values[static_cast<std::size_t>(col("cal_cycle_sin"))] == approx(1.0));
    CHECK(fi.values[static_cast<std::size_t>(col("cal_cycle_cos"))] == approx(0.0));
}

TEST_CASE("core42: no volume column gives zero volume features", "[data]") {
    auto b = small_series();
    b.has_volume = false;
    b.volume.assign(5, 0.0);
    const auto f = compute_core42(b, {});
    for (std::size_t t = 0; t < 5; ++t)
        for (const char* n : {"logvol_z_32", "vol_ratio_8_32", "signed_vol_32"})
            CHECK(f.values[t * 42 + col(n)] == 0.0f);
}

TEST_CASE("core42: causal - features on bars[0..k) equal the first k rows of the full series", "[data]") {
    // Two segments, so that the segment restart is covered too.
    auto b = generate_synthetic({1500, 11, 0.1});
    auto second = generate_synthetic({700, 12, 0.0});
    for (auto& t : second.time) t += b.time.back() - second.time.front() + 7 * 86400;
    append_segment(b, std::move(second));
    REQUIRE(b.segment_starts.size() == 2);
    const auto full = compute_core42(b, {});
    std::vector<std::size_t> ks = {1,   2,   3,   5,   8,   13,   31,   32,   33,   64,   127,  128,
                                   129, 130, 200, 511, 999, 1499, 1500, 1501, 1502, 1629, 1630, 2199};
    for (std::size_t k = 7; k < b.size(); k += 97) ks.push_back(k);
    for (std::size_t k : ks) {
        const auto p = compute_core42(prefix(b, k), {});
        INFO("k = " << k);
        REQUIRE(p.values.size() == k * 42);
        bool same = std::equal(p.values.begin(), p.values.end(), full.values.begin());
        same = same && std::equal(p.atr.begin(), p.atr.end(), full.atr.begin());
        REQUIRE(same);
    }
}

TEST_CASE("core42: each segment starts afresh (no feature reads across a contract boundary)", "[data]") {
    auto a = generate_synthetic({400, 21, 0.0});
    auto c = generate_synthetic({300, 22, 0.0});
    for (auto& t : c.time) t += a.time.back() - c.time.front() + 7 * 86400;
    const auto alone = compute_core42(c, {});
    append_segment(a, std::move(c));
    const auto joined = compute_core42(a, {});
    REQUIRE(std::equal(alone.values.begin(), alone.values.end(), joined.values.begin() + 400 * 42));
}

TEST_CASE("core42: a zero-range bar (high = low) has a neutral bar shape: close_pos 0, body and wicks 0", "[data]") {
    auto b = small_series();
    b.open[3] = b.high[3] = b.low[3] = b.close[3] = 99;  // a flat bar (no trade, or a limit day)
    const auto f = compute_core42(b, FeatureConfig{"core42", true});
    auto at = [&](std::size_t t, const char* name) { return static_cast<double>(f.values[t * 42 + col(name)]); };
    CHECK(at(3, "close_pos") == 0.0);  // mid-range, as documented; it was -1 (2 * 0 - 1)
    CHECK(at(3, "body") == 0.0);
    CHECK(at(3, "upper_wick") == 0.0);
    CHECK(at(3, "lower_wick") == 0.0);
    CHECK(at(3, "range_rel") == 0.0);
    CHECK(at(4, "close_pos") == Catch::Detail::Approx(2 * 10.9 / 12 - 1));  // a bar with a range is unchanged
}
