/// @file features.cpp
/// @brief core42: each feature written from its formula in docs/features.md. Row t of a segment
///        [s, e) reads bars [s, t] only; windows are clipped at s (the warm-up rows).
#include "data/features.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numbers>

#include "util/errors.hpp"

namespace fh::data {
namespace {

constexpr double kTwoPi = 2.0 * std::numbers::pi;

/// a / b, or 0 when b is 0 (flat windows, zero ranges).
double safe_div(double a, double b) noexcept {
    return b != 0.0 ? a / b : 0.0;
}

/// Mean of x[lo..hi] (inclusive); 0 for an empty range.
double mean(const std::vector<double>& x, std::size_t lo, std::size_t hi) noexcept {
    if (hi < lo) return 0.0;
    double s = 0;
    for (std::size_t j = lo; j <= hi; ++j) s += x[j];
    return s / static_cast<double>(hi - lo + 1);
}

/// Population standard deviation of x[lo..hi].
double stddev(const std::vector<double>& x, std::size_t lo, std::size_t hi) noexcept {
    if (hi < lo) return 0.0;
    const double m = mean(x, lo, hi);
    double s = 0;
    for (std::size_t j = lo; j <= hi; ++j) s += (x[j] - m) * (x[j] - m);
    return std::sqrt(s / static_cast<double>(hi - lo + 1));
}

}  // namespace

const std::vector<std::string>& core42_names() {
    static const std::vector<std::string> names = {
        // returns 0-8
        "ret_1", "ret_2", "ret_4", "ret_8", "ret_16", "ret_32", "ret_64", "ret_oc", "gap",
        // volatility 9-13
        "rv_8", "rv_32", "rv_128", "vol_ratio_8_128", "parkinson_32",
        // trend 14-21
        "sma_dev_8", "sma_dev_32", "sma_dev_128", "sma_slope_32", "macd", "macd_signal", "donchian_32", "er_32",
        // oscillators 22-26
        "rsi_14", "stoch_k_14", "cci_20", "boll_z_20", "ret_z_32",
        // range 27-34
        "atr_14_rel", "atr_ratio_14_64", "range_rel", "range_atr", "body", "upper_wick", "lower_wick", "close_pos",
        // volume 35-37
        "logvol_z_32", "vol_ratio_8_32", "signed_vol_32",
        // calendar 38-41
        "cal_cycle_sin", "cal_cycle_cos", "dow_sin", "dow_cos"};
    return names;
}

const std::vector<FeatureGroup>& core42_groups() {
    static const std::vector<FeatureGroup> groups = {
        {"returns", 0, 9}, {"volatility", 9, 14}, {"trend", 14, 22},    {"oscillators", 22, 27},
        {"range", 27, 35}, {"volume", 35, 38},    {"calendar", 38, 42},
    };
    return groups;
}

RawFeatures compute_core42(const BarSeries& b, const FeatureConfig& config) {
    constexpr int D = kCore42Dim;
    const std::size_t n = b.size();
    RawFeatures out;
    out.dim = D;
    out.values.assign(n * D, 0.0f);  // values is (n, 42) row-major
    out.atr.assign(n, 0.0);

    // Per-bar series used by several features (global index; segment starts reset them).
    std::vector<double> r(n, 0.0);   // log return ln(c_t / c_{t-1}); 0 at a segment start
    std::vector<double> tr(n, 0.0);  // true range; h - l at a segment start
    std::vector<double> tp(n, 0.0);  // typical price (h + l + c) / 3
    std::vector<double> lv(n, 0.0);  // ln(1 + volume)
    std::vector<double> pk(n, 0.0);  // ln(h / l)^2 (Parkinson)
    std::vector<double> r2(n, 0.0);  // r^2
    std::vector<double> sma32(n, 0.0);

    for (std::size_t seg = 0; seg < b.segment_starts.size(); ++seg) {
        const std::size_t s = b.segment_starts[seg];
        const std::size_t e = seg + 1 < b.segment_starts.size() ? b.segment_starts[seg + 1] : n;
        double ema12 = 0, ema26 = 0, signal = 0;
        for (std::size_t t = s; t < e; ++t) {
            const double o = b.open[t], h = b.high[t], l = b.low[t], c = b.close[t], v = b.volume[t];
            // lo(k): first index of a window of k bars ending at t, clipped at the segment start.
            auto lo = [&](std::size_t k) { return t + 1 >= s + k ? t + 1 - k : s; };
            // lag(k): index of the bar k bars before t, clipped at the segment start.
            auto lag = [&](std::size_t k) { return t >= s + k ? t - k : s; };
            // rlo(k): first return index of the last k returns (returns exist from s + 1).
            auto rlo = [&](std::size_t k) { return std::max(lo(k), s + 1); };

            r[t] = t > s ? std::log(c / b.close[t - 1]) : 0.0;
            r2[t] = r[t] * r[t];
            tr[t] = t > s ? std::max({h - l, std::abs(h - b.close[t - 1]), std::abs(l - b.close[t - 1])}) : h - l;
            tp[t] = (h + l + c) / 3.0;
            lv[t] = std::log1p(v);
            pk[t] = std::log(h / l) * std::log(h / l);

            double f[D];
            // Returns over horizons 1..64 bars.
            const std::size_t horizons[] = {1, 2, 4, 8, 16, 32, 64};
            for (int k = 0; k < 7; ++k) f[k] = std::log(c / b.close[lag(horizons[k])]);
            f[7] = std::log(c / o);                             // ret_oc
            f[8] = t > s ? std::log(o / b.close[t - 1]) : 0.0;  // gap
            // Realized volatility: RMS of the last k log returns.
            const double rv8 = std::sqrt(mean(r2, rlo(8), t));
            const double rv32 = std::sqrt(mean(r2, rlo(32), t));
            const double rv128 = std::sqrt(mean(r2, rlo(128), t));
            f[9] = rv8;
            f[10] = rv32;
            f[11] = rv128;
            f[12] = std::log((rv8 + 1e-12) / (rv128 + 1e-12));
            f[13] = std::sqrt(mean(pk, lo(32), t) / (4.0 * std::numbers::ln2));
            // Trend.
            auto sma_close = [&](std::size_t k) { return mean(b.close, lo(k), t); };
            f[14] = std::log(c / sma_close(8));
            sma32[t] = sma_close(32);
            f[15] = std::log(c / sma32[t]);
            f[16] = std::log(c / sma_close(128));
            f[17] = std::log(sma32[t] / sma32[lag(8)]);
            if (t == s) {
                ema12 = ema26 = c;
                signal = 0;
            } else {
                ema12 += (2.0 / 13.0) * (c - ema12);
                ema26 += (2.0 / 27.0) * (c - ema26);
            }
            const double macd = std::log(ema12 / ema26);
            if (t > s) signal += (2.0 / 10.0) * (macd - signal);
            f[18] = macd;
            f[19] = signal;
            // The close's place in the high-low channel of the last k bars, in [-1, 1].
            auto channel = [&](std::size_t k) {
                const double hh = *std::max_element(b.high.begin() + static_cast<std::ptrdiff_t>(lo(k)),
                                                    b.high.begin() + static_cast<std::ptrdiff_t>(t) + 1);
                const double ll = *std::min_element(b.low.begin() + static_cast<std::ptrdiff_t>(lo(k)),
                                                    b.low.begin() + static_cast<std::ptrdiff_t>(t) + 1);
                return 2.0 * safe_div(c - ll, hh - ll) - 1.0;
            };
            f[20] = channel(32);
            double path = 0;
            for (std::size_t j = rlo(32); j <= t && t > s; ++j) path += std::abs(b.close[j] - b.close[j - 1]);
            f[21] = safe_div(c - b.close[lag(32)], path);
            // Oscillators.
            double gain = 0, loss = 0;
            for (std::size_t j = rlo(14); j <= t && t > s; ++j) {
                const double d = b.close[j] - b.close[j - 1];
                (d > 0 ? gain : loss) += std::abs(d);
            }
            f[22] = safe_div(gain - loss, gain + loss);
            f[23] = channel(14);
            const double tp_sma = mean(tp, lo(20), t);
            double md = 0;
            for (std::size_t j = lo(20); j <= t; ++j) md += std::abs(tp[j] - tp_sma);
            md /= static_cast<double>(t - lo(20) + 1);
            f[24] = safe_div(tp[t] - tp_sma, 0.015 * md) / 100.0;
            f[25] = safe_div(c - mean(b.close, lo(20), t), stddev(b.close, lo(20), t));
            f[26] = safe_div(r[t], rv32);
            // ATR, range and bar shape.
            const double atr14 = mean(tr, lo(14), t);
            const double atr64 = mean(tr, lo(64), t);
            out.atr[t] = atr14;
            f[27] = atr14 / c;
            f[28] = std::log(safe_div(atr14, atr64) + 1e-12);
            f[29] = std::log(h / l);
            f[30] = safe_div(h - l, atr14);
            f[31] = safe_div(c - o, h - l);
            f[32] = safe_div(h - std::max(o, c), h - l);
            f[33] = safe_div(std::min(o, c) - l, h - l);
            f[34] = h > l ? 2.0 * (c - l) / (h - l) - 1.0 : 0.0;  // a zero-range bar closes mid-range
            // Volume (all 0 when the source has no volume column).
            f[35] = safe_div(lv[t] - mean(lv, lo(32), t), stddev(lv, lo(32), t));
            f[36] = std::log((mean(b.volume, lo(8), t) + 1.0) / (mean(b.volume, lo(32), t) + 1.0));
            double sv = 0, vs = 0;
            for (std::size_t j = rlo(32); j <= t && t > s; ++j) {
                sv += (r[j] > 0 ? 1.0 : r[j] < 0 ? -1.0 : 0.0) * b.volume[j];
                vs += b.volume[j];
            }
            f[37] = safe_div(sv, vs);
            // Calendar (UTC). Cycle: time of day (intraday) or day of year (daily).
            const std::int64_t ts = b.time[t];
            const std::int64_t days = ts >= 0 ? ts / 86400 : -((-ts + 86399) / 86400);
            const double cycle = config.daily_calendar ? std::fmod(static_cast<double>(days), 365.2425) / 365.2425
                                                       : static_cast<double>(ts - days * 86400) / 86400.0;
            const auto dow = static_cast<double>(((days + 3) % 7 + 7) % 7);  // Monday = 0
            f[38] = std::sin(kTwoPi * cycle);
            f[39] = std::cos(kTwoPi * cycle);
            f[40] = std::sin(kTwoPi * dow / 7.0);
            f[41] = std::cos(kTwoPi * dow / 7.0);

            float* row = &out.values[t * D];
            for (int k = 0; k < D; ++k) row[k] = std::isfinite(f[k]) ? static_cast<float>(f[k]) : 0.0f;
        }
    }
    return out;
}

RawFeatures compute_features(const BarSeries& bars, const FeatureConfig& config) {
    if (config.feature_set == "core42") return compute_core42(bars, config);
    throw UsageError(
        fmt::format("data.feature_set = \"{}\" is not a known feature set; expected \"core42\"", config.feature_set));
}

}  // namespace fh::data
