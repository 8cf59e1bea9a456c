/// @file eval.cpp
/// @brief `eval --checkpoint`: a saved policy's backtest on one split, normalised with the
///        checkpoint's statistics, in one exact sequential pass (or eval.segments when given);
///        with an output directory, the CSVs, the JSON, the profile used and an HTML report.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "config/schema.hpp"
#include "data/load.hpp"
#include "eval/backtest.hpp"
#include "eval/inference.hpp"
#include "io/json.hpp"
#include "io/run_directory.hpp"
#include "io/safetensors.hpp"
#include "report/report.hpp"
#include "run/run.hpp"
#include "run/session.hpp"
#include "trainers/checkpoint.hpp"
#include "trainers/setup.hpp"
#include "trainers/trainer.hpp"
#include "util/errors.hpp"
#include "util/log.hpp"

namespace fh::run {

namespace json = io::json;
namespace fs = std::filesystem;

const std::vector<std::string>& eval_honoured_keys() {
    static const std::vector<std::string> keys{
        "data.path",          "data.format",       "data.train_fraction",     "data.val_fraction",
        "data.test_fraction", "data.cache_dir",    "data.synthetic_bars",     "data.planted_signal",
        "instrument.commission", "instrument.slippage_ticks", "instrument.bars_per_year", "eval.segments",
        "eval.bootstrap_resamples", "eval.bootstrap_block", "eval.bootstrap_seed", "eval.confidence",
        "run.device",         "dqn.her_eval_goal"};  // a HER policy asked for another target (docs/dqn.md)
    return keys;
}

std::string evaluate(const EvalRequest& r) {
    if (r.split != "val" && r.split != "test")
        throw UsageError("eval --split: expected val or test, got '" + r.split + "'");
    bool segments_given = false;
    for (const auto& o : r.overrides) {
        std::string key = o.substr(0, o.find('='));
        key.erase(0, key.find_first_not_of(" \t"));
        key.erase(key.find_last_not_of(" \t") + 1);
        const auto& honoured = eval_honoured_keys();
        if (std::find(honoured.begin(), honoured.end(), key) == honoured.end())
            throw UsageError(fmt::format("eval --set {}: eval uses the checkpoint's profile and honours only {} "
                                         "(docs/sweeps.md, \"eval\")",
                                         o, fmt::join(honoured, ", ")));
        segments_given = segments_given || key == "eval.segments";
    }
    const auto p = config::resolve_profile_text(trainers::checkpoint_profile_toml(r.checkpoint), r.checkpoint, r.overrides);
    const int segments = segments_given ? static_cast<int>(p.eval.segments) : 1;
    auto ops = make_device(p);
    auto options = trainers::data_options(p);
    options.normalization = trainers::checkpoint_normalization(r.checkpoint);
    const auto market = data::load_market(options);
    env::DeviceMarket dm(*ops, market);
    const auto params = trainers::env_params(p, market.market_dim);

    // Only the policy's network: the checkpoint's params/online.
    const auto policy = trainers::make_greedy_policy(p, params.state_dim);
    const auto file = io::TensorFile::read(r.checkpoint);
    trainers::require_layout_version(file, r.checkpoint, p);
    const auto weights = file.get<float>("params/online", {policy->weights_size()});
    const auto online = ops->from_host<float>(weights);
    auto act = [&](ops::View<int> a, ops::View<const float> s, int n) { policy->act(*ops, online.cview(), a, s, n); };
    const bool keep = !r.output_dir.empty();
    const auto report = eval::backtest(*ops, dm, market, r.split == "val" ? env::Split::val : env::Split::test, params, act,
                                       segments, true, policy->capture_safe());  // records: the inference's returns
    json::Array overrides;
    for (const auto& o : r.overrides) overrides.emplace_back(o);
    const std::string text = json::serialize(json::object({{"checkpoint", r.checkpoint},
                                                           {"split", r.split},
                                                           {"data", market.source},
                                                           {"segments", segments},
                                                           {"overrides", json::Value::array(std::move(overrides))},
                                                           {"strategy", eval::metrics_value(report.strategy)},
                                                           {"buy_and_hold", eval::metrics_value(report.buy_and_hold)},
                                                           {"inference", eval::inference_value(eval::backtest_returns(report),
                                                                                               report.bars_per_year,
                                                                                               eval::bootstrap_options(p.eval))}}));
    if (keep) {
        std::error_code ec;
        fs::create_directories(r.output_dir, ec);
        if (ec) throw UsageError(fmt::format("eval --output {}: {}", r.output_dir, ec.message()));
        const fs::path dir(r.output_dir);
        io::write_file_atomically((dir / "eval.json").string(), text + "\n");
        io::write_file_atomically((dir / "config.toml").string(), config::to_toml(p));
        eval::write_equity_csv((dir / "equity.csv").string(), report, market);
        eval::write_trades_csv((dir / "trades.csv").string(), report, market);
        const std::string page = report::write_report(r.output_dir, "");
        log::info("eval output: {} (eval.json, equity.csv, trades.csv, config.toml, {})", r.output_dir,
                  fs::path(page).filename().string());
    }
    return text;
}

}  // namespace fh::run
