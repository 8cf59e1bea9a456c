/// @file cuda.cpp
/// @brief CUDA twins of the IQN op family: launchers of cuda/kernels/dqn_iqn.cu on the device's
///        stream. The op (src/ops/iqn/ops.hpp) checked sizes and that the buffers of each launch
///        are distinct before these run.
#include "ops/cuda_device.hpp"
#include "ops/iqn/ops.hpp"

namespace fh::ops::cuda_twin {

using cuda::LaunchDims;

void iqn_taus(CudaDevice& device, View<float> features, View<float> taus, View<const dqn::AgentParams> agent,
              View<const dqn::Counters> counters, int rows, int quantiles, int n_cos) {
    abi::IqnTausArgs a{features.data(), taus.data(), or_null(agent), or_null(counters), rows, quantiles, n_cos};
    device.kernels().iqn_taus_kernel(
        device.stream(), LaunchDims::linear(static_cast<std::size_t>(rows) * static_cast<std::size_t>(quantiles), 128),
        a);
}

void iqn_hadamard(CudaDevice& device, View<float> x, View<const float> phi, View<const float> psi, int count, int rows,
                  int quantiles, int psi_rows, int width) {
    device.kernels().iqn_hadamard_kernel(device.stream(), LaunchDims::linear(x.size(), 256), x.data(), phi.data(),
                                         psi.data(), count, rows, quantiles, psi_rows, width);
}

void iqn_hadamard_backward(CudaDevice& device, View<float> d_phi, View<float> d_psi, View<const float> dx,
                           View<const float> phi, View<const float> psi, int batch, int quantiles, int width) {
    device.kernels().iqn_hadamard_backward_kernel(device.stream(), LaunchDims::linear(d_phi.size(), 256), d_phi.data(),
                                                  d_psi.data(), dx.data(), phi.data(), psi.data(), batch, quantiles,
                                                  width);
}

void iqn_loss(CudaDevice& device, View<float> d_head, View<float> stats, View<const float> head_s,
              View<const float> head_select, View<const float> head_target, View<const float> taus,
              View<const int> actions, View<const float> returns, View<const float> discounts,
              View<const dqn::AgentParams> agent, const dqn::HeadParams& h, int quantiles, int batch) {
    constexpr int T = abi::kIqnLossThreads;
    const LaunchDims dims{
        dim3(static_cast<unsigned>((batch + T - 1) / T)), dim3(T),
        sizeof(float) * static_cast<std::size_t>(T) * static_cast<std::size_t>(iqn::loss_scratch(h, quantiles))};
    abi::IqnLossArgs a{d_head.data(),
                       stats.data(),
                       head_s.data(),
                       head_select.data(),
                       head_target.data(),
                       taus.data(),
                       actions.data(),
                       returns.data(),
                       discounts.data(),
                       agent.data(),
                       h,
                       quantiles,
                       batch};
    device.kernels().iqn_loss_kernel(device.stream(), dims, a);
}

void iqn_mean_rows(CudaDevice& device, View<float> out, View<const float> head, int n, int quantiles, int width) {
    device.kernels().iqn_mean_rows_kernel(device.stream(), LaunchDims::linear(out.size(), 256), out.data(), head.data(),
                                          n, quantiles, width);
}

}  // namespace fh::ops::cuda_twin
