/// @file cuda.cpp
/// @brief CUDA twins of the nn op family: launchers of cuda/kernels/nn_select.cu, nn_guard.cu, nn_attention.cu on the
/// device's stream.
///        The op (src/ops/nn/ops.hpp) checked sizes and that the buffers of each launch are
///        distinct before these run.
#include "ops/nn/ops.hpp"
#include "device/cuda_device.hpp"

namespace fh::ops::cuda_twin {

using cuda::LaunchDims;

void epsilon_greedy(CudaDevice& device, View<int> actions, View<const float> q, int num_actions, float epsilon,
                    std::uint64_t seed, std::uint64_t step) {
    device.kernels().epsilon_greedy_kernel(device.stream(), LaunchDims::linear(actions.size(), 128), actions.data(),
                                           q.data(), num_actions, epsilon, seed, step,
                                           static_cast<int>(actions.size()));
}

void action_histogram(CudaDevice& device, View<unsigned long long> histogram, View<const int> actions, int num_actions,
                      int agents) {
    device.kernels().action_histogram_kernel(device.stream(), LaunchDims::linear(actions.size(), 256), histogram.data(),
                                             actions.data(), num_actions, static_cast<int>(actions.size()),
                                             static_cast<int>(actions.size() / static_cast<std::size_t>(agents)));
}

void training_guard(CudaDevice& device, View<int> gate, View<nn::GuardState> state, View<const float> losses,
                    View<const float> grad_norm, core::CounterValue update) {
    device.kernels().training_guard_kernel(device.stream(), LaunchDims{dim3(1), dim3(32), 0}, gate.data(), state.data(),
                                           losses.data(), static_cast<int>(losses.size()), grad_norm.data(), update);
}

void norm_and_guard(CudaDevice& device, View<float> grad_norm, View<float> scratch, View<const float> x, View<int> gate,
                    View<nn::GuardState> state, View<const float> losses, core::CounterValue update, View<float> accum,
                    View<const float> stats) {
    // The fixed grid of Device::global_norm (its partials' order), the last block finishing.
    device.kernels().network_norm_guard_kernel(
        device.stream(), LaunchDims{dim3(abi::kNormBlocks), dim3(abi::kNormThreads), 0}, grad_norm.data(),
        scratch.data(), x.data(), static_cast<int>(x.size()), gate.data(), state.data(), losses.data(),
        static_cast<int>(losses.size()), update, accum.empty() ? nullptr : accum.data(),
        stats.empty() ? nullptr : stats.data(), static_cast<int>(accum.size()));
}

void norm_and_guard_agents(CudaDevice& device, int agents, View<const float> x, View<float> scratch, View<int> gate,
                           View<nn::GuardState> state, View<float> stats, int n_losses, int norm_index,
                           core::CounterValue update, View<float> accum, int accum_stride) {
    const std::size_t N = static_cast<std::size_t>(agents);
    device.kernels().network_norm_guard_agents_kernel(
        device.stream(), LaunchDims{dim3(abi::kNormBlocks, static_cast<unsigned>(agents)), dim3(abi::kNormThreads), 0},
        scratch.data(), x.data(), static_cast<int>(x.size() / N), gate.data(), state.data(), stats.data(), agents,
        n_losses, norm_index, update, accum.empty() ? nullptr : accum.data(), static_cast<int>(stats.size() / N),
        accum_stride);
}

void adam_step_agents(CudaDevice& device, int agents, View<float> params, View<float> m, View<float> v,
                      View<const float> grads, View<const float> grad_norm, View<const int> gate,
                      core::CounterValue step, const core::AdamConstants& c, View<const float> lr, View<float> target,
                      View<const float> tau_keep) {
    const long long P = static_cast<long long>(params.size() / static_cast<std::size_t>(agents));
    const LaunchDims dims{dim3(static_cast<unsigned>(abi::adam_blocks(P, false)), static_cast<unsigned>(agents)),
                          dim3(abi::kAdamThreads), 0};
    device.kernels().network_adam_agents_kernel(
        device.stream(), dims, params.data(), m.data(), v.data(), grads.data(),
        grad_norm.empty() ? nullptr : grad_norm.data(), gate.empty() ? nullptr : gate.data(), step, lr.data(), c,
        target.empty() ? nullptr : target.data(), tau_keep.empty() ? nullptr : tau_keep.data(), static_cast<int>(P));
}

void group_attention_forward(CudaDevice& device, View<float> x_out, View<float> alpha, View<const float> x,
                             View<const float> scores, const attention::Groups& groups, int D, int rows, int x_rows) {
    device.kernels().group_attention_forward_kernel(
        device.stream(), LaunchDims::linear(static_cast<std::size_t>(rows), 128), x_out.data(), alpha.data(), x.data(),
        scores.data(), groups, D, rows, x_rows);
}

void group_attention_backward(CudaDevice& device, View<float> d_scores, View<const float> d_x_out, View<const float> x,
                              View<const float> alpha, const attention::Groups& groups, int D, int rows) {
    device.kernels().group_attention_backward_kernel(
        device.stream(), LaunchDims::linear(static_cast<std::size_t>(rows), 128), d_scores.data(), d_x_out.data(),
        x.data(), alpha.data(), groups, D, rows);
}

}  // namespace fh::ops::cuda_twin
