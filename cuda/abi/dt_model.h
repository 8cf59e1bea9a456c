/// @file dt_model.h
/// @brief Signatures of cuda/kernels/dt_model.cu: the Decision Transformer's token embeddings,
///        layer norm, GELU, causal attention and their backwards (math in math/dt.h).
#pragma once

#include "math/dt.h"

namespace fh::abi {

/// Per token row of x (steps * 3, dim): dt::embed_token from rtg (steps), s_proj (steps, dim) and
/// actions (steps); steps = batch * K windows' timesteps.
using DtEmbed = void(float* __restrict__ x, const float* __restrict__ rtg, const float* __restrict__ s_proj,
                     const int* __restrict__ actions, dt::EmbedParams params, long long steps);
/// Per element of dt::embed_backward_element (dt::embed_backward_elements of them).
using DtEmbedBackward = void(float* __restrict__ d_return_w, float* __restrict__ d_return_b,
                             float* __restrict__ d_action_table, float* __restrict__ d_s_proj,
                             const float* __restrict__ dx, const float* __restrict__ rtg,
                             const int* __restrict__ actions, long long steps, int dim, int num_actions);
/// Per element: dt::state_input_element; out, states (rows, state_dim).
using DtStateInput = void(float* __restrict__ out, const float* __restrict__ states, long long n, int state_dim,
                          int market_dim);
/// Per row: dt::layer_norm_row.
using DtLayerNorm = void(float* __restrict__ y, float* __restrict__ stats, const float* __restrict__ x,
                         const float* __restrict__ gain, const float* __restrict__ bias, long long rows, int dim);
/// Per row: dt::layer_norm_backward_row (dx set, or added to when accumulate).
using DtLayerNormBackward = void(float* __restrict__ dx, const float* __restrict__ dy, const float* __restrict__ x,
                                 const float* __restrict__ stats, const float* __restrict__ gain, long long rows,
                                 int dim, int accumulate);
/// Per feature: dt::layer_norm_param_grad.
using DtLayerNormParamGrad = void(float* __restrict__ d_gain, float* __restrict__ d_bias, const float* __restrict__ dy,
                                  const float* __restrict__ x, const float* __restrict__ stats, long long rows,
                                  int dim);
/// Per element: y = gelu(z) (forward), or dz = dy * gelu'(z) (backward).
using DtGelu = void(float* __restrict__ y, const float* __restrict__ z, long long n);
using DtGeluBackward = void(float* __restrict__ dz, const float* __restrict__ dy, const float* __restrict__ z,
                            long long n);
/// Per (b, h, i): dt::attention_query; out (batch * tokens, dim), P (batch, heads, tokens, tokens).
using DtAttention = void(float* __restrict__ out, float* __restrict__ P, const float* __restrict__ qkv,
                         dt::AttentionShape shape);
/// Per (b, h, i): dt::attention_backward_query, then per (b, h, j): dt::attention_backward_key.
using DtAttentionBackwardQuery = void(float* __restrict__ dqkv, float* __restrict__ dS, const float* __restrict__ d_out,
                                      const float* __restrict__ qkv, const float* __restrict__ P,
                                      dt::AttentionShape shape);
using DtAttentionBackwardKey = void(float* __restrict__ dqkv, const float* __restrict__ dS,
                                    const float* __restrict__ d_out, const float* __restrict__ qkv,
                                    const float* __restrict__ P, dt::AttentionShape shape);

}  // namespace fh::abi

#define FH_KERNELS_dt_model(FH_KERNEL)                                                \
    FH_KERNEL(dt_model, dt_embed_kernel, DtEmbed)                                     \
    FH_KERNEL(dt_model, dt_embed_backward_kernel, DtEmbedBackward)                    \
    FH_KERNEL(dt_model, dt_state_input_kernel, DtStateInput)                          \
    FH_KERNEL(dt_model, dt_layer_norm_kernel, DtLayerNorm)                            \
    FH_KERNEL(dt_model, dt_layer_norm_backward_kernel, DtLayerNormBackward)           \
    FH_KERNEL(dt_model, dt_layer_norm_param_grad_kernel, DtLayerNormParamGrad)        \
    FH_KERNEL(dt_model, dt_gelu_kernel, DtGelu)                                       \
    FH_KERNEL(dt_model, dt_gelu_backward_kernel, DtGeluBackward)                      \
    FH_KERNEL(dt_model, dt_attention_kernel, DtAttention)                             \
    FH_KERNEL(dt_model, dt_attention_backward_query_kernel, DtAttentionBackwardQuery) \
    FH_KERNEL(dt_model, dt_attention_backward_key_kernel, DtAttentionBackwardKey)
