/// @file dt.h
/// @brief The Decision Transformer (docs/dt.md) for ONE row, token or (query, head): the batch
///        gather of training windows, the token embeddings, layer norm, GELU, causal attention
///        with ALiBi position biases (training windows and the acting KV cache), their backwards,
///        the action loss and the warm-up learning rate. Templates over the float type: nvcc
///        (cuda/kernels/dt_*.cu) and g++ (src/ops/dt/cpu.cpp) compile them with float, the
///        gradient check (tests/ops/test_dt_ops.cpp) with double, from this one definition.
#pragma once

#include <cmath>
#include <cstdint>

#include "math/core.h"
#include "math/host_device.h"
#include "math/rng.h"

namespace fh::dt {

/// Tokens per timestep, in this order: the return-to-go token R_t, the state token s_t, the action
/// token a_t. Token i of a sequence belongs to timestep i / 3 and is of kind i % 3.
constexpr int kTokensPerStep = 3;
enum TokenKind : int { kReturnToken = 0, kStateToken = 1, kActionToken = 2 };

/// Floats after the network's parameters in the weights (params/online): fixed from the dataset
/// at the start of training, so that evaluation needs only the checkpoint.
///   [0] the target return token the policy acts with (the target rate / rate_scale)
///   [1] rate_scale: the standard deviation of the dataset's return-to-go rates
///   [2] the target rate (mean reward per step) itself, for the logs
constexpr int kCalibrationFloats = 3;

constexpr float kLayerNormEps = 1e-5f;
/// Largest head width (embedding / heads): the attention kernels keep no per-head arrays, but the
/// schema's rule keeps heads meaningful and the per-thread loops short.
constexpr int kMaxHeadDim = 128;

FH_HD float sqrt_of(float x) {
    return sqrtf(x);
}
FH_HD double sqrt_of(double x) {
    return sqrt(x);
}
FH_HD float exp_of(float x) {
    return expf(x);
}
FH_HD double exp_of(double x) {
    return exp(x);
}
FH_HD float log_of(float x) {
    return logf(x);
}
FH_HD double log_of(double x) {
    return log(x);
}
FH_HD float erf_of(float x) {
    return erff(x);
}
FH_HD double erf_of(double x) {
    return erf(x);
}

// ---- GELU (exact, erf form) ------------------------------------------------------------------

template <class T>
FH_HD T gelu(T x) {
    return T(0.5) * x * (T(1) + erf_of(x * T(0.70710678118654752)));
}
template <class T>
FH_HD T gelu_derivative(T x) {
    const T cdf = T(0.5) * (T(1) + erf_of(x * T(0.70710678118654752)));
    return cdf + x * exp_of(T(-0.5) * x * x) * T(0.39894228040143268);
}

// ---- layer norm ------------------------------------------------------------------------------
// y = (x - mean) * rstd * (1 + gain) + bias over the D features of a row. The gain is stored as
// its offset from 1, so that zero-initialised parameters start as the plain normalisation.

/// Row r: y[r], and stats[2 r] = mean, stats[2 r + 1] = rstd = 1 / sqrt(var + eps) (population
/// variance), which the backward reads.
template <class T>
FH_HD void layer_norm_row(long long r, T* y, T* stats, const T* x, const T* gain, const T* bias, int D) {
    const T* xr = x + r * D;
    T mean = T(0);
    for (int c = 0; c < D; ++c) mean += xr[c];
    mean /= T(D);
    T var = T(0);
    for (int c = 0; c < D; ++c) var += (xr[c] - mean) * (xr[c] - mean);
    var /= T(D);
    const T rstd = T(1) / sqrt_of(var + T(kLayerNormEps));
    T* yr = y + r * D;
    for (int c = 0; c < D; ++c) yr[c] = (xr[c] - mean) * rstd * (T(1) + gain[c]) + bias[c];
    stats[2 * r] = mean;
    stats[2 * r + 1] = rstd;
}

/// Row r of the input gradient: dx = rstd (g - mean(g) - xhat mean(g xhat)), g = dy (1 + gain);
/// added to dx when `accumulate` (the residual stream's gradient), else set.
template <class T>
FH_HD void layer_norm_backward_row(long long r, T* dx, const T* dy, const T* x, const T* stats, const T* gain, int D,
                                   int accumulate) {
    const T* xr = x + r * D;
    const T* dyr = dy + r * D;
    const T mean = stats[2 * r], rstd = stats[2 * r + 1];
    T mg = T(0), mgx = T(0);
    for (int c = 0; c < D; ++c) {
        const T g = dyr[c] * (T(1) + gain[c]);
        mg += g;
        mgx += g * (xr[c] - mean) * rstd;
    }
    mg /= T(D);
    mgx /= T(D);
    T* dxr = dx + r * D;
    for (int c = 0; c < D; ++c) {
        const T xhat = (xr[c] - mean) * rstd;
        const T v = rstd * (dyr[c] * (T(1) + gain[c]) - mg - xhat * mgx);
        dxr[c] = accumulate ? dxr[c] + v : v;
    }
}

/// The parameter gradients' reduction: kParamGradThreads partial sums per feature (one block of
/// that many threads per feature on the device), then a fixed tree.
inline constexpr int kParamGradThreads = 256;

/// Partial t of feature c: rows t, t + kParamGradThreads, ... in order: g = sum dy xhat, b = sum dy.
template <class T>
FH_HD void layer_norm_param_grad_partial(int c, int t, T& g, T& b, const T* dy, const T* x, const T* stats,
                                         long long rows, int D) {
    g = T(0);
    b = T(0);
    for (long long r = t; r < rows; r += kParamGradThreads) {
        const T xhat = (x[r * D + c] - stats[2 * r]) * stats[2 * r + 1];
        g += dy[r * D + c] * xhat;
        b += dy[r * D + c];
    }
}

/// Feature c of the parameter gradients over `rows` rows: dgain[c] = sum_r dy[r, c] xhat[r, c],
/// dbias[c] = sum_r dy[r, c] (set), as the partials of layer_norm_param_grad_partial summed in
/// the tree stride kParamGradThreads / 2, / 4, ..., 1 (s[t] += s[t + stride]) that the kernel
/// runs in shared memory.
template <class T>
FH_HD void layer_norm_param_grad(int c, T* dgain, T* dbias, const T* dy, const T* x, const T* stats, long long rows,
                                 int D) {
    T g[kParamGradThreads], b[kParamGradThreads];
    for (int t = 0; t < kParamGradThreads; ++t) layer_norm_param_grad_partial(c, t, g[t], b[t], dy, x, stats, rows, D);
    for (int stride = kParamGradThreads / 2; stride > 0; stride /= 2)
        for (int t = 0; t < stride; ++t) {
            g[t] += g[t + stride];
            b[t] += b[t + stride];
        }
    dgain[c] = g[0];
    dbias[c] = b[0];
}

// ---- causal attention with ALiBi -------------------------------------------------------------
// Query token i (its index since the start of the agent's history) sees the key tokens j <= i of
// the last `span` timesteps (its own included): j >= first_visible(i, span). Score
// q.k_j / sqrt(hd) - slope_h (i - j): ALiBi (Press et al., 2022), a fixed bias by distance
// instead of a position embedding, so a cached key never depends on where a window starts.

FH_HD long long first_visible(long long i, int span) {
    const long long t = i / kTokensPerStep - span + 1;
    return t > 0 ? t * kTokensPerStep : 0;
}

/// Head h's slope 2^(-8 (h + 1) / heads) (the ALiBi geometric sequence).
FH_HD float alibi_slope(int h, int heads) {
    return exp2f(-8.0f * static_cast<float>(h + 1) / static_cast<float>(heads));
}

/// Training attention: `batch` sequences of `tokens` tokens (tokens <= 3 span), width `dim` in
/// `heads` heads; qkv rows (batch * tokens, 3 dim) = [q | k | v], head h at columns
/// h * hd .. (h + 1) * hd of each part.
struct AttentionShape {
    int batch, tokens, dim, heads, span;
};

/// One query: out (hd) = sum_j p_j v_j, p = softmax over j in [j0, i] of the scores; p_row (may
/// be null) receives p_j at p_row[j - p_base]. keys(j) / values(j) give head h's k_j, v_j.
/// With p_row, the first pass keeps each score there and the later passes read it back (the same
/// values the dot products would give again); without, they recompute them.
template <class T, class Keys, class Values>
FH_HD void attend(T* out, T* p_row, long long p_base, const T* q, long long i, long long j0, int hd, T slope,
                  const Keys& keys, const Values& values) {
    const T scale = T(1) / sqrt_of(T(hd));
    auto score = [&](long long j) {
        const T* k = keys(j);
        T s = T(0);
        for (int c = 0; c < hd; ++c) s += q[c] * k[c];
        return s * scale - slope * T(i - j);
    };
    T m = T(0);
    for (long long j = j0; j <= i; ++j) {
        const T s = score(j);
        if (p_row != nullptr) p_row[j - p_base] = s;
        m = (j == j0 || s > m) ? s : m;
    }
    T sum = T(0);
    for (long long j = j0; j <= i; ++j) sum += exp_of((p_row != nullptr ? p_row[j - p_base] : score(j)) - m);
    T acc[kMaxHeadDim];  // the output, accumulated locally in the same order
    for (int c = 0; c < hd; ++c) acc[c] = T(0);
    for (long long j = j0; j <= i; ++j) {
        const T p = exp_of((p_row != nullptr ? p_row[j - p_base] : score(j)) - m) / sum;
        if (p_row != nullptr) p_row[j - p_base] = p;
        const T* v = values(j);
        for (int c = 0; c < hd; ++c) acc[c] += p * v[c];
    }
    for (int c = 0; c < hd; ++c) out[c] = acc[c];
}

/// Training forward of query (b, h, i): out (batch * tokens, dim) head slice, and row i of
/// P (batch, heads, tokens, tokens) (zero where not visible).
template <class T>
FH_HD void attention_query(int b, int h, int i, T* out, T* P, const T* qkv, const AttentionShape& s) {
    const int D = s.dim, hd = s.dim / s.heads, Tn = s.tokens;
    const long long base = static_cast<long long>(b) * Tn;
    const T* q = qkv + (base + i) * 3 * D + h * hd;
    auto keys = [&](long long j) { return qkv + (base + j) * 3 * D + D + h * hd; };
    auto values = [&](long long j) { return qkv + (base + j) * 3 * D + 2 * D + h * hd; };
    T* p_row = P + ((static_cast<long long>(b) * s.heads + h) * Tn + i) * Tn;
    const long long j0 = first_visible(i, s.span);
    for (int j = 0; j < Tn; ++j) p_row[j] = T(0);
    attend(out + (base + i) * D + h * hd, p_row, 0, q, i, j0, hd, T(alibi_slope(h, s.heads)), keys, values);
}

/// Backward, query pass of (b, h, i): dS row i = P (dP - sum_j P dP) with dP_j = dO_i . v_j
/// (into dS, shaped like P), and dq_i = sum_j dS_ij k_j / sqrt(hd) into the q part of dqkv.
template <class T>
FH_HD void attention_backward_query(int b, int h, int i, T* dqkv, T* dS, const T* d_out, const T* qkv, const T* P,
                                    const AttentionShape& s) {
    const int D = s.dim, hd = s.dim / s.heads, Tn = s.tokens;
    const long long base = static_cast<long long>(b) * Tn;
    const long long prow = ((static_cast<long long>(b) * s.heads + h) * Tn + i) * Tn;
    const T* dout = d_out + (base + i) * D + h * hd;
    const long long j0 = first_visible(i, s.span);
    T delta = T(0);
    for (long long j = j0; j <= i; ++j) {
        const T* v = qkv + (base + j) * 3 * D + 2 * D + h * hd;
        T dp = T(0);
        for (int c = 0; c < hd; ++c) dp += dout[c] * v[c];
        dS[prow + j] = dp;
        delta += P[prow + j] * dp;
    }
    const T scale = T(1) / sqrt_of(T(hd));
    T dq[kMaxHeadDim];  // accumulated locally in the order j = 0, 1, ...
    for (int c = 0; c < hd; ++c) dq[c] = T(0);
    for (int j = 0; j < Tn; ++j) {
        if (j < j0 || j > i) {
            dS[prow + j] = T(0);
            continue;
        }
        const T ds = P[prow + j] * (dS[prow + j] - delta);
        dS[prow + j] = ds;
        const T* k = qkv + (base + j) * 3 * D + D + h * hd;
        for (int c = 0; c < hd; ++c) dq[c] += ds * scale * k[c];
    }
    T* dq_out = dqkv + (base + i) * 3 * D + h * hd;
    for (int c = 0; c < hd; ++c) dq_out[c] = dq[c];
}

/// Backward, key pass of (b, h, j): dk_j = sum_i dS_ij q_i / sqrt(hd), dv_j = sum_i P_ij dO_i
/// (queries in increasing order) into the k and v parts of dqkv.
template <class T>
FH_HD void attention_backward_key(int b, int h, int j, T* dqkv, const T* dS, const T* d_out, const T* qkv, const T* P,
                                  const AttentionShape& s) {
    const int D = s.dim, hd = s.dim / s.heads, Tn = s.tokens;
    const long long base = static_cast<long long>(b) * Tn;
    const long long pbase = (static_cast<long long>(b) * s.heads + h) * Tn * Tn;
    const T scale = T(1) / sqrt_of(T(hd));
    T dk[kMaxHeadDim], dv[kMaxHeadDim];  // accumulated locally in the order i = j, j + 1, ...
    for (int c = 0; c < hd; ++c) dk[c] = dv[c] = T(0);
    for (int i = j; i < Tn; ++i) {
        const T ds = dS[pbase + static_cast<long long>(i) * Tn + j];
        const T p = P[pbase + static_cast<long long>(i) * Tn + j];
        const T* q = qkv + (base + i) * 3 * D + h * hd;
        const T* dout = d_out + (base + i) * D + h * hd;
        for (int c = 0; c < hd; ++c) {
            dk[c] += ds * scale * q[c];
            dv[c] += p * dout[c];
        }
    }
    T* dk_out = dqkv + (base + j) * 3 * D + D + h * hd;
    T* dv_out = dqkv + (base + j) * 3 * D + 2 * D + h * hd;
    for (int c = 0; c < hd; ++c) {
        dk_out[c] = dk[c];
        dv_out[c] = dv[c];
    }
}

// ---- token embeddings ------------------------------------------------------------------------

/// Where the embedding parameters are (offsets into the flat parameter buffer): R_t's
/// token = rtg * return_w + return_b; s_t's = the state projection (a linear layer, computed
/// before); a_t's = row `action` of the action table (num_actions, dim).
struct EmbedParams {
    const float* return_w;
    const float* return_b;
    const float* action_table;
    int dim, num_actions;
};

/// Token row x (dim) of the given kind.
template <class T>
FH_HD void embed_token(T* x, int kind, T rtg, const T* state_token, int action, const T* return_w, const T* return_b,
                       const T* action_table, int dim) {
    for (int c = 0; c < dim; ++c)
        x[c] = kind == kReturnToken  ? rtg * return_w[c] + return_b[c]
               : kind == kStateToken ? state_token[c]
                                     : action_table[static_cast<long long>(action) * dim + c];
}

/// Token row r of a batch of windows (x (steps * 3, dim)): timestep n = r / 3, kind r % 3.
FH_HD void embed_row(long long r, float* x, const float* rtg, const float* s_proj, const int* actions,
                     const EmbedParams& p) {
    const long long n = r / kTokensPerStep;
    embed_token(x + r * p.dim, static_cast<int>(r % kTokensPerStep), rtg[n], s_proj + n * p.dim, actions[n], p.return_w,
                p.return_b, p.action_table, p.dim);
}

/// Element `idx` of the embeddings' backward, summed over the batch's rows in a fixed order, from
/// dx (batch * tokens, dim): idx < dim: d_return_w[idx] = sum dx[R rows] * rtg; < 2 dim:
/// d_return_b; < (2 + A) dim: d_action_table (A, dim) = sum of dx over the a rows of that action;
/// then d_s_proj (batch * K, dim) = dx of the s rows (a copy). Sizes: steps = batch * K.
template <class T>
FH_HD void embed_backward_element(long long idx, T* d_return_w, T* d_return_b, T* d_action_table, T* d_s_proj,
                                  const T* dx, const T* rtg, const int* actions, long long steps, int dim,
                                  int num_actions) {
    const long long D = dim;
    auto row = [&](long long n, int kind) { return (n * kTokensPerStep + kind) * D; };
    if (idx < 2 * D) {
        const long long c = idx % D;
        T s = T(0);
        for (long long n = 0; n < steps; ++n) s += dx[row(n, kReturnToken) + c] * (idx < D ? rtg[n] : T(1));
        (idx < D ? d_return_w : d_return_b)[c] = s;
    } else if (idx < (2 + num_actions) * D) {
        const long long a = (idx - 2 * D) / D, c = (idx - 2 * D) % D;
        T s = T(0);
        for (long long n = 0; n < steps; ++n)
            if (actions[n] == a) s += dx[row(n, kActionToken) + c];
        d_action_table[a * D + c] = s;
    } else {
        const long long e = idx - (2 + num_actions) * D, n = e / D, c = e % D;
        d_s_proj[e] = dx[row(n, kStateToken) + c];
    }
}

/// Elements embed_backward_element covers.
FH_HD long long embed_backward_elements(long long steps, int dim, int num_actions) {
    return (2 + num_actions + steps) * static_cast<long long>(dim);
}

// ---- the state token's input -----------------------------------------------------------------
// The state token reads the market features and the portfolio features that describe the
// position now (position, unrealized P&L, time in position, time left, last fill), not the
// episode's running totals (equity change, drawdown, fees paid): a backtest runs far longer than
// a training episode, and those totals leave the range the training episodes showed (docs/dt.md).

/// Portfolio columns (docs/environment.md) the state token leaves out.
FH_HD bool is_running_total(int portfolio_column) {
    return portfolio_column == 2 || portfolio_column == 3 || portfolio_column == 5;
}

/// Element i of states (rows, state_dim): the network's input, zero in the running totals' columns.
FH_HD void state_input_element(long long i, float* out, const float* states, int state_dim, int market_dim) {
    const int c = static_cast<int>(i % state_dim);
    out[i] = c >= market_dim && is_running_total(c - market_dim) ? 0.0f : states[i];
}

// ---- training windows ------------------------------------------------------------------------

/// The dataset on the device, episodes in order: step n has state states[n] (state_dim), action
/// actions[n], return-to-go token rtg[n] and belongs to the episode that starts at step
/// episode_start[n] (<= n).
struct Dataset {
    const float* states;
    const int* actions;
    const float* rtg;
    const int* episode_start;
    long long steps;
    int state_dim;
};

/// Which windows a batch holds: window b ends at step Philox(seed, dt_sample, b, update) (uniform)
/// when random, else at first + b.
struct WindowParams {
    std::uint64_t seed;
    core::CounterValue update;
    long long first;
    int random;
    int context;  ///< K: timesteps per window
};

FH_HD long long window_end(long long b, long long steps, const WindowParams& w) {
    if (!w.random) return w.first + b;
    const rng::U32x4 u = rng::draw(w.seed, rng::Purpose::dt_sample, static_cast<std::uint32_t>(b),
                                   static_cast<std::uint64_t>(w.update.value()));
    const std::uint64_t pick = (static_cast<std::uint64_t>(u.v[0]) << 32) | u.v[1];
    return static_cast<long long>(pick % static_cast<std::uint64_t>(steps));
}

/// Window b: the last min(K, steps since its episode's start + 1) steps up to its end step,
/// left-aligned: states (batch * K, state_dim), rtg, actions (batch * K), lengths (batch). The
/// padding after the window's length is zero (action 0): padded tokens come after every real one,
/// so the causal mask keeps them out of every real token's attention, and they carry no loss.
FH_HD void gather_window(long long b, float* states, float* rtg, int* actions, int* lengths, const Dataset& d,
                         const WindowParams& w) {
    const long long end = window_end(b, d.steps, w);
    long long start = end - w.context + 1;
    if (start < d.episode_start[end]) start = d.episode_start[end];
    const int len = static_cast<int>(end - start + 1);
    lengths[b] = len;
    for (int k = 0; k < w.context; ++k) {
        const long long row = b * w.context + k;
        const bool real = k < len;
        const long long n = start + k;
        for (int c = 0; c < d.state_dim; ++c)
            states[row * d.state_dim + c] = real ? d.states[n * d.state_dim + c] : 0.0f;
        rtg[row] = real ? d.rtg[n] : 0.0f;
        actions[row] = real ? d.actions[n] : 0;
    }
}

// ---- the action loss -------------------------------------------------------------------------

/// Window b's cross-entropy of the action a_k predicted from the state token s_k's logits (row
/// b * tokens + 3 k + 1 of logits (batch * tokens, A)), over its real steps; each term divided by
/// the batch's real steps N (every window counts them itself, in a fixed order), so that the
/// windows' loss[b] sum to the batch mean. correct[b]: the same sum of 1(argmax = a_k).
/// d_logits (batch * tokens, A): the gradient of the batch mean (zero on other rows), or null.
FH_HD void action_loss_window(int b, float* loss, float* correct, float* d_logits, const float* logits,
                              const int* actions, const int* lengths, int batch, int context, int num_actions) {
    long long n = 0;
    for (int i = 0; i < batch; ++i) n += lengths[i];
    const float inv_n = 1.0f / static_cast<float>(n > 0 ? n : 1);
    const int tokens = context * kTokensPerStep;
    float l = 0.0f, hit = 0.0f;
    if (d_logits != nullptr)
        for (long long e = 0; e < static_cast<long long>(tokens) * num_actions; ++e)
            d_logits[static_cast<long long>(b) * tokens * num_actions + e] = 0.0f;
    for (int k = 0; k < lengths[b]; ++k) {
        const long long row = static_cast<long long>(b) * tokens + k * kTokensPerStep + kStateToken;
        const float* z = logits + row * num_actions;
        const int a = actions[static_cast<long long>(b) * context + k];
        int best = 0;
        for (int c = 1; c < num_actions; ++c)
            if (z[c] > z[best]) best = c;
        const float m = z[best];
        float sum = 0.0f;
        for (int c = 0; c < num_actions; ++c) sum += expf(z[c] - m);
        l += (m + logf(sum) - z[a]) * inv_n;
        hit += (best == a ? 1.0f : 0.0f) * inv_n;
        if (d_logits != nullptr) {
            float* d = d_logits + row * num_actions;
            for (int c = 0; c < num_actions; ++c) d[c] = (expf(z[c] - m) / sum - (c == a ? 1.0f : 0.0f)) * inv_n;
        }
    }
    loss[b] = l;
    correct[b] = hit;
}

/// The learning rate at update `step` (>= 1): lr * min(1, step / warmup) (warmup 0: lr).
FH_HD float warmup_learning_rate(double lr, long long warmup, long long step) {
    if (warmup <= 0 || step >= warmup) return static_cast<float>(lr);
    return static_cast<float>(lr * static_cast<double>(step) / static_cast<double>(warmup));
}

// ---- acting with the KV cache ----------------------------------------------------------------
// Each act() appends one timestep per environment: the tokens a_{t-1}, R_t, s_t (history indices
// 3t - 1, 3t, 3t + 1; a_{t-1} does not exist at t = 0) as rows 3 e + r of the step's token rows.
// Every layer's keys and values of the last span + 1 timesteps stay in a ring of
// cache_slots(span) tokens per environment (token j in slot j % slots): a_{t-1} still needs
// R_{t-span}, which R_t's slot would overwrite in a ring of 3 span.

FH_HD int cache_slots(int span) {
    return kTokensPerStep * (span + 1);
}

/// Per environment: the timestep t since the history's start, and the action taken at t - 1.
struct History {
    int step;
    int prev_action;
};

/// Column of the portfolio features' "time left" (docs/environment.md): 1 at an episode's first
/// step (the backtest wraps its step count at the episode length).
constexpr int kTimeLeftFeature = 6;

struct ActParams {
    int state_dim, market_dim, dim, heads, span, num_actions;
    const float* target_token;  ///< the return-to-go token every step conditions on (calibration [0])
};

/// Environment e: starts its history over at an episode's first step (time left = 1), then writes
/// its three token rows x (3 n, dim) from the state projection s_proj (n, dim).
FH_HD void act_tokens(int e, float* x, History* hist, const float* states, const float* s_proj, const EmbedParams& p,
                      const ActParams& a) {
    History& h = hist[e];
    if (states[static_cast<long long>(e) * a.state_dim + a.market_dim + kTimeLeftFeature] >= 1.0f) h = History{0, 0};
    const long long r0 = static_cast<long long>(e) * kTokensPerStep;
    embed_token(x + r0 * a.dim, kActionToken, 0.0f, s_proj, h.prev_action, p.return_w, p.return_b, p.action_table,
                a.dim);
    embed_token(x + (r0 + 1) * a.dim, kReturnToken, a.target_token[0], s_proj, 0, p.return_w, p.return_b,
                p.action_table, a.dim);
    embed_token(x + (r0 + 2) * a.dim, kStateToken, 0.0f, s_proj + static_cast<long long>(e) * a.dim, 0, p.return_w,
                p.return_b, p.action_table, a.dim);
}

/// The history index of environment e's new token r (0: a_{t-1}, 1: R_t, 2: s_t); -1 for the
/// a_{t-1} of a history's first step (no such token).
FH_HD long long new_token_index(const History& h, int r) {
    return static_cast<long long>(h.step) * kTokensPerStep - 1 + r;
}

/// Writes new token r of environment e: its k and v (from qkv rows (3 n, 3 dim)) into the layer's
/// cache (n, slots, 2 dim) = [k | v] per slot.
FH_HD void cache_write(int e, int r, float* cache, const float* qkv, const History* hist, const ActParams& a) {
    const long long j = new_token_index(hist[e], r);
    if (j < 0) return;
    const int slots = cache_slots(a.span);
    const float* src = qkv + (static_cast<long long>(e) * kTokensPerStep + r) * 3 * a.dim;
    float* dst = cache + (static_cast<long long>(e) * slots + j % slots) * 2 * a.dim;
    for (int c = 0; c < 2 * a.dim; ++c) dst[c] = src[a.dim + c];
}

/// Attention of new token r of environment e in head h over the cached keys and values (after
/// cache_write): out rows (3 n, dim). The a_{t-1} of a first step gets zeros (it is not cached
/// and nothing reads its output).
FH_HD void cache_attend(int e, int h, int r, float* out, const float* cache, const float* qkv, const History* hist,
                        const ActParams& a) {
    const int hd = a.dim / a.heads, slots = cache_slots(a.span);
    const long long row = static_cast<long long>(e) * kTokensPerStep + r;
    const long long i = new_token_index(hist[e], r);
    float* o = out + row * a.dim + h * hd;
    if (i < 0) {
        for (int c = 0; c < hd; ++c) o[c] = 0.0f;
        return;
    }
    const float* base = cache + static_cast<long long>(e) * slots * 2 * a.dim;
    auto keys = [&](long long j) { return base + (j % slots) * 2 * a.dim + h * hd; };
    auto values = [&](long long j) { return base + (j % slots) * 2 * a.dim + a.dim + h * hd; };
    attend(o, static_cast<float*>(nullptr), 0, qkv + row * 3 * a.dim + h * hd, i, first_visible(i, a.span), hd,
           alibi_slope(h, a.heads), keys, values);
}

/// Environment e's action: the most likely under the logits of its s_t row (logits (3 n, A));
/// remembered as the next step's a_{t-1}, and the history advances one timestep.
FH_HD void act_select(int e, int* actions, History* hist, const float* logits, int num_actions) {
    const float* z = logits + (static_cast<long long>(e) * kTokensPerStep + 2) * num_actions;
    int best = 0;
    for (int c = 1; c < num_actions; ++c)
        if (z[c] > z[best]) best = c;
    actions[e] = best;
    hist[e].prev_action = best;
    hist[e].step += 1;
}

}  // namespace fh::dt
