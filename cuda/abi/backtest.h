/// @file backtest.h
/// @brief Kernel signatures of cuda/kernels/backtest.cu, the backtest evaluator (math:
///        math/backtest.h).
#pragma once

#include "math/backtest.h"
#include "abi/view.h"

namespace fh::abi {

/// The kernels of the ops below (ops::BacktestReset, ...), one thread per segment (metrics: one
/// thread), on their operands' pointers and n_segments.
using BacktestReset = void(backtest::SegmentState* __restrict__ state, backtest::BarRecord* __restrict__ records,
                           const backtest::Segment* __restrict__ segments, env::EnvParams params, int n_segments);
using BacktestStep = void(backtest::SegmentState* __restrict__ state, backtest::BarRecord* __restrict__ records,
                          const backtest::Segment* __restrict__ segments, const int* __restrict__ actions,
                          env::MarketView market, env::EnvParams params, int n_segments);
using BacktestGather = void(float* __restrict__ states, const backtest::SegmentState* __restrict__ state,
                            env::MarketView market, env::EnvParams params, int n_segments);
using BacktestMetrics = void(backtest::MetricsOut* __restrict__ out, long long* __restrict__ histogram,
                             const backtest::BarRecord* __restrict__ records,
                             const backtest::SegmentState* __restrict__ state,
                             const backtest::Segment* __restrict__ segments, int n_segments,
                             const double* __restrict__ close, backtest::MetricsParams params);

}  // namespace fh::abi

namespace fh::ops {

/// Starts every segment flat at its first bar and writes its first record
/// (backtest::reset_segment). state, segments (n_segments); records (sum of segment lengths).
struct BacktestReset {
    View<backtest::SegmentState> state;
    View<backtest::BarRecord> records;
    View<const backtest::Segment> segments;
    env::EnvParams params;
};

/// One lock-step of every running segment with actions[s] (backtest::step_segment); finished
/// segments idle. state, segments, actions (n_segments); records (sum of segment lengths).
struct BacktestStep {
    View<backtest::SegmentState> state;
    View<backtest::BarRecord> records;
    View<const backtest::Segment> segments;
    View<const int> actions;
    env::MarketView market;
    env::EnvParams params;
};

/// states (n_segments, state_dim) row s = [features of bar t_s (market_dim) |
/// env::portfolio_features of segment s]; state (n_segments).
struct BacktestGather {
    View<float> states;
    View<const backtest::SegmentState> state;
    env::MarketView market;
    env::EnvParams params;
};

/// out (1) and histogram (num_actions) = backtest::compute_metrics of the records (one thread,
/// fixed order, double). records (sum of segment lengths), state and segments (n_segments),
/// market.close (n_bars).
struct BacktestMetrics {
    View<backtest::MetricsOut> out;
    View<long long> histogram;
    View<const backtest::BarRecord> records;
    View<const backtest::SegmentState> state;
    View<const backtest::Segment> segments;
    env::MarketView market;
    backtest::MetricsParams params;
};

}  // namespace fh::ops

#define FH_KERNELS_backtest(FH_KERNEL)                          \
    FH_KERNEL(backtest, backtest_reset_kernel, BacktestReset)   \
    FH_KERNEL(backtest, backtest_step_kernel, BacktestStep)     \
    FH_KERNEL(backtest, backtest_gather_kernel, BacktestGather) \
    FH_KERNEL(backtest, backtest_metrics_kernel, BacktestMetrics)

#ifndef __CUDACC__
#include "ops/op_begin.hpp"

namespace detail {
inline void check_backtest_params(const env::EnvParams& p) {
    if (p.position_levels < 1 || p.position_levels % 2 == 0 || p.urgency_levels < 1 || p.urgency_levels > 3 ||
        p.state_dim != p.market_dim + env::kPortfolioFeatures || p.episode_length < 1 || p.max_contracts < 1 ||
        !(p.initial_equity > 0))
        throw std::invalid_argument(
            "ops::backtest: invalid environment parameters (levels, "
            "state_dim, episode_length, max_contracts or initial_equity)");
}
}  // namespace detail

inline bool check(const BacktestReset& a) {
    const auto& [state, records, segments, params] = a;
    detail::check_backtest_params(params);
    detail::require_same_size(segments.size(), state.size(), "backtest_reset (segments)");
    detail::checked_int_size(state.size(), "backtest_reset");
    detail::checked_int_size(records.size(), "backtest_reset (records)");
    detail::require_distinct("backtest_reset", {FH_RANGES(state, records, segments)});
    return !state.empty();
}
FH_LAUNCH(BacktestReset) {
    const auto& [state, records, segments, params] = a;
    gpu.kernels().backtest_reset_kernel(gpu.stream(), LaunchDims::linear(state.size(), 128), state.data(),
                                        records.data(), segments.data(), params, static_cast<int>(state.size()));
}

inline bool check(const BacktestStep& a) {
    const auto& [state, records, segments, actions, market, params] = a;
    detail::check_backtest_params(params);
    detail::require_same_size(segments.size(), state.size(), "backtest_step (segments)");
    detail::require_same_size(actions.size(), state.size(), "backtest_step (actions)");
    detail::checked_int_size(state.size(), "backtest_step");
    detail::require_distinct("backtest_step", {FH_RANGES(state, records, segments, actions)});
    if (market.n_bars < 2) throw std::invalid_argument("ops::backtest_step: the market has < 2 bars");
    return !state.empty();
}
FH_LAUNCH(BacktestStep) {
    const auto& [state, records, segments, actions, market, params] = a;
    gpu.kernels().backtest_step_kernel(gpu.stream(), LaunchDims::linear(state.size(), 128), state.data(),
                                       records.data(), segments.data(), actions.data(), market, params,
                                       static_cast<int>(state.size()));
}

inline bool check(const BacktestGather& a) {
    const auto& [states, state, market, params] = a;
    detail::check_backtest_params(params);
    detail::require_same_size(states.size(), state.size() * static_cast<std::size_t>(params.state_dim),
                              "backtest_gather");
    detail::checked_int_size(states.size(), "backtest_gather");
    detail::require_distinct("backtest_gather", {FH_RANGES(states, state)});
    return !state.empty();
}
FH_LAUNCH(BacktestGather) {
    const auto& [states, state, market, params] = a;
    gpu.kernels().backtest_gather_kernel(gpu.stream(), LaunchDims::linear(states.size()), states.data(), state.data(),
                                         market, params, static_cast<int>(state.size()));
}

inline void check(const BacktestMetrics& a) {
    const auto& [out, histogram, records, state, segments, market, params] = a;
    detail::require_same_size(out.size(), 1, "backtest_metrics (out)");
    detail::require_same_size(histogram.size(),
                              static_cast<std::size_t>(params.num_actions < 0 ? 0 : params.num_actions),
                              "backtest_metrics (histogram)");
    detail::require_same_size(segments.size(), state.size(), "backtest_metrics (segments)");
    detail::checked_int_size(records.size(), "backtest_metrics");
    if (params.num_actions < 1 || !(params.initial_equity > 0) || !(params.bars_per_year > 0))
        throw std::invalid_argument(
            fmt::format("ops::backtest_metrics: num_actions ({}), initial_equity "
                        "and bars_per_year ({}) must be positive",
                        params.num_actions, params.bars_per_year));
    detail::require_distinct("backtest_metrics", {FH_RANGES(out, histogram, records, state, segments)});
}
FH_LAUNCH(BacktestMetrics) {
    const auto& [out, histogram, records, state, segments, market, params] = a;
    gpu.kernels().backtest_metrics_kernel(gpu.stream(), LaunchDims{}, out.data(), histogram.data(), records.data(),
                                          state.data(), segments.data(), static_cast<int>(segments.size()),
                                          market.close, params);
}

#include "ops/op_end.hpp"
#endif
