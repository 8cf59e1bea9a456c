/// @file checkpoint.cpp
#include "trainers/checkpoint.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <span>

#include "build_config.hpp"
#include "io/json.hpp"
#include "io/run_directory.hpp"
#include "io/safetensors.hpp"
#include "math/dqn.h"
#include "math/env.h"
#include "math/nn.h"
#include "trainers/dqn/network.hpp"
#include "trainers/trainer.hpp"
#include "util/fault.hpp"
#include "util/log.hpp"

namespace fh::trainers {
namespace {

io::Shape to_shape(const std::vector<std::int64_t>& s) {
    return io::Shape(s.begin(), s.end());
}

io::Dtype dtype(const StateTensor& t) {
    const auto d = io::dtype_from_name(t.dtype);
    if (!d) throw std::logic_error("state tensor " + t.name + " has no safetensors dtype " + t.dtype);
    return *d;
}

/// The layout as JSON: [{"name":...,"offset":...,"size":...,"shape":[...]}, ...]. A weight
/// slice `<x>.w` is row-major (out, in), out being the size of its bias `<x>.b`.
std::string layout_json(const nn::ParamLayout& layout) {
    std::string out = "[";
    for (const auto& s : layout.slices()) {
        std::string shape = fmt::format("[{}]", s.size);
        if (s.name.size() > 2 && s.name.ends_with(".w")) {
            const std::string bias = s.name.substr(0, s.name.size() - 2) + ".b";
            for (const auto& b : layout.slices())
                if (b.name == bias && b.size > 0 && s.size % b.size == 0)
                    shape = fmt::format("[{},{}]", b.size, s.size / b.size);
        }
        out += fmt::format("{}{{\"name\":{},\"offset\":{},\"size\":{},\"shape\":{}}}", out.size() > 1 ? "," : "",
                           util::json_quote(s.name), s.offset, s.size, shape);
    }
    return out + "]";
}

[[noreturn]] void bad_metadata(const std::string& path, const std::string& key, const std::string& value,
                               const std::string& expected) {
    throw io::CheckpointError(
        fmt::format("checkpoint {}: metadata {} = {} is not {}; the file is corrupt or was "
                    "edited (use another checkpoint)",
                    path, key, util::json_quote(value.substr(0, 60)), expected));
}

/// A metadata number, strictly: the whole text, finite unless `allow_inf`.
double number_of(const io::TensorFile& f, const std::string& key, const std::string& fallback, bool allow_inf = false) {
    const std::string text = f.metadata(key).value_or(fallback);
    double v = 0;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || ptr != text.data() + text.size() || std::isnan(v) || (!allow_inf && !std::isfinite(v)))
        bad_metadata(f.path(), key, text, allow_inf ? "a number" : "a finite number");
    return v;
}

std::int64_t integer_of(const io::TensorFile& f, const std::string& key, const std::string& fallback, std::int64_t lo) {
    const std::string text = f.metadata(key).value_or(fallback);
    std::int64_t v = 0;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || ptr != text.data() + text.size() || v < lo)
        bad_metadata(f.path(), key, text, fmt::format("an integer >= {}", lo));
    return v;
}

/// The records of a struct-valued tensor (U8 bytes), copied out.
template <class T>
std::vector<T> records(std::span<const std::byte> bytes) {
    std::vector<T> out(bytes.size() / sizeof(T));
    if (!out.empty()) std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
    return out;
}

/// Every integer of a state tensor against the run it is restored into: "" when valid, else what
/// is wrong. The checksum proves the file is the one written, not that its values are possible
/// (an edited, regenerated file; a bar index past the data would be read out of bounds). Every
/// integer tensor a trainer checkpoints has a rule here (a new one without a rule is refused).
std::string integer_problem(const std::string& name, std::span<const std::byte> bytes, const CheckpointBounds& k) {
    const auto each = [&](auto sample, long long lo, long long hi, const char* what) -> std::string {
        using T = decltype(sample);
        const auto v = records<T>(bytes);
        for (std::size_t i = 0; i < v.size(); ++i)
            if (static_cast<long long>(v[i]) < lo || static_cast<long long>(v[i]) > hi)
                return fmt::format("element {} is {}, not {} in [{}, {}]", i, static_cast<long long>(v[i]), what, lo,
                                   hi);
        return "";
    };
    if (name.ends_with("replay/actions")) return each(std::int32_t{}, 0, k.num_actions - 1, "an action");
    if (name.ends_with("replay/done")) return each(std::uint8_t{}, 0, 2, "a done flag");
    if (name == "diversity/window") return each(std::int32_t{}, -1, k.num_actions - 1, "an action (or -1)");
    if (name == "diversity/counts") return each(std::int32_t{}, 0, k.diversity_window, "a count of the window");
    if (name == "monitor/histogram") return "";  // counts: any value
    if (name == "env/state") {
        const auto v = records<env::EnvState>(bytes);
        for (std::size_t i = 0; i < v.size(); ++i) {
            const auto& e = v[i];
            std::string bad;
            if (!(0 <= e.start_bar && e.start_bar <= e.t && e.t <= e.end_bar && e.end_bar <= k.n_bars))
                bad = fmt::format("bars start {}, t {}, end {} are not 0 <= start <= t <= end <= {} (the data's bars)",
                                  e.start_bar, e.t, e.end_bar, k.n_bars);
            else if (e.steps < 0 || e.bars_in_position < 0)
                bad = fmt::format("steps {} / bars in position {} are negative", e.steps, e.bars_in_position);
            else if (e.position < -k.max_contracts || e.position > k.max_contracts)
                bad = fmt::format("position {} exceeds instrument.max_contracts = {}", e.position, k.max_contracts);
            else if (e.last_fill_side < -1 || e.last_fill_side > 1)
                bad = fmt::format("last fill side {} is not -1, 0 or 1", e.last_fill_side);
            else if (!std::isfinite(e.equity) || !std::isfinite(e.peak_equity) || !std::isfinite(e.avg_entry_price) ||
                     !std::isfinite(e.realized_pnl) || !std::isfinite(e.fees) || !std::isfinite(e.last_fill_price))
                bad = "an amount is not finite";
            if (!bad.empty()) return fmt::format("environment {}: {}", i, bad);
        }
        return "";
    }
    if (name == "guard/state") {
        for (const auto& g : records<nn::GuardState>(bytes))
            if (g.bad_total < 0 || g.bad_consecutive < 0 || g.bad_consecutive > g.bad_total ||
                g.first_bad_quantity < -1 || g.applied_updates < 0 || g.first_bad_update < -1)
                return fmt::format(
                    "the guard's counters (skipped {}, in a row {}, first bad quantity {}, applied {}) "
                    "are impossible",
                    g.bad_total, g.bad_consecutive, g.first_bad_quantity, g.applied_updates);
        return "";
    }
    if (name == "monitor/stats") {
        for (const auto& m : records<dqn::MonitorStats>(bytes))
            if (m.updates < 0 || m.samples < 0)
                return fmt::format("the monitor's counts (updates {}, samples {}) are negative", m.updates, m.samples);
        return "";
    }
    if (name == "curiosity/stats") {
        for (const auto& c : records<dqn::CuriosityStats>(bytes))
            if (c.transitions < 0) return fmt::format("the curiosity transitions ({}) are negative", c.transitions);
        return "";
    }
    throw std::logic_error("checkpoint: the integer state tensor " + name + " has no range check");
}

bool integer_dtype(const std::string& dtype) {
    return dtype != "F32" && dtype != "F64";
}

void warn_if_version1(const io::TensorFile& f) {
    if (f.format_version() == 1)
        log::warn(
            "checkpoint {}: format version 1, written before checkpoints checksummed their metadata: the "
            "embedded profile and the normalisation clip are not verified (a resumed run writes version 2)",
            f.path());
}

}  // namespace

void require_layout_version(const io::TensorFile& file, const std::string& path, const config::Profile& profile) {
    const std::string want = parameter_layout(profile);
    const std::string have = file.metadata("layout_version").value_or(profile.run.trainer + "/1");
    if (have != want && (have == kIqnNetworkLayout || want == kIqnNetworkLayout))
        throw io::CheckpointError(fmt::format(
            "checkpoint {}: its parameters are in layout {}, the profile's dqn.head = \"{}\" reads {}: {} (set "
            "dqn.head to the head the checkpoint was trained with, or train anew)",
            path, have, profile.dqn.head, want,
            want == kIqnNetworkLayout ? "an IQN network (fraction embedding, one output per action and fraction) "
                                        "cannot load the weights of a C51 or scalar head"
                                      : "the checkpoint holds an IQN network (dqn.head = \"iqn\"), which this head "
                                        "cannot load"));
    if (have != want)
        throw io::CheckpointError(fmt::format(
            "checkpoint {}: its parameters are in layout {}, this version of foxhunt-train reads {}{} (the "
            "checkpoint was written by an earlier version: evaluate or resume it with that version, or train anew)",
            path, have, want, want == "dqn/2" ? " (one head layer [value | advantages] instead of two)" : ""));
}

void save_checkpoint(const std::string& path, ops::Device& ops, Trainer& trainer, const config::Profile& profile,
                     const data::MarketData& market, const EarlyStopping& es, const RunRecord& record) {
    io::TensorFileWriter w;
    // One host copy of each tensor, borrowed by the writer (not copied again).
    std::vector<std::vector<std::byte>> host;
    const auto tensors = trainer.state_tensors();
    const bool has_replay = std::ranges::any_of(tensors, [](const StateTensor& t) { return replay_memory(t.name); });
    const bool keep_replay = profile.checkpoint.keep_replay;
    host.reserve(tensors.size());
    for (const auto& t : tensors) {
        if (!keep_replay && replay_memory(t.name)) continue;
        host.push_back(ops.to_host<std::byte>(t.bytes));
        w.add_borrowed(t.name, dtype(t), to_shape(t.shape), std::span<const std::byte>(host.back()));
    }
    const auto counters =
        keep_replay ? trainer.counter_values() : trainer.counters_without_replay(trainer.counter_values());
    w.set_metadata("replay", !has_replay ? "none" : keep_replay ? "kept" : "omitted");
    w.add<std::int64_t>("counters", {counters.size()}, counters);
    const std::uint64_t dim = market.norm.mean.size();
    w.add<float>("norm/mean", {dim}, market.norm.mean);
    w.add<float>("norm/stddev", {dim}, market.norm.stddev);
    w.set_metadata("trainer", profile.run.trainer);
    w.set_metadata("layout_version", parameter_layout(profile));
    w.set_metadata("profile", config::to_toml(profile));
    w.set_metadata("created_by", std::string("foxhunt-train ") + FH_VERSION);
    w.set_metadata("step", fmt::format("{}", trainer.progress()));
    w.set_metadata("progress_unit", trainer.progress_unit());
    w.set_metadata("param_layout",
                   layout_json(policy_weights_layout(profile, market.market_dim + env::kPortfolioFeatures)));
    w.set_metadata("norm_clip", fmt::format("{}", market.norm.clip));
    w.set_metadata("feature_set", profile.data.feature_set);
    w.set_metadata("data_source", market.source);
    w.set_metadata("bars_per_year", fmt::format("{}", market.bars_per_year));
    w.set_metadata("bars_per_year_inferred", market.bars_per_year_inferred ? "true" : "false");
    w.set_metadata("early_stopping_best", es.best() ? fmt::format("{}", *es.best()) : "none");
    w.set_metadata("early_stopping_best_step", fmt::format("{}", es.best_step()));
    w.set_metadata("early_stopping_stale", fmt::format("{}", es.evaluations_without_improvement()));
    w.set_metadata("wall_seconds", fmt::format("{}", record.wall_seconds));
    if (!record.best_validation.empty()) w.set_metadata("best_validation", record.best_validation);
    util::fault_point("checkpoint");  // as a full disk would fail the write
    w.write(path);
}

RunRecord load_checkpoint(const std::string& path, ops::Device& ops, Trainer& trainer, const config::Profile& profile,
                          EarlyStopping* es, std::int64_t n_bars) {
    const auto file = io::TensorFile::read(path);
    warn_if_version1(file);
    const auto trainer_name = file.metadata("trainer").value_or("");
    if (trainer_name != profile.run.trainer)
        throw io::CheckpointError(fmt::format("checkpoint {}: written by the '{}' trainer, this run is '{}'", path,
                                              trainer_name, profile.run.trainer));
    require_layout_version(file, path, profile);
    // A checkpoint without the replay memory (checkpoint.keep_replay = false): the trainer keeps
    // its fresh, empty replay and continues from the counters of an empty one. (Files written
    // before the key have no `replay` metadata and hold the replay.)
    const std::string replay = file.metadata("replay").value_or("kept");
    if (replay != "kept" && replay != "omitted" && replay != "none")
        bad_metadata(path, "replay", replay, "\"kept\", \"omitted\" or \"none\"");
    const bool replay_omitted = replay == "omitted";
    // Everything is checked before anything is uploaded.
    auto tensors = trainer.state_tensors();
    if (replay_omitted) std::erase_if(tensors, [](const StateTensor& t) { return replay_memory(t.name); });
    for (const auto& t : tensors) {
        const auto v = file.tensor(t.name);
        if (v.dtype != dtype(t) || v.shape != to_shape(t.shape))
            throw io::CheckpointError(
                fmt::format("checkpoint {}: tensor {} is {} {}, this run needs {} {} (was the "
                            "profile changed since the checkpoint was written?)",
                            path, t.name, io::dtype_name(v.dtype), io::shape_string(v.shape), t.dtype,
                            io::shape_string(to_shape(t.shape))));
    }
    const CheckpointBounds bounds{profile.num_actions(), n_bars, profile.instrument.max_contracts,
                                  profile.ppo.diversity_window};
    for (const auto& t : tensors) {
        if (!integer_dtype(t.dtype)) continue;
        const auto problem = integer_problem(t.name, file.tensor(t.name).bytes, bounds);
        if (!problem.empty())
            throw io::CheckpointError(
                fmt::format("checkpoint {}: tensor {}: {}; the file was edited or written for "
                            "other data (use another checkpoint)",
                            path, t.name, problem));
    }
    // "counters/steps_updates_pushed": the name DQN checkpoints had before the trainers shared a format.
    const char* counters = file.has("counters") ? "counters" : "counters/steps_updates_pushed";
    auto c = file.get<std::int64_t>(counters, {trainer.counter_values().size()});
    if (replay_omitted) c = trainer.counters_without_replay(c);  // as written; enforced for an edited file
    for (std::size_t i = 0; i < c.size(); ++i)
        if (c[i] < 0 || c[i] > static_cast<std::int64_t>(9e15))
            throw io::CheckpointError(
                fmt::format("checkpoint {}: tensor {}: counter {} is {}, not in [0, 9e15]", path, counters, i, c[i]));
    RunRecord record;
    record.replay_omitted = replay_omitted;
    std::optional<double> best;
    std::int64_t best_step = -1, stale = 0;
    if (es) {
        const std::string best_text = file.metadata("early_stopping_best").value_or("none");
        if (best_text != "none") best = number_of(file, "early_stopping_best", "none", /*allow_inf=*/true);
        best_step = integer_of(file, "early_stopping_best_step", "-1", -1);
        stale = integer_of(file, "early_stopping_stale", "0", 0);
    }
    record.wall_seconds = number_of(file, "wall_seconds", "0");
    if (record.wall_seconds < 0)
        bad_metadata(path, "wall_seconds", fmt::format("{}", record.wall_seconds), "a time >= 0");
    record.best_validation = file.metadata("best_validation").value_or("");
    if (!record.best_validation.empty()) {
        // Parsed as summary.json will parse it at the end of the run: a bad value is refused now,
        // before anything trains.
        bool ok = record.best_validation.find_first_of("\n\r") == std::string::npos;
        if (ok) {
            try {
                const auto v = io::json::parse(record.best_validation, io::json::Limits{1'000'000, 16, true});
                ok = v.is_object() && v.find("strategy") != nullptr && v.find("strategy")->is_object();
            } catch (const std::exception&) {
                ok = false;
            }
        }
        if (!ok) bad_metadata(path, "best_validation", record.best_validation, "a backtest JSON object");
    }

    for (const auto& t : tensors) ops.upload<std::byte>(t.bytes, file.tensor(t.name).bytes);
    trainer.restore_counter_values(c);
    if (es) es->restore(best, best_step, stale);
    return record;
}

std::vector<std::int64_t> checkpoint_counters(const std::string& path) {
    const auto file = io::TensorFile::read(path);
    // "counters/steps_updates_pushed": the name DQN checkpoints had before the trainers shared a format.
    const char* name = file.has("counters") ? "counters" : "counters/steps_updates_pushed";
    if (!file.has(name)) throw io::CheckpointError(fmt::format("checkpoint {}: no counters", path));
    return file.get<std::int64_t>(name, file.tensor(name).shape);
}

std::string checkpoint_profile_toml(const std::string& path) {
    const auto file = io::TensorFile::read(path);
    warn_if_version1(file);
    const auto p = file.metadata("profile");
    if (!p) throw io::CheckpointError(fmt::format("checkpoint {}: no resolved profile in its metadata", path));
    return *p;
}

data::NormalizationStats checkpoint_normalization(const std::string& path) {
    const auto file = io::TensorFile::read(path);
    const auto mean = file.tensor("norm/mean");
    data::NormalizationStats s;
    s.mean = file.get<float>("norm/mean", mean.shape);
    s.stddev = file.get<float>("norm/stddev", mean.shape);
    const double clip = number_of(file, "norm_clip", "5");
    if (!(clip > 0) || clip > 1e6) bad_metadata(path, "norm_clip", fmt::format("{}", clip), "a clip in (0, 1e6]");
    s.clip = static_cast<float>(clip);
    for (std::size_t i = 0; i < s.mean.size(); ++i)
        if (!std::isfinite(s.mean[i]) || !std::isfinite(s.stddev[i]) || !(s.stddev[i] > 0))
            throw io::CheckpointError(
                fmt::format("checkpoint {}: the normalisation of feature {} (mean {}, stddev {}) "
                            "is not finite with a positive stddev; the file is corrupt",
                            path, i, s.mean[i], s.stddev[i]));
    return s;
}

}  // namespace fh::trainers
