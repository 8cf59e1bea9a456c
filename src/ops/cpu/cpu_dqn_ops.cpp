/// @file cpu_dqn_ops.cpp
/// @brief CPU twins of the DQN kernels: the same per-sample functions (cuda/math/dqn.h,
///        training_guard_abi.h, monitoring_abi.h) in plain loops.
#include <cstring>

#include "ops/cpu/cpu_ops.hpp"

namespace fh::ops {

void CpuOps::copy_bytes(void* dst, const void* src, std::size_t bytes) { std::memcpy(dst, src, bytes); }

void CpuOps::mean_impl(View<float> out, View<const float> x) {
    double sum = 0.0;
    for (std::size_t i = 0; i < x.size(); ++i) sum += x.data()[i];
    out.data()[0] = static_cast<float>(sum / static_cast<double>(x.size()));
}

void CpuOps::c51_head_forward_impl(View<float> logits, View<float> probs, View<float> q,
                                   View<const float> value, View<const float> adv,
                                   const dqn::HeadParams& h, int batch) {
    const std::size_t AZ = static_cast<std::size_t>(h.num_actions) * h.num_atoms;
    for (std::size_t b = 0; b < static_cast<std::size_t>(batch); ++b)
        dqn::head_forward<float>(value.empty() ? nullptr : value.data() + b * h.num_atoms, adv.data() + b * AZ,
                                 logits.data() + b * AZ, probs.data() + b * AZ, q.data() + b * h.num_actions, h);
}

void CpuOps::c51_head_backward_impl(View<float> d_value, View<float> d_adv, View<const float> d_logits,
                                    const dqn::HeadParams& h, int batch) {
    const std::size_t AZ = static_cast<std::size_t>(h.num_actions) * h.num_atoms;
    for (std::size_t b = 0; b < static_cast<std::size_t>(batch); ++b)
        dqn::head_backward<float>(d_logits.data() + b * AZ,
                                  d_value.empty() ? nullptr : d_value.data() + b * h.num_atoms,
                                  d_adv.data() + b * AZ, h);
}

void CpuOps::c51_loss_impl(View<float> loss, View<float> d_logits, View<const float> logits,
                           View<const float> probs, View<const float> q_next_select,
                           View<const float> probs_next_target, View<const int> actions,
                           View<const float> returns, View<const float> discounts,
                           const dqn::HeadParams& h, int batch) {
    const float scale = 1.0f / static_cast<float>(batch);
    for (long long b = 0; b < batch; ++b)
        loss.data()[b] = dqn::c51_sample_loss<float>(b, logits.data(), probs.data(), q_next_select.data(),
                                                     probs_next_target.data(), actions.data(), returns.data(),
                                                     discounts.data(), d_logits.data(), scale, h);
}

void CpuOps::mse_loss_impl(View<float> loss, View<float> d_logits, View<float> td, View<const float> probs,
                           View<const float> q, View<const float> q_next_select,
                           View<const float> q_next_target, View<const int> actions,
                           View<const float> returns, View<const float> discounts,
                           const dqn::HeadParams& h, int batch) {
    const float scale = 1.0f / static_cast<float>(batch);
    for (long long b = 0; b < batch; ++b)
        loss.data()[b] = dqn::mse_sample_loss<float>(b, probs.data(), q.data(), q_next_select.data(),
                                                     q_next_target.data(), actions.data(), returns.data(),
                                                     discounts.data(), d_logits.data(), td.data(), scale, h);
}

void CpuOps::nstep_sample_impl(View<float> states, View<float> next_states, View<int> actions,
                               View<float> returns, View<float> discounts, const replay::ReplayView& r,
                               const replay::SampleParams& p, int batch) {
    const std::size_t D = static_cast<std::size_t>(r.state_dim);
    for (int b = 0; b < batch; ++b)
        replay::sample_nstep(b, r, p, states.data() + b * D, next_states.data() + b * D, actions.data()[b],
                          returns.data()[b], discounts.data()[b]);
}

void CpuOps::epsilon_greedy_impl(View<int> actions, View<const float> q, int num_actions, float epsilon,
                                 std::uint64_t seed, std::uint64_t step) {
    for (std::size_t e = 0; e < actions.size(); ++e)
        actions.data()[e] = policy::epsilon_greedy(q.data() + e * num_actions, num_actions, epsilon, seed,
                                                static_cast<int>(e), step);
}

void CpuOps::training_guard_impl(View<int> gate, View<nn::GuardState> state, View<const float> losses,
                                 View<const float> grad_norm, long long update) {
    gate.data()[0] = nn::guard_decide(state.data()[0], losses.data(), static_cast<int>(losses.size()),
                                       grad_norm.data()[0], update);
}

void CpuOps::monitor_update_impl(View<dqn::MonitorStats> stats, View<const float> losses, View<const float> q,
                                 View<const int> actions, View<const float> td, View<const float> grad_norm,
                                 int num_actions, int batch) {
    dqn::monitor_accumulate(stats.data()[0], losses.data(), q.data(), actions.data(), td.data(),
                            grad_norm.data()[0], num_actions, batch);
}

void CpuOps::monitor_actions_impl(View<unsigned long long> histogram, View<const int> actions, int num_actions) {
    for (std::size_t e = 0; e < actions.size(); ++e) {
        const int a = actions.data()[e];
        if (a >= 0 && a < num_actions) histogram.data()[a] += 1;
    }
}

}  // namespace fh::ops
