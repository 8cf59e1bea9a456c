/// @file dt_act.h
/// @brief The Decision Transformer acting one timestep at a time with its KV cache (math in
///        math/dt.h) and the signatures of its kernels in cuda/kernels/dt_act.cu. CPU twins:
///        src/ops/dt/cpu.cpp.
#pragma once

// dt_model.h's host part must not reach the kernel table before this header's kernel list exists.
#pragma push_macro("FH_INCLUDING_KERNEL_LISTS")
#define FH_INCLUDING_KERNEL_LISTS
#include "abi/dt_model.h"
#pragma pop_macro("FH_INCLUDING_KERNEL_LISTS")

namespace fh::ops {

/// Acting, one timestep for n environments: their histories (start over at an episode's first
/// step) and the token rows x (3 n, dim) a_{t-1}, R_t, s_t (dt::act_tokens); states (n,
/// state_dim), s_proj (n, dim).
struct DtActTokens {
    View<float> x;
    View<dt::History> hist;
    View<const float> states, s_proj;
    DtEmbedViews weights;
    dt::ActParams params;
};

/// One layer of acting: the step's keys and values (qkv (3 n, 3 dim)) into the layer's cache
/// (n, dt::cache_slots(span), 2 dim), then every new token's attention over the cache into out
/// (3 n, dim) (dt::cache_write, dt::cache_attend).
struct DtCacheAttention {
    View<float> out, cache;
    View<const float> qkv;
    View<const dt::History> hist;
    dt::ActParams params;
};

/// The step's actions (n): the most likely under each environment's s_t logits (logits (3 n, A));
/// the histories advance one timestep.
struct DtActSelect {
    View<int> actions;
    View<dt::History> hist;
    View<const float> logits;
    int num_actions;
};

}  // namespace fh::ops

namespace fh::abi {

/// Per environment: dt::act_tokens; x (3 n, dim), hist (n), states (n, state_dim), s_proj (n, dim).
using DtActTokens = void(float* __restrict__ x, dt::History* __restrict__ hist, const float* __restrict__ states,
                         const float* __restrict__ s_proj, dt::EmbedParams embed, dt::ActParams params, int n);
/// Per (environment, new token): dt::cache_write into one layer's cache (n, slots, 2 dim).
using DtCacheWrite = void(float* __restrict__ cache, const float* __restrict__ qkv,
                          const dt::History* __restrict__ hist, dt::ActParams params, int n);
/// Per (environment, head, new token): dt::cache_attend; out (3 n, dim).
using DtCacheAttend = void(float* __restrict__ out, const float* __restrict__ cache, const float* __restrict__ qkv,
                           const dt::History* __restrict__ hist, dt::ActParams params, int n);
/// Per environment: dt::act_select; actions (n), logits (3 n, A).
using DtActSelect = void(int* __restrict__ actions, dt::History* __restrict__ hist, const float* __restrict__ logits,
                         int num_actions, int n);

}  // namespace fh::abi

#define FH_KERNELS_dt_act(FH_KERNEL)                         \
    FH_KERNEL(dt_act, dt_act_tokens_kernel, DtActTokens)     \
    FH_KERNEL(dt_act, dt_cache_write_kernel, DtCacheWrite)   \
    FH_KERNEL(dt_act, dt_cache_attend_kernel, DtCacheAttend) \
    FH_KERNEL(dt_act, dt_act_select_kernel, DtActSelect)

#ifndef __CUDACC__
#include "ops/op_begin.hpp"

namespace detail {
inline void check_act(const dt::ActParams& a, const char* op) {
    require(a.dim >= a.heads && a.heads >= 1 && a.dim % a.heads == 0 && a.span >= 1 && a.num_actions >= 1 &&
                a.state_dim > a.market_dim + dt::kTimeLeftFeature,
            op, "bad acting parameters (dim a multiple of heads, span >= 1, states with portfolio features)");
}
}  // namespace detail

inline void check(const DtActTokens& a) {
    const auto& [x, hist, states, s_proj, w, p] = a;
    const char* op = "dt_act_tokens";
    detail::check_embed(w, op);
    detail::check_act(p, op);
    const std::size_t n = hist.size(), D = static_cast<std::size_t>(p.dim);
    detail::require(n >= 1 && p.dim == w.dim, op, "no environments, or the embedding width differs");
    detail::require_size(x.size(), n * dt::kTokensPerStep * D, op, "x");
    detail::require_size(states.size(), n * static_cast<std::size_t>(p.state_dim), op, "states");
    detail::require_size(s_proj.size(), n * D, op, "s_proj");
    detail::checked_int_size(x.size(), op);
    detail::require_distinct(op, {FH_RANGES(x, hist, states, s_proj)});
}
FH_LAUNCH(DtActTokens) {
    const auto n = static_cast<int>(a.hist.size());
    gpu.kernels().dt_act_tokens_kernel(gpu.stream(), dt_threads(n), a.x.data(), a.hist.data(), a.states.data(),
                                       a.s_proj.data(), embed_params(a.weights), a.params, n);
}

inline void check(const DtCacheAttention& a) {
    const auto& [out, cache, qkv, hist, p] = a;
    const char* op = "dt_cache_attention";
    detail::check_act(p, op);
    const std::size_t n = hist.size(), D = static_cast<std::size_t>(p.dim);
    detail::require(n >= 1, op, "no environments");
    detail::require_size(out.size(), n * dt::kTokensPerStep * D, op, "out");
    detail::require_size(qkv.size(), n * dt::kTokensPerStep * 3 * D, op, "qkv");
    detail::require_size(cache.size(), n * static_cast<std::size_t>(dt::cache_slots(p.span)) * 2 * D, op, "cache");
    detail::checked_int_size(cache.size(), op);
    detail::require_distinct(op, {FH_RANGES(out, cache, qkv, hist)});
}
/// The write (a thread per (environment, new token)), then the attention (per (environment, head,
/// new token)).
FH_LAUNCH(DtCacheAttention) {
    const auto n = static_cast<int>(a.hist.size());
    gpu.kernels().dt_cache_write_kernel(gpu.stream(), dt_threads(static_cast<long long>(n) * dt::kTokensPerStep),
                                        a.cache.data(), a.qkv.data(), a.hist.data(), a.params, n);
    gpu.kernels().dt_cache_attend_kernel(gpu.stream(),
                                         dt_threads(static_cast<long long>(n) * a.params.heads * dt::kTokensPerStep),
                                         a.out.data(), a.cache.data(), a.qkv.data(), a.hist.data(), a.params, n);
}

inline void check(const DtActSelect& a) {
    const auto& [actions, hist, logits, num_actions] = a;
    const char* op = "dt_act_select";
    const std::size_t n = hist.size();
    detail::require(n >= 1 && num_actions >= 1, op, "empty shape");
    detail::require_size(actions.size(), n, op, "actions");
    detail::require_size(logits.size(), n * dt::kTokensPerStep * static_cast<std::size_t>(num_actions), op, "logits");
    detail::checked_int_size(logits.size(), op);
    detail::require_distinct(op, {FH_RANGES(actions, hist, logits)});
}
FH_LAUNCH(DtActSelect) {
    const auto n = static_cast<int>(a.hist.size());
    gpu.kernels().dt_act_select_kernel(gpu.stream(), dt_threads(n), a.actions.data(), a.hist.data(), a.logits.data(),
                                       a.num_actions, n);
}

#include "ops/op_end.hpp"
#endif
