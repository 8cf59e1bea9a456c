/* backtest_gather_kernel.cu — the policy's input of every backtest segment.
 *
 * Math:        states[s] = [market features of bar t_s | env::portfolio_features(segment s)]
 *              (abi/futures_env.h), exactly what the training environment gathers.
 *              CPU twin: src/ops/cpu/cpu_backtest_ops.cpp.
 * Layout:      states (n_segments, state_dim) floats; state (n_segments) SegmentState.
 * Launch:      one thread per (segment, column), any 1-D grid (grid-stride).
 * Determinism: exact (copies, and the portfolio features' float conversions of double values;
 *              compiled with --fmad=false like the environment).
 * Aliasing:    states and state are distinct buffers.
 * Signatures:  cuda/abi/backtest_abi.h.
 */
#include "abi/backtest_abi.h"
#include "common_device_functions.cuh"

using fh::device::global_thread_index;
using fh::device::grid_thread_count;
using namespace fh::backtest;

extern "C" __global__ void backtest_gather_kernel(float* __restrict__ states,
                                                  const SegmentState* __restrict__ state,
                                                  fh::env::MarketView market,
                                                  fh::env::EnvParams params, int n_segments) {
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

FH_BACKTEST_GATHER_KERNELS(FH_CHECK_KERNEL_ABI)
