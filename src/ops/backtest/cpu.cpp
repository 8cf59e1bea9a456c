/// @file cpu.cpp
/// @brief CPU twins of the backtest op family: the shared per-element math (math/backtest.h, math/env.h) in plain
/// loops.
#include "ops/backtest/ops.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace fh::ops::cpu_twin {

void backtest_reset(View<backtest::SegmentState> state, View<backtest::BarRecord> records,
                    View<const backtest::Segment> segments, const env::EnvParams& params) {
    for (std::size_t s = 0; s < state.size(); ++s)
        backtest::reset_segment(state.data()[s], records.data(), segments.data()[s], params);
}

void backtest_step(View<backtest::SegmentState> state, View<backtest::BarRecord> records,
                   View<const backtest::Segment> segments, View<const int> actions, const env::MarketView& market,
                   const env::EnvParams& params) {
    for (std::size_t s = 0; s < state.size(); ++s)
        backtest::step_segment(state.data()[s], records.data(), segments.data()[s], actions.data()[s], market, params);
}

void backtest_gather(View<float> states, View<const backtest::SegmentState> state, const env::MarketView& market,
                     const env::EnvParams& params) {
    const std::size_t dim = static_cast<std::size_t>(params.state_dim);
    const std::size_t mdim = static_cast<std::size_t>(params.market_dim);
    for (std::size_t s = 0; s < state.size(); ++s) {
        const env::EnvState& e = state.data()[s].env;
        float* row = states.data() + s * dim;
        const float* features = market.features + static_cast<std::size_t>(e.t) * mdim;
        for (std::size_t c = 0; c < mdim; ++c) row[c] = features[c];
        float portfolio[env::PORTFOLIO_STRIDE];
        env::portfolio_features(e, market, params, portfolio);
        for (std::size_t c = 0; c < env::kPortfolioFeatures; ++c) row[mdim + c] = portfolio[c];
    }
}

void backtest_metrics(View<backtest::MetricsOut> out, View<long long> histogram,
                      View<const backtest::BarRecord> records, View<const backtest::SegmentState> state,
                      View<const backtest::Segment> segments, const env::MarketView& market,
                      const backtest::MetricsParams& params) {
    backtest::compute_metrics(out.data()[0], histogram.data(), records.data(), state.data(), segments.data(),
                              static_cast<int>(segments.size()), market.close, params);
}

}  // namespace fh::ops::cpu_twin
