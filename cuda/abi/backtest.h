/// @file backtest.h
/// @brief Kernel signatures of cuda/kernels/backtest.cu, the backtest evaluator (math:
///        math/backtest.h).
#pragma once

#include "math/backtest.h"

namespace fh::abi {

/// Starts every segment flat at its first bar and writes its first record (backtest::reset_segment).
/// state (n_segments), records (sum of segment lengths), segments (n_segments).
using BacktestReset = void(backtest::SegmentState* __restrict__ state, backtest::BarRecord* __restrict__ records,
                           const backtest::Segment* __restrict__ segments, env::EnvParams params, int n_segments);

/// One lock-step of every running segment with actions[s] (backtest::step_segment); finished
/// segments idle. state, segments, actions (n_segments); records (sum of segment lengths).
using BacktestStep = void(backtest::SegmentState* __restrict__ state, backtest::BarRecord* __restrict__ records,
                          const backtest::Segment* __restrict__ segments, const int* __restrict__ actions,
                          env::MarketView market, env::EnvParams params, int n_segments);

/// states[s] = [features of bar t_s (market_dim) | env::portfolio_features of segment s].
/// states (n_segments, state_dim), state (n_segments).
using BacktestGather = void(float* __restrict__ states, const backtest::SegmentState* __restrict__ state,
                            env::MarketView market, env::EnvParams params, int n_segments);

/// out[0] and histogram (num_actions) = backtest::compute_metrics (one thread, fixed order).
/// records (sum of segment lengths), state and segments (n_segments), close (n_bars).
using BacktestMetrics = void(backtest::MetricsOut* __restrict__ out, long long* __restrict__ histogram,
                             const backtest::BarRecord* __restrict__ records,
                             const backtest::SegmentState* __restrict__ state,
                             const backtest::Segment* __restrict__ segments, int n_segments,
                             const double* __restrict__ close, backtest::MetricsParams params);

}  // namespace fh::abi

#define FH_KERNELS_backtest(FH_KERNEL)                          \
    FH_KERNEL(backtest, backtest_reset_kernel, BacktestReset)   \
    FH_KERNEL(backtest, backtest_step_kernel, BacktestStep)     \
    FH_KERNEL(backtest, backtest_gather_kernel, BacktestGather) \
    FH_KERNEL(backtest, backtest_metrics_kernel, BacktestMetrics)
