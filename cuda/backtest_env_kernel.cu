/* backtest_env_kernel.cu — the backtest's lock-step environment (SPEC section 8).
 *
 * Math:        backtest::reset_segment, backtest::step_segment (abi/backtest.h), which call
 *              env::step_env (abi/futures_env.h): the training environment's fills and
 *              accounting, unchanged. CPU twin: src/ops/cpu/cpu_backtest_ops.cpp.
 * Layout:      state, segments, actions (n_segments); records (sum over segments of end - start)
 *              BarRecord, segment s owning records[offset_s, offset_s + end_s - start_s).
 * Launch:      one thread per segment, any 1-D grid (grid-stride).
 * Determinism: exact; compiled with --fmad=false (cuda/meson.build) so the GPU equals the CPU bit
 *              for bit (tests/eval/test_backtest_gpu.cpp, [gpu]).
 * Aliasing:    every pointer of one launch is a distinct buffer (src/eval/backtest.cpp).
 * Signatures:  cuda/abi/backtest_abi.h.
 */
#include "abi/backtest_abi.h"
#include "common_device_functions.cuh"

using fh::device::global_thread_index;
using fh::device::grid_thread_count;
using namespace fh::backtest;

extern "C" __global__ void backtest_reset_kernel(SegmentState* __restrict__ state,
                                                 BarRecord* __restrict__ records,
                                                 const Segment* __restrict__ segments,
                                                 fh::env::EnvParams params, int n_segments) {
    for (long long s = global_thread_index(); s < n_segments; s += grid_thread_count()) {
        SegmentState st;
        reset_segment(st, records, segments[s], params);
        state[s] = st;
    }
}

extern "C" __global__ void backtest_step_kernel(SegmentState* __restrict__ state,
                                                BarRecord* __restrict__ records,
                                                const Segment* __restrict__ segments,
                                                const int* __restrict__ actions,
                                                fh::env::MarketView market,
                                                fh::env::EnvParams params, int n_segments) {
    for (long long s = global_thread_index(); s < n_segments; s += grid_thread_count()) {
        SegmentState st = state[s];
        if (st.finished) continue;
        step_segment(st, records, segments[s], actions[s], market, params);
        state[s] = st;
    }
}

FH_BACKTEST_ENV_KERNELS(FH_CHECK_KERNEL_ABI)
