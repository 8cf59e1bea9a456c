/// @file inference.cpp
#include "backtest/inference.hpp"

#include <algorithm>

#include "backtest/sharpe_inference.hpp"

namespace fh::backtest {

namespace json = io::json;

ReturnSeries segment_returns(const std::vector<std::vector<double>>& strategy,
                             const std::vector<std::vector<double>>& hold) {
    ReturnSeries out;
    const auto add = [](std::vector<double>& to, const std::vector<double>& curve, std::size_t bars) {
        for (std::size_t i = 1; i < bars; ++i) to.push_back(curve[i] / curve[i - 1] - 1);
    };
    for (std::size_t s = 0; s < strategy.size(); ++s) {
        const std::vector<double> none;
        const auto& h = s < hold.size() ? hold[s] : none;
        add(out.strategy, strategy[s], strategy[s].size());
        add(out.hold, h, h.size());
        const std::size_t both = std::min(strategy[s].size(), h.size());
        add(out.strategy_paired, strategy[s], both);
        add(out.hold_paired, h, both);
    }
    return out;
}

ReturnSeries backtest_returns(const BacktestReport& r) {
    std::vector<std::vector<double>> strategy(r.segments.size()), hold(r.segments.size());
    const bool have_hold = r.buy_and_hold_segment_bars.size() == r.segments.size();
    for (std::size_t s = 0; s < r.segments.size(); ++s) {
        const auto offset = static_cast<std::size_t>(r.segments[s].offset);
        for (int i = 0; i < r.segment_bars.at(s); ++i)
            strategy[s].push_back(r.records.at(offset + static_cast<std::size_t>(i)).equity);
        if (have_hold)
            for (int i = 0; i < r.buy_and_hold_segment_bars[s]; ++i)
                hold[s].push_back(r.buy_and_hold_records.at(offset + static_cast<std::size_t>(i)).equity);
    }
    return segment_returns(strategy, hold);
}

BootstrapOptions bootstrap_options(const config::EvalConfig& e) {
    BootstrapOptions o;
    o.resamples = static_cast<int>(e.bootstrap_resamples);
    o.block = e.bootstrap_block;
    o.seed = static_cast<std::uint64_t>(e.bootstrap_seed);
    o.confidence = e.confidence;
    return o;
}

json::Value inference_value(const ReturnSeries& r, double bars_per_year, const BootstrapOptions& o) {
    const SharpeMoments m = sharpe_moments(r.strategy), h = sharpe_moments(r.hold);
    json::Value boot;
    if (!o.cut_block_to_series) require_block_fits(o.block, std::min(r.strategy.size(), r.strategy_paired.size()));
    if (r.strategy.size() >= 2 && r.strategy_paired.size() >= 2) {
        const BootstrapResult b = block_bootstrap(r.strategy, r.strategy_paired, r.hold_paired, bars_per_year, o);
        const auto interval = [](const Interval& i) { return json::object({{"lo", i.lo}, {"hi", i.hi}}); };
        boot = json::object({{"method", "stationary block bootstrap of the per-bar returns"},
                             {"resamples", b.resamples},
                             {"block_length", b.block},
                             {"block_rule", b.block_automatic ? "ceil(n^(1/3))"
                                            : b.block_cut     ? "eval.bootstrap_block, cut to the series"
                                                              : "eval.bootstrap_block"},
                             {"seed", b.seed},
                             {"confidence", b.confidence},
                             {"sharpe", interval(b.sharpe)},
                             {"total_return", interval(b.total_return)},
                             {"sharpe_difference", interval(b.sharpe_difference)}});
    }
    return json::object({{"bars", r.strategy.size()},
                         {"paired_bars", r.strategy_paired.size()},
                         {"bootstrap", boot},
                         {"sharpe_per_bar", m.sharpe},
                         {"skewness", m.skewness},
                         {"kurtosis", m.kurtosis},
                         {"buy_and_hold_sharpe_per_bar", h.sharpe},
                         {"psr_zero", probabilistic_sharpe(m, 0.0)},
                         {"psr_buy_and_hold", probabilistic_sharpe(m, h.sharpe)}});
}

json::Value with_inference(const json::Value& object, const BacktestReport& report, const BootstrapOptions& o) {
    json::Object members = object.as_object();
    members.emplace_back("inference", inference_value(backtest_returns(report), report.bars_per_year, o));
    return json::Value::object(std::move(members));
}

}  // namespace fh::backtest
