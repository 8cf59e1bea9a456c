/// @file eval.cpp
/// @brief `eval --checkpoint`: a saved policy's backtest on one split, normalised with the
///        checkpoint's statistics, in one exact sequential pass.
#include <fmt/format.h>

#include "config/schema.hpp"
#include "data/load.hpp"
#include "eval/backtest.hpp"
#include "io/json.hpp"
#include "io/safetensors.hpp"
#include "run/run.hpp"
#include "run/session.hpp"
#include "trainers/checkpoint.hpp"
#include "trainers/setup.hpp"
#include "trainers/trainer.hpp"
#include "util/errors.hpp"

namespace fh::run {

namespace json = io::json;

std::string evaluate(const std::string& checkpoint, const std::string& split_name, const std::string& data_path,
                     const std::string& device) {
    if (split_name != "val" && split_name != "test")
        throw UsageError("eval --split: expected val or test, got '" + split_name + "'");
    std::vector<std::string> overrides;
    if (!data_path.empty()) overrides.push_back("data.path=" + config::toml_quote(data_path));
    if (!device.empty()) overrides.push_back("run.device=" + config::toml_quote(device));
    const auto p = config::resolve_profile_text(trainers::checkpoint_profile_toml(checkpoint), checkpoint, overrides);
    auto ops = make_device(p);
    auto options = trainers::data_options(p);
    options.normalization = trainers::checkpoint_normalization(checkpoint);
    const auto market = data::load_market(options);
    env::DeviceMarket dm(*ops, market);
    const auto params = trainers::env_params(p, market.market_dim);

    // Only the policy's network: the checkpoint's params/online.
    const auto policy = trainers::make_greedy_policy(p, params.state_dim);
    const auto file = io::TensorFile::read(checkpoint);
    const auto weights = file.get<float>("params/online", {policy->weights_size()});
    const auto online = ops->from_host<float>(weights);
    auto act = [&](ops::View<int> a, ops::View<const float> s, int n) { policy->act(*ops, online.cview(), a, s, n); };
    const auto report = eval::backtest(*ops, dm, market, split_name == "val" ? env::Split::val : env::Split::test,
                                       params, act, 1, false);
    return json::serialize(json::object({{"checkpoint", checkpoint},
                                         {"split", split_name},
                                         {"data", market.source},
                                         {"strategy", eval::metrics_value(report.strategy)},
                                         {"buy_and_hold", eval::metrics_value(report.buy_and_hold)}}));
}

}  // namespace fh::run
