/// @file synthetic_market.cpp
/// @brief The synthetic market's generating process, step by step as in docs/data.md.
#include "data/synthetic_market.hpp"

#include <fmt/format.h>

#include <cmath>
#include <numbers>

#include "util/errors.hpp"

namespace fh::data {
namespace {

/// splitmix64 -> xoshiro256** : fully specified, so a seed gives the same market everywhere.
struct Rng {
    std::uint64_t s[4];
    explicit Rng(std::uint64_t seed) {
        for (auto& x : s) {
            seed += 0x9E3779B97F4A7C15ull;
            std::uint64_t z = seed;
            z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
            z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
            x = z ^ (z >> 31);
        }
    }
    static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
    std::uint64_t next() {
        const std::uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
        s[2] ^= s[0], s[3] ^= s[1], s[1] ^= s[2], s[0] ^= s[3], s[2] ^= t, s[3] = rotl(s[3], 45);
        return r;
    }
    /// Uniform in (0, 1): 53 random bits, never 0.
    double uniform() { return (static_cast<double>(next() >> 11) + 0.5) * 0x1.0p-53; }
    /// Standard normal by Box-Muller (one draw per call: two uniforms).
    double normal() {
        const double u1 = uniform(), u2 = uniform();
        return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
    }
};

// Documented constants (docs/data.md).
constexpr double kStartPrice = 4000.0;
constexpr double kSigmaBase = 0.002;  // per-bar log-return volatility scale
constexpr double kGarchA = 0.05, kGarchB = 0.93;
constexpr double kStay = 0.995;  // regime persistence per bar
constexpr double kDrift[3] = {0.00002, 0.0, -0.00004};
constexpr double kVolMult[3] = {0.8, 1.0, 1.8};
constexpr int kBarsPerDay = 23;                  // hourly bars 00:00..22:00 UTC, Monday..Friday
constexpr std::int64_t kStartTime = 1420416000;  // 2015-01-05T00:00:00Z, a Monday

}  // namespace

BarSeries generate_synthetic(const SyntheticOptions& opt) {
    if (opt.bars < 2) throw UsageError(fmt::format("data.synthetic_bars = {}: expected at least 2 bars", opt.bars));
    if (!(std::abs(opt.planted_signal) < 1.0))
        throw UsageError(fmt::format("data.planted_signal = {}: expected a value in (-1, 1)", opt.planted_signal));
    const auto n = static_cast<std::size_t>(opt.bars);
    const double k = opt.planted_signal;
    const double kc = std::sqrt(1.0 - k * k);
    Rng rng(opt.seed);

    BarSeries b;
    b.has_volume = true;
    b.segment_names = {"synthetic"};
    for (auto* v : {&b.open, &b.high, &b.low, &b.close, &b.volume}) v->resize(n);
    b.time.resize(n);

    int regime = 1;
    double h = 1.0;       // GARCH variance multiplier, E[h] = 1
    double prev_e = 0.0;  // previous standardized shock e_{t-1}
    double prev_r = 0.0;  // previous log return r_{t-1}
    double prev_close = kStartPrice;
    for (std::size_t t = 0; t < n; ++t) {
        // 1. Regime: stay with probability kStay, else move to one of the other two.
        const double u = rng.uniform();
        if (t > 0 && u >= kStay) regime = (regime + 1 + (u >= kStay + (1.0 - kStay) / 2 ? 1 : 0)) % 3;
        // 2. GARCH(1,1) variance on the standardized shocks.
        if (t > 0) h = (1.0 - kGarchA - kGarchB) + kGarchA * prev_e * prev_e + kGarchB * h;
        const double sigma = kSigmaBase * kVolMult[regime] * std::sqrt(h);
        // 3. Shock with the planted component: e_t = k * s_{t-1} + sqrt(1 - k^2) * z_t.
        const double z = rng.normal();
        const double s_prev = t == 0 ? 0.0 : (prev_r > 0 ? 1.0 : prev_r < 0 ? -1.0 : 0.0);
        const double e = k * s_prev + kc * z;
        const double r = kDrift[regime] + sigma * e;
        // 4. OHLC: no gaps (open = previous close); wicks beyond the body.
        const double open = prev_close;
        const double close = open * std::exp(r);
        const double w_hi = 0.5 * sigma * std::abs(rng.normal());
        const double w_lo = 0.5 * sigma * std::abs(rng.normal());
        // 5. Volume: intraday U-shape, more volume on large shocks, lognormal noise.
        const std::int64_t day = static_cast<std::int64_t>(t) / kBarsPerDay;
        const int hour = static_cast<int>(static_cast<std::int64_t>(t) % kBarsPerDay);
        const double ushape = 1.0 + 0.5 * std::cos(2.0 * std::numbers::pi * (hour - 14.5) / kBarsPerDay);
        const double vol = std::round(1000.0 * ushape * std::exp(0.5 * (std::abs(e) - 0.8) + 0.3 * rng.normal()));

        b.open[t] = open;
        b.close[t] = close;
        b.high[t] = std::max(open, close) * std::exp(w_hi);
        b.low[t] = std::min(open, close) * std::exp(-w_lo);
        b.volume[t] = vol;
        // Trading days Monday..Friday: week w, weekday d.
        b.time[t] = kStartTime + (day / 5) * 7 * 86400 + (day % 5) * 86400 + hour * 3600;
        prev_e = e;
        prev_r = r;
        prev_close = close;
    }
    return b;
}

int planted_observable(const BarSeries& bars, std::size_t t) noexcept {
    if (t == 0 || t >= bars.size() || bars.segment_begin(t) == t) return 0;
    const double r = std::log(bars.close[t] / bars.close[t - 1]);
    return r > 0 ? 1 : r < 0 ? -1 : 0;
}

OracleResult planted_oracle(const BarSeries& bars, const SplitRange& split, double k, double bars_per_year) {
    OracleResult res;
    const int sign_k = k < 0 ? -1 : 1;  // k = 0: the momentum policy, expected to earn nothing
    double sum = 0, sq = 0;
    std::size_t hits = 0, n = 0;
    for (std::size_t t = split.begin; t + 1 < split.end; ++t) {
        if (t + 1 >= bars.segment_end(t)) continue;
        const int pos = sign_k * planted_observable(bars, t);
        // Entered at open(t+1) = close(t) (no gaps in the synthetic market), marked at close(t+1).
        const double ret = pos * std::log(bars.close[t + 1] / bars.close[t]);
        sum += ret;
        sq += ret * ret;
        hits += ret > 0;
        ++n;
    }
    res.bars = n;
    if (n == 0) return res;
    res.mean_return = sum / static_cast<double>(n);
    res.stddev_return = std::sqrt(std::max(0.0, sq / static_cast<double>(n) - res.mean_return * res.mean_return));
    res.sharpe_per_bar = res.stddev_return > 0 ? res.mean_return / res.stddev_return : 0.0;
    res.sharpe_annualized = res.sharpe_per_bar * std::sqrt(bars_per_year);
    res.hit_rate = static_cast<double>(hits) / static_cast<double>(n);
    const double x = std::abs(k) / std::sqrt(1.0 - k * k);
    res.expected_hit_rate = 0.5 * std::erfc(-x / std::numbers::sqrt2);
    return res;
}

}  // namespace fh::data
