/// @file eval.cpp
/// @brief `eval --checkpoint`: a saved policy's backtest on one split, normalised with the
///        checkpoint's statistics, in one exact sequential pass (or eval.segments when given);
///        with an output directory, the CSVs, the JSON, the profile used and an HTML report.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>
#include <system_error>

#include "config/schema.hpp"
#include "data/load.hpp"
#include "backtest/backtest.hpp"
#include "backtest/inference.hpp"
#include "io/json.hpp"
#include "io/run_directory.hpp"
#include "io/safetensors.hpp"
#include "report/report.hpp"
#include "run/naming.hpp"
#include "run/run.hpp"
#include "run/session.hpp"
#include "trainers/checkpoint.hpp"
#include "trainers/registry.hpp"
#include "trainers/run_checks.hpp"
#include "trainers/setup.hpp"
#include "trainers/trainer.hpp"
#include "util/errors.hpp"
#include "util/log.hpp"

namespace fh::run {

namespace json = io::json;
namespace fs = std::filesystem;

const std::vector<std::string>& eval_honoured_keys() {
    static const std::vector<std::string> keys{
        "data.path",
        "data.format",
        "data.train_fraction",
        "data.val_fraction",
        "data.test_fraction",
        "data.cache_dir",
        "data.synthetic_bars",
        "data.planted_signal",
        "data.seed",
        "instrument.commission",
        "instrument.slippage_ticks",
        "instrument.bars_per_year",
        "eval.segments",
        "eval.bootstrap_resamples",
        "eval.bootstrap_block",
        "eval.bootstrap_seed",
        "eval.confidence",
        "run.device",
        "dqn.her_eval_goal"};  // a HER policy asked for another target (docs/dqn.md)
    return keys;
}

namespace {

/// --split FROM:TO (TO may be empty: to the last bar) as bars [FROM, TO); nullopt for val, test.
std::optional<data::SplitRange> bar_range(const std::string& split) {
    if (split == "val" || split == "test") return std::nullopt;
    if (split == "all") return data::SplitRange{0, 0};
    const auto colon = split.find(':');
    const auto number = [&](std::string_view t, std::size_t* out) {
        if (t.empty() || t.size() > 15 || t.find_first_not_of("0123456789") != std::string_view::npos) return false;
        *out = static_cast<std::size_t>(std::stoull(std::string(t)));
        return true;
    };
    data::SplitRange r;
    if (colon != std::string::npos && number(std::string_view(split).substr(0, colon), &r.begin)) {
        if (colon + 1 == split.size()) return r;  // FROM: to the last bar (end 0)
        if (number(std::string_view(split).substr(colon + 1), &r.end) && r.end > r.begin) return r;
    }
    throw UsageError(
        "eval --split: expected val, test, all or FROM:TO (bar numbers, TO exclusive, empty for the last bar), got '" +
        split + "'");
}

/// The key of a "section.key=value" override, trimmed.
std::string override_key(const std::string& o) {
    return trim(std::string_view(o).substr(0, o.find('=')));
}

}  // namespace

config::Profile checkpoint_profile(const std::string& checkpoint, const std::vector<std::string>& overrides,
                                   std::string_view command) {
    const auto& honoured = eval_honoured_keys();
    for (const auto& o : overrides)
        if (std::find(honoured.begin(), honoured.end(), override_key(o)) == honoured.end())
            throw UsageError(
                fmt::format("{} --set {}: {} uses the checkpoint's profile and honours only {} "
                            "(docs/sweeps.md, \"eval\")",
                            command, o, command, fmt::join(honoured, ", ")));
    auto p = config::resolve_profile_text(trainers::checkpoint_profile_toml(checkpoint), checkpoint, overrides);
    const auto eval_goal = trainers::trainer_kind(p.run.trainer).eval_goal;
    for (const auto& o : overrides)
        if (override_key(o) == "dqn.her_eval_goal" && !(eval_goal && eval_goal(p)))
            throw UsageError(
                fmt::format("{} --set {}: the checkpoint's policy was not trained with hindsight "
                            "experience replay (dqn.her = true), so it has no goal to set",
                            command, o));
    return p;
}

std::vector<float> checkpoint_policy_weights(const std::string& checkpoint, const config::Profile& p,
                                             std::size_t weights_size) {
    const auto file = io::TensorFile::read(checkpoint);
    trainers::require_layout_version(file, checkpoint, p);
    auto weights = file.get<float>("params/online", {weights_size});
    // Weights that are not all finite (a run that diverged, an edited file) would trade on NaN.
    if (const auto bad = std::find_if(weights.begin(), weights.end(), [](float w) { return !std::isfinite(w); });
        bad != weights.end())
        throw io::CheckpointError(
            fmt::format("checkpoint {}: tensor params/online: weight {} of {} is {}: the policy "
                        "is not finite (did its run diverge?); nothing to evaluate",
                        checkpoint, bad - weights.begin(), weights.size(), *bad));
    return weights;
}

std::string evaluate(const EvalRequest& r) {
    const std::optional<data::SplitRange> range = bar_range(r.split);
    if (!r.output_dir.empty() && !r.force) {
        std::error_code ec;
        if (fs::exists(r.output_dir, ec) && (!fs::is_directory(r.output_dir, ec) || !fs::is_empty(r.output_dir, ec)))
            throw UsageError(
                fmt::format("eval --output {}: exists and is not an empty directory; choose another, "
                            "remove it, or give --force to write into it (its eval files are replaced)",
                            r.output_dir));
    }
    bool segments_given = false;
    for (const auto& o : r.overrides) segments_given = segments_given || override_key(o) == "eval.segments";
    const auto p = checkpoint_profile(r.checkpoint, r.overrides, "eval");
    const int segments = segments_given ? static_cast<int>(p.eval.segments) : 1;
    auto ops = make_device(p);
    auto options = trainers::data_options(p);
    options.normalization = trainers::checkpoint_normalization(r.checkpoint);
    options.test_range = range;
    const auto market = data::load_market(options);
    env::DeviceMarket dm(*ops, market);
    const auto params = trainers::env_params(p, market.market_dim);
    // A profile error, not a data error: the segments the split cannot hold (exit 2).
    if (segments_given)
        trainers::check_segments(market, r.split == "val" ? market.val : market.test,
                                 r.split == "val" ? "validation" : "test", segments);

    // Only the policy's network: the checkpoint's params/online.
    const auto policy = trainers::make_greedy_policy(p, params.state_dim);
    const auto weights = checkpoint_policy_weights(r.checkpoint, p, policy->weights_size());
    const auto online = ops->from_host<float>(weights);
    auto act = [&](ops::View<int> a, ops::View<const float> s, int n) { policy->act(*ops, online.cview(), a, s, n); };
    const env::Split split = r.split == "val" ? env::Split::val : env::Split::test;  // all, FROM:TO: md.test
    const auto report = backtest::backtest(*ops, dm, market, split, params, act, segments, true,
                                           policy->capture_safe());  // records: the inference's returns
    const data::SplitRange scored = split == env::Split::val ? market.val : market.test;
    const std::string text = json::serialize(json::object(
        {{"checkpoint", r.checkpoint},
         {"split", r.split},
         {"bars", json::object({{"from", scored.begin}, {"to", scored.end}, {"warmup", market.warmup_bars}})},
         {"data", market.source},
         {"trainer", p.run.trainer},
         {"device", ops->description()},
         {"seed", p.run.seed},
         {"bars_per_year", market.bars_per_year},
         {"bars_per_year_inferred", market.bars_per_year_inferred},
         {"segments", segments},
         {"overrides", json::array_of<std::string>(r.overrides)},
         {"strategy", backtest::metrics_value(report.strategy)},
         {"buy_and_hold", backtest::metrics_value(report.buy_and_hold)},
         {"inference", backtest::inference_value(backtest::backtest_returns(report), report.bars_per_year,
                                                 backtest::bootstrap_options(p.eval))}}));
    if (!r.output_dir.empty()) {
        std::error_code ec;
        fs::create_directories(r.output_dir, ec);
        if (ec) throw UsageError(fmt::format("eval --output {}: {}", r.output_dir, ec.message()));
        const fs::path dir(r.output_dir);
        io::write_file_atomically((dir / "eval.json").string(), text + "\n");
        io::write_file_atomically((dir / "config.toml").string(), config::to_toml(p));
        backtest::write_equity_csv((dir / "equity.csv").string(), report, market);
        backtest::write_trades_csv((dir / "trades.csv").string(), report, market);
        const std::string page = report::write_report(r.output_dir, "");
        log::info("eval output: {} (eval.json, equity.csv, trades.csv, config.toml, {})", r.output_dir,
                  fs::path(page).filename().string());
    }
    return text;
}

}  // namespace fh::run
