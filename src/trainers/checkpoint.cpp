/// @file checkpoint.cpp
#include "trainers/checkpoint.hpp"

#include <fmt/format.h>

#include <span>

#include "io/safetensors.hpp"

namespace fh::trainers {
namespace {

io::Shape to_shape(const std::vector<std::int64_t>& s) { return io::Shape(s.begin(), s.end()); }

io::Dtype dtype(const StateTensor& t) {
    const auto d = io::dtype_from_name(t.dtype);
    if (!d) throw std::logic_error("state tensor " + t.name + " has no safetensors dtype " + t.dtype);
    return *d;
}

}  // namespace

void require_parameter_layout(const io::TensorFile& file, const std::string& path, const config::Profile& profile) {
    const std::string want = parameter_layout(profile);
    const std::string have = file.metadata("parameter_layout").value_or(profile.run.trainer + "/1");
    if (have != want)
        throw io::CheckpointError(fmt::format(
            "checkpoint {}: its parameters are in layout {}, this version of foxhunt-train reads {}{} (the "
            "checkpoint was written by an earlier version: evaluate or resume it with that version, or train anew)",
            path, have, want, want == "dqn/2" ? " (one head layer [value | advantages] instead of two)" : ""));
}

void save_checkpoint(const std::string& path, ops::Device& ops, Trainer& trainer, const config::Profile& profile,
                     const data::MarketData& market, const EarlyStopping& es) {
    io::TensorFileWriter w;
    for (const auto& t : trainer.state_tensors()) {
        const auto bytes = ops.to_host<std::byte>(t.bytes);
        w.add(t.name, dtype(t), to_shape(t.shape), std::span<const std::byte>(bytes));
    }
    const auto counters = trainer.counter_values();
    w.add<std::int64_t>("counters", {counters.size()}, counters);
    const std::uint64_t dim = market.norm.mean.size();
    w.add<float>("norm/mean", {dim}, market.norm.mean);
    w.add<float>("norm/stddev", {dim}, market.norm.stddev);
    w.set_metadata("trainer", profile.run.trainer);
    w.set_metadata("parameter_layout", parameter_layout(profile));
    w.set_metadata("profile", config::to_toml(profile));
    w.set_metadata("norm_clip", fmt::format("{}", market.norm.clip));
    w.set_metadata("feature_set", profile.data.feature_set);
    w.set_metadata("data_source", market.source);
    w.set_metadata("early_stopping_best", es.best() ? fmt::format("{}", *es.best()) : "none");
    w.set_metadata("early_stopping_best_step", fmt::format("{}", es.best_step()));
    w.set_metadata("early_stopping_stale", fmt::format("{}", es.evaluations_without_improvement()));
    w.write(path);
}

void load_checkpoint(const std::string& path, ops::Device& ops, Trainer& trainer, const config::Profile& profile,
                     EarlyStopping* es) {
    const auto file = io::TensorFile::read(path);
    const auto trainer_name = file.metadata("trainer").value_or("");
    if (trainer_name != profile.run.trainer)
        throw io::CheckpointError(fmt::format("checkpoint {}: written by the '{}' trainer, this run is '{}'", path,
                                              trainer_name, profile.run.trainer));
    require_parameter_layout(file, path, profile);
    for (const auto& t : trainer.state_tensors()) {
        const auto v = file.tensor(t.name);
        if (v.dtype != dtype(t) || v.shape != to_shape(t.shape))
            throw io::CheckpointError(fmt::format("checkpoint {}: tensor {} is {} {}, this run needs {} {} (was the "
                                                  "profile changed since the checkpoint was written?)",
                                                  path, t.name, io::dtype_name(v.dtype), io::shape_string(v.shape),
                                                  t.dtype, io::shape_string(to_shape(t.shape))));
        ops.upload<std::byte>(t.bytes, v.bytes);
    }
    // "counters/steps_updates_pushed": the name DQN checkpoints had before the trainers shared a format.
    const char* counters = file.has("counters") ? "counters" : "counters/steps_updates_pushed";
    const auto c = file.get<std::int64_t>(counters, {trainer.counter_values().size()});
    trainer.restore_counter_values(c);
    if (es) {
        const std::string best = file.metadata("early_stopping_best").value_or("none");
        es->restore(best == "none" ? std::nullopt : std::optional<double>(std::stod(best)),
                    std::stoll(file.metadata("early_stopping_best_step").value_or("-1")),
                    std::stoll(file.metadata("early_stopping_stale").value_or("0")));
    }
}

std::string checkpoint_profile_toml(const std::string& path) {
    const auto file = io::TensorFile::read(path);
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
    s.clip = std::stof(file.metadata("norm_clip").value_or("5"));
    return s;
}

}  // namespace fh::trainers
