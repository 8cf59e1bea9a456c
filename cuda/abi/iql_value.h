/// @file iql_value.h
/// @brief The IQL critic losses (the expectile value loss and the twin-Q TD loss, math in
///        math/iql.h), their kernels in cuda/kernels/iql_value.cu and the rows all three IQL losses
///        share. CPU twins: src/ops/iql/cpu.cpp.
#pragma once

#include "abi/view.h"
#include "math/iql.h"

namespace fh::ops {

/// Expectile value loss, one thread per row (iql::value_row): q = min(q1[a], q2[a]) of the TARGET
/// twins, u = q - v, w = |expectile - 1(u < 0)|: loss[i] = w u^2, d_v[i] = -2 w u / B.
/// expectile in (0, 1). A population's agents at once: scalars (N, each agent's valid: the
/// caller's check) makes the rows N batches of B one after the other (IqlRows), each with its own
/// expectile; `expectile` is then not used.
struct IqlValueLoss {
    View<float> loss, d_v;                   ///< (B) out
    View<const float> v;                     ///< (B) V(s)
    View<const float> q1, q2;                ///< (B, A) the target twins at s
    View<const int> actions;                 ///< (B)
    float expectile;                         ///<
    View<const iql::LossScalars> scalars{};  ///< (N) or empty: one agent
};

/// Twin-Q TD loss, one thread per row (iql::q_row): y = rewards + discounts * v_next (discounts =
/// gamma (1 - terminated)), loss[i] = (q1[a] - y)^2 + (q2[a] - y)^2 of the ONLINE twins; d_q1,
/// d_q2 (B, A) = 2 (q - y) / B at column a, 0 elsewhere. `agents` > 1: that many batches one
/// after the other (IqlRows).
struct IqlQLoss {
    View<float> loss;                      ///< (B) out
    View<float> d_q1, d_q2;                ///< (B, A) out
    View<const float> q1, q2;              ///< (B, A) the online twins at s
    View<const int> actions;               ///< (B)
    View<const float> rewards, discounts;  ///< (B)
    View<const float> v_next;              ///< (B) V(s')
    int agents = 1;                        ///<
};

/// The rows of the IQL losses: `agents` batches of `batch` rows one after the other (row r is
/// agent r / batch's), each scaled by 1 / batch as its own batch; A = num_actions columns.
struct IqlRows {
    long long rows;
    int batch, num_actions;
    float scale;
};
FH_HD IqlRows iql_rows(std::size_t rows, std::size_t matrix, std::size_t agents) {
    const int batch = static_cast<int>(rows / agents);
    return {static_cast<long long>(rows), batch, static_cast<int>(matrix / rows), 1.0f / static_cast<float>(batch)};
}

}  // namespace fh::ops

#define FH_KERNELS_iql_value(FH_KERNEL)                                    \
    FH_KERNEL(iql_value, iql_value_loss_kernel, Op<fh::ops::IqlValueLoss>) \
    FH_KERNEL(iql_value, iql_q_loss_kernel, Op<fh::ops::IqlQLoss>)

#ifndef __CUDACC__
#include "ops/op_begin.hpp"

namespace detail {
/// The losses' shape from a per-row vector (batch_name, the rows) and a (rows, A) matrix of
/// `agents` batches: rows >= 1, A >= 1, within int range, the rows split evenly.
inline void check_iql_rows(std::size_t rows, std::size_t matrix, std::size_t agents, const char* op,
                           const char* batch_name, const char* matrix_name) {
    require(rows != 0, op, "empty batch ({} is empty)", batch_name);
    require(matrix != 0 && matrix % rows == 0, op,
            "{} has {} elements, not a positive multiple of the batch {} (the (B, A) layout)", matrix_name, matrix,
            rows);
    checked_int_size(matrix, op);
    require(agents >= 1 && rows % agents == 0, op, "{} rows do not split into {} agents' batches of one size", rows,
            agents);
}
}  // namespace detail

inline void check(const IqlValueLoss& a) {
    const auto& [loss, d_v, v, q1, q2, actions, expectile, scalars] = a;
    const char* op = "iql_value_loss";
    detail::check_iql_rows(v.size(), q1.size(), scalars.empty() ? 1 : scalars.size(), op, "v", "q1");
    detail::require(!scalars.empty() || (expectile > 0.0f && expectile < 1.0f), op, "expectile {} is not in (0, 1)",
                    expectile);
    detail::require_sizes(v.size(), op, {FH_SIZES(loss, d_v)});
    detail::require_size(q2.size(), q1.size(), op, "q2");
    detail::require_size(actions.size(), v.size(), op, "actions");
    detail::require_distinct(op, {FH_RANGES(loss, d_v, v, q1, q2, actions, scalars)});
}
FH_LAUNCH_KERNEL(IqlValueLoss, iql_value_loss_kernel, LaunchDims::linear(a.v.size(), 128));

inline void check(const IqlQLoss& a) {
    const auto& [loss, d_q1, d_q2, q1, q2, actions, rewards, discounts, v_next, agents] = a;
    const char* op = "iql_q_loss";
    if (agents < 1) throw std::invalid_argument("ops::iql_q_loss: agents must be >= 1");
    detail::check_iql_rows(actions.size(), q1.size(), static_cast<std::size_t>(agents), op, "actions", "q1");
    const std::size_t b = actions.size();
    detail::require_size(loss.size(), b, op, "loss");
    detail::require_sizes(q1.size(), op, {FH_SIZES(d_q1, d_q2, q2)});
    detail::require_sizes(b, op, {FH_SIZES(rewards, discounts, v_next)});
    detail::require_distinct(op, {FH_RANGES(loss, d_q1, d_q2, q1, q2, actions, rewards, discounts, v_next)});
}
FH_LAUNCH_KERNEL(IqlQLoss, iql_q_loss_kernel, LaunchDims::linear(a.actions.size(), 128));

#include "ops/op_end.hpp"
#endif
