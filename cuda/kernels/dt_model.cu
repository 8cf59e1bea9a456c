/* dt_model.cu — the Decision Transformer's layers (docs/dt.md): the state input, token embeddings, layer norm,
 *              GELU, causal attention with ALiBi biases, and their backwards.
 *
 * Math:        math/dt.h (state_input_element, embed_row, embed_backward_element, layer_norm_row,
 *              layer_norm_backward_row, layer_norm_param_grad, gelu, gelu_derivative,
 *              attention_query, attention_backward_query, attention_backward_key). CPU twins in
 *              src/ops/dt/cpu.cpp.
 * Layout:      token rows (batch * 3 K, dim) row-major; qkv rows (.., 3 dim) = [q | k | v];
 *              P and dS (batch, heads, tokens, tokens).
 * Launch:      one thread per row / element / (b, h, token), any 1-D grid (grid-stride loops);
 *              the layer norm's parameter gradients: a block of dt::kParamGradThreads per feature.
 * Determinism: no atomics; every sum (over a row's features, a query's keys or a key's queries)
 *              runs in one thread in a fixed order, a parameter's rows in a block's fixed
 *              partials and tree (the CPU twin's order too), so results are
 *              run-to-run exact; they equal the CPU within float rounding (FMA contraction,
 *              expf/erff ulps).
 * Aliasing:    outputs distinct from every other operand (checked by the ops' checks, cuda/abi/dt_model.h).
 * Signatures:  cuda/abi/dt_model.h.
 */
#include "abi/dt_model.h"
#include "device_functions.cuh"

using fh::device::global_thread_index;
using fh::device::grid_thread_count;

extern "C" __global__ void dt_embed_kernel(float* __restrict__ x, const float* __restrict__ rtg,
                                           const float* __restrict__ s_proj, const int* __restrict__ actions,
                                           fh::dt::EmbedParams params, long long steps) {
    for (long long r = global_thread_index(); r < steps * fh::dt::kTokensPerStep; r += grid_thread_count())
        fh::dt::embed_row(r, x, rtg, s_proj, actions, params);
}

extern "C" __global__ void dt_embed_backward_kernel(float* __restrict__ d_return_w, float* __restrict__ d_return_b,
                                                    float* __restrict__ d_action_table, float* __restrict__ d_s_proj,
                                                    const float* __restrict__ dx, const float* __restrict__ rtg,
                                                    const int* __restrict__ actions, long long steps, int dim,
                                                    int num_actions) {
    const long long n = fh::dt::embed_backward_elements(steps, dim, num_actions);
    for (long long i = global_thread_index(); i < n; i += grid_thread_count())
        fh::dt::embed_backward_element(i, d_return_w, d_return_b, d_action_table, d_s_proj, dx, rtg, actions, steps,
                                       dim, num_actions);
}

extern "C" __global__ void dt_state_input_kernel(float* __restrict__ out, const float* __restrict__ states, long long n,
                                                 int state_dim, int market_dim) {
    for (long long i = global_thread_index(); i < n; i += grid_thread_count())
        fh::dt::state_input_element(i, out, states, state_dim, market_dim);
}

extern "C" __global__ void dt_layer_norm_kernel(float* __restrict__ y, float* __restrict__ stats,
                                                const float* __restrict__ x, const float* __restrict__ gain,
                                                const float* __restrict__ bias, long long rows, int dim) {
    for (long long r = global_thread_index(); r < rows; r += grid_thread_count())
        fh::dt::layer_norm_row(r, y, stats, x, gain, bias, dim);
}

extern "C" __global__ void dt_layer_norm_backward_kernel(float* __restrict__ dx, const float* __restrict__ dy,
                                                         const float* __restrict__ x, const float* __restrict__ stats,
                                                         const float* __restrict__ gain, long long rows, int dim,
                                                         int accumulate) {
    for (long long r = global_thread_index(); r < rows; r += grid_thread_count())
        fh::dt::layer_norm_backward_row(r, dx, dy, x, stats, gain, dim, accumulate);
}

// One block of kParamGradThreads per feature (grid-stride over the features): every thread sums
// its rows (dt::layer_norm_param_grad_partial), then a fixed tree; the order of
// dt::layer_norm_param_grad.
extern "C" __global__ void dt_layer_norm_param_grad_kernel(float* __restrict__ d_gain, float* __restrict__ d_bias,
                                                           const float* __restrict__ dy, const float* __restrict__ x,
                                                           const float* __restrict__ stats, long long rows, int dim) {
    constexpr int T = fh::dt::kParamGradThreads;
    __shared__ float sg[T], sb[T];
    const int t = threadIdx.x;
    for (int c = blockIdx.x; c < dim; c += gridDim.x) {
        float g, b;
        fh::dt::layer_norm_param_grad_partial(c, t, g, b, dy, x, stats, rows, dim);
        sg[t] = g;
        sb[t] = b;
        __syncthreads();
        for (int stride = T / 2; stride > 0; stride /= 2) {
            if (t < stride) {
                sg[t] += sg[t + stride];
                sb[t] += sb[t + stride];
            }
            __syncthreads();
        }
        if (t == 0) {
            d_gain[c] = sg[0];
            d_bias[c] = sb[0];
        }
        __syncthreads();
    }
}

extern "C" __global__ void dt_gelu_kernel(float* __restrict__ y, const float* __restrict__ z, long long n) {
    for (long long i = global_thread_index(); i < n; i += grid_thread_count()) y[i] = fh::dt::gelu(z[i]);
}

extern "C" __global__ void dt_gelu_backward_kernel(float* __restrict__ dz, const float* __restrict__ dy,
                                                   const float* __restrict__ z, long long n) {
    for (long long i = global_thread_index(); i < n; i += grid_thread_count())
        dz[i] = dy[i] * fh::dt::gelu_derivative(z[i]);
}

namespace {
// f(b, h, i) for every batch row b, head h and token i of `s`: a grid-stride loop over their flat
// index (i fastest).
template <class F>
__device__ __forceinline__ void for_each_bhi(const fh::dt::AttentionShape& s, F f) {
    const long long n = static_cast<long long>(s.batch) * s.heads * s.tokens;
    for (long long t = global_thread_index(); t < n; t += grid_thread_count())
        f(static_cast<int>(t / (static_cast<long long>(s.tokens) * s.heads)),
          static_cast<int>((t / s.tokens) % s.heads), static_cast<int>(t % s.tokens));
}
}  // namespace

extern "C" __global__ void dt_attention_kernel(float* __restrict__ out, float* __restrict__ P,
                                               const float* __restrict__ qkv, fh::dt::AttentionShape shape) {
    for_each_bhi(shape, [=](int b, int h, int i) { fh::dt::attention_query(b, h, i, out, P, qkv, shape); });
}

extern "C" __global__ void dt_attention_backward_query_kernel(float* __restrict__ dqkv, float* __restrict__ dS,
                                                              const float* __restrict__ d_out,
                                                              const float* __restrict__ qkv,
                                                              const float* __restrict__ P,
                                                              fh::dt::AttentionShape shape) {
    for_each_bhi(
        shape, [=](int b, int h, int i) { fh::dt::attention_backward_query(b, h, i, dqkv, dS, d_out, qkv, P, shape); });
}

extern "C" __global__ void dt_attention_backward_key_kernel(float* __restrict__ dqkv, const float* __restrict__ dS,
                                                            const float* __restrict__ d_out,
                                                            const float* __restrict__ qkv, const float* __restrict__ P,
                                                            fh::dt::AttentionShape shape) {
    for_each_bhi(shape,
                 [=](int b, int h, int j) { fh::dt::attention_backward_key(b, h, j, dqkv, dS, d_out, qkv, P, shape); });
}

FH_KERNELS_dt_model(FH_CHECK_KERNEL_ABI)
