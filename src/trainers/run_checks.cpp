/// @file run_checks.cpp
#include "trainers/run_checks.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "math/env.h"
#include "backtest/backtest.hpp"
#include "env/vec_env.hpp"
#include "backtest/bootstrap.hpp"
#include "io/replay_dump.hpp"
#include "trainers/registry.hpp"
#include "util/errors.hpp"
#include "util/log.hpp"

namespace fh::trainers {
namespace {

double median(std::vector<double> v) {
    if (v.empty()) return 0;
    auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
    std::nth_element(v.begin(), mid, v.end());
    return *mid;
}

/// Bars of `split` a backtest trades (its segments, docs/metrics.md), 0 when none.
std::size_t tradable_bars(const data::MarketData& md, const data::SplitRange& split) {
    if (data::count_episode_starts(md, split) == 0) return 0;
    std::size_t n = 0;
    for (const auto& s : backtest::backtest_segments(md, split, 1)) n += static_cast<std::size_t>(s.end - s.start);
    return n;
}

}  // namespace

void check_segments(const data::MarketData& md, const data::SplitRange& split, const char* name,
                    std::int64_t segments) {
    const std::size_t bars = tradable_bars(md, split);
    if (static_cast<std::size_t>(segments) > bars / 2)
        throw UsageError(fmt::format(
            "eval.segments = {} is more than half of the {} split's {} tradable bars: every segment needs a bar to "
            "decide at and one to execute in; set eval.segments <= {} or give the {} split more bars",
            segments, name, bars, std::max<std::size_t>(1, bars / 2), name));
}

namespace {

void check_splits(const config::Profile& p, const data::MarketData& md) {
    const auto none = [&](const char* name, const data::SplitRange& r, const char* key) {
        return DataError(fmt::format(
            "{}: the {} split [{}, {}) ({} bars) has no bar to trade after the {}-bar feature warm-up of its "
            "segment(s): a backtest needs a bar to decide at and the next one to execute in; provide more data "
            "or raise {}",
            md.source, name, r.begin, r.end, r.size(), md.warmup_bars, key));
    };
    if (tradable_bars(md, md.test) == 0) throw none("test", md.test, "data.test_fraction");
    // The trainer's own rules that need the data (the supervised forecaster's training samples).
    if (const auto check = trainer_kind(p.run.trainer).check_data) check(p, md);
    // The bootstrap's fixed block against the returns of the test and validation backtests
    // (each segment's bars but its first).
    for (const auto* split : {&md.test, &md.val}) {
        std::size_t returns = 0;
        for (const auto& s : backtest::backtest_segments(md, *split, 1))
            returns += static_cast<std::size_t>(s.end - s.start - 1);
        if (returns > 0) backtest::require_block_fits(p.eval.bootstrap_block, returns);
    }
    if (p.run.eval_interval > 0) {
        if (tradable_bars(md, md.val) == 0) throw none("validation", md.val, "data.val_fraction");
        check_segments(md, md.val, "validation", p.eval.segments);
    }
}

/// An offline trainer's replay dump (iql.dataset, dt.dataset) against the profile and the data,
/// with `batch` rows per update and that key's name; returns its rows.
std::uint64_t check_dump(const config::Profile& p, const data::MarketData& md, bool verify, const std::string& path,
                         std::int64_t batch, std::string_view batch_key) {
    const auto info = verify ? io::verify_replay_dump(path) : io::read_replay_dump_info(path);
    const int state_dim = md.market_dim + env::kPortfolioFeatures;
    if (info.state_dim != state_dim)
        throw DataError(
            fmt::format("{}: the replay dump's states have {} features, this profile's data gives {} "
                        "(was it written with another data.feature_set?)",
                        path, info.state_dim, state_dim));
    if (info.num_actions != p.num_actions())
        throw DataError(
            fmt::format("{}: the replay dump has {} actions, this profile's environment has {} (set "
                        "env.position_levels and env.urgency_levels as in the run that wrote it)",
                        path, info.num_actions, p.num_actions()));
    if (info.transitions() == 0) throw DataError(path + ": the replay dump holds no transitions");
    if (info.transitions() < static_cast<std::uint64_t>(batch))
        throw DataError(
            fmt::format("{}: the replay dump holds {} transitions, fewer than one batch "
                        "({} = {}): lower the batch size or use a larger dump",
                        path, info.transitions(), batch_key, batch));
    return static_cast<std::uint64_t>(info.capacity_steps) * static_cast<std::uint64_t>(info.n_envs);
}

std::string percent(double x) {
    return fmt::format("{:.3g}%", 100 * x);
}

}  // namespace

bool has_validation_backtest(const data::MarketData& md) {
    return tradable_bars(md, md.val) > 0;
}

InstrumentFit instrument_fit(const config::Profile& p, const data::BarSeries& b) {
    InstrumentFit fit;
    if (b.size() == 0) return fit;
    std::vector<double> ranges(b.size());
    for (std::size_t i = 0; i < b.size(); ++i) ranges[i] = b.high[i] - b.low[i];
    const double close = median(b.close);
    const double range = median(std::move(ranges));
    const auto& in = p.instrument;
    const std::string defaults_hint =
        "the [instrument] defaults are a CME E-mini S&P 500's (tick 0.25, multiplier 50, commission 2.5); set "
        "this contract's values (docs/data.md, \"Instruments\", has examples)";
    const double tick_share = in.tick_size / close;
    const std::string tick = fmt::format(
        "instrument.tick_size = {} is {} of the median close {:.6g}: every market fill slips {} tick(s) = {} of the "
        "price",
        in.tick_size, percent(tick_share), close, in.slippage_ticks, percent(tick_share * in.slippage_ticks));
    if (tick_share > 0.05)
        fit.refusals.push_back(tick);
    else if (tick_share > 0.005)
        fit.warnings.push_back(tick);
    const double round_trip = 2 * in.commission + 2 * in.slippage_ticks * in.tick_size * in.multiplier;
    const double range_value = range * in.multiplier;
    if (round_trip > 0) {
        const std::string cost = fmt::format(
            "a round trip of one contract costs {:.6g} (2 x commission {} + 2 x slippage {} ticks x tick_size {} x "
            "multiplier {}) but the median bar moves {:.6g} ({:.6g} points x multiplier): {}",
            round_trip, in.commission, in.slippage_ticks, in.tick_size, in.multiplier, range_value, range,
            range_value > 0 ? fmt::format("{:.3g} times the typical bar's range", round_trip / range_value)
                            : std::string("the bars have no range"));
        if (range_value > 0 && round_trip > 10 * range_value)
            fit.refusals.push_back(cost);
        else if (range_value <= 0 || round_trip > range_value)
            fit.warnings.push_back(cost);
    }
    const double position = close * in.multiplier * static_cast<double>(in.max_contracts);
    if (position > 20 * in.initial_equity)
        fit.warnings.push_back(fmt::format(
            "a full position ({} contracts x close {:.6g} x multiplier {} = {:.6g}) is {:.3g} times "
            "instrument.initial_equity "
            "= {}: the agent trades with that leverage",
            in.max_contracts, close, in.multiplier, position, position / in.initial_equity, in.initial_equity));
    if (!fit.refusals.empty()) fit.refusals.push_back(defaults_hint);
    return fit;
}

void check_data_size(const config::Profile& p, const RunCheckOptions& o) {
    if (p.data.path.empty() || !o.check_host_memory) return;
    namespace fs = std::filesystem;
    std::error_code ec;
    std::uint64_t bytes = 0;
    if (fs::is_directory(p.data.path, ec)) {
        for (fs::directory_iterator it(p.data.path, ec), end; !ec && it != end; it.increment(ec))
            if (it->is_regular_file(ec)) bytes += it->file_size(ec);
    } else if (fs::is_regular_file(p.data.path, ec)) {
        bytes = fs::file_size(p.data.path, ec);
    }
    if (bytes == 0) return;  // missing or unreadable: the loader names the problem
    const std::uint64_t available = o.host_memory > 0 ? o.host_memory : config::available_host_memory();
    if (available == 0) return;
    config::SizeInputs in;
    in.bars = std::max<std::uint64_t>(1, bytes / 40);
    in.bars_known = false;
    in.host_backend = o.host_backend;
    auto items = estimate_host_memory(p, in);
    items.push_back({fmt::format("the CSV text while it is parsed ({} bytes)", bytes), bytes, "data.path"});
    std::stable_sort(items.begin(), items.end(),
                     [](const config::MemoryItem& a, const config::MemoryItem& b) { return a.bytes > b.bytes; });
    config::require_memory(items, available, "host memory",
                           fmt::format("estimated before reading {}: about 40 bytes a CSV row", p.data.path));
}

RunSizes check_run(const config::Profile& p, const data::MarketData& md, const RunCheckOptions& o) {
    if (const std::string refused = precision_refusal(p.run.trainer, p.gpu.precision); !refused.empty())
        throw UsageError(refused);
    check_splits(p, md);

    RunSizes sizes;
    sizes.inputs.bars = md.bars.size();
    sizes.inputs.bars_known = true;
    sizes.inputs.host_backend = o.host_backend;
    if (const auto dataset = offline_dataset(p); dataset && dataset->path != "behaviour") {
        sizes.inputs.dump_rows = check_dump(p, md, o.verify_dataset, dataset->path, dataset->batch, dataset->batch_key);
        sizes.dump_key = dataset->key;
        sizes.dump_path = dataset->path;
    }

    // The kernels' int index range with the real sizes (resolution checked what it could).
    std::string index;
    for (const auto& ip : index_range_problems(p, sizes.inputs)) index += "\n  " + ip.message;
    if (!index.empty()) throw UsageError("the run's arrays do not fit the kernels' int index range:" + index);

    const auto fit = instrument_fit(p, md.bars);
    for (const auto& w : fit.warnings) log::warn("instrument: {}", w);
    if (!fit.refusals.empty()) {
        std::string list;
        for (const auto& r : fit.refusals) list += "\n  " + r;
        if (!o.force)
            throw UsageError(
                fmt::format("the instrument does not fit the prices of {}:{}\nEvery agent would lose to "
                            "costs; pass --force to train anyway",
                            md.source, list));
        log::warn("instrument: --force: training although the instrument does not fit the prices:{}", list);
    }

    sizes.device = estimate_device_memory(p, sizes.inputs);
    sizes.host = estimate_host_memory(p, sizes.inputs);
    if (o.check_host_memory) {
        sizes.host_available = o.host_memory > 0 ? o.host_memory : config::available_host_memory();
        if (sizes.host_available > 0)
            config::require_memory(sizes.host, sizes.host_available, "host memory",
                                   "MemAvailable, or the cgroup's memory limit");
    }
    return sizes;
}

}  // namespace fh::trainers
