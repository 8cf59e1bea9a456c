/// @file cpu.cpp
/// @brief CPU twins of the dqn op family: the shared per-element math (math/dqn.h) in plain loops.
#include "ops/dqn/ops.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace fh::ops::cpu_twin {

void c51_head_forward(View<float> logits, View<float> probs, View<float> q, View<const float> value,
                      View<const float> adv, const dqn::HeadParams& h, int batch) {
    const std::size_t AZ = static_cast<std::size_t>(h.num_actions) * h.num_atoms;
    for (std::size_t b = 0; b < static_cast<std::size_t>(batch); ++b)
        dqn::head_forward<float>(value.empty() ? nullptr : value.data() + b * h.num_atoms, adv.data() + b * AZ,
                                 logits.data() + b * AZ, probs.data() + b * AZ, q.data() + b * h.num_actions, h);
}

void c51_head_backward(View<float> d_value, View<float> d_adv, View<const float> d_logits, const dqn::HeadParams& h,
                       int batch) {
    const std::size_t AZ = static_cast<std::size_t>(h.num_actions) * h.num_atoms;
    for (std::size_t b = 0; b < static_cast<std::size_t>(batch); ++b)
        dqn::head_backward<float>(d_logits.data() + b * AZ,
                                  d_value.empty() ? nullptr : d_value.data() + b * h.num_atoms, d_adv.data() + b * AZ,
                                  h);
}

void c51_loss(View<float> loss, View<float> d_logits, View<const float> logits, View<const float> probs,
              View<const float> q_next_select, View<const float> probs_next_target, View<const int> actions,
              View<const float> returns, View<const float> discounts, const dqn::HeadParams& h, int batch) {
    const float scale = 1.0f / static_cast<float>(batch);
    for (long long b = 0; b < batch; ++b)
        loss.data()[b] =
            dqn::c51_sample_loss<float>(b, logits.data(), probs.data(), q_next_select.data(), probs_next_target.data(),
                                        actions.data(), returns.data(), discounts.data(), d_logits.data(), scale, h);
}

void mse_loss(View<float> loss, View<float> d_logits, View<float> td, View<const float> probs, View<const float> q,
              View<const float> q_next_select, View<const float> q_next_target, View<const int> actions,
              View<const float> returns, View<const float> discounts, const dqn::HeadParams& h, int batch) {
    const float scale = 1.0f / static_cast<float>(batch);
    for (long long b = 0; b < batch; ++b)
        loss.data()[b] = dqn::mse_sample_loss<float>(b, probs.data(), q.data(), q_next_select.data(),
                                                     q_next_target.data(), actions.data(), returns.data(),
                                                     discounts.data(), d_logits.data(), td.data(), scale, h);
}

void dqn_monitor_update(View<dqn::MonitorStats> stats, View<const float> losses, View<const float> q,
                    View<const int> actions, View<const float> td, View<const float> grad_norm, int num_actions,
                    int batch) {
    dqn::monitor_accumulate(stats.data()[0], losses.data(), q.data(), actions.data(), td.data(), grad_norm.data()[0],
                            num_actions, batch);
}

}  // namespace fh::ops::cpu_twin
