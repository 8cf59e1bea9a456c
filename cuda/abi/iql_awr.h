/// @file iql_awr.h
/// @brief The advantage-weighted (AWR) policy loss of IQL (math in math/iql.h, the softmax in
///        math/policy.h) and its kernel in cuda/kernels/iql_awr.cu. CPU twin: src/ops/iql/cpu.cpp.
#pragma once

// iql_value.h's host part must not reach the kernel table before this header's kernel list exists.
#pragma push_macro("FH_INCLUDING_KERNEL_LISTS")
#define FH_INCLUDING_KERNEL_LISTS
#include "abi/iql_value.h"
#pragma pop_macro("FH_INCLUDING_KERNEL_LISTS")

namespace fh::ops {

/// AWR policy loss, one thread per row (iql::awr_row): adv = min(q1[a], q2[a]) - v of the TARGET
/// twins, weights[i] = min(exp(beta adv), max_weight) with the exponent clamped to
/// iql::kMaxAwrExponent (a constant, no gradient); loss[i] = -weights[i] log pi(a|s);
/// d_logits (B, A) = weights[i] (softmax - onehot(a)) / B. beta >= 0 and max_weight > 0, both
/// finite. scalars (N): N agents' batches at once (IqlRows), each with its own beta and
/// max_weight; beta and max_weight are then not used.
struct AwrPolicyLoss {
    View<float> loss, weights;               ///< (B) out
    View<float> d_logits;                    ///< (B, A) out
    View<const float> logits, q1, q2;        ///< (B, A) the policy's; the target twins at s
    View<const float> v;                     ///< (B)
    View<const int> actions;                 ///< (B)
    float beta, max_weight;                  ///<
    View<const iql::LossScalars> scalars{};  ///< (N) or empty: one agent
};

}  // namespace fh::ops

#define FH_KERNELS_iql_awr(FH_KERNEL) FH_KERNEL(iql_awr, awr_policy_loss_kernel, Op<fh::ops::AwrPolicyLoss>)

#ifndef __CUDACC__
#include "ops/op_begin.hpp"

inline void check(const AwrPolicyLoss& a) {
    const auto& [loss, weights, d_logits, logits, q1, q2, v, actions, beta, max_weight, scalars] = a;
    const char* op = "awr_policy_loss";
    detail::check_iql_rows(v.size(), logits.size(), scalars.empty() ? 1 : scalars.size(), op, "v", "logits");
    detail::require(!scalars.empty() || (std::isfinite(beta) && beta >= 0.0f), op, "beta {} must be finite and >= 0",
                    beta);
    detail::require(!scalars.empty() || (std::isfinite(max_weight) && max_weight > 0.0f), op,
                    "max_weight {} must be finite and > 0", max_weight);
    detail::require_sizes(v.size(), op, {FH_SIZES(loss, weights)});
    detail::require_sizes(logits.size(), op, {FH_SIZES(d_logits, q1, q2)});
    detail::require_size(actions.size(), v.size(), op, "actions");
    detail::require_distinct(op, {FH_RANGES(loss, weights, d_logits, logits, q1, q2, v, actions, scalars)});
}
FH_LAUNCH_KERNEL(AwrPolicyLoss, awr_policy_loss_kernel, LaunchDims::linear(a.v.size(), 128));

#include "ops/op_end.hpp"
#endif
