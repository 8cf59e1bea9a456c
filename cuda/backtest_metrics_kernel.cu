/* backtest_metrics_kernel.cu — the metrics of one backtest (docs/metrics.md), in double.
 *
 * Math:        backtest::compute_metrics (abi/backtest.h): per-bar returns, compounded curve,
 *              Sharpe, Sortino, max drawdown, Calmar, closed round trips, exposure, turnover,
 *              action histogram. CPU twin: src/ops/cpu/cpu_backtest_ops.cpp.
 * Layout:      out (1) MetricsOut; histogram (num_actions); records (sum of segment lengths);
 *              state, segments (n_segments); close (n_bars).
 * Launch:      one thread (grid 1 x block 1): a sequential pass in one fixed order. The records
 *              stay on the device; only the few scalars travel to the host.
 * Determinism: exact run to run; equal to the CPU bit for bit except annual_return and calmar
 *              (pow may differ by an ulp). Compiled with --fmad=false.
 * Aliasing:    out and histogram are distinct from each other and from the inputs.
 * Signatures:  cuda/abi/backtest_abi.h.
 */
#include "abi/backtest_abi.h"
#include "common_device_functions.cuh"

using namespace fh::backtest;

extern "C" __global__ void backtest_metrics_kernel(MetricsOut* __restrict__ out,
                                                   long long* __restrict__ histogram,
                                                   const BarRecord* __restrict__ records,
                                                   const SegmentState* __restrict__ state,
                                                   const Segment* __restrict__ segments,
                                                   int n_segments, const double* __restrict__ close,
                                                   MetricsParams params) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    MetricsOut m;
    compute_metrics(m, histogram, records, state, segments, n_segments, close, params);
    out[0] = m;
}

FH_BACKTEST_METRICS_KERNELS(FH_CHECK_KERNEL_ABI)
