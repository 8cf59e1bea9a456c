/// @file nn_attention.h
/// @brief Feature-group attention's elementwise part and its backward (math/attention.h), their
///        kernels in cuda/kernels/nn_attention.cu. CPU twins: src/ops/nn/cpu.cpp.
#pragma once

#include "abi/view.h"
#include "math/attention.h"

namespace fh::ops {

/// Forward, one thread per row r < rows: attention::forward_row(x_out row r, alpha row r, x row
/// (r % x_rows), scores row r): x (x_rows, D) may feed several networks' rows (x_rows divides
/// rows: one X under several networks). x_out (rows, D), alpha (rows, G), scores (rows, G); D the
/// groups' width (1..kMaxGroups contiguous groups from column 0, checked). Buffers distinct.
/// Equal to the CPU twin within rounding (exp).
struct GroupAttentionForward {
    View<float> x_out, alpha;
    View<const float> x, scores;
    attention::Groups groups;
    int rows, x_rows;
};
/// Backward to the scores, one thread per row: attention::backward_row(d_scores row r, d_x_out row
/// r, x row r, alpha row r): d_scores (rows, G) from d_x_out (rows, D), x (rows, D) and alpha
/// (rows, G) of the forward.
struct GroupAttentionBackward {
    View<float> d_scores;
    View<const float> d_x_out, x, alpha;
    attention::Groups groups;
    int rows;
};

}  // namespace fh::ops

#define FH_KERNELS_nn_attention(FH_KERNEL)                                                      \
    FH_KERNEL(nn_attention, group_attention_forward_kernel, Op<fh::ops::GroupAttentionForward>) \
    FH_KERNEL(nn_attention, group_attention_backward_kernel, Op<fh::ops::GroupAttentionBackward>)

#ifndef __CUDACC__
#include "ops/op_begin.hpp"

namespace detail {
/// The width D of the rows the groups cover: 1..kMaxGroups contiguous, non-empty groups from
/// column 0, in order (checked); D = the last group's end.
inline int group_row_width(const attention::Groups& g, const char* op) {
    require(g.count >= 1 && g.count <= attention::kMaxGroups, op, "need 1..{} groups (got {})", attention::kMaxGroups,
            g.count);
    require(g.begin[0] == 0, op, "the groups must start at column 0");
    for (int k = 0; k < g.count; ++k) require(g.begin[k] < g.begin[k + 1], op, "every group needs a column, in order");
    return g.begin[g.count];
}
}  // namespace detail

inline void check(const GroupAttentionForward& a) {
    const char* op = "group_attention_forward";
    const int D = detail::group_row_width(a.groups, op);
    detail::require(a.rows >= 1 && a.x_rows >= 1 && a.rows % a.x_rows == 0, op,
                    "need rows >= 1 and x_rows dividing rows");
    const auto G = static_cast<std::size_t>(a.groups.count), R = static_cast<std::size_t>(a.rows);
    detail::require_size(a.x_out.size(), R * static_cast<std::size_t>(D), op, "x_out");
    detail::require_sizes(R * G, op, {FH_SIZES_OF(a, alpha, scores)});
    detail::require_size(a.x.size(), static_cast<std::size_t>(a.x_rows) * static_cast<std::size_t>(D), op, "x");
    detail::checked_int_size(a.x_out.size(), op);
    detail::require_distinct(op, {FH_RANGES_OF(a, x_out, alpha, x, scores)});
}
FH_LAUNCH_KERNEL(GroupAttentionForward, group_attention_forward_kernel,
                 LaunchDims::linear(static_cast<std::size_t>(a.rows), 128));

inline void check(const GroupAttentionBackward& a) {
    const char* op = "group_attention_backward";
    const int D = detail::group_row_width(a.groups, op);
    detail::require(a.rows >= 1, op, "need rows >= 1");
    const auto G = static_cast<std::size_t>(a.groups.count), R = static_cast<std::size_t>(a.rows);
    detail::require_size(a.d_scores.size(), R * G, op, "d_scores");
    detail::require_sizes(R * static_cast<std::size_t>(D), op, {FH_SIZES_OF(a, d_x_out, x)});
    detail::require_size(a.alpha.size(), R * G, op, "alpha");
    detail::checked_int_size(a.d_x_out.size(), op);
    detail::require_distinct(op, {FH_RANGES_OF(a, d_scores, d_x_out, x, alpha)});
}
FH_LAUNCH_KERNEL(GroupAttentionBackward, group_attention_backward_kernel,
                 LaunchDims::linear(static_cast<std::size_t>(a.rows), 128));

#include "ops/op_end.hpp"
#endif
