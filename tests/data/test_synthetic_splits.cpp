/// @file test_synthetic_splits.cpp
/// @brief Synthetic market (determinism, OHLC invariants, planted strength), splits,
///        bars_per_year inference, normalisation, the episode-start rule.
#include <catch2/catch.hpp>

#include <cmath>

#include "data/csv_bars.hpp"
#include "data/load.hpp"
#include "data/splits.hpp"
#include "data/synthetic_market.hpp"
#include "util/errors.hpp"

using namespace fh::data;

TEST_CASE("synthetic: deterministic for a seed, different across seeds", "[data]") {
    const auto a = generate_synthetic({5000, 42, 0.1});
    const auto b = generate_synthetic({5000, 42, 0.1});
    const auto c = generate_synthetic({5000, 43, 0.1});
    CHECK((a.close == b.close));
    CHECK(a.high == b.high);
    CHECK(a.volume == b.volume);
    CHECK(a.time == b.time);
    CHECK((a.close != c.close));
    // A shorter run is a prefix of a longer one.
    const auto s = generate_synthetic({1000, 42, 0.1});
    CHECK(std::equal(s.close.begin(), s.close.end(), a.close.begin()));
}

TEST_CASE("synthetic: OHLC invariants, volume, time", "[data]") {
    const auto b = generate_synthetic({20000, 7, 0.3});
    REQUIRE(b.size() == 20000);
    CHECK(b.has_volume);
    for (std::size_t t = 0; t < b.size(); ++t) {
        INFO("t = " << t);
        REQUIRE(b.low[t] > 0);
        REQUIRE(b.low[t] <= std::min(b.open[t], b.close[t]));
        REQUIRE(b.high[t] >= std::max(b.open[t], b.close[t]));
        REQUIRE(b.volume[t] >= 0);
        REQUIRE(std::isfinite(b.volume[t]));
        if (t > 0) {
            REQUIRE(b.open[t] == b.close[t - 1]);  // no gaps
            REQUIRE(b.time[t] > b.time[t - 1]);
        }
        // 23 hourly bars Monday..Friday, 00:00..22:00 UTC.
        const std::int64_t days = b.time[t] / 86400;
        REQUIRE((days + 3) % 7 < 5);
        REQUIRE(b.time[t] % 86400 <= 22 * 3600);
    }
    // It round-trips through the CSV reader (it is valid data).
    std::string csv = "timestamp,open,high,low,close,volume\n";
    char buf[200];
    for (std::size_t t = 0; t < 500; ++t) {
        std::snprintf(buf, sizeof buf, "%lld,%.17g,%.17g,%.17g,%.17g,%.17g\n", static_cast<long long>(b.time[t]),
                      b.open[t], b.high[t], b.low[t], b.close[t], b.volume[t]);
        csv += buf;
    }
    const auto r = parse_csv_bars(csv, "synthetic.csv");
    CHECK(std::equal(r.close.begin(), r.close.end(), b.close.begin()));
}

TEST_CASE("synthetic: volatility clusters (|r| autocorrelated) and regimes switch", "[data]") {
    const auto b = generate_synthetic({50000, 5, 0.0});
    std::vector<double> a;
    for (std::size_t t = 1; t < b.size(); ++t) a.push_back(std::abs(std::log(b.close[t] / b.close[t - 1])));
    double m = 0;
    for (double x : a) m += x / static_cast<double>(a.size());
    double num = 0, den = 0;
    for (std::size_t t = 1; t < a.size(); ++t) num += (a[t] - m) * (a[t - 1] - m);
    for (double x : a) den += (x - m) * (x - m);
    CHECK(num / den > 0.05);  // i.i.d. returns would give ~0 (+-0.005)
}

TEST_CASE("synthetic: the planted component's strength is measurable", "[data]") {
    for (double k : {0.0, 0.1, 0.3, -0.2}) {
        INFO("planted_signal = " << k);
        const auto b = generate_synthetic({60000, 99, k});
        const SplitRange all{0, b.size()};
        const auto o = planted_oracle(b, all, k, 5796);
        CHECK(o.bars == b.size() - 1);
        // Hit rate of the oracle matches Phi(|k| / sqrt(1 - k^2)) within sampling error (+-0.006).
        CHECK(o.hit_rate == Approx(o.expected_hit_rate).margin(0.01));
        if (k == 0.0) {
            CHECK(std::abs(o.sharpe_per_bar) < 0.02);
        } else {
            // Sharpe per bar ~ |k| E[sigma] / sqrt(E[sigma^2]) (docs/data.md): a bit below |k|.
            CHECK(o.sharpe_per_bar > 0.75 * std::abs(k));
            CHECK(o.sharpe_per_bar < 1.05 * std::abs(k));
        }
        // The observable is the sign of core42's raw ret_1.
        CHECK(planted_observable(b, 0) == 0);
        CHECK(planted_observable(b, 10) == (b.close[10] > b.close[9] ? 1 : -1));
    }
    CHECK_THROWS_AS(generate_synthetic({100, 1, 1.0}), fh::UsageError);
    CHECK_THROWS_AS(generate_synthetic({1, 1, 0.0}), fh::UsageError);
}

TEST_CASE("splits: by time from the fractions", "[data]") {
    MarketData md;
    md.bars.close.resize(1000);
    make_splits(md, {0.7, 0.15, 0.15});
    CHECK(md.train.begin == 0);
    CHECK(md.train.end == 700);
    CHECK(md.val.begin == 700);
    CHECK(md.val.end == 850);
    CHECK(md.test.begin == 850);
    CHECK(md.test.end == 1000);
    make_splits(md, {0.5, 0.2, 0.1});  // sum < 1: the last 20% are unused
    CHECK(md.test.begin == 700);
    CHECK(md.test.end == 800);
    make_splits(md, {1.0, 0.0, 0.0});
    CHECK(md.train.end == 1000);
    CHECK(md.val.size() == 0);
    CHECK(md.test.size() == 0);
    CHECK_THROWS_AS(make_splits(md, {0.8, 0.2, 0.1}), fh::UsageError);
    CHECK_THROWS_AS(make_splits(md, {0.0, 0.5, 0.5}), fh::UsageError);
    CHECK_THROWS_AS(make_splits(md, {0.5, -0.1, 0.1}), fh::UsageError);
}

TEST_CASE("splits: bars_per_year inferred from the data", "[data]") {
    // Synthetic: 23 hourly bars on weekdays -> 23 * 5 * 365.2425 / 7 = 5993 bars a year.
    const auto syn = generate_synthetic({30000, 1, 0.0});
    CHECK(median_spacing(syn) == 3600);
    CHECK(infer_bars_per_year(syn) == Approx(23.0 * 5 * 365.2425 / 7).epsilon(0.01));
    // Daily weekday bars over two years -> ~261 a year.
    BarSeries d;
    for (std::int64_t day = days_from_civil(2020, 1, 6); d.size() < 520; ++day)
        if ((day + 3) % 7 < 5) {
            d.time.push_back(day * 86400);
            d.close.push_back(1);
        }
    CHECK(median_spacing(d) == 86400);
    CHECK(infer_bars_per_year(d) == Approx(261).epsilon(0.01));
    // Short daily data (a month) -> 252 trading days.
    BarSeries s = d;
    s.time.resize(20);
    s.close.resize(20);
    CHECK(infer_bars_per_year(s) == 252.0);
    // Short 5-minute data, 78 bars a day (a US equity session) -> 252 * 78.
    BarSeries m;
    for (int day = 0; day < 5; ++day)
        for (int i = 0; i < 78; ++i) {
            m.time.push_back(days_from_civil(2024, 3, 4 + static_cast<unsigned>(day)) * 86400 + 14 * 3600 + 30 * 60 +
                             i * 300);
            m.close.push_back(1);
        }
    CHECK(median_spacing(m) == 300);
    CHECK(infer_bars_per_year(m) == 252.0 * 78);
}

TEST_CASE("normalisation: training-split statistics only, clipped z-scores", "[data]") {
    BarSeries b;
    RawFeatures raw;
    raw.dim = 2;
    for (int t = 0; t < 10; ++t) {
        b.close.push_back(1);
        raw.values.push_back(static_cast<float>(t < 6 ? t % 2 : 1000));  // test rows are wild
        raw.values.push_back(3.0f);                                      // constant feature
    }
    const auto st = training_stats(raw, b, SplitRange{0, 6}, 2, 5.0f);
    // Rows 2..5 (past the warm-up of 2): 0, 1, 0, 1.
    CHECK(st.mean[0] == 0.5f);
    CHECK(st.stddev[0] == 0.5f);
    CHECK(st.mean[1] == 3.0f);
    CHECK(st.stddev[1] == 1.0f);  // constant: stddev 1, z = 0
    const auto z = normalize(raw, st);
    CHECK(z[2 * 2] == -1.0f);
    CHECK(z[3 * 2] == 1.0f);
    CHECK(z[3 * 2 + 1] == 0.0f);
    CHECK(z[9 * 2] == 5.0f);  // clipped
}

TEST_CASE("load_market: synthetic default, episode starts respect warm-up and segments", "[data]") {
    DataOptions o;
    o.synthetic_bars = 3000;
    o.seed = 5;
    o.planted_signal = 0.2;
    const auto md = load_market(o);
    CHECK(md.source == "synthetic(seed=5)");
    CHECK(md.cache_status == "off");
    CHECK(md.market_dim == 42);
    CHECK(md.feature_names.size() == 42);
    CHECK(md.features.size() == 3000 * 42);
    CHECK(md.atr.size() == 3000);
    CHECK(md.warmup_bars == 128);
    CHECK(md.train.end == 2100);
    CHECK(md.bars_per_year_inferred);
    for (float x : md.features) REQUIRE(std::abs(x) <= md.norm.clip);
    CHECK_FALSE(valid_episode_start(md, md.train, 127));
    CHECK(valid_episode_start(md, md.train, 128));
    CHECK(valid_episode_start(md, md.train, 2098));
    CHECK_FALSE(valid_episode_start(md, md.train, 2099));  // t + 1 must be inside the split
    CHECK(count_episode_starts(md, md.train) == 2099 - 128);
    CHECK(count_episode_starts(md, md.val) == 449);
    // Train-split features past the warm-up have mean ~0 and stddev ~1 after normalisation.
    double m = 0;
    int c = 0;
    for (std::size_t t = 128; t < 2100; ++t, ++c) m += md.features[t * 42 + 0];
    CHECK(std::abs(m / c) < 0.05);
    const std::string d = describe(md);
    CHECK(d.find("bars:           3000 in 1 segment") != std::string::npos);
    CHECK(d.find("warm-up 128 bars") != std::string::npos);
    CHECK(d.find("train") != std::string::npos);

    // Too few bars for a single episode start past the warm-up is a data error.
    o.synthetic_bars = 150;
    CHECK_THROWS_AS(load_market(o), fh::DataError);
    o.format = "parquet";
    CHECK_THROWS_AS(load_market(o), fh::UsageError);
}
