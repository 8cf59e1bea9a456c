/// @file checkpoint.cpp
#include "trainers/checkpoint.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <span>

#include "build_config.hpp"
#include "io/json.hpp"
#include "io/run_directory.hpp"
#include "io/safetensors.hpp"
#include "trainers/q_network.hpp"
#include "trainers/trainer.hpp"
#include "util/log.hpp"

namespace fh::trainers {
namespace {

io::Shape to_shape(const std::vector<std::int64_t>& s) { return io::Shape(s.begin(), s.end()); }

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
                if (b.name == bias && b.size > 0 && s.size % b.size == 0) shape = fmt::format("[{},{}]", b.size, s.size / b.size);
        }
        out += fmt::format("{}{{\"name\":{},\"offset\":{},\"size\":{},\"shape\":{}}}", out.size() > 1 ? "," : "",
                           io::json::quote(s.name), s.offset, s.size, shape);
    }
    return out + "]";
}

[[noreturn]] void bad_metadata(const std::string& path, const std::string& key, const std::string& value,
                               const std::string& expected) {
    throw io::CheckpointError(fmt::format("checkpoint {}: metadata {} = {} is not {}; the file is corrupt or was "
                                          "edited (use another checkpoint)",
                                          path, key, io::json::quote(value.substr(0, 60)), expected));
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

void warn_if_version1(const io::TensorFile& f) {
    if (f.format_version() == 1)
        log::warn("checkpoint {}: format version 1, written before checkpoints checksummed their metadata: the "
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
    host.reserve(tensors.size());
    for (const auto& t : tensors) {
        host.push_back(ops.to_host<std::byte>(t.bytes));
        w.add_borrowed(t.name, dtype(t), to_shape(t.shape), std::span<const std::byte>(host.back()));
    }
    const auto counters = trainer.counter_values();
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
    w.set_metadata("param_layout", layout_json(policy_weights_layout(profile, market.market_dim + env::kPortfolioFeatures)));
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
    w.write(path);
}

RunRecord load_checkpoint(const std::string& path, ops::Device& ops, Trainer& trainer, const config::Profile& profile,
                          EarlyStopping* es) {
    const auto file = io::TensorFile::read(path);
    warn_if_version1(file);
    const auto trainer_name = file.metadata("trainer").value_or("");
    if (trainer_name != profile.run.trainer)
        throw io::CheckpointError(fmt::format("checkpoint {}: written by the '{}' trainer, this run is '{}'", path,
                                              trainer_name, profile.run.trainer));
    require_layout_version(file, path, profile);
    // Everything is checked before anything is uploaded.
    const auto tensors = trainer.state_tensors();
    for (const auto& t : tensors) {
        const auto v = file.tensor(t.name);
        if (v.dtype != dtype(t) || v.shape != to_shape(t.shape))
            throw io::CheckpointError(fmt::format("checkpoint {}: tensor {} is {} {}, this run needs {} {} (was the "
                                                  "profile changed since the checkpoint was written?)",
                                                  path, t.name, io::dtype_name(v.dtype), io::shape_string(v.shape),
                                                  t.dtype, io::shape_string(to_shape(t.shape))));
    }
    // "counters/steps_updates_pushed": the name DQN checkpoints had before the trainers shared a format.
    const char* counters = file.has("counters") ? "counters" : "counters/steps_updates_pushed";
    const auto c = file.get<std::int64_t>(counters, {trainer.counter_values().size()});
    RunRecord record;
    std::optional<double> best;
    std::int64_t best_step = -1, stale = 0;
    if (es) {
        const std::string best_text = file.metadata("early_stopping_best").value_or("none");
        if (best_text != "none") best = number_of(file, "early_stopping_best", "none", /*allow_inf=*/true);
        best_step = integer_of(file, "early_stopping_best_step", "-1", -1);
        stale = integer_of(file, "early_stopping_stale", "0", 0);
    }
    record.wall_seconds = number_of(file, "wall_seconds", "0");
    if (record.wall_seconds < 0) bad_metadata(path, "wall_seconds", fmt::format("{}", record.wall_seconds), "a time >= 0");
    record.best_validation = file.metadata("best_validation").value_or("");
    if (!record.best_validation.empty() &&
        (record.best_validation.rfind("{\"strategy\":", 0) != 0 || record.best_validation.back() != '}' ||
         record.best_validation.find_first_of("\n\r") != std::string::npos))
        bad_metadata(path, "best_validation", record.best_validation, "a backtest JSON object");

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
            throw io::CheckpointError(fmt::format("checkpoint {}: the normalisation of feature {} (mean {}, stddev {}) "
                                                  "is not finite with a positive stddev; the file is corrupt",
                                                  path, i, s.mean[i], s.stddev[i]));
    return s;
}

}  // namespace fh::trainers
