/* dt_act.cu — the Decision Transformer acting one timestep per call with a KV cache (docs/dt.md).
 *
 * Math:        dt::act_tokens, dt::cache_write, dt::cache_attend, dt::act_select in math/dt.h.
 *              CPU twins in src/ops/dt/cpu.cpp.
 * Layout:      the step's token rows (3 n, dim): rows 3 e .. 3 e + 2 = a_{t-1}, R_t, s_t of
 *              environment e; one layer's cache (n, 3 (K + 1), 2 dim) = [k | v] per token slot.
 * Launch:      one thread per environment / (environment, token) / (environment, head, token).
 * Determinism: no atomics, fixed-order sums in one thread; equal to the CPU within float rounding.
 * Aliasing:    outputs distinct from every other operand (checked by the ops).
 * Signatures:  cuda/abi/dt_act.h.
 */
#include "abi/dt_act.h"
#include "device_functions.cuh"

using fh::device::global_thread_index;
using fh::device::grid_thread_count;

extern "C" __global__ void dt_act_tokens_kernel(float* __restrict__ x, fh::dt::History* __restrict__ hist,
                                                const float* __restrict__ states, const float* __restrict__ s_proj,
                                                fh::dt::EmbedParams embed, fh::dt::ActParams params, int n) {
    for (long long e = global_thread_index(); e < n; e += grid_thread_count())
        fh::dt::act_tokens(static_cast<int>(e), x, hist, states, s_proj, embed, params);
}

extern "C" __global__ void dt_cache_write_kernel(float* __restrict__ cache, const float* __restrict__ qkv,
                                                 const fh::dt::History* __restrict__ hist, fh::dt::ActParams params,
                                                 int n) {
    const long long count = static_cast<long long>(n) * fh::dt::kTokensPerStep;
    for (long long t = global_thread_index(); t < count; t += grid_thread_count())
        fh::dt::cache_write(static_cast<int>(t / fh::dt::kTokensPerStep), static_cast<int>(t % fh::dt::kTokensPerStep),
                            cache, qkv, hist, params);
}

extern "C" __global__ void dt_cache_attend_kernel(float* __restrict__ out, const float* __restrict__ cache,
                                                  const float* __restrict__ qkv,
                                                  const fh::dt::History* __restrict__ hist, fh::dt::ActParams params,
                                                  int n) {
    const long long per_env = static_cast<long long>(params.heads) * fh::dt::kTokensPerStep;
    for (long long t = global_thread_index(); t < n * per_env; t += grid_thread_count()) {
        const int e = static_cast<int>(t / per_env);
        const int h = static_cast<int>((t % per_env) / fh::dt::kTokensPerStep);
        const int r = static_cast<int>(t % fh::dt::kTokensPerStep);
        fh::dt::cache_attend(e, h, r, out, cache, qkv, hist, params);
    }
}

extern "C" __global__ void dt_act_select_kernel(int* __restrict__ actions, fh::dt::History* __restrict__ hist,
                                                const float* __restrict__ logits, int num_actions, int n) {
    for (long long e = global_thread_index(); e < n; e += grid_thread_count())
        fh::dt::act_select(static_cast<int>(e), actions, hist, logits, num_actions);
}

FH_KERNELS_dt_act(FH_CHECK_KERNEL_ABI)
