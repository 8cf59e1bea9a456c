/// @file cuda_backtest_ops.cpp
/// @brief Launchers for cuda/kernels/backtest_env.cu, backtest_gather_kernel.cu and
///        backtest_metrics_kernel.cu. Ops:: checked sizes and distinct buffers first.
#include "ops/cuda/cuda_ops.hpp"

namespace fh::ops {

using cuda::LaunchDims;

void CudaOps::backtest_reset_impl(View<backtest::SegmentState> state,
                                  View<backtest::BarRecord> records,
                                  View<const backtest::Segment> segments,
                                  const env::EnvParams& params) {
    kernels().backtest_reset_kernel(stream(), LaunchDims::linear(state.size(), 128), state.data(),
                                    records.data(), segments.data(), params,
                                    static_cast<int>(state.size()));
}

void CudaOps::backtest_step_impl(View<backtest::SegmentState> state,
                                 View<backtest::BarRecord> records,
                                 View<const backtest::Segment> segments, View<const int> actions,
                                 const env::MarketView& market, const env::EnvParams& params) {
    kernels().backtest_step_kernel(stream(), LaunchDims::linear(state.size(), 128), state.data(),
                                   records.data(), segments.data(), actions.data(), market, params,
                                   static_cast<int>(state.size()));
}

void CudaOps::backtest_gather_impl(View<float> states, View<const backtest::SegmentState> state,
                                   const env::MarketView& market, const env::EnvParams& params) {
    kernels().backtest_gather_kernel(stream(), LaunchDims::linear(states.size()), states.data(),
                                     state.data(), market, params, static_cast<int>(state.size()));
}

void CudaOps::backtest_metrics_impl(View<backtest::MetricsOut> out, View<long long> histogram,
                                    View<const backtest::BarRecord> records,
                                    View<const backtest::SegmentState> state,
                                    View<const backtest::Segment> segments,
                                    const env::MarketView& market,
                                    const backtest::MetricsParams& params) {
    kernels().backtest_metrics_kernel(stream(), LaunchDims{}, out.data(), histogram.data(),
                                      records.data(), state.data(), segments.data(),
                                      static_cast<int>(segments.size()), market.close, params);
}

}  // namespace fh::ops
