/// @file cuda_iql_ops.cpp
/// @brief Launchers of the IQL kernels (cuda/kernels/iql_value.cu, awr_policy_kernel.cu,
///        iql_behaviour_kernel.cu). Ops:: (src/ops/iql_ops.cpp) checked the sizes and that the
///        outputs of each launch overlap nothing before these run.
#include "ops/cuda/cuda_ops.hpp"

namespace fh::ops {

using cuda::LaunchDims;

void CudaOps::iql_value_loss_impl(View<float> loss, View<float> d_v, View<const float> v, View<const float> q1,
                                  View<const float> q2, View<const int> actions, float expectile, int num_actions,
                                  int batch) {
    kernels().iql_value_loss_kernel(stream(), LaunchDims::linear(static_cast<std::size_t>(batch), 128), loss.data(),
                                    d_v.data(), v.data(), q1.data(), q2.data(), actions.data(), expectile,
                                    num_actions, batch);
}

void CudaOps::iql_q_loss_impl(View<float> loss, View<float> d_q1, View<float> d_q2, View<const float> q1,
                              View<const float> q2, View<const int> actions, View<const float> rewards,
                              View<const float> discounts, View<const float> v_next, int num_actions, int batch) {
    kernels().iql_q_loss_kernel(stream(), LaunchDims::linear(static_cast<std::size_t>(batch), 128), loss.data(),
                                d_q1.data(), d_q2.data(), q1.data(), q2.data(), actions.data(), rewards.data(),
                                discounts.data(), v_next.data(), num_actions, batch);
}

void CudaOps::awr_policy_loss_impl(View<float> loss, View<float> weights, View<float> d_logits,
                                   View<const float> logits, View<const float> q1, View<const float> q2,
                                   View<const float> v, View<const int> actions, float beta, float max_weight,
                                   int num_actions, int batch) {
    kernels().awr_policy_loss_kernel(stream(), LaunchDims::linear(static_cast<std::size_t>(batch), 128),
                                     loss.data(), weights.data(), d_logits.data(), logits.data(), q1.data(),
                                     q2.data(), v.data(), actions.data(), beta, max_weight, num_actions, batch);
}

void CudaOps::behaviour_actions_impl(View<int> actions, View<const float> states, const iql::BehaviourParams& p,
                                     std::uint64_t step) {
    kernels().iql_behaviour_kernel(stream(), LaunchDims::linear(actions.size(), 128), actions.data(),
                                   states.data(), p, step, static_cast<int>(actions.size()));
}

}  // namespace fh::ops
