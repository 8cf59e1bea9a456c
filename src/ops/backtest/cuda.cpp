/// @file cuda.cpp
/// @brief CUDA twins of the backtest op family: launchers of cuda/kernels/backtest.cu on the device's stream.
///        The op (src/ops/backtest/ops.hpp) checked sizes and that the buffers of each launch are
///        distinct before these run.
#include "ops/backtest/ops.hpp"
#include "ops/cuda_device.hpp"

namespace fh::ops::cuda_twin {

using cuda::LaunchDims;

void backtest_reset(CudaDevice& device, View<backtest::SegmentState> state, View<backtest::BarRecord> records,
                    View<const backtest::Segment> segments, const env::EnvParams& params) {
    device.kernels().backtest_reset_kernel(device.stream(), LaunchDims::linear(state.size(), 128), state.data(),
                                           records.data(), segments.data(), params, static_cast<int>(state.size()));
}

void backtest_step(CudaDevice& device, View<backtest::SegmentState> state, View<backtest::BarRecord> records,
                   View<const backtest::Segment> segments, View<const int> actions, const env::MarketView& market,
                   const env::EnvParams& params) {
    device.kernels().backtest_step_kernel(device.stream(), LaunchDims::linear(state.size(), 128), state.data(),
                                          records.data(), segments.data(), actions.data(), market, params,
                                          static_cast<int>(state.size()));
}

void backtest_gather(CudaDevice& device, View<float> states, View<const backtest::SegmentState> state,
                     const env::MarketView& market, const env::EnvParams& params) {
    device.kernels().backtest_gather_kernel(device.stream(), LaunchDims::linear(states.size()), states.data(),
                                            state.data(), market, params, static_cast<int>(state.size()));
}

void backtest_metrics(CudaDevice& device, View<backtest::MetricsOut> out, View<long long> histogram,
                      View<const backtest::BarRecord> records, View<const backtest::SegmentState> state,
                      View<const backtest::Segment> segments, const env::MarketView& market,
                      const backtest::MetricsParams& params) {
    device.kernels().backtest_metrics_kernel(device.stream(), LaunchDims{}, out.data(), histogram.data(),
                                             records.data(), state.data(), segments.data(),
                                             static_cast<int>(segments.size()), market.close, params);
}

}  // namespace fh::ops::cuda_twin
