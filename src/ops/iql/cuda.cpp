/// @file cuda.cpp
/// @brief CUDA twins of the iql op family: launchers of cuda/kernels/iql_*.cu on the device's stream.
///        The op (src/ops/iql/ops.hpp) checked sizes and that the buffers of each launch are
///        distinct before these run.
#include "ops/iql/ops.hpp"
#include "device/cuda_device.hpp"

namespace fh::ops::cuda_twin {

using cuda::LaunchDims;

namespace {
/// Every agent's rows: one thread each.
std::size_t rows_of(int batch, int agents) {
    return static_cast<std::size_t>(batch) * static_cast<std::size_t>(agents);
}
}  // namespace

void iql_value_loss(CudaDevice& device, View<float> loss, View<float> d_v, View<const float> v, View<const float> q1,
                    View<const float> q2, View<const int> actions, float expectile, int num_actions, int batch,
                    const iql::LossScalars* scalars, int agents) {
    device.kernels().iql_value_loss_kernel(device.stream(), LaunchDims::linear(rows_of(batch, agents), 128),
                                           loss.data(), d_v.data(), v.data(), q1.data(), q2.data(), actions.data(),
                                           expectile, num_actions, batch, scalars, agents);
}

void iql_q_loss(CudaDevice& device, View<float> loss, View<float> d_q1, View<float> d_q2, View<const float> q1,
                View<const float> q2, View<const int> actions, View<const float> rewards, View<const float> discounts,
                View<const float> v_next, int num_actions, int batch, int agents) {
    device.kernels().iql_q_loss_kernel(device.stream(), LaunchDims::linear(rows_of(batch, agents), 128), loss.data(),
                                       d_q1.data(), d_q2.data(), q1.data(), q2.data(), actions.data(), rewards.data(),
                                       discounts.data(), v_next.data(), num_actions, batch, agents);
}

void awr_policy_loss(CudaDevice& device, View<float> loss, View<float> weights, View<float> d_logits,
                     View<const float> logits, View<const float> q1, View<const float> q2, View<const float> v,
                     View<const int> actions, float beta, float max_weight, int num_actions, int batch,
                     const iql::LossScalars* scalars, int agents) {
    device.kernels().awr_policy_loss_kernel(device.stream(), LaunchDims::linear(rows_of(batch, agents), 128),
                                            loss.data(), weights.data(), d_logits.data(), logits.data(), q1.data(),
                                            q2.data(), v.data(), actions.data(), beta, max_weight, num_actions, batch,
                                            scalars, agents);
}

void behaviour_actions(CudaDevice& device, View<int> actions, View<const float> states, const iql::BehaviourParams& p,
                       std::uint64_t step) {
    device.kernels().iql_behaviour_kernel(device.stream(), LaunchDims::linear(actions.size(), 128), actions.data(),
                                          states.data(), p, step, static_cast<int>(actions.size()));
}

}  // namespace fh::ops::cuda_twin
