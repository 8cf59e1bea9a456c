/// @file export.cpp
/// @brief `export RUN_DIR|CHECKPOINT -o FILE.safetensors`: a checkpoint's policy weights as named
///        per-layer tensors, with the feature normalisation and the resolved profile, in a small
///        safetensors file any safetensors reader loads (docs/checkpoints.md "Exported weights").
#include <fmt/format.h>

#include <filesystem>
#include <span>
#include <system_error>

#include "build_config.hpp"
#include "config/schema.hpp"
#include "env/vec_env.hpp"
#include "io/json.hpp"
#include "io/safetensors.hpp"
#include "run/run.hpp"
#include "trainers/checkpoint.hpp"
#include "trainers/trainer.hpp"
#include "util/errors.hpp"
#include "util/log.hpp"

namespace fh::run {

namespace fs = std::filesystem;

namespace {

/// A layout slice's name in the export: '/' becomes '.', a last part "w" becomes "weight" and
/// "b" "bias" (`q.l0.w` -> `q.l0.weight`, `block0/attn/qkv/w` -> `block0.attn.qkv.weight`).
std::string export_name(const std::string& slice) {
    std::string n = slice;
    for (char& c : n)
        if (c == '/') c = '.';
    if (n.ends_with(".w")) return n.substr(0, n.size() - 2) + ".weight";
    if (n.ends_with(".b")) return n.substr(0, n.size() - 2) + ".bias";
    return n;
}

}  // namespace

std::string policy_checkpoint(const std::string& source) {
    std::error_code ec;
    if (!fs::is_directory(source, ec)) return source;
    for (const char* name : {"best.safetensors", "last.safetensors"}) {
        const fs::path f = fs::path(source) / "checkpoints" / name;
        if (fs::is_regular_file(f, ec)) return f.string();
    }
    throw UsageError(
        fmt::format("{} is a directory without checkpoints/best.safetensors or checkpoints/last.safetensors: "
                    "name a run directory or a checkpoint file",
                    source));
}

std::string export_policy(const std::string& source, const std::string& output, bool force) {
    if (output.empty()) throw UsageError("export: name the file to write with -o FILE.safetensors");
    std::error_code ec;
    if (!force && fs::exists(output, ec))
        throw UsageError(
            fmt::format("export -o {}: the file exists; choose another name, or give --force to replace it", output));
    const std::string checkpoint = policy_checkpoint(source);
    const auto file = io::TensorFile::read(checkpoint);
    if (file.metadata("content").value_or("") == kPolicyExportContent)
        throw UsageError(fmt::format("export: {} is an exported policy already, not a checkpoint", checkpoint));
    const config::Profile p = config::resolve_profile_text(trainers::checkpoint_profile_toml(checkpoint), checkpoint);
    trainers::require_layout_version(file, checkpoint, p);
    const data::NormalizationStats norm = trainers::checkpoint_normalization(checkpoint);
    const int market_dim = static_cast<int>(norm.mean.size());
    const int state_dim = market_dim + env::kPortfolioFeatures;
    const auto policy = trainers::make_greedy_policy(p, state_dim);
    const std::vector<float> weights = file.get<float>("params/online", {policy->weights_size()});
    const nn::ParamLayout layout = trainers::policy_weights_layout(p, state_dim);

    io::TensorFileWriter w;
    io::json::Array tensors;  // the export's table: name, layout slice, shape
    const auto slices = layout.slices();
    for (const auto& s : slices) {
        io::Shape shape{s.size};
        // A weight (out, in), out being the size of its bias.
        for (const char* suffix : {".w", "/w"}) {
            if (!s.name.ends_with(suffix)) continue;
            const std::string bias = s.name.substr(0, s.name.size() - 1) + "b";
            for (const auto& b : slices)
                if (b.name == bias && b.size > 0 && s.size % b.size == 0) shape = {b.size, s.size / b.size};
        }
        const std::string name = export_name(s.name);
        w.add<float>(name, shape, std::span<const float>(weights.data() + s.offset, s.size));
        tensors.push_back(
            io::json::object({{"name", name}, {"slice", s.name}, {"shape", io::json::array_of<std::uint64_t>(shape)}}));
    }
    if (weights.size() > layout.total()) {  // the supervised adapter's and the Decision Transformer's calibration
        const std::size_t n = weights.size() - layout.total();
        w.add<float>("calibration", {n}, std::span<const float>(weights.data() + layout.total(), n));
    }
    w.add<float>("norm.mean", {norm.mean.size()}, norm.mean);
    w.add<float>("norm.stddev", {norm.stddev.size()}, norm.stddev);
    w.set_metadata("content", std::string(kPolicyExportContent));
    w.set_metadata("trainer", p.run.trainer);
    w.set_metadata("layout_version", trainers::parameter_layout(p));
    w.set_metadata("profile", config::to_toml(p));
    w.set_metadata("tensors", io::json::serialize(io::json::Value::array(std::move(tensors))));
    w.set_metadata("state_dim", fmt::format("{}", state_dim));
    w.set_metadata("market_dim", fmt::format("{}", market_dim));
    w.set_metadata("num_actions", fmt::format("{}", p.num_actions()));
    w.set_metadata("norm_mean", io::json::serialize(io::json::array_of<float>(norm.mean)));
    w.set_metadata("norm_stddev", io::json::serialize(io::json::array_of<float>(norm.stddev)));
    w.set_metadata("norm_clip", fmt::format("{}", norm.clip));
    w.set_metadata("feature_set", p.data.feature_set);
    for (const char* key : {"step", "progress_unit", "bars_per_year", "data_source"})
        if (const auto v = file.metadata(key)) w.set_metadata(key, *v);
    w.set_metadata("checkpoint", checkpoint);
    w.set_metadata("created_by", std::string("foxhunt-train ") + FH_VERSION);
    w.write(output);
    log::info("export: {} ({} tensors of {} weights) from {}", output, slices.size(), weights.size(), checkpoint);
    return checkpoint;
}

}  // namespace fh::run
