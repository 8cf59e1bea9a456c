/* backtest.cu — the backtest evaluator's kernels (docs/metrics.md): the lock-step environment of
 * the evaluation segments, the policy's observations, and the metrics in double.
 *
 * Math:        backtest::reset_segment / step_segment (math/backtest.h), which call env::step_env
 *              (math/env.h): the training environment's fills and accounting, unchanged;
 *              backtest_gather: states[s] = [market features of bar t_s | env::portfolio_features];
 *              backtest::compute_metrics: per-bar returns, compounded curve, Sharpe, Sortino, max
 *              drawdown, Calmar, closed round trips, exposure, turnover, action histogram.
 * Layout:      state, segments, actions (n_segments); records (sum over segments of end - start)
 *              BarRecord, segment s owning records[offset_s, offset_s + end_s - start_s);
 *              states (n_segments, state_dim); out (1) MetricsOut; histogram (num_actions);
 *              close (n_bars).
 * Launch:      reset/step: one thread per segment; gather: one thread per (segment, column); both
 *              any 1-D grid (grid-stride). metrics: one thread (grid 1 x block 1), a sequential
 *              pass in one fixed order; only the few scalars travel to the host.
 * Determinism: exact run to run; compiled with --fmad=false (cuda/meson.build) so the GPU equals the
 *              CPU twin (src/ops/backtest/cpu.cpp) bit for bit, except annual_return and calmar
 *              (pow may differ by an ulp). Test: tests/eval/test_backtest_gpu.cpp ([gpu]).
 * Aliasing:    every pointer of one launch is a distinct buffer (checked in cuda/abi/backtest.h).
 * Signatures:  cuda/abi/backtest.h.
 */
#include "abi/backtest.h"
#include "device_functions.cuh"

using fh::device::global_thread_index;
using fh::device::grid_thread_count;
using namespace fh::backtest;

extern "C" __global__ void backtest_reset_kernel(SegmentState* __restrict__ state, BarRecord* __restrict__ records,
                                                 const Segment* __restrict__ segments, fh::env::EnvParams params,
                                                 int n_segments) {
    for (long long s = global_thread_index(); s < n_segments; s += grid_thread_count()) {
        SegmentState st;
        reset_segment(st, records, segments[s], params);
        state[s] = st;
    }
}

extern "C" __global__ void backtest_step_kernel(SegmentState* __restrict__ state, BarRecord* __restrict__ records,
                                                const Segment* __restrict__ segments, const int* __restrict__ actions,
                                                fh::env::MarketView market, fh::env::EnvParams params, int n_segments) {
    for (long long s = global_thread_index(); s < n_segments; s += grid_thread_count()) {
        SegmentState st = state[s];
        if (st.finished) continue;
        step_segment(st, records, segments[s], actions[s], market, params);
        state[s] = st;
    }
}

extern "C" __global__ void backtest_gather_kernel(float* __restrict__ states, const SegmentState* __restrict__ state,
                                                  fh::env::MarketView market, fh::env::EnvParams params,
                                                  int n_segments) {
    const long long total = static_cast<long long>(n_segments) * params.state_dim;
    for (long long i = global_thread_index(); i < total; i += grid_thread_count()) {
        const long long s = i / params.state_dim;
        const int col = static_cast<int>(i - s * params.state_dim);
        const fh::env::EnvState& e = state[s].env;
        if (col < params.market_dim) {
            states[i] = market.features[static_cast<long long>(e.t) * params.market_dim + col];
        } else {
            float row[fh::env::PORTFOLIO_STRIDE];
            fh::env::portfolio_features(e, market, params, row);
            states[i] = row[col - params.market_dim];
        }
    }
}

extern "C" __global__ void backtest_metrics_kernel(MetricsOut* __restrict__ out, long long* __restrict__ histogram,
                                                   const BarRecord* __restrict__ records,
                                                   const SegmentState* __restrict__ state,
                                                   const Segment* __restrict__ segments, int n_segments,
                                                   const double* __restrict__ close, MetricsParams params) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    MetricsOut m;
    compute_metrics(m, histogram, records, state, segments, n_segments, close, params);
    out[0] = m;
}

FH_KERNELS_backtest(FH_CHECK_KERNEL_ABI)
