/// @file cpu.cpp
/// @brief CPU twins of the iql op family (cuda/abi/iql_*.h): the shared per-element math
///        (math/iql.h) in plain loops.
#include "abi/iql_awr.h"
#include "abi/iql_behaviour.h"

namespace fh::ops {

void cpu(const IqlValueLoss& a) {
    const IqlRows r = iql_rows(a.v.size(), a.q1.size(), a.scalars.empty() ? 1 : a.scalars.size());
    for (long long b = 0; b < r.rows; ++b)
        iql::value_row(b, a.loss.data(), a.d_v.data(), a.v.data(), a.q1.data(), a.q2.data(), a.actions.data(),
                       a.scalars.empty() ? a.expectile : a.scalars.data()[b / r.batch].expectile, r.num_actions,
                       r.scale);
}

void cpu(const IqlQLoss& a) {
    const IqlRows r = iql_rows(a.actions.size(), a.q1.size(), static_cast<std::size_t>(a.agents));
    for (long long b = 0; b < r.rows; ++b)
        iql::q_row(b, a.loss.data(), a.d_q1.data(), a.d_q2.data(), a.q1.data(), a.q2.data(), a.actions.data(),
                   a.rewards.data(), a.discounts.data(), a.v_next.data(), r.num_actions, r.scale);
}

void cpu(const AwrPolicyLoss& a) {
    const IqlRows r = iql_rows(a.v.size(), a.logits.size(), a.scalars.empty() ? 1 : a.scalars.size());
    for (long long b = 0; b < r.rows; ++b) {
        const iql::LossScalars* own = a.scalars.empty() ? nullptr : a.scalars.data() + b / r.batch;
        iql::awr_row(b, a.loss.data(), a.weights.data(), a.d_logits.data(), a.logits.data(), a.q1.data(), a.q2.data(),
                     a.v.data(), a.actions.data(), own ? own->beta : a.beta, own ? own->max_weight : a.max_weight,
                     r.num_actions, r.scale);
    }
}

void cpu(const BehaviourActions& a) {
    const std::size_t D = static_cast<std::size_t>(a.params.state_dim);
    for (std::size_t e = 0; e < a.actions.size(); ++e)
        a.actions.data()[e] = iql::behaviour_action(a.states.data() + e * D, static_cast<int>(e), a.step, a.params);
}

}  // namespace fh::ops
