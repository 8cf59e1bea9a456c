/// @file cpu.cpp
/// @brief CPU twins of the backtest op family: the shared per-element math (math/backtest.h, math/env.h) in plain
/// loops.
#include "abi/backtest.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace fh::ops {

void cpu(const BacktestReset& a) {
    const auto& [state, records, segments, params] = a;
    for (std::size_t s = 0; s < state.size(); ++s)
        backtest::reset_segment(state.data()[s], records.data(), segments.data()[s], params);
}

void cpu(const BacktestStep& a) {
    const auto& [state, records, segments, actions, market, params] = a;
    for (std::size_t s = 0; s < state.size(); ++s)
        backtest::step_segment(state.data()[s], records.data(), segments.data()[s], actions.data()[s], market, params);
}

void cpu(const BacktestGather& a) {
    const auto& [states, state, market, params] = a;
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

void cpu(const BacktestMetrics& a) {
    const auto& [out, histogram, records, state, segments, market, params] = a;
    backtest::compute_metrics(out.data()[0], histogram.data(), records.data(), state.data(), segments.data(),
                              static_cast<int>(segments.size()), market.close, params);
}

}  // namespace fh::ops
