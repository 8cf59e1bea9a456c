/// @file dt_act.h
/// @brief Signatures of cuda/kernels/dt_act.cu: the Decision Transformer acting one timestep at a
///        time with its KV cache (math in math/dt.h).
#pragma once

#include "math/dt.h"

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
