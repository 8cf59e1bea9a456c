/// @file ops.hpp
/// @brief The Decision Transformer op family (docs/dt.md; the math: math/dt.h): token
///        embeddings, layer norm, GELU, causal attention and their backwards; the training
///        windows, the action loss and the warm-up learning rate; acting with a KV cache.
///
/// Each op checks its arguments here, once, then runs its CPU twin (cpu_twin::, plain loops over
/// the shared math, src/ops/dt/cpu.cpp) or its CUDA twin (cuda_twin::, the kernels of
/// cuda/kernels/dt_*.cu, launched by src/ops/dt/cuda.cpp). The linear layers between them are the
/// device core's (Device::linear_forward / linear_backward).
#pragma once

#include <fmt/format.h>

#include "math/dt.h"
#include "device/device.hpp"

namespace fh::ops {

/// The embedding parameters (slices of the flat parameter buffer): return_w, return_b (dim),
/// action_table (num_actions, dim).
struct DtEmbedViews {
    View<const float> return_w, return_b, action_table;
    int dim = 0, num_actions = 0;
};

/// The dataset the windows come from (dt::Dataset): states (steps, state_dim), actions, rtg,
/// episode_start (steps).
struct DtDatasetViews {
    View<const float> states, rtg;
    View<const int> actions, episode_start;
    int state_dim = 0;
};

namespace cpu_twin {
void dt_state_input(View<float> out, View<const float> states, int state_dim, int market_dim);
void dt_embed(View<float> x, View<const float> rtg, View<const float> s_proj, View<const int> actions,
              const dt::EmbedParams& p, long long steps);
void dt_embed_backward(View<float> d_return_w, View<float> d_return_b, View<float> d_action_table, View<float> d_s_proj,
                       View<const float> dx, View<const float> rtg, View<const int> actions, long long steps, int dim,
                       int num_actions);
void dt_layer_norm(View<float> y, View<float> stats, View<const float> x, View<const float> gain,
                   View<const float> bias, long long rows, int dim);
void dt_layer_norm_backward(View<float> dx, View<float> d_gain, View<float> d_bias, View<const float> dy,
                            View<const float> x, View<const float> stats, View<const float> gain, long long rows,
                            int dim, bool accumulate);
void dt_gelu(View<float> y, View<const float> z);
void dt_gelu_backward(View<float> dz, View<const float> dy, View<const float> z);
void dt_attention(View<float> out, View<float> P, View<const float> qkv, const dt::AttentionShape& s);
void dt_attention_backward(View<float> dqkv, View<float> dS, View<const float> d_out, View<const float> qkv,
                           View<const float> P, const dt::AttentionShape& s);
void dt_gather(View<float> states, View<float> rtg, View<int> actions, View<int> lengths, const dt::Dataset& d,
               const dt::WindowParams& w, int batch);
void dt_action_loss(View<float> loss, View<float> correct, View<float> d_logits, View<const float> logits,
                    View<const int> actions, View<const int> lengths, int batch, int context, int num_actions);
void dt_learning_rate(View<float> lr, double base, long long warmup, core::CounterValue step);
void dt_act_tokens(View<float> x, View<dt::History> hist, View<const float> states, View<const float> s_proj,
                   const dt::EmbedParams& e, const dt::ActParams& a, int n);
void dt_cache_write(View<float> cache, View<const float> qkv, View<const dt::History> hist, const dt::ActParams& a,
                    int n);
void dt_cache_attend(View<float> out, View<const float> cache, View<const float> qkv, View<const dt::History> hist,
                     const dt::ActParams& a, int n);
void dt_act_select(View<int> actions, View<dt::History> hist, View<const float> logits, int num_actions, int n);
}  // namespace cpu_twin

namespace cuda_twin {
void dt_state_input(CudaDevice& d, View<float> out, View<const float> states, int state_dim, int market_dim);
void dt_embed(CudaDevice& d, View<float> x, View<const float> rtg, View<const float> s_proj, View<const int> actions,
              const dt::EmbedParams& p, long long steps);
void dt_embed_backward(CudaDevice& d, View<float> d_return_w, View<float> d_return_b, View<float> d_action_table,
                       View<float> d_s_proj, View<const float> dx, View<const float> rtg, View<const int> actions,
                       long long steps, int dim, int num_actions);
void dt_layer_norm(CudaDevice& d, View<float> y, View<float> stats, View<const float> x, View<const float> gain,
                   View<const float> bias, long long rows, int dim);
void dt_layer_norm_backward(CudaDevice& d, View<float> dx, View<float> d_gain, View<float> d_bias, View<const float> dy,
                            View<const float> x, View<const float> stats, View<const float> gain, long long rows,
                            int dim, bool accumulate);
void dt_gelu(CudaDevice& d, View<float> y, View<const float> z);
void dt_gelu_backward(CudaDevice& d, View<float> dz, View<const float> dy, View<const float> z);
void dt_attention(CudaDevice& d, View<float> out, View<float> P, View<const float> qkv, const dt::AttentionShape& s);
void dt_attention_backward(CudaDevice& d, View<float> dqkv, View<float> dS, View<const float> d_out,
                           View<const float> qkv, View<const float> P, const dt::AttentionShape& s);
void dt_gather(CudaDevice& d, View<float> states, View<float> rtg, View<int> actions, View<int> lengths,
               const dt::Dataset& ds, const dt::WindowParams& w, int batch);
void dt_action_loss(CudaDevice& d, View<float> loss, View<float> correct, View<float> d_logits,
                    View<const float> logits, View<const int> actions, View<const int> lengths, int batch, int context,
                    int num_actions);
void dt_learning_rate(CudaDevice& d, View<float> lr, double base, long long warmup, core::CounterValue step);
void dt_act_tokens(CudaDevice& d, View<float> x, View<dt::History> hist, View<const float> states,
                   View<const float> s_proj, const dt::EmbedParams& e, const dt::ActParams& a, int n);
void dt_cache_write(CudaDevice& d, View<float> cache, View<const float> qkv, View<const dt::History> hist,
                    const dt::ActParams& a, int n);
void dt_cache_attend(CudaDevice& d, View<float> out, View<const float> cache, View<const float> qkv,
                     View<const dt::History> hist, const dt::ActParams& a, int n);
void dt_act_select(CudaDevice& d, View<int> actions, View<dt::History> hist, View<const float> logits, int num_actions,
                   int n);
}  // namespace cuda_twin

namespace dt_detail {
inline dt::EmbedParams embed_params(const DtEmbedViews& w, const char* op) {
    detail::require(w.dim >= 1 && w.num_actions >= 1, op, "need dim >= 1 and num_actions >= 1");
    detail::require_size(w.return_w.size(), static_cast<std::size_t>(w.dim), op, "return_w");
    detail::require_size(w.return_b.size(), static_cast<std::size_t>(w.dim), op, "return_b");
    detail::require_size(w.action_table.size(), static_cast<std::size_t>(w.num_actions) * w.dim, op, "action_table");
    return dt::EmbedParams{w.return_w.data(), w.return_b.data(), w.action_table.data(), w.dim, w.num_actions};
}
inline void check_shape(const dt::AttentionShape& s, const char* op) {
    detail::require(s.batch >= 1 && s.tokens >= 1 && s.heads >= 1 && s.dim >= s.heads && s.dim % s.heads == 0 &&
                        s.dim / s.heads <= dt::kMaxHeadDim && s.span >= 1,
                    op,
                    fmt::format("bad shape (batch {}, tokens {}, dim {}, heads {}, span {}): need dim a multiple of "
                                "heads, head width <= {}",
                                s.batch, s.tokens, s.dim, s.heads, s.span, dt::kMaxHeadDim));
    (void)detail::checked_int_size(static_cast<std::size_t>(s.batch) * s.heads * s.tokens * s.tokens, op);
}
inline void check_act(const dt::ActParams& a, const char* op) {
    detail::require(a.dim >= a.heads && a.heads >= 1 && a.dim % a.heads == 0 && a.span >= 1 && a.num_actions >= 1 &&
                        a.state_dim > a.market_dim + dt::kTimeLeftFeature,
                    op, "bad acting parameters (dim a multiple of heads, span >= 1, states with portfolio features)");
}
}  // namespace dt_detail

/// The state token's input (dt::state_input_element): out = states (rows, state_dim) with the
/// portfolio's running totals (columns market_dim + 2, 3, 5) zeroed; distinct buffers.
inline void dt_state_input(Device& device, View<float> out, View<const float> states, int state_dim, int market_dim) {
    const char* op = "dt_state_input";
    detail::require(state_dim >= 1 && market_dim >= 0 && market_dim < state_dim && !states.empty() &&
                        states.size() % static_cast<std::size_t>(state_dim) == 0,
                    op,
                    fmt::format("states has {} floats, not rows of state_dim = {} (market_dim {})", states.size(),
                                state_dim, market_dim));
    detail::require_size(out.size(), states.size(), op, "out");
    (void)detail::checked_int_size(states.size(), op);
    detail::require_distinct(op, {detail::range("out", out), detail::range("states", states)});
    if (CudaDevice* cuda = device.cuda()) return cuda_twin::dt_state_input(*cuda, out, states, state_dim, market_dim);
    cpu_twin::dt_state_input(out, states, state_dim, market_dim);
}

/// Token rows x (3 steps, dim) of a batch of windows (dt::embed_row) from rtg (steps), the state
/// projections s_proj (steps, dim) and actions (steps, each in [0, num_actions)).
inline void dt_embed(Device& device, View<float> x, View<const float> rtg, View<const float> s_proj,
                     View<const int> actions, const DtEmbedViews& w) {
    const char* op = "dt_embed";
    const auto p = dt_detail::embed_params(w, op);
    const std::size_t steps = rtg.size(), D = static_cast<std::size_t>(w.dim);
    detail::require(steps >= 1, op, "no timesteps");
    detail::require_size(x.size(), steps * dt::kTokensPerStep * D, op, "x");
    detail::require_size(s_proj.size(), steps * D, op, "s_proj");
    detail::require_size(actions.size(), steps, op, "actions");
    (void)detail::checked_int_size(x.size(), op);
    detail::require_distinct(op, {detail::range("x", x), detail::range("rtg", rtg), detail::range("s_proj", s_proj),
                                  detail::range("actions", actions), detail::range("return_w", w.return_w),
                                  detail::range("action_table", w.action_table)});
    const auto n = static_cast<long long>(steps);
    if (CudaDevice* cuda = device.cuda()) return cuda_twin::dt_embed(*cuda, x, rtg, s_proj, actions, p, n);
    cpu_twin::dt_embed(x, rtg, s_proj, actions, p, n);
}

/// The backward of dt_embed from dx (3 steps, dim): d_return_w, d_return_b (dim), d_action_table
/// (num_actions, dim) set (sums over the rows in order), d_s_proj (steps, dim) = dx of the s rows.
inline void dt_embed_backward(Device& device, View<float> d_return_w, View<float> d_return_b,
                              View<float> d_action_table, View<float> d_s_proj, View<const float> dx,
                              View<const float> rtg, View<const int> actions, int dim, int num_actions) {
    const char* op = "dt_embed_backward";
    const std::size_t steps = rtg.size(), D = static_cast<std::size_t>(dim);
    detail::require(steps >= 1 && dim >= 1 && num_actions >= 1, op, "empty shape");
    detail::require_size(d_return_w.size(), D, op, "d_return_w");
    detail::require_size(d_return_b.size(), D, op, "d_return_b");
    detail::require_size(d_action_table.size(), D * static_cast<std::size_t>(num_actions), op, "d_action_table");
    detail::require_size(d_s_proj.size(), steps * D, op, "d_s_proj");
    detail::require_size(dx.size(), steps * D * dt::kTokensPerStep, op, "dx");
    detail::require_size(actions.size(), steps, op, "actions");
    (void)detail::checked_int_size(dx.size(), op);
    detail::require_distinct(op,
                             {detail::range("d_return_w", d_return_w), detail::range("d_return_b", d_return_b),
                              detail::range("d_action_table", d_action_table), detail::range("d_s_proj", d_s_proj),
                              detail::range("dx", dx), detail::range("rtg", rtg), detail::range("actions", actions)});
    const auto n = static_cast<long long>(steps);
    if (CudaDevice* cuda = device.cuda())
        return cuda_twin::dt_embed_backward(*cuda, d_return_w, d_return_b, d_action_table, d_s_proj, dx, rtg, actions,
                                            n, dim, num_actions);
    cpu_twin::dt_embed_backward(d_return_w, d_return_b, d_action_table, d_s_proj, dx, rtg, actions, n, dim,
                                num_actions);
}

/// Layer norm over rows of `dim` features (dt::layer_norm_row): y, x (rows, dim); stats (rows, 2);
/// gain, bias (dim).
inline void dt_layer_norm(Device& device, View<float> y, View<float> stats, View<const float> x, View<const float> gain,
                          View<const float> bias, int dim) {
    const char* op = "dt_layer_norm";
    detail::require(dim >= 1 && !x.empty() && x.size() % static_cast<std::size_t>(dim) == 0, op,
                    fmt::format("x has {} floats, not a positive multiple of dim = {}", x.size(), dim));
    const std::size_t rows = x.size() / static_cast<std::size_t>(dim);
    (void)detail::checked_int_size(x.size(), op);
    detail::require_size(y.size(), x.size(), op, "y");
    detail::require_size(stats.size(), 2 * rows, op, "stats");
    detail::require_size(gain.size(), static_cast<std::size_t>(dim), op, "gain");
    detail::require_size(bias.size(), static_cast<std::size_t>(dim), op, "bias");
    detail::require_distinct(op, {detail::range("y", y), detail::range("stats", stats), detail::range("x", x),
                                  detail::range("gain", gain), detail::range("bias", bias)});
    const auto r = static_cast<long long>(rows);
    if (CudaDevice* cuda = device.cuda()) return cuda_twin::dt_layer_norm(*cuda, y, stats, x, gain, bias, r, dim);
    cpu_twin::dt_layer_norm(y, stats, x, gain, bias, r, dim);
}

/// The backward of dt_layer_norm: dx (rows, dim) set, or added to when `accumulate`; d_gain,
/// d_bias (dim) set (sums over rows in order).
inline void dt_layer_norm_backward(Device& device, View<float> dx, View<float> d_gain, View<float> d_bias,
                                   View<const float> dy, View<const float> x, View<const float> stats,
                                   View<const float> gain, int dim, bool accumulate) {
    const char* op = "dt_layer_norm_backward";
    detail::require(dim >= 1 && !x.empty() && x.size() % static_cast<std::size_t>(dim) == 0, op,
                    fmt::format("x has {} floats, not a positive multiple of dim = {}", x.size(), dim));
    const std::size_t rows = x.size() / static_cast<std::size_t>(dim);
    (void)detail::checked_int_size(x.size(), op);
    for (auto [v, name] : {std::pair{dx.size(), "dx"}, std::pair{dy.size(), "dy"}})
        detail::require_size(v, x.size(), op, name);
    detail::require_size(stats.size(), 2 * rows, op, "stats");
    for (auto [v, name] :
         {std::pair{gain.size(), "gain"}, std::pair{d_gain.size(), "d_gain"}, std::pair{d_bias.size(), "d_bias"}})
        detail::require_size(v, static_cast<std::size_t>(dim), op, name);
    detail::require_distinct(op, {detail::range("dx", dx), detail::range("d_gain", d_gain),
                                  detail::range("d_bias", d_bias), detail::range("dy", dy), detail::range("x", x),
                                  detail::range("stats", stats), detail::range("gain", gain)});
    const auto r = static_cast<long long>(rows);
    if (CudaDevice* cuda = device.cuda())
        return cuda_twin::dt_layer_norm_backward(*cuda, dx, d_gain, d_bias, dy, x, stats, gain, r, dim, accumulate);
    cpu_twin::dt_layer_norm_backward(dx, d_gain, d_bias, dy, x, stats, gain, r, dim, accumulate);
}

/// y = gelu(z) elementwise (exact erf form); distinct buffers of one size.
inline void dt_gelu(Device& device, View<float> y, View<const float> z) {
    const char* op = "dt_gelu";
    detail::require_size(y.size(), z.size(), op, "y");
    (void)detail::checked_int_size(z.size(), op);
    detail::require_distinct(op, {detail::range("y", y), detail::range("z", z)});
    if (z.empty()) return;
    if (CudaDevice* cuda = device.cuda()) return cuda_twin::dt_gelu(*cuda, y, z);
    cpu_twin::dt_gelu(y, z);
}

/// dz = dy * gelu'(z) elementwise; distinct buffers of one size.
inline void dt_gelu_backward(Device& device, View<float> dz, View<const float> dy, View<const float> z) {
    const char* op = "dt_gelu_backward";
    detail::require_size(dz.size(), z.size(), op, "dz");
    detail::require_size(dy.size(), z.size(), op, "dy");
    (void)detail::checked_int_size(z.size(), op);
    detail::require_distinct(op, {detail::range("dz", dz), detail::range("dy", dy), detail::range("z", z)});
    if (z.empty()) return;
    if (CudaDevice* cuda = device.cuda()) return cuda_twin::dt_gelu_backward(*cuda, dz, dy, z);
    cpu_twin::dt_gelu_backward(dz, dy, z);
}

/// Causal attention of training windows (dt::attention_query): out (batch * tokens, dim) and the
/// weights P (batch, heads, tokens, tokens) from qkv (batch * tokens, 3 dim).
inline void dt_attention(Device& device, View<float> out, View<float> P, View<const float> qkv,
                         const dt::AttentionShape& s) {
    const char* op = "dt_attention";
    dt_detail::check_shape(s, op);
    const std::size_t rows = static_cast<std::size_t>(s.batch) * s.tokens, D = static_cast<std::size_t>(s.dim);
    detail::require_size(out.size(), rows * D, op, "out");
    detail::require_size(qkv.size(), rows * 3 * D, op, "qkv");
    detail::require_size(P.size(), static_cast<std::size_t>(s.batch) * s.heads * s.tokens * s.tokens, op, "P");
    (void)detail::checked_int_size(qkv.size(), op);
    detail::require_distinct(op, {detail::range("out", out), detail::range("P", P), detail::range("qkv", qkv)});
    if (CudaDevice* cuda = device.cuda()) return cuda_twin::dt_attention(*cuda, out, P, qkv, s);
    cpu_twin::dt_attention(out, P, qkv, s);
}

/// The backward of dt_attention: dqkv (batch * tokens, 3 dim) set from d_out (batch * tokens,
/// dim); dS (shaped like P) is scratch (the score gradients).
inline void dt_attention_backward(Device& device, View<float> dqkv, View<float> dS, View<const float> d_out,
                                  View<const float> qkv, View<const float> P, const dt::AttentionShape& s) {
    const char* op = "dt_attention_backward";
    dt_detail::check_shape(s, op);
    const std::size_t rows = static_cast<std::size_t>(s.batch) * s.tokens, D = static_cast<std::size_t>(s.dim);
    const std::size_t pn = static_cast<std::size_t>(s.batch) * s.heads * s.tokens * s.tokens;
    detail::require_size(dqkv.size(), rows * 3 * D, op, "dqkv");
    detail::require_size(qkv.size(), rows * 3 * D, op, "qkv");
    detail::require_size(d_out.size(), rows * D, op, "d_out");
    detail::require_size(P.size(), pn, op, "P");
    detail::require_size(dS.size(), pn, op, "dS");
    (void)detail::checked_int_size(qkv.size(), op);
    detail::require_distinct(op, {detail::range("dqkv", dqkv), detail::range("dS", dS), detail::range("d_out", d_out),
                                  detail::range("qkv", qkv), detail::range("P", P)});
    if (CudaDevice* cuda = device.cuda()) return cuda_twin::dt_attention_backward(*cuda, dqkv, dS, d_out, qkv, P, s);
    cpu_twin::dt_attention_backward(dqkv, dS, d_out, qkv, P, s);
}

/// A batch of windows (dt::gather_window): states (batch * K, state_dim), rtg, actions (batch * K),
/// lengths (batch). Sequential batches must lie inside the dataset. Exact, equal on both backends.
inline void dt_gather(Device& device, View<float> states, View<float> rtg, View<int> actions, View<int> lengths,
                      const DtDatasetViews& d, const dt::WindowParams& w) {
    const char* op = "dt_gather";
    detail::require(d.state_dim >= 1 && w.context >= 1, op, "need state_dim >= 1 and context >= 1");
    const std::size_t steps = d.rtg.size(), batch = lengths.size(), K = static_cast<std::size_t>(w.context);
    detail::require(steps >= 1 && batch >= 1, op, "empty dataset or batch");
    detail::require_size(d.states.size(), steps * static_cast<std::size_t>(d.state_dim), op, "dataset states");
    detail::require_size(d.actions.size(), steps, op, "dataset actions");
    detail::require_size(d.episode_start.size(), steps, op, "dataset episode_start");
    detail::require_size(states.size(), batch * K * static_cast<std::size_t>(d.state_dim), op, "states");
    detail::require_size(rtg.size(), batch * K, op, "rtg");
    detail::require_size(actions.size(), batch * K, op, "actions");
    (void)detail::checked_int_size(states.size(), op);
    if (!w.random)
        detail::require(w.first >= 0 && static_cast<std::size_t>(w.first) + batch <= steps, op,
                        fmt::format("sequential windows [{}, {}) exceed the {} steps", w.first,
                                    w.first + static_cast<long long>(batch), steps));
    detail::require_distinct(
        op, {detail::range("states", states), detail::range("rtg", rtg), detail::range("actions", actions),
             detail::range("lengths", lengths), detail::range("dataset states", d.states),
             detail::range("dataset rtg", d.rtg), detail::range("dataset actions", d.actions),
             detail::range("episode_start", d.episode_start)});
    const dt::Dataset ds{
        d.states.data(), d.actions.data(), d.rtg.data(), d.episode_start.data(), static_cast<long long>(steps),
        d.state_dim};
    const int B = detail::checked_int_size(batch, op);
    if (CudaDevice* cuda = device.cuda()) return cuda_twin::dt_gather(*cuda, states, rtg, actions, lengths, ds, w, B);
    cpu_twin::dt_gather(states, rtg, actions, lengths, ds, w, B);
}

/// The action loss (dt::action_loss_window): loss, correct (batch) whose sums are the batch's mean
/// cross-entropy and accuracy; d_logits (batch * 3 K, A) its gradient, or empty. logits
/// (batch * 3 K, A), actions (batch * K), lengths (batch, each in [1, K]).
inline void dt_action_loss(Device& device, View<float> loss, View<float> correct, View<float> d_logits,
                           View<const float> logits, View<const int> actions, View<const int> lengths, int context,
                           int num_actions) {
    const char* op = "dt_action_loss";
    const std::size_t batch = lengths.size();
    detail::require(batch >= 1 && context >= 1 && num_actions >= 1, op, "empty shape");
    const std::size_t rows = batch * static_cast<std::size_t>(context) * dt::kTokensPerStep;
    detail::require_size(loss.size(), batch, op, "loss");
    detail::require_size(correct.size(), batch, op, "correct");
    detail::require_size(logits.size(), rows * static_cast<std::size_t>(num_actions), op, "logits");
    if (!d_logits.empty()) detail::require_size(d_logits.size(), logits.size(), op, "d_logits");
    detail::require_size(actions.size(), batch * static_cast<std::size_t>(context), op, "actions");
    (void)detail::checked_int_size(logits.size(), op);
    detail::require_distinct(
        op, {detail::range("loss", loss), detail::range("correct", correct), detail::range("d_logits", d_logits),
             detail::range("logits", logits), detail::range("actions", actions), detail::range("lengths", lengths)});
    const int B = detail::checked_int_size(batch, op);
    if (CudaDevice* cuda = device.cuda())
        return cuda_twin::dt_action_loss(*cuda, loss, correct, d_logits, logits, actions, lengths, B, context,
                                         num_actions);
    cpu_twin::dt_action_loss(loss, correct, d_logits, logits, actions, lengths, B, context, num_actions);
}

/// lr[0] = base * min(1, step / warmup) at the update number `step` (device memory in a captured
/// update).
inline void dt_learning_rate(Device& device, View<float> lr, double base, long long warmup, CounterValue step) {
    const char* op = "dt_learning_rate";
    detail::require_size(lr.size(), 1, op, "lr");
    detail::require(base > 0 && warmup >= 0, op, "need base > 0 and warmup >= 0");
    if (CudaDevice* cuda = device.cuda()) return cuda_twin::dt_learning_rate(*cuda, lr, base, warmup, step);
    cpu_twin::dt_learning_rate(lr, base, warmup, step);
}

/// Acting, one timestep for n environments: their histories (start over at an episode's first
/// step) and the token rows x (3 n, dim) a_{t-1}, R_t, s_t (dt::act_tokens); states (n,
/// state_dim), s_proj (n, dim).
inline void dt_act_tokens(Device& device, View<float> x, View<dt::History> hist, View<const float> states,
                          View<const float> s_proj, const DtEmbedViews& w, const dt::ActParams& a) {
    const char* op = "dt_act_tokens";
    const auto e = dt_detail::embed_params(w, op);
    dt_detail::check_act(a, op);
    const std::size_t n = hist.size(), D = static_cast<std::size_t>(a.dim);
    detail::require(n >= 1 && a.dim == w.dim, op, "no environments, or the embedding width differs");
    detail::require_size(x.size(), n * dt::kTokensPerStep * D, op, "x");
    detail::require_size(states.size(), n * static_cast<std::size_t>(a.state_dim), op, "states");
    detail::require_size(s_proj.size(), n * D, op, "s_proj");
    (void)detail::checked_int_size(x.size(), op);
    detail::require_distinct(op, {detail::range("x", x), detail::range("hist", hist), detail::range("states", states),
                                  detail::range("s_proj", s_proj)});
    const int N = detail::checked_int_size(n, op);
    if (CudaDevice* cuda = device.cuda()) return cuda_twin::dt_act_tokens(*cuda, x, hist, states, s_proj, e, a, N);
    cpu_twin::dt_act_tokens(x, hist, states, s_proj, e, a, N);
}

/// One layer of acting: the step's keys and values (qkv (3 n, 3 dim)) into the layer's cache
/// (n, dt::cache_slots(span), 2 dim), then every new token's attention over the cache into out
/// (3 n, dim) (dt::cache_write, dt::cache_attend).
inline void dt_cache_attention(Device& device, View<float> out, View<float> cache, View<const float> qkv,
                               View<const dt::History> hist, const dt::ActParams& a) {
    const char* op = "dt_cache_attention";
    dt_detail::check_act(a, op);
    const std::size_t n = hist.size(), D = static_cast<std::size_t>(a.dim);
    detail::require(n >= 1, op, "no environments");
    detail::require_size(out.size(), n * dt::kTokensPerStep * D, op, "out");
    detail::require_size(qkv.size(), n * dt::kTokensPerStep * 3 * D, op, "qkv");
    detail::require_size(cache.size(), n * static_cast<std::size_t>(dt::cache_slots(a.span)) * 2 * D, op, "cache");
    (void)detail::checked_int_size(cache.size(), op);
    detail::require_distinct(op, {detail::range("out", out), detail::range("cache", cache), detail::range("qkv", qkv),
                                  detail::range("hist", hist)});
    const int N = detail::checked_int_size(n, op);
    if (CudaDevice* cuda = device.cuda()) {
        cuda_twin::dt_cache_write(*cuda, cache, qkv, hist, a, N);
        return cuda_twin::dt_cache_attend(*cuda, out, cache, qkv, hist, a, N);
    }
    cpu_twin::dt_cache_write(cache, qkv, hist, a, N);
    cpu_twin::dt_cache_attend(out, cache, qkv, hist, a, N);
}

/// The step's actions (n): the most likely under each environment's s_t logits (logits (3 n, A));
/// the histories advance one timestep.
inline void dt_act_select(Device& device, View<int> actions, View<dt::History> hist, View<const float> logits,
                          int num_actions) {
    const char* op = "dt_act_select";
    const std::size_t n = hist.size();
    detail::require(n >= 1 && num_actions >= 1, op, "empty shape");
    detail::require_size(actions.size(), n, op, "actions");
    detail::require_size(logits.size(), n * dt::kTokensPerStep * static_cast<std::size_t>(num_actions), op, "logits");
    (void)detail::checked_int_size(logits.size(), op);
    detail::require_distinct(
        op, {detail::range("actions", actions), detail::range("hist", hist), detail::range("logits", logits)});
    const int N = detail::checked_int_size(n, op);
    if (CudaDevice* cuda = device.cuda()) return cuda_twin::dt_act_select(*cuda, actions, hist, logits, num_actions, N);
    cpu_twin::dt_act_select(actions, hist, logits, num_actions, N);
}

}  // namespace fh::ops
