/// @file load.cpp
/// @brief load_market: source -> (fxcache | parse + features) -> splits -> normalisation.
#include "data/load.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <mutex>
#include <stdexcept>
#include <system_error>
#include <utility>
#include <vector>

#include "data/csv_bars.hpp"
#include "data/features.hpp"
#include "data/fxcache.hpp"
#include "data/splits.hpp"
#include "data/synthetic_market.hpp"
#include "data/walk_forward.hpp"
#include "util/errors.hpp"
#include "util/fault.hpp"
#include "util/log.hpp"

namespace fh::data {
namespace {

namespace fs = std::filesystem;

/// One source file's name and bytes.
struct SourceFile {
    std::string name;
    std::string bytes;
};

std::string synthetic_descriptor(const DataOptions& o) {
    return fmt::format("synthetic;bars={};seed={};planted={:a};generator={}", o.synthetic_bars, o.seed,
                       o.planted_signal, kSyntheticVersion);
}

void check_options(const DataOptions& o) {
    if (o.format != "auto" && o.format != "csv")
        throw UsageError(fmt::format("data.format = \"{}\": expected \"auto\" or \"csv\"", o.format));
    if (!(o.bars_per_year >= 0) || !std::isfinite(o.bars_per_year))
        throw UsageError(
            fmt::format("instrument.bars_per_year = {}: expected 0 (infer) or a positive number", o.bars_per_year));
    if (o.feature_set != "core42")
        throw UsageError(
            fmt::format("data.feature_set = \"{}\" is not a known feature set; expected \"core42\"", o.feature_set));
    if (!(o.norm_clip > 0)) throw UsageError("the normalisation clip must be positive");
}

/// Reads the source files (a file, or every *.csv of a directory sorted by name).
std::vector<SourceFile> read_sources(const std::string& path) {
    std::error_code ec;
    if (!fs::exists(path, ec))
        throw DataError(
            fmt::format("{}: {}; data.path must name a CSV file or a directory "
                        "of CSV files (or be empty for the synthetic market)",
                        path, ec ? ec.message() : std::string("no such file or directory")));
    std::vector<SourceFile> files;
    if (fs::is_directory(path, ec)) {
        for (auto& f : list_csv_files(path)) files.push_back({f, read_file_bytes(f)});
    } else {
        files.push_back({path, read_file_bytes(path)});
    }
    return files;
}

std::uint64_t hash_sources(const std::vector<SourceFile>& files) {
    std::string acc;
    for (const auto& f : files) {
        const std::string base = fs::path(f.name).filename().string();
        acc += fmt::format("{}:{}:{:016x};", base, f.bytes.size(), xxh64(f.bytes));
    }
    return xxh64(acc);
}

/// Parses every file and joins them as consecutive contracts ordered by their first bar.
BarSeries parse_sources(const std::vector<SourceFile>& files) {
    std::vector<BarSeries> parts;
    parts.reserve(files.size());
    for (const auto& f : files) parts.push_back(parse_csv_bars(f.bytes, f.name));
    return join_contracts(std::move(parts));
}

/// FH_PLANT_LOOKAHEAD (util/fault.hpp, tests only): the feature `name` of every bar takes the
/// value of the next bar of its segment, a one-bar look-ahead planted on purpose. After the
/// fxcache, so that no cache file ever holds it.
void plant_lookahead(RawFeatures& raw, const BarSeries& bars, const std::string& name) {
    const auto& names = core42_names();
    const auto it = std::find(names.begin(), names.end(), name);
    if (it == names.end())
        throw UsageError(fmt::format("FH_PLANT_LOOKAHEAD={}: no such feature (docs/features.md lists them)", name));
    const auto k = static_cast<std::size_t>(it - names.begin());
    const auto D = static_cast<std::size_t>(raw.dim);
    static std::once_flag said;  // once per process, not at every load
    std::call_once(said, [&] {
        log::warn("FH_PLANT_LOOKAHEAD: the feature {} reads the next bar (a look-ahead planted on purpose, for a test)",
                  name);
    });
    for (std::size_t t = 0; t < bars.size(); ++t)
        if (t + 1 < bars.segment_end(t)) raw.values[t * D + k] = raw.values[(t + 1) * D + k];
}

}  // namespace

std::string fxcache_path(const DataOptions& o) {
    if (!o.use_cache || o.alter_bars) return "";
    if (o.path.empty()) {
        if (o.cache_dir.empty()) return "";
        return (fs::path(o.cache_dir) / fmt::format("synthetic-{:016x}.fxcache", xxh64(synthetic_descriptor(o))))
            .string();
    }
    std::error_code ec;
    fs::path src = fs::weakly_canonical(fs::path(o.path), ec);
    if (ec) src = fs::absolute(fs::path(o.path));
    if (!src.has_filename()) src = src.parent_path();           // "dir/" -> "dir"
    if (o.cache_dir.empty()) return src.string() + ".fxcache";  // next to the data
    return (fs::path(o.cache_dir) /
            fmt::format("{}-{:08x}.fxcache", src.filename().string(), xxh64(src.string()) & 0xffffffffu))
        .string();
}

namespace {

/// Removes the fxcache file a failed load wrote, on destruction unless dismissed.
struct CacheGuard {
    std::string path;
    ~CacheGuard() {
        if (path.empty()) return;
        std::error_code ec;
        fs::remove(path, ec);
    }
};

}  // namespace

MarketData load_market(const DataOptions& o) {
    const auto t0 = std::chrono::steady_clock::now();
    check_options(o);
    const bool synthetic = o.path.empty();

    std::vector<SourceFile> files;
    CacheKey key;
    key.config_hash = feature_config_hash(o.feature_set);
    if (synthetic) {
        key.source_hash = xxh64(synthetic_descriptor(o));
    } else {
        files = read_sources(o.path);
        key.source_hash = hash_sources(files);
    }

    const std::string cache = fxcache_path(o);
    CachePayload payload;
    std::string status = cache.empty() ? "off" : "";
    CacheGuard written;  // the cache written below, removed if the load fails after it
    if (!cache.empty()) {
        std::string why;
        bool ok = read_fxcache(cache, key, &payload, &why);
        if (ok && payload.raw.dim != kCore42Dim) ok = false, why = "unexpected feature dimension";
        if (ok && !synthetic) {  // a CSV's prices were range-checked when parsed: so must a cache's be
            if (const auto bad = check_bar_series(payload.bars, true); !bad.empty())
                ok = false, why = "corrupt: " + bad;
        }
        if (ok) {
            status = "reused";
        } else if (why != "no cache file") {
            if (why.empty()) why = "unexpected feature dimension";
            log::warn("fxcache: {}: {}; rebuilding", cache, why);
            status = fmt::format("rebuilt ({})", why);
        } else {
            status = "built";
        }
    }
    if (status != "reused") {
        payload.bars =
            synthetic ? generate_synthetic({o.synthetic_bars, o.seed, o.planted_signal}) : parse_sources(files);
        if (o.alter_bars) {
            const std::size_t n = payload.bars.size();
            o.alter_bars(payload.bars);
            if (const auto bad = check_bar_series(payload.bars, false); !bad.empty() || payload.bars.size() != n)
                throw std::logic_error("load_market: alter_bars left an invalid series: " + bad);
        }
        payload.daily_calendar = median_spacing(payload.bars) >= 20 * 3600;
        payload.raw = compute_features(payload.bars, FeatureConfig{o.feature_set, payload.daily_calendar});
        if (!cache.empty()) {
            std::string why;
            if (!write_fxcache(cache, key, payload, &why)) {
                log::warn("fxcache: not written: {}; features will be recomputed next time", why);
                status += " (not written)";
            } else {
                written.path = cache;
            }
        }
    }
    if (const std::string& planted = util::planted_lookahead_feature(); !planted.empty())
        plant_lookahead(payload.raw, payload.bars, planted);
    files.clear();
    files.shrink_to_fit();
    for (const auto& w : sanity_warnings(payload.bars))
        log::warn("data: {}: {}", synthetic ? "synthetic market" : o.path, w);

    MarketData md;
    md.bars = std::move(payload.bars);
    md.source = synthetic ? fmt::format("synthetic(seed={})", o.seed) : o.path;
    md.feature_set = o.feature_set;
    md.market_dim = payload.raw.dim;
    md.feature_names = core42_names();
    md.atr = std::move(payload.raw.atr);
    md.warmup_bars = kCore42Warmup;
    md.daily_calendar = payload.daily_calendar;
    md.median_spacing_s = median_spacing(md.bars);
    md.bars_per_year = o.bars_per_year > 0 ? o.bars_per_year : infer_bars_per_year(md.bars);
    md.bars_per_year_inferred = !(o.bars_per_year > 0);
    md.cache_path = cache;
    md.cache_status = status;
    make_splits(md, SplitFractions{o.train_fraction, o.val_fraction, o.test_fraction});
    if (o.test_range) {
        const std::size_t n = md.bars.size();
        const SplitRange r{o.test_range->begin, o.test_range->end == 0 ? n : o.test_range->end};
        if (r.end > n || r.begin >= r.end)
            throw UsageError(
                fmt::format("the bars [{}, {}) are not a range of the data's {} bars [0, {})", r.begin, r.end, n, n));
        md.test = r;
        if (count_episode_starts(md, md.test) == 0)
            throw DataError(
                fmt::format("{}: the bars [{}, {}) have no bar to trade past the {}-bar feature warm-up of "
                            "their segment",
                            md.source, r.begin, r.end, md.warmup_bars));
    }
    if (o.walk_forward_folds > 0) {  // one fold of a walk-forward (docs/walk-forward.md)
        const auto folds =
            walk_forward_folds(md.bars.size(), SplitFractions{o.train_fraction, o.val_fraction, o.test_fraction},
                               o.walk_forward_folds, o.walk_forward_sliding);
        check_walk_forward_folds(folds, md.warmup_bars, o.episode_length, o.walk_forward_folds);
        const Fold& f = folds.at(static_cast<std::size_t>(o.walk_forward_fold));
        truncate_bars(md, payload.raw.values, payload.raw.dim, f.test.end);
        md.train = f.train;
        md.val = f.val;
        md.test = f.test;
        log::info(
            "data: walk-forward fold {} of {} ({}): train [{}, {}), validation [{}, {}), test [{}, {}); the "
            "bars after it dropped",
            o.walk_forward_fold, o.walk_forward_folds, o.walk_forward_sliding ? "sliding" : "expanding", f.train.begin,
            f.train.end, f.val.begin, f.val.end, f.test.begin, f.test.end);
    }

    if ((!o.test_range || !o.normalization) && count_episode_starts(md, md.train) == 0)
        throw DataError(fmt::format(
            "{}: {} bars give the training split [{}, {}) no episode start: every segment needs more than the "
            "{}-bar feature warm-up plus one bar inside the split; provide more data or raise data.train_fraction",
            md.source, md.bars.size(), md.train.begin, md.train.end, md.warmup_bars));
    for (const auto* sp : {&md.val, &md.test})
        if (sp->size() > 0 && count_episode_starts(md, *sp) == 0)
            log::warn("data: the {} split [{}, {}) has no episode start past the {}-bar warm-up",
                      sp == &md.val ? "validation" : "test", sp->begin, sp->end, md.warmup_bars);

    if (o.normalization) {
        if (o.normalization->mean.size() != static_cast<std::size_t>(md.market_dim) ||
            o.normalization->stddev.size() != o.normalization->mean.size())
            throw UsageError(fmt::format("data: the given normalisation statistics have {} features, the data has {}",
                                         o.normalization->mean.size(), md.market_dim));
        md.norm = *o.normalization;
    } else {
        StatisticsSource source;
        md.norm =
            training_stats(payload.raw, md.bars, md.train, md.warmup_bars, o.norm_clip, o.column_moments, &source);
        md.norm_rows = source.rows;
        md.norm_computed_on = source.computed_on;
    }
    md.features = std::move(payload.raw.values);
    normalize_in_place(md.features, md.norm);
    log::info("data: {} bars from {} in {:.3f} s (fxcache {})", md.bars.size(), md.source,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), md.cache_status);
    written.path.clear();  // loaded: the cache stays
    return md;
}

std::string describe(const MarketData& md) {
    const auto& b = md.bars;
    std::string s;
    s += fmt::format("data:           {}\n", md.source);
    s += fmt::format("bars:           {} in {} segment{} (volume: {})\n", b.size(), b.segment_starts.size(),
                     b.segment_starts.size() == 1 ? "" : "s", b.has_volume ? "yes" : "no");
    if (b.size() > 0)
        s += fmt::format("time range:     {} .. {}\n", format_time(b.time.front()), format_time(b.time.back()));
    s += fmt::format("bar spacing:    median {} s ({} calendar features)\n", md.median_spacing_s,
                     md.daily_calendar ? "daily" : "intraday");
    s += fmt::format("bars_per_year:  {:.1f} ({})\n", md.bars_per_year,
                     md.bars_per_year_inferred ? "inferred from the data" : "from the profile");
    s += fmt::format("features:       {} ({} per bar), warm-up {} bars per segment\n", md.feature_set, md.market_dim,
                     md.warmup_bars);
    auto split = [&](const char* name, const SplitRange& r) {
        return fmt::format("  {:<5} {:>10} bars [{}, {}), {} episode starts{}\n", name, r.size(), r.begin, r.end,
                           count_episode_starts(md, r),
                           r.size() > 0
                               ? fmt::format(", {} .. {}", format_time(b.time[r.begin]), format_time(b.time[r.end - 1]))
                               : std::string());
    };
    s += "splits:\n" + split("train", md.train) + split("val", md.val) + split("test", md.test);
    if (!md.norm.mean.empty()) {
        const auto [mlo, mhi] = std::minmax_element(md.norm.mean.begin(), md.norm.mean.end());
        const auto [slo, shi] = std::minmax_element(md.norm.stddev.begin(), md.norm.stddev.end());
        s += md.norm_rows > 0 ? fmt::format("normalisation:  {} training bars, computed on the {}", md.norm_rows,
                                            md.norm_computed_on)
                              : std::string("normalisation:  given (a checkpoint's)");
        s += fmt::format("; feature means {:.4g} .. {:.4g}, stddevs {:.4g} .. {:.4g}\n", *mlo, *mhi, *slo, *shi);
        if (md.feature_names.size() == md.norm.mean.size())
            s += fmt::format("                {}: mean {:.4g}, stddev {:.4g} per bar\n", md.feature_names.front(),
                             md.norm.mean.front(), md.norm.stddev.front());
    }
    s += fmt::format("fxcache:        {}{}\n", md.cache_status, md.cache_path.empty() ? "" : " " + md.cache_path);
    return s;
}

}  // namespace fh::data
