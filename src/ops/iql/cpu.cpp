/// @file cpu.cpp
/// @brief CPU twins of the iql op family: the shared per-element math (math/iql.h) in plain loops.
#include "ops/iql/ops.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace fh::ops::cpu_twin {

void iql_value_loss(View<float> loss, View<float> d_v, View<const float> v, View<const float> q1, View<const float> q2,
                    View<const int> actions, float expectile, int num_actions, int batch,
                    const iql::LossScalars* scalars, int agents) {
    const float scale = 1.0f / static_cast<float>(batch);
    for (long long b = 0; b < static_cast<long long>(batch) * agents; ++b)
        iql::value_row(b, loss.data(), d_v.data(), v.data(), q1.data(), q2.data(), actions.data(),
                       scalars != nullptr ? scalars[b / batch].expectile : expectile, num_actions, scale);
}

void iql_q_loss(View<float> loss, View<float> d_q1, View<float> d_q2, View<const float> q1, View<const float> q2,
                View<const int> actions, View<const float> rewards, View<const float> discounts,
                View<const float> v_next, int num_actions, int batch, int agents) {
    const float scale = 1.0f / static_cast<float>(batch);
    for (long long b = 0; b < static_cast<long long>(batch) * agents; ++b)
        iql::q_row(b, loss.data(), d_q1.data(), d_q2.data(), q1.data(), q2.data(), actions.data(), rewards.data(),
                   discounts.data(), v_next.data(), num_actions, scale);
}

void awr_policy_loss(View<float> loss, View<float> weights, View<float> d_logits, View<const float> logits,
                     View<const float> q1, View<const float> q2, View<const float> v, View<const int> actions,
                     float beta, float max_weight, int num_actions, int batch, const iql::LossScalars* scalars,
                     int agents) {
    const float scale = 1.0f / static_cast<float>(batch);
    for (long long b = 0; b < static_cast<long long>(batch) * agents; ++b) {
        const bool own = scalars != nullptr;
        iql::awr_row(b, loss.data(), weights.data(), d_logits.data(), logits.data(), q1.data(), q2.data(), v.data(),
                     actions.data(), own ? scalars[b / batch].beta : beta,
                     own ? scalars[b / batch].max_weight : max_weight, num_actions, scale);
    }
}

void behaviour_actions(View<int> actions, View<const float> states, const iql::BehaviourParams& p, std::uint64_t step) {
    const std::size_t D = static_cast<std::size_t>(p.state_dim);
    for (std::size_t e = 0; e < actions.size(); ++e)
        actions.data()[e] = iql::behaviour_action(states.data() + e * D, static_cast<int>(e), step, p);
}

}  // namespace fh::ops::cpu_twin
