/// @file nn_attention.h
/// @brief Signatures of cuda/kernels/nn_attention.cu: feature-group attention's elementwise part
///        and its backward (math/attention.h).
#pragma once

#include "math/attention.h"

namespace fh::abi {

/// Row r < rows: attention::forward_row(x_out row r, alpha row r, x row (r % x_rows), scores row
/// r): x (x_rows, D) may feed several networks' rows (forward_batched on one X). x_out (rows, D),
/// alpha (rows, G), scores (rows, G). Buffers distinct.
using GroupAttentionForward = void(float* __restrict__ x_out, float* __restrict__ alpha, const float* __restrict__ x,
                                   const float* __restrict__ scores, attention::Groups groups, int D, int rows,
                                   int x_rows);
/// Row r < rows: attention::backward_row(d_scores row r, d_x_out row r, x row r, alpha row r).
using GroupAttentionBackward = void(float* __restrict__ d_scores, const float* __restrict__ d_x_out,
                                    const float* __restrict__ x, const float* __restrict__ alpha,
                                    attention::Groups groups, int D, int rows);

}  // namespace fh::abi

#define FH_KERNELS_nn_attention(FH_KERNEL)                                         \
    FH_KERNEL(nn_attention, group_attention_forward_kernel, GroupAttentionForward) \
    FH_KERNEL(nn_attention, group_attention_backward_kernel, GroupAttentionBackward)
