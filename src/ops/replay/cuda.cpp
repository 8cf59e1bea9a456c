/// @file cuda.cpp
/// @brief CUDA twins of the replay op family: launchers of cuda/kernels/replay_nstep.cu on the device's stream.
///        The op (src/ops/replay/ops.hpp) checked sizes and that the buffers of each launch are
///        distinct before these run.
#include "ops/replay/ops.hpp"
#include "ops/cuda_device.hpp"

namespace fh::ops::cuda_twin {

using cuda::LaunchDims;

void nstep_sample(CudaDevice& device, View<float> states, View<float> next_states, View<int> actions,
                  View<float> returns, View<float> discounts, const replay::ReplayView& r,
                  const replay::SampleParams& p, View<const long long> update_from, const CounterAdvance& advance,
                  int batch) {
    device.kernels().nstep_sample_kernel(device.stream(), LaunchDims::linear(static_cast<std::size_t>(batch) * 32, 128),
                                         states.data(), next_states.data(), actions.data(), returns.data(),
                                         discounts.data(), r, p, update_from.empty() ? nullptr : update_from.data(),
                                         or_null(advance.counter), or_null(advance.ticket), batch);
}

void nstep_sample_agents(CudaDevice& device, View<float> states, View<float> next_states, View<int> actions,
                         View<float> returns, View<float> discounts, View<const abi::SampleAgent> agents,
                         std::size_t out_stride, const CounterAdvance& advance, int batch) {
    LaunchDims dims = LaunchDims::linear(static_cast<std::size_t>(batch) * 32, 128);
    dims.grid.y = static_cast<unsigned>(agents.size());
    device.kernels().nstep_sample_agents_kernel(
        device.stream(), dims, states.data(), next_states.data(), actions.data(), returns.data(), discounts.data(),
        agents.data(), static_cast<long long>(out_stride), advance.counter.data(), advance.ticket.data(), batch);
}

}  // namespace fh::ops::cuda_twin
