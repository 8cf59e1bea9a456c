/// @file dt_model.h
/// @brief The Decision Transformer's model ops (docs/dt.md; math in math/dt.h): token embeddings,
///        layer norm, GELU, causal attention and their backwards, and the signatures of their
///        kernels in cuda/kernels/dt_model.cu. CPU twins: src/ops/dt/cpu.cpp. The linear layers
///        between them are the device core's (Device::linear_forward / linear_backward).
#pragma once

#include <algorithm>

#include "abi/view.h"
#include "math/dt.h"

namespace fh::ops {

/// The embedding parameters (slices of the flat parameter buffer): return_w, return_b (dim),
/// action_table (num_actions, dim).
struct DtEmbedViews {
    View<const float> return_w, return_b, action_table;
    int dim = 0, num_actions = 0;
};

/// The state token's input (dt::state_input_element): out = states (rows, state_dim) with the
/// portfolio's running totals (columns market_dim + 2, 3, 5) zeroed; distinct buffers.
struct DtStateInput {
    View<float> out;
    View<const float> states;
    int state_dim, market_dim;
};

/// Token rows x (3 steps, dim) of a batch of windows (dt::embed_row) from rtg (steps), the state
/// projections s_proj (steps, dim) and actions (steps, each in [0, num_actions)).
struct DtEmbed {
    View<float> x;
    View<const float> rtg, s_proj;
    View<const int> actions;
    DtEmbedViews weights;
};

/// The backward of DtEmbed from dx (3 steps, dim): d_return_w, d_return_b (dim), d_action_table
/// (num_actions, dim) set (sums over the rows in order), d_s_proj (steps, dim) = dx of the s rows.
struct DtEmbedBackward {
    View<float> d_return_w, d_return_b, d_action_table, d_s_proj;
    View<const float> dx, rtg;
    View<const int> actions;
    int dim, num_actions;
};

/// Layer norm over rows of `dim` features (dt::layer_norm_row): y, x (rows, dim); stats (rows, 2);
/// gain, bias (dim).
struct DtLayerNorm {
    View<float> y, stats;
    View<const float> x, gain, bias;
    int dim;
};

/// The backward of DtLayerNorm: dx (rows, dim) set, or added to when `accumulate`; d_gain,
/// d_bias (dim) set (sums over rows in order).
struct DtLayerNormBackward {
    View<float> dx, d_gain, d_bias;
    View<const float> dy, x, stats, gain;
    int dim;
    bool accumulate;
};

/// y = gelu(z) elementwise (exact erf form); distinct buffers of one size.
struct DtGelu {
    View<float> y;
    View<const float> z;
};

/// dz = dy * gelu'(z) elementwise; distinct buffers of one size.
struct DtGeluBackward {
    View<float> dz;
    View<const float> dy, z;
};

/// Causal attention of training windows (dt::attention_query): out (batch * tokens, dim) and the
/// weights P (batch, heads, tokens, tokens) from qkv (batch * tokens, 3 dim).
struct DtAttention {
    View<float> out, P;
    View<const float> qkv;
    dt::AttentionShape shape;
};

/// The backward of DtAttention: dqkv (batch * tokens, 3 dim) set from d_out (batch * tokens,
/// dim); dS (shaped like P) is scratch (the score gradients).
struct DtAttentionBackward {
    View<float> dqkv, dS;
    View<const float> d_out, qkv, P;
    dt::AttentionShape shape;
};

}  // namespace fh::ops

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

#ifndef __CUDACC__
#include "ops/op_begin.hpp"

/// One thread per element or row.
inline LaunchDims dt_threads(long long n) {
    return LaunchDims::linear(static_cast<std::size_t>(n), 128);
}

/// The embedding's parameters as the math reads them.
inline dt::EmbedParams embed_params(const DtEmbedViews& w) {
    return dt::EmbedParams{w.return_w.data(), w.return_b.data(), w.action_table.data(), w.dim, w.num_actions};
}

namespace detail {
inline void check_embed(const DtEmbedViews& w, const char* op) {
    require(w.dim >= 1 && w.num_actions >= 1, op, "need dim >= 1 and num_actions >= 1");
    require_sizes(static_cast<std::size_t>(w.dim), op, {FH_SIZES_OF(w, return_w, return_b)});
    require_size(w.action_table.size(), static_cast<std::size_t>(w.num_actions) * w.dim, op, "action_table");
}
inline void check_shape(const dt::AttentionShape& s, const char* op) {
    require(s.batch >= 1 && s.tokens >= 1 && s.heads >= 1 && s.dim >= s.heads && s.dim % s.heads == 0 &&
                s.dim / s.heads <= dt::kMaxHeadDim && s.span >= 1,
            op,
            "bad shape (batch {}, tokens {}, dim {}, heads {}, span {}): need dim a multiple of "
            "heads, head width <= {}",
            s.batch, s.tokens, s.dim, s.heads, s.span, dt::kMaxHeadDim);
    checked_int_size(static_cast<std::size_t>(s.batch) * s.heads * s.tokens * s.tokens, op);
}
/// Rows of `dim` features: x a positive multiple of dim, within int range.
inline std::size_t check_rows(std::size_t x, int dim, const char* op) {
    require(dim >= 1 && x != 0 && x % static_cast<std::size_t>(dim) == 0, op,
            "x has {} floats, not a positive multiple of dim = {}", x, dim);
    checked_int_size(x, op);
    return x / static_cast<std::size_t>(dim);
}
}  // namespace detail

inline void check(const DtStateInput& a) {
    const auto& [out, states, state_dim, market_dim] = a;
    const char* op = "dt_state_input";
    detail::require(state_dim >= 1 && market_dim >= 0 && market_dim < state_dim && !states.empty() &&
                        states.size() % static_cast<std::size_t>(state_dim) == 0,
                    op, "states has {} floats, not rows of state_dim = {} (market_dim {})", states.size(), state_dim,
                    market_dim);
    detail::require_size(out.size(), states.size(), op, "out");
    detail::checked_int_size(states.size(), op);
    detail::require_distinct(op, {FH_RANGES(out, states)});
}
FH_LAUNCH(DtStateInput) {
    const auto n = static_cast<long long>(a.states.size());
    gpu.kernels().dt_state_input_kernel(gpu.stream(), dt_threads(n), a.out.data(), a.states.data(), n, a.state_dim,
                                        a.market_dim);
}

inline void check(const DtEmbed& a) {
    const auto& [x, rtg, s_proj, actions, w] = a;
    const char* op = "dt_embed";
    detail::check_embed(w, op);
    const std::size_t steps = rtg.size(), D = static_cast<std::size_t>(w.dim);
    detail::require(steps >= 1, op, "no timesteps");
    detail::require_size(x.size(), steps * dt::kTokensPerStep * D, op, "x");
    detail::require_size(s_proj.size(), steps * D, op, "s_proj");
    detail::require_size(actions.size(), steps, op, "actions");
    detail::checked_int_size(x.size(), op);
    detail::require_distinct(op, {FH_RANGES(x, rtg, s_proj, actions), FH_RANGES_OF(w, return_w, action_table)});
}
FH_LAUNCH(DtEmbed) {
    const auto steps = static_cast<long long>(a.rtg.size());
    gpu.kernels().dt_embed_kernel(gpu.stream(), dt_threads(steps * dt::kTokensPerStep), a.x.data(), a.rtg.data(),
                                  a.s_proj.data(), a.actions.data(), embed_params(a.weights), steps);
}

inline void check(const DtEmbedBackward& a) {
    const auto& [d_return_w, d_return_b, d_action_table, d_s_proj, dx, rtg, actions, dim, num_actions] = a;
    const char* op = "dt_embed_backward";
    const std::size_t steps = rtg.size(), D = static_cast<std::size_t>(dim);
    detail::require(steps >= 1 && dim >= 1 && num_actions >= 1, op, "empty shape");
    detail::require_sizes(D, op, {FH_SIZES(d_return_w, d_return_b)});
    detail::require_size(d_action_table.size(), D * static_cast<std::size_t>(num_actions), op, "d_action_table");
    detail::require_size(d_s_proj.size(), steps * D, op, "d_s_proj");
    detail::require_size(dx.size(), steps * D * dt::kTokensPerStep, op, "dx");
    detail::require_size(actions.size(), steps, op, "actions");
    detail::checked_int_size(dx.size(), op);
    detail::require_distinct(op, {FH_RANGES(d_return_w, d_return_b, d_action_table, d_s_proj, dx, rtg, actions)});
}
FH_LAUNCH(DtEmbedBackward) {
    const auto steps = static_cast<long long>(a.rtg.size());
    gpu.kernels().dt_embed_backward_kernel(
        gpu.stream(), dt_threads(dt::embed_backward_elements(steps, a.dim, a.num_actions)), a.d_return_w.data(),
        a.d_return_b.data(), a.d_action_table.data(), a.d_s_proj.data(), a.dx.data(), a.rtg.data(), a.actions.data(),
        steps, a.dim, a.num_actions);
}

inline void check(const DtLayerNorm& a) {
    const auto& [y, stats, x, gain, bias, dim] = a;
    const char* op = "dt_layer_norm";
    const std::size_t rows = detail::check_rows(x.size(), dim, op);
    detail::require_size(y.size(), x.size(), op, "y");
    detail::require_size(stats.size(), 2 * rows, op, "stats");
    detail::require_sizes(static_cast<std::size_t>(dim), op, {FH_SIZES(gain, bias)});
    detail::require_distinct(op, {FH_RANGES(y, stats, x, gain, bias)});
}
FH_LAUNCH(DtLayerNorm) {
    const auto rows = static_cast<long long>(a.x.size() / static_cast<std::size_t>(a.dim));
    gpu.kernels().dt_layer_norm_kernel(gpu.stream(), dt_threads(rows), a.y.data(), a.stats.data(), a.x.data(),
                                       a.gain.data(), a.bias.data(), rows, a.dim);
}

inline void check(const DtLayerNormBackward& a) {
    const auto& [dx, d_gain, d_bias, dy, x, stats, gain, dim, accumulate] = a;
    const char* op = "dt_layer_norm_backward";
    const std::size_t rows = detail::check_rows(x.size(), dim, op);
    detail::require_sizes(x.size(), op, {FH_SIZES(dx, dy)});
    detail::require_size(stats.size(), 2 * rows, op, "stats");
    detail::require_sizes(static_cast<std::size_t>(dim), op, {FH_SIZES(gain, d_gain, d_bias)});
    detail::require_distinct(op, {FH_RANGES(dx, d_gain, d_bias, dy, x, stats, gain)});
}
/// Per row (dx), then a block per feature (d_gain, d_bias: dt::kParamGradThreads partials each).
FH_LAUNCH(DtLayerNormBackward) {
    const auto rows = static_cast<long long>(a.x.size() / static_cast<std::size_t>(a.dim));
    gpu.kernels().dt_layer_norm_backward_kernel(gpu.stream(), dt_threads(rows), a.dx.data(), a.dy.data(), a.x.data(),
                                                a.stats.data(), a.gain.data(), rows, a.dim, a.accumulate ? 1 : 0);
    const LaunchDims per_feature{dim3(static_cast<unsigned>(std::min(a.dim, 1024))), dim3(dt::kParamGradThreads), 0};
    gpu.kernels().dt_layer_norm_param_grad_kernel(gpu.stream(), per_feature, a.d_gain.data(), a.d_bias.data(),
                                                  a.dy.data(), a.x.data(), a.stats.data(), rows, a.dim);
}

inline bool check(const DtGelu& a) {
    const char* op = "dt_gelu";
    detail::require_size(a.y.size(), a.z.size(), op, "y");
    detail::checked_int_size(a.z.size(), op);
    detail::require_distinct(op, {FH_RANGES_OF(a, y, z)});
    return !a.z.empty();
}
FH_LAUNCH(DtGelu) {
    const auto n = static_cast<long long>(a.z.size());
    gpu.kernels().dt_gelu_kernel(gpu.stream(), dt_threads(n), a.y.data(), a.z.data(), n);
}

inline bool check(const DtGeluBackward& a) {
    const char* op = "dt_gelu_backward";
    detail::require_sizes(a.z.size(), op, {FH_SIZES_OF(a, dz, dy)});
    detail::checked_int_size(a.z.size(), op);
    detail::require_distinct(op, {FH_RANGES_OF(a, dz, dy, z)});
    return !a.z.empty();
}
FH_LAUNCH(DtGeluBackward) {
    const auto n = static_cast<long long>(a.z.size());
    gpu.kernels().dt_gelu_backward_kernel(gpu.stream(), dt_threads(n), a.dz.data(), a.dy.data(), a.z.data(), n);
}

inline void check(const DtAttention& a) {
    const auto& [out, P, qkv, s] = a;
    const char* op = "dt_attention";
    detail::check_shape(s, op);
    const std::size_t rows = static_cast<std::size_t>(s.batch) * s.tokens, D = static_cast<std::size_t>(s.dim);
    detail::require_size(out.size(), rows * D, op, "out");
    detail::require_size(qkv.size(), rows * 3 * D, op, "qkv");
    detail::require_size(P.size(), static_cast<std::size_t>(s.batch) * s.heads * s.tokens * s.tokens, op, "P");
    detail::checked_int_size(qkv.size(), op);
    detail::require_distinct(op, {FH_RANGES(out, P, qkv)});
}
/// One thread per (b, h, i).
FH_LAUNCH(DtAttention) {
    const dt::AttentionShape& s = a.shape;
    gpu.kernels().dt_attention_kernel(gpu.stream(), dt_threads(static_cast<long long>(s.batch) * s.heads * s.tokens),
                                      a.out.data(), a.P.data(), a.qkv.data(), s);
}

inline void check(const DtAttentionBackward& a) {
    const auto& [dqkv, dS, d_out, qkv, P, s] = a;
    const char* op = "dt_attention_backward";
    detail::check_shape(s, op);
    const std::size_t rows = static_cast<std::size_t>(s.batch) * s.tokens, D = static_cast<std::size_t>(s.dim);
    const std::size_t pn = static_cast<std::size_t>(s.batch) * s.heads * s.tokens * s.tokens;
    detail::require_sizes(rows * 3 * D, op, {FH_SIZES(dqkv, qkv)});
    detail::require_size(d_out.size(), rows * D, op, "d_out");
    detail::require_sizes(pn, op, {FH_SIZES(P, dS)});
    detail::checked_int_size(qkv.size(), op);
    detail::require_distinct(op, {FH_RANGES(dqkv, dS, d_out, qkv, P)});
}
/// The query pass, then the key pass, which reads every query's dS row (stream order).
FH_LAUNCH(DtAttentionBackward) {
    const dt::AttentionShape& s = a.shape;
    const LaunchDims dims = dt_threads(static_cast<long long>(s.batch) * s.heads * s.tokens);
    gpu.kernels().dt_attention_backward_query_kernel(gpu.stream(), dims, a.dqkv.data(), a.dS.data(), a.d_out.data(),
                                                     a.qkv.data(), a.P.data(), s);
    gpu.kernels().dt_attention_backward_key_kernel(gpu.stream(), dims, a.dqkv.data(), a.dS.data(), a.d_out.data(),
                                                   a.qkv.data(), a.P.data(), s);
}

#include "ops/op_end.hpp"
#endif
