/// @file test_data_bench.cpp
/// @brief [.bench] measurements, hidden by default: CSV rows/s on 1M rows, and the first
///        (parse + features + cache write) vs second (cache reuse) load of the same file.
///        Run: build-data/tests/foxhunt-tests "[.bench]"
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>

#include "data/csv_bars.hpp"
#include "data/load.hpp"
#include "data/synthetic_market.hpp"
#include "data_test_util.hpp"

using namespace fh::data;

namespace {
double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// CSV of n synthetic bars with ISO date-times (the slower time format), like vendor exports.
std::string iso_csv(std::size_t n) {
    const auto b = generate_synthetic({static_cast<std::int64_t>(n), 17, 0.05});
    std::string s = "datetime,open,high,low,close,volume\n";
    s.reserve(n * 80);
    char buf[200];
    for (std::size_t i = 0; i < n; ++i) {
        const std::string t = format_time(b.time[i]);
        std::snprintf(buf, sizeof buf, "%s,%.2f,%.2f,%.2f,%.2f,%.0f\n", t.c_str(), b.open[i], b.high[i] + 0.01,
                      b.low[i] - 0.01, b.close[i], b.volume[i]);
        s += buf;
    }
    return s;
}
}  // namespace

TEST_CASE("bench: CSV parse rows/s on 1M rows", "[.bench]") {
    const std::size_t n = 1000000;
    const std::string text = iso_csv(n);
    double best = 1e9;
    for (int rep = 0; rep < 3; ++rep) {
        const double t0 = now_s();
        const auto b = parse_csv_bars(text, "bench.csv");
        best = std::min(best, now_s() - t0);
        REQUIRE(b.size() == n);
    }
    std::printf("csv parse: %zu rows, %.1f MB, best of 3: %.3f s = %.2f M rows/s (%.0f MB/s)\n", n,
                static_cast<double>(text.size()) / 1e6, best, static_cast<double>(n) / best / 1e6,
                static_cast<double>(text.size()) / best / 1e6);
}

TEST_CASE("bench: first load vs fxcache reuse", "[.bench]") {
    fh::test::TempDir dir;
    for (std::size_t n : {std::size_t{5000}, std::size_t{200000}, std::size_t{1000000}}) {
        const std::string csv = dir.file("bars" + std::to_string(n) + ".csv");
        fh::test::write_text(csv, iso_csv(n));
        DataOptions o;
        o.path = csv;
        o.cache_dir = dir.file("cache");
        double t0 = now_s();
        const auto a = load_market(o);
        const double first = now_s() - t0;
        t0 = now_s();
        const auto b = load_market(o);
        const double second = now_s() - t0;
        REQUIRE(a.cache_status == "built");
        REQUIRE(b.cache_status == "reused");
        REQUIRE(a.features.size() == b.features.size());
        REQUIRE(std::equal(a.features.begin(), a.features.end(), b.features.begin()));
        std::printf("load %7zu bars: first %.3f s (parse + core42 + write), second %.3f s (fxcache), %.1fx faster\n", n,
                    first, second, first / second);
    }
}
