/// @file test_fxcache.cpp
/// @brief fxcache: xxh64 vectors, round trip, invalidation, corruption detection and rebuild.
#include <catch2/catch.hpp>

#include <filesystem>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>

#include "data/csv_bars.hpp"
#include "data/fxcache.hpp"
#include "data/load.hpp"
#include "data/synthetic_market.hpp"
#include "data_test_util.hpp"
#include "util/errors.hpp"

using namespace fh::data;
namespace fs = std::filesystem;

namespace {

CachePayload sample_payload() {
    CachePayload p;
    p.bars = generate_synthetic({400, 3, 0.1});
    p.bars.segment_starts = {0, 250};
    p.bars.segment_names = {"a.csv", "b.csv"};
    p.raw = compute_core42(p.bars, {});
    p.daily_calendar = true;
    return p;
}

void flip_byte(const std::string& path, std::size_t offset) {
    std::string bytes = read_file_bytes(path);
    bytes[offset] = static_cast<char>(bytes[offset] ^ 0x40);
    fh::test::write_text(path, bytes);
}

std::string csv_of_synthetic(std::size_t n, std::uint64_t seed) {
    const auto b = generate_synthetic({static_cast<std::int64_t>(n), seed, 0.0});
    return fh::test::to_csv(b, 0, n);
}

}  // namespace

TEST_CASE("fxcache: xxh64 matches the reference vectors", "[data]") {
    CHECK(xxh64(std::string_view("")) == 0xEF46DB3751D8E999ull);
    CHECK(xxh64(std::string_view("abc")) == 0x44BC2CF5AD770999ull);
    CHECK(xxh64(std::string_view("Nobody inspects the spammish repetition")) == 0xFBCEA83C8A378BF1ull);
    // Every length path (<4, <8, <32, >=32) is sensitive to every byte.
    std::string s(100, 'x');
    for (std::size_t len : {1u, 5u, 9u, 31u, 32u, 33u, 64u, 100u}) {
        const auto h = xxh64(std::string_view(s).substr(0, len));
        std::string t = s.substr(0, len);
        t[len - 1] = 'y';
        CHECK(xxh64(t) != h);
    }
}

TEST_CASE("fxcache: round trip", "[data]") {
    fh::test::TempDir dir;
    const auto p = sample_payload();
    const CacheKey key{123, feature_config_hash("core42")};
    const std::string path = dir.file("sub/dir/x.fxcache");
    std::string why;
    REQUIRE(write_fxcache(path, key, p, &why));
    CHECK(fs::exists(path));
    for (auto& e : fs::directory_iterator(dir.path / "sub/dir"))
        CHECK(e.path().filename() == "x.fxcache");  // no temp left
    CachePayload q;
    REQUIRE(read_fxcache(path, key, &q, &why));
    CHECK(q.bars.time == p.bars.time);
    CHECK(q.bars.open == p.bars.open);
    CHECK(q.bars.high == p.bars.high);
    CHECK(q.bars.low == p.bars.low);
    CHECK(q.bars.close == p.bars.close);
    CHECK(q.bars.volume == p.bars.volume);
    CHECK(q.bars.has_volume == p.bars.has_volume);
    CHECK(q.bars.segment_starts == p.bars.segment_starts);
    CHECK(q.bars.segment_names == p.bars.segment_names);
    CHECK(q.raw.dim == 42);
    CHECK((q.raw.values == p.raw.values));
    CHECK(q.raw.atr == p.raw.atr);
    CHECK(q.daily_calendar);
}

TEST_CASE("fxcache: stale, truncated, corrupted and wrong-version files are rejected", "[data]") {
    fh::test::TempDir dir;
    const auto p = sample_payload();
    const CacheKey key{123, feature_config_hash("core42")};
    const std::string path = dir.file("x.fxcache");
    std::string why;
    CachePayload q;
    REQUIRE(write_fxcache(path, key, p, &why));
    const std::string good = read_file_bytes(path);

    CHECK_FALSE(read_fxcache(path, CacheKey{124, key.config_hash}, &q, &why));
    CHECK(why.find("stale: the source data changed") == 0);
    CHECK_FALSE(read_fxcache(path, CacheKey{123, feature_config_hash("core43")}, &q, &why));
    CHECK(why.find("stale: the feature configuration") == 0);
    CHECK_FALSE(read_fxcache(dir.file("none.fxcache"), key, &q, &why));
    CHECK(why == "no cache file");

    for (std::size_t cut :
         {std::size_t{0}, std::size_t{10}, std::size_t{63}, std::size_t{64}, good.size() / 2, good.size() - 1}) {
        INFO("cut to " << cut);
        fh::test::write_text(path, good.substr(0, cut));
        CHECK_FALSE(read_fxcache(path, key, &q, &why));
        CHECK(why.find("truncated") == 0);
    }
    for (std::size_t off : {std::size_t{64}, std::size_t{100}, good.size() / 2, good.size() - 1}) {
        INFO("flip at " << off);
        fh::test::write_text(path, good);
        flip_byte(path, off);
        CHECK_FALSE(read_fxcache(path, key, &q, &why));
        CHECK(why == "corrupt: payload checksum mismatch");
    }
    fh::test::write_text(path, good);
    flip_byte(path, 8);  // version field
    CHECK_FALSE(read_fxcache(path, key, &q, &why));
    CHECK(why.find("format version") == 0);
    fh::test::write_text(path, good);
    flip_byte(path, 0);  // magic
    CHECK_FALSE(read_fxcache(path, key, &q, &why));
    CHECK(why.find("not an fxcache file") == 0);
    fh::test::write_text(path, good);
    flip_byte(path, 40);  // checksum field itself
    CHECK_FALSE(read_fxcache(path, key, &q, &why));
    fh::test::write_text(path, good);
    REQUIRE(read_fxcache(path, key, &q, &why));
}

TEST_CASE("fxcache: load_market builds, reuses, and rebuilds when data, config or file change", "[data]") {
    fh::test::TempDir dir;
    const std::string csv = dir.file("bars.csv");
    fh::test::write_text(csv, csv_of_synthetic(1500, 8));
    DataOptions o;
    o.path = csv;
    o.cache_dir = dir.file("cache");

    const auto a = load_market(o);
    CHECK(a.cache_status == "built");
    CHECK(a.cache_path == fxcache_path(o));
    CHECK(fs::exists(a.cache_path));
    const auto b = load_market(o);
    CHECK(b.cache_status == "reused");
    CHECK((b.features == a.features));
    CHECK((b.atr == a.atr));
    CHECK((b.bars.close == a.bars.close));
    CHECK((b.bars.time == a.bars.time));

    // Different split fractions reuse the cache (normalisation is recomputed).
    o.train_fraction = 0.6;
    const auto c = load_market(o);
    CHECK(c.cache_status == "reused");
    CHECK(c.norm.mean != a.norm.mean);
    o.train_fraction = 0.7;

    // Data change -> stale -> rebuilt.
    fh::test::write_text(csv, csv_of_synthetic(1501, 8));
    const auto d = load_market(o);
    CHECK(d.cache_status.rfind("rebuilt (stale: the source data changed", 0) == 0);
    CHECK(d.bars.size() == 1501);
    CHECK(load_market(o).cache_status == "reused");

    // Feature configuration change: an unknown set is a usage error, never a cache hit.
    o.feature_set = "core43";
    CHECK_THROWS_AS(load_market(o), fh::UsageError);
    o.feature_set = "core42";

    // Truncated and corrupted files are rebuilt.
    const std::string bytes = read_file_bytes(d.cache_path);
    fh::test::write_text(d.cache_path, bytes.substr(0, bytes.size() / 3));
    CHECK(load_market(o).cache_status.rfind("rebuilt (truncated", 0) == 0);
    flip_byte(d.cache_path, bytes.size() / 2);
    CHECK(load_market(o).cache_status == "rebuilt (corrupt: payload checksum mismatch)");
    CHECK(load_market(o).cache_status == "reused");

    // cache_dir "" -> next to the data.
    o.cache_dir = "";
    const auto e = load_market(o);
    CHECK(e.cache_path == fs::weakly_canonical(csv).string() + ".fxcache");
    CHECK(e.cache_status == "built");
    CHECK(load_market(o).cache_status == "reused");
    // use_cache = false: neither read nor written.
    o.use_cache = false;
    CHECK(load_market(o).cache_status == "off");
}

TEST_CASE("fxcache: a contract directory is cached as one source", "[data]") {
    fh::test::TempDir dir;
    fs::create_directories(dir.path / "es");
    const auto b = generate_synthetic({800, 4, 0.0});
    fh::test::write_text(dir.file("es/ESH24.csv"), fh::test::to_csv(b, 0, 400));
    fh::test::write_text(dir.file("es/ESM24.csv"), fh::test::to_csv(b, 400, 800));
    DataOptions o;
    o.path = dir.file("es");
    o.cache_dir = dir.file("cache");
    const auto a = load_market(o);
    CHECK(a.bars.segment_starts == std::vector<std::size_t>{0, 400});
    CHECK(a.cache_status == "built");
    // Episodes never span the boundary; each segment has its own warm-up.
    CHECK_FALSE(valid_episode_start(a, a.train, 399));
    CHECK_FALSE(valid_episode_start(a, a.train, 400 + 127));
    CHECK(valid_episode_start(a, a.train, 400 + 128));
    CHECK(load_market(o).cache_status == "reused");
    // Changing one file invalidates.
    fh::test::write_text(dir.file("es/ESM24.csv"), fh::test::to_csv(b, 400, 799));
    CHECK(load_market(o).cache_status.rfind("rebuilt (stale", 0) == 0);
}

TEST_CASE("fxcache: the synthetic market is cached only with a cache_dir, keyed by its parameters", "[data]") {
    fh::test::TempDir dir;
    DataOptions o;
    o.synthetic_bars = 1000;
    o.seed = 9;
    CHECK(fxcache_path(o).empty());
    CHECK(load_market(o).cache_status == "off");
    o.cache_dir = dir.file("cache");
    const auto a = load_market(o);
    CHECK(a.cache_status == "built");
    const auto b = load_market(o);
    CHECK(b.cache_status == "reused");
    CHECK((b.features == a.features));
    o.seed = 10;  // another market, another file
    CHECK(fxcache_path(o) != a.cache_path);
    CHECK(load_market(o).cache_status == "built");
    o.planted_signal = 0.1;
    CHECK(load_market(o).cache_status == "built");
}

TEST_CASE("fxcache: contents are validated whatever the checksum says", "[data]") {
    fh::test::TempDir dir;
    const CacheKey key{123, feature_config_hash("core42")};
    const std::string path = dir.file("x.fxcache");
    const double nan = std::numeric_limits<double>::quiet_NaN();
    struct Case {
        const char* what;
        std::function<void(CachePayload&)> edit;
        std::string why;
    };
    const std::vector<Case> cases = {
        {"NaN close", [&](CachePayload& p) { p.bars.close[10] = nan; }, "corrupt: bar 10: price nan is not finite"},
        {"negative close", [](CachePayload& p) { p.bars.close[11] = -p.bars.close[11]; }, "corrupt: bar 11: price -"},
        {"backwards time", [](CachePayload& p) { p.bars.time[20] = p.bars.time[18]; }, "corrupt: bar 20: time"},
        {"high < low", [](CachePayload& p) { std::swap(p.bars.high[30], p.bars.low[30]); }, "corrupt: bar 30: open"},
        {"infinite feature",
         [](CachePayload& p) { p.raw.values[42 * 40 + 7] = std::numeric_limits<float>::infinity(); },
         "corrupt: bar 40: feature 7 is inf"},
        {"NaN ATR", [&](CachePayload& p) { p.raw.atr[50] = nan; }, "corrupt: bar 50: ATR nan"},
        {"negative volume", [](CachePayload& p) { p.bars.volume[60] = -1; }, "corrupt: bar 60: volume -1"},
    };
    for (const auto& c : cases) {
        INFO(c.what);
        CachePayload p = sample_payload();
        c.edit(p);
        std::string why;
        REQUIRE(write_fxcache(path, key, p, &why));  // written with a matching checksum
        CachePayload q;
        CHECK_FALSE(read_fxcache(path, key, &q, &why));
        CHECK_THAT(why, Catch::StartsWith(c.why));
    }
}

TEST_CASE("fxcache: a cache of a CSV with a price out of range is rebuilt from the CSV", "[data]") {
    fh::test::TempDir dir;
    const std::string csv = dir.file("bars.csv");
    fh::test::write_text(csv, csv_of_synthetic(1500, 8));
    DataOptions o;
    o.path = csv;
    o.cache_dir = dir.file("cache");
    REQUIRE(load_market(o).cache_status == "built");
    // A cache with the source's key, a valid checksum and a close of 1e300 (finite and positive).
    const std::string bytes = read_file_bytes(fxcache_path(o));
    CacheKey key;
    std::memcpy(&key.source_hash, bytes.data() + 16, 8);
    std::memcpy(&key.config_hash, bytes.data() + 24, 8);
    CachePayload p;
    std::string why;
    REQUIRE(read_fxcache(fxcache_path(o), key, &p, &why));
    p.bars.close[700] = 1e300;
    p.bars.high[700] = 1e300;
    REQUIRE(write_fxcache(fxcache_path(o), key, p, &why));
    const auto md = load_market(o);
    CHECK_THAT(md.cache_status,
               Catch::StartsWith("rebuilt (corrupt: bar 700: price 1e+300 is outside [1e-09, 1000000000]"));
    CHECK(md.bars.close[700] < 1e6);
}
