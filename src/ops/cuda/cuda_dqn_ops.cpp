/// @file cuda_dqn_ops.cpp
/// @brief Launchers of the DQN kernels. Ops:: (src/ops/dqn_ops.cpp) checked the sizes and that
///        the buffers of each launch are distinct before these run.
#include "ops/cuda/cuda_ops.hpp"

namespace fh::ops {

using cuda::LaunchDims;

namespace {
template <class T> T* or_null(View<T> v) { return v.empty() ? nullptr : v.data(); }
}  // namespace

void CudaOps::copy_bytes(void* dst, const void* src, std::size_t bytes) {
    FH_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream()));
}

void CudaOps::mean_impl(View<float> out, View<const float> x) {
    kernels().mean_f32_kernel(stream(), LaunchDims{dim3(1), dim3(abi::kMeanThreads), 0}, out.data(),
                                  x.data(), static_cast<int>(x.size()));
}

void CudaOps::c51_head_forward_impl(View<float> logits, View<float> probs, View<float> q,
                                    View<const float> value, View<const float> adv,
                                    const dqn::HeadParams& h, int batch) {
    kernels().c51_head_forward_kernel(stream(), LaunchDims::linear(static_cast<std::size_t>(batch), 64),
                                      logits.data(), probs.data(), q.data(), or_null(value), adv.data(), h,
                                      batch);
}

void CudaOps::c51_head_backward_impl(View<float> d_value, View<float> d_adv, View<const float> d_logits,
                                     const dqn::HeadParams& h, int batch) {
    kernels().c51_head_backward_kernel(stream(), LaunchDims::linear(static_cast<std::size_t>(batch), 64),
                                       or_null(d_value), d_adv.data(), d_logits.data(), h, batch);
}

void CudaOps::c51_loss_impl(View<float> loss, View<float> d_logits, View<const float> logits,
                            View<const float> probs, View<const float> q_next_select,
                            View<const float> probs_next_target, View<const int> actions,
                            View<const float> returns, View<const float> discounts,
                            const dqn::HeadParams& h, int batch) {
    kernels().c51_loss_kernel(stream(), LaunchDims::linear(static_cast<std::size_t>(batch), 64), loss.data(),
                              d_logits.data(), logits.data(), probs.data(), q_next_select.data(),
                              probs_next_target.data(), actions.data(), returns.data(), discounts.data(), h,
                              batch);
}

void CudaOps::mse_loss_impl(View<float> loss, View<float> d_logits, View<float> td, View<const float> probs,
                            View<const float> q, View<const float> q_next_select,
                            View<const float> q_next_target, View<const int> actions,
                            View<const float> returns, View<const float> discounts,
                            const dqn::HeadParams& h, int batch) {
    kernels().mse_loss_kernel(stream(), LaunchDims::linear(static_cast<std::size_t>(batch), 64), loss.data(),
                              d_logits.data(), td.data(), probs.data(), q.data(), q_next_select.data(),
                              q_next_target.data(), actions.data(), returns.data(), discounts.data(), h, batch);
}

void CudaOps::nstep_sample_impl(View<float> states, View<float> next_states, View<int> actions,
                                View<float> returns, View<float> discounts, const replay::ReplayView& r,
                                const replay::SampleParams& p, int batch) {
    kernels().nstep_sample_kernel(stream(), LaunchDims::linear(static_cast<std::size_t>(batch), 128),
                                  states.data(), next_states.data(), actions.data(), returns.data(),
                                  discounts.data(), r, p, batch);
}

void CudaOps::epsilon_greedy_impl(View<int> actions, View<const float> q, int num_actions, float epsilon,
                                  std::uint64_t seed, std::uint64_t step) {
    kernels().epsilon_greedy_kernel(stream(), LaunchDims::linear(actions.size(), 128), actions.data(), q.data(),
                                    num_actions, epsilon, seed, step, static_cast<int>(actions.size()));
}

void CudaOps::training_guard_impl(View<int> gate, View<nn::GuardState> state, View<const float> losses,
                                  View<const float> grad_norm, long long update) {
    kernels().training_guard_kernel(stream(), LaunchDims{dim3(1), dim3(32), 0}, gate.data(), state.data(),
                                    losses.data(), static_cast<int>(losses.size()), grad_norm.data(), update);
}

void CudaOps::monitor_update_impl(View<dqn::MonitorStats> stats, View<const float> losses, View<const float> q,
                                  View<const int> actions, View<const float> td, View<const float> grad_norm,
                                  int num_actions, int batch) {
    kernels().dqn_monitor_update_kernel(stream(), LaunchDims{dim3(1), dim3(32), 0}, stats.data(), losses.data(),
                                       q.data(), actions.data(), td.data(), grad_norm.data(), num_actions,
                                       batch);
}

void CudaOps::monitor_actions_impl(View<unsigned long long> histogram, View<const int> actions,
                                   int num_actions) {
    kernels().action_histogram_kernel(stream(), LaunchDims::linear(actions.size(), 256), histogram.data(),
                                        actions.data(), num_actions, static_cast<int>(actions.size()));
}

}  // namespace fh::ops
