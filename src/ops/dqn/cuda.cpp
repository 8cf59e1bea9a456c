/// @file cuda.cpp
/// @brief CUDA twins of the dqn op family: launchers of cuda/kernels/dqn_c51.cu, dqn_mse.cu, dqn_monitor.cu on the
/// device's stream.
///        The op (src/ops/dqn/ops.hpp) checked sizes and that the buffers of each launch are
///        distinct before these run.
#include "ops/dqn/ops.hpp"
#include "ops/cuda_device.hpp"

namespace fh::ops::cuda_twin {

using cuda::LaunchDims;

void c51_head_forward(CudaDevice& device, View<float> logits, View<float> probs, View<float> q, View<const float> value,
                      View<const float> adv, const dqn::HeadParams& h, int batch) {
    device.kernels().c51_head_forward_kernel(device.stream(), LaunchDims::linear(static_cast<std::size_t>(batch), 64),
                                             logits.data(), probs.data(), q.data(), or_null(value), adv.data(), h,
                                             batch);
}

void c51_head_backward(CudaDevice& device, View<float> d_value, View<float> d_adv, View<const float> d_logits,
                       const dqn::HeadParams& h, int batch) {
    device.kernels().c51_head_backward_kernel(device.stream(), LaunchDims::linear(static_cast<std::size_t>(batch), 64),
                                              or_null(d_value), d_adv.data(), d_logits.data(), h, batch);
}

void c51_loss(CudaDevice& device, View<float> loss, View<float> d_logits, View<const float> logits,
              View<const float> probs, View<const float> q_next_select, View<const float> probs_next_target,
              View<const int> actions, View<const float> returns, View<const float> discounts, const dqn::HeadParams& h,
              int batch) {
    device.kernels().c51_loss_kernel(device.stream(), LaunchDims::linear(static_cast<std::size_t>(batch), 64),
                                     loss.data(), d_logits.data(), logits.data(), probs.data(), q_next_select.data(),
                                     probs_next_target.data(), actions.data(), returns.data(), discounts.data(), h,
                                     batch);
}

void mse_loss(CudaDevice& device, View<float> loss, View<float> d_logits, View<float> td, View<const float> probs,
              View<const float> q, View<const float> q_next_select, View<const float> q_next_target,
              View<const int> actions, View<const float> returns, View<const float> discounts, const dqn::HeadParams& h,
              int batch) {
    device.kernels().mse_loss_kernel(device.stream(), LaunchDims::linear(static_cast<std::size_t>(batch), 64),
                                     loss.data(), d_logits.data(), td.data(), probs.data(), q.data(),
                                     q_next_select.data(), q_next_target.data(), actions.data(), returns.data(),
                                     discounts.data(), h, batch);
}

void dqn_monitor_update(CudaDevice& device, View<dqn::MonitorStats> stats, View<const float> losses, View<const float> q,
                    View<const int> actions, View<const float> td, View<const float> grad_norm, int num_actions,
                    int batch) {
    device.kernels().dqn_monitor_update_kernel(device.stream(), LaunchDims{dim3(1), dim3(32), 0}, stats.data(),
                                               losses.data(), q.data(), actions.data(), td.data(), grad_norm.data(),
                                               num_actions, batch);
}

}  // namespace fh::ops::cuda_twin
