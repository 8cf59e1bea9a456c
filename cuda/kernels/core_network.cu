/* core_network.cu — the elementwise and reduction parts of the MLP building blocks and Adam
 * (the matrix products are cuBLASLt / cuBLAS GEMMs issued by src/device/cuda_linear.cpp).
 *
 * Math:        bias+act forward  y[r,j] = act(y[r,j] + b[j])          (core::activate)
 *              act + bias grad   dy[i] = dy[i] * act'(y[i]) in place  (core::activation_derivative)
 *                                and db[j] (+)= sum_r dy[r,j]
 *              global norm       out = sqrt(sum_i x[i]^2); with the guard (nn::guard_decide) in
 *                                the last block: the norm and guard of an update's tail, one launch
 *              Adam              g = grad * min(1, clip / (norm + 1e-6)); m = b1 m + (1-b1) g;
 *                                v = b2 v + (1-b2) g^2; p -= lr (mhat / (sqrt(vhat) + eps) + wd p)
 *                                (core::clip_scale, core::adam_element; bias corrections from the host, or
 *                                core::at_step of the update number in device memory)
 *              BF16 operands     dst[i] = core::bf16_bits(src[i]) (gpu.precision = "bf16": the
 *                                operands of the cuBLAS products; the head backward and the fused
 *                                MLP inference round theirs with core::round_to_bf16 as they load)
 * Layout:      row-major; y, dy (batch, out); b, db (out); partials (slices, out) and tickets
 *              (ceil(out / 32), zero between launches) for the bias gradient, (kNormBlocks) for the norm; x, params, m,
 * v, grads (n) flat; out, grad_norm, gate (1). Launch:      bias+act: 1-D grid-stride, any grid (over quads of four
 * columns when abi::bias_act_quads, else over elements). Adam: abi::adam_blocks blocks of abi::kAdamThreads, a thread
 * per element, or per four by float4 in network_adam_by4_kernel where abi::adam_vectorized says so. Act + bias grad:
 * block (32, kBiasGradRows), grid (ceil(out / 32), slices); with several slices the last block of each column group
 *              sums them. Norm: partials with exactly kNormBlocks x kNormThreads, then finish with
 *              one block of kNormThreads. A population's norm and guard and Adam
 *              (network_norm_guard_agents_kernel, network_adam_agents_kernel): the single
 *              kernels' grids in x, one agent per blockIdx.y, each on its slices. The split weight
 *              gradients' reduce (network_split_k_reduce_kernel): grid-stride over the networks'
 *              elements, each summing its slices' partials in slice order.
 * Determinism: run-to-run exact. No float atomics: the bias gradient sums each column's rows in
 *              row order per thread, then the block's threads in a fixed tree; with several
 *              slices, the last block of a column group to finish (an integer ticket decides
 *              which, not the order of the sum) adds the slices in a fixed strided order and a
 *              fixed tree; the norm reduces a fixed grid (independent of the device's SM count)
 *              in a fixed tree order, in double. Adam equals the CPU twin bit for bit (its
 *              element rounds every product and sum on its own: core::mul_rn, add_rn); the other
 *              elementwise math matches the CPU twins (src/device/cpu_device.cpp) up to FMA
 *              contraction and tanh's last bits, hence the tolerances of the tests; sums differ
 *              from the CPU's sequential sums by order only.
 * Aliasing:    pointers are __restrict__: y/b, dy/db/partials/y, partials/x, out/partials and the
 *              six Adam buffers must be distinct (tickets too); Device (src/device/device.cpp) checks it before
 *              launching. In-place updates (bias+act on y, act backward on dy) are single pointers.
 * Gate:        Adam does nothing when *gate == 0 (the training guard's skip, no host sync).
 * Signatures:  cuda/abi/core_network.h (checked below).
 * CPU twin:    src/device/cpu_device.cpp (+ src/device/linear_reference.hpp); tests: tests/ops/test_nn_ops*.cpp
 *              and tests/nn/.
 */
#include "abi/core_network.h"
#include "device_functions.cuh"

using fh::core::Activation;
using fh::device::global_thread_index;
using fh::device::grid_thread_count;

namespace {

/// A matrix product's operand: x, or with round_bf16 (gpu.precision = "bf16") x rounded to BF16.
__device__ __forceinline__ float round_operand(float x, int round_bf16) {
    return round_bf16 ? fh::core::round_to_bf16(x) : x;
}

/// network_bias_act_forward_kernel's pass over one network's y (the grid's x dimension).
__device__ __forceinline__ void bias_act(float* __restrict__ y, const float* __restrict__ b, Activation act, int batch,
                                         int out) {
    const long long total = static_cast<long long>(batch) * out;
    if (fh::abi::bias_act_quads(y, b, out, total)) {
        // Four columns of a row at a time: 16-byte loads and stores, the column found with one
        // 32-bit remainder per four elements; each element's math is the scalar loop's.
        float4* __restrict__ y4 = reinterpret_cast<float4*>(y);
        const float4* __restrict__ b4 = reinterpret_cast<const float4*>(b);
        const unsigned quads = static_cast<unsigned>(total / 4), out4 = static_cast<unsigned>(out / 4);
        const unsigned stride = static_cast<unsigned>(grid_thread_count());
        for (unsigned i = static_cast<unsigned>(global_thread_index()); i < quads; i += stride) {
            float4 v = y4[i];
            if (b4 != nullptr) {
                const float4 c = b4[i % out4];
                v.x += c.x;
                v.y += c.y;
                v.z += c.z;
                v.w += c.w;
            }
            v.x = fh::core::activate(v.x, act);
            v.y = fh::core::activate(v.y, act);
            v.z = fh::core::activate(v.z, act);
            v.w = fh::core::activate(v.w, act);
            y4[i] = v;  // i + stride < 2^32: quads and the thread count are below 2^31
        }
        return;
    }
    for (long long i = global_thread_index(); i < total; i += grid_thread_count()) {
        const int j = static_cast<int>(i % out);
        const float z = b != nullptr ? y[i] + b[j] : y[i];
        y[i] = fh::core::activate(z, act);
    }
}

}  // namespace

extern "C" __global__ void network_bias_act_forward_kernel(float* __restrict__ y, const float* __restrict__ b,
                                                           Activation act, int batch, int out) {
    bias_act(y, b, act, batch, out);
}

extern "C" __global__ void network_bias_act_forward_batched_kernel(float* __restrict__ y, const float* __restrict__ b,
                                                                   Activation act, int batch, int out,
                                                                   long long b_stride) {
    const long long z = blockIdx.z;  // this block's network
    bias_act(y + z * batch * out, b == nullptr ? nullptr : b + z * b_stride, act, batch, out);
}

namespace {

/// v[0..V) = p[0..V), one 16- or 8-byte shared-memory load (p aligned to it).
template <int V>
__device__ __forceinline__ void load_vec(float* v, const float* p) {
    if constexpr (V == 4) {
        const float4 t = *reinterpret_cast<const float4*>(p);
        v[0] = t.x, v[1] = t.y, v[2] = t.z, v[3] = t.w;
    } else {
        const float2 t = *reinterpret_cast<const float2*>(p);
        v[0] = t.x, v[1] = t.y;
    }
}

/// One float from global to shared memory without passing through registers (cp.async, sm_80+);
/// when !valid nothing is read and the word is set to zero (the copy's zero fill).
__device__ __forceinline__ void copy_async_float(float* dst, const float* src, bool valid) {
    const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src), "r"(valid ? 4 : 0));
}
__device__ __forceinline__ void copy_async_commit() {
    asm volatile("cp.async.commit_group;\n" ::);
}
/// Waits until at most `pending` of this thread's committed copy groups are still in flight.
template <int pending>
__device__ __forceinline__ void copy_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(pending));
}

/// network_linear_narrow_<TM>_kernel (cuda/abi/core_network.h): a tile of T = 16 TM rows by T
/// columns per block, TM x TM outputs per thread. A thread's rows (and columns) are groups of V
/// adjacent ones, 16 V apart, so that its shared-memory reads are vector loads without bank
/// conflicts and its stores cover whole spans of a row with the other threads of its half-warp.
/// The inputs come in chunks of C by cp.async copies (no registers) into NB shared buffers
/// (dynamic shared memory, abi::linear_narrow_smem_bytes): with two (the 128-row tile) the copies
/// of chunk c + 1 are in flight while the block sums chunk c.
template <int TM>
__device__ __forceinline__ void linear_narrow(float* __restrict__ y, const float* __restrict__ x,
                                              const float* __restrict__ w, const float* __restrict__ b, Activation act,
                                              int batch, int in, int out, long long x_stride, long long w_stride) {
    constexpr int V = TM < 4 ? TM : 4;
    constexpr int T = 16 * TM;
    constexpr int C = fh::abi::kLinearNarrowChunk;
    constexpr int L = fh::abi::linear_narrow_row(T);
    constexpr int NB = fh::abi::linear_narrow_buffers(T);
    extern __shared__ __align__(16) float narrow_smem[];
    // Buffer u: xs(u)[k * L + r] = x[row0 + r, k0 + k], ws(u)[k * L + c] = W[col0 + c, k0 + k].
    const auto xs = [&](int u) { return narrow_smem + u * 2 * C * L; };
    const auto ws = [&](int u) { return narrow_smem + u * 2 * C * L + C * L; };
    const long long z = blockIdx.z;
    x += z * x_stride;
    w += z * w_stride;
    if (b != nullptr) b += z * w_stride;
    y += z * static_cast<long long>(batch) * out;
    const int row0 = static_cast<int>(blockIdx.x) * T, col0 = static_cast<int>(blockIdx.y) * T;
    const int tx = static_cast<int>(threadIdx.x) % 16, ty = static_cast<int>(threadIdx.x) / 16;
    const int chunks = (in + C - 1) / C;
    // A warp stages one row's (and one column's) inputs per step: lane k copies input k0 + k, so
    // a warp's reads are one contiguous span. Rows past the batch (columns past out) are zero.
    static_assert(C == 32, "a lane per staged input");
    const auto stage = [&](int chunk) {
        if (chunk < chunks) {
            const int k0 = chunk * C, k = static_cast<int>(threadIdx.x) % 32;
            float* xd = xs(chunk % NB);
            float* wd = ws(chunk % NB);
            if (k < in - k0)
#pragma unroll 4
                for (int r = static_cast<int>(threadIdx.x) / 32; r < T; r += fh::abi::kLinearNarrowThreads / 32) {
                    const bool xv = row0 + r < batch, wv = col0 + r < out;
                    copy_async_float(xd + k * L + r, x + (xv ? static_cast<long long>(row0 + r) * in + k0 + k : 0), xv);
                    copy_async_float(wd + k * L + r, w + (wv ? static_cast<long long>(col0 + r) * in + k0 + k : 0), wv);
                }
        }
        copy_async_commit();  // a group per chunk, empty past the last: the wait below counts groups
    };
    stage(0);
    if constexpr (NB == 2) stage(1);
    float acc[TM][TM];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TM; ++j) acc[i][j] = 0.f;
    for (int chunk = 0; chunk < chunks; ++chunk) {
        copy_async_wait<NB - 1>();  // this chunk's group is done (the next one may still be in flight)
        __syncthreads();            // ... for every thread's copies
        const int kn = min(C, in - chunk * C);
        const float* xc = xs(chunk % NB);
        const float* wc = ws(chunk % NB);
        // The fragments of input k + 1 are loaded while input k's products are summed.
        const auto fetch = [&](float* a, float* c, int k) {
#pragma unroll
            for (int g = 0; g < TM / V; ++g) {
                load_vec<V>(a + g * V, xc + k * L + g * 16 * V + ty * V);
                load_vec<V>(c + g * V, wc + k * L + g * 16 * V + tx * V);
            }
        };
        const auto sum = [&](const float* a, const float* c) {
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TM; ++j) acc[i][j] = fmaf(a[i], c[j], acc[i][j]);
        };
        float a0[TM], c0[TM], a1[TM], c1[TM];
        fetch(a0, c0, 0);
        int k = 0;
        for (; k + 2 <= kn; k += 2) {
            fetch(a1, c1, k + 1);
            sum(a0, c0);
            if (k + 2 < kn) fetch(a0, c0, k + 2);
            sum(a1, c1);
        }
        if (k < kn) sum(a0, c0);  // an odd count: the last input's fragments are in a0, c0
        __syncthreads();          // every thread is done with this buffer before chunk + NB is copied into it
        stage(chunk + NB);
    }
    const bool vec4 = V == 4 && out % 4 == 0 && reinterpret_cast<unsigned long long>(y) % 16 == 0;
    float bias[TM];  // this thread's columns' biases (read only when b is not null)
#pragma unroll
    for (int j = 0; j < TM; ++j) {
        const int col = col0 + (j / V) * 16 * V + tx * V + j % V;
        bias[j] = b != nullptr && col < out ? b[col] : 0.f;
    }
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = row0 + (i / V) * 16 * V + ty * V + i % V;
        if (row >= batch) continue;
        float* yr = y + static_cast<long long>(row) * out;
#pragma unroll
        for (int g = 0; g < TM / V; ++g) {
            const int c0 = col0 + g * 16 * V + tx * V;
            float v[V];
#pragma unroll
            for (int e = 0; e < V; ++e) {
                const int col = c0 + e;
                const float s = acc[i][g * V + e];
                v[e] = col < out ? fh::core::activate(b != nullptr ? s + bias[g * V + e] : s, act) : 0.f;
            }
            if (vec4 && c0 + V <= out) {
                *reinterpret_cast<float4*>(yr + c0) = make_float4(v[0], v[1 % V], v[2 % V], v[3 % V]);
            } else {
#pragma unroll
                for (int e = 0; e < V; ++e)
                    if (c0 + e < out) yr[c0 + e] = v[e];
            }
        }
    }
}

}  // namespace

// One instance per tile: 32, 64 or 128 rows and columns (the host picks the largest that still
// gives the GPU enough blocks). Two blocks of the largest fit an SM's registers.
extern "C" __global__ void __launch_bounds__(fh::abi::kLinearNarrowThreads, 2)
    network_linear_narrow_8_kernel(float* __restrict__ y, const float* __restrict__ x, const float* __restrict__ w,
                                   const float* __restrict__ b, Activation act, int batch, int in, int out,
                                   long long x_stride, long long w_stride) {
    linear_narrow<8>(y, x, w, b, act, batch, in, out, x_stride, w_stride);
}
extern "C" __global__ void __launch_bounds__(fh::abi::kLinearNarrowThreads, 3)
    network_linear_narrow_4_kernel(float* __restrict__ y, const float* __restrict__ x, const float* __restrict__ w,
                                   const float* __restrict__ b, Activation act, int batch, int in, int out,
                                   long long x_stride, long long w_stride) {
    linear_narrow<4>(y, x, w, b, act, batch, in, out, x_stride, w_stride);
}
extern "C" __global__ void __launch_bounds__(fh::abi::kLinearNarrowThreads)
    network_linear_narrow_2_kernel(float* __restrict__ y, const float* __restrict__ x, const float* __restrict__ w,
                                   const float* __restrict__ b, Activation act, int batch, int in, int out,
                                   long long x_stride, long long w_stride) {
    linear_narrow<2>(y, x, w, b, act, batch, in, out, x_stride, w_stride);
}

namespace {

/// Sums sums[0..kBiasGradRows)[threadIdx.x] in a fixed tree into sums[0][threadIdx.x]. Every
/// thread of the block calls it.
__device__ void bias_rows_tree(float (&sums)[fh::abi::kBiasGradRows][32]) {
    __syncthreads();
    for (int stride = fh::abi::kBiasGradRows / 2; stride > 0; stride /= 2) {
        if (threadIdx.y < static_cast<unsigned>(stride))
            sums[threadIdx.y][threadIdx.x] += sums[threadIdx.y + stride][threadIdx.x];
        __syncthreads();
    }
}

/// bias_rows_tree for the first n of N arrays at once: one barrier per level for all of them,
/// each array summed in bias_rows_tree's order (the same floats as n trees one after another).
template <int N>
__device__ void bias_rows_trees(float (*sums)[fh::abi::kBiasGradRows][32], int n) {
    __syncthreads();
    for (int stride = fh::abi::kBiasGradRows / 2; stride > 0; stride /= 2) {
        if (threadIdx.y < static_cast<unsigned>(stride))
#pragma unroll
            for (int j = 0; j < N; ++j)
                if (j < n) sums[j][threadIdx.y][threadIdx.x] += sums[j][threadIdx.y + stride][threadIdx.x];
        __syncthreads();
    }
}

}  // namespace

namespace {

/// The bias-gradient kernels' work for one network (their pointers already at its blocks).
__device__ __forceinline__ void act_bias_grad(float* __restrict__ dy, float* __restrict__ db,
                                              float* __restrict__ partials, unsigned* __restrict__ tickets,
                                              const float* __restrict__ y, Activation act, int accumulate, int batch,
                                              int out, int rows_per_slice) {
    __shared__ float sums[fh::abi::kBiasGradRows][32];
    const int col = blockIdx.x * 32 + threadIdx.x;
    const long long row0 = static_cast<long long>(blockIdx.y) * rows_per_slice;
    long long row_end = row0 + rows_per_slice;
    if (row_end > batch) row_end = batch;
    float acc = 0.f;
    // dZ of row i, rounded before the sum (no FMA contraction): the same dZ, hence the same db, as
    // the activation's pass and the bias sums launched apart (ops::BackwardPart).
    const auto dz_of = [&](long long i, float d, float yv) {
        if (act == Activation::none) return d;
        const float dz = __fmul_rn(d, fh::core::activation_derivative(yv, act));
        dy[i] = dz;
        return dz;
    };
    constexpr int K = fh::abi::kBiasGradRows, U = 4;
    if (col < out) {
        long long r = row0 + threadIdx.y;
        // U of the thread's rows at a time, their loads issued together (a streaming pass needs
        // many bytes in flight), then summed in row order: the same sum as one row at a time.
        for (; r + (U - 1) * K < row_end; r += U * K) {
            float d[U], yv[U];
#pragma unroll
            for (int u = 0; u < U; ++u) d[u] = dy[(r + u * K) * out + col];
#pragma unroll
            for (int u = 0; u < U; ++u) yv[u] = act == Activation::none ? 0.f : y[(r + u * K) * out + col];
#pragma unroll
            for (int u = 0; u < U; ++u) acc += dz_of((r + u * K) * out + col, d[u], yv[u]);
        }
        for (; r < row_end; r += K) {
            const long long i = r * out + col;
            acc += dz_of(i, dy[i], act == Activation::none ? 0.f : y[i]);
        }
    }
    if (db == nullptr) return;  // dZ only (the same for the whole grid)
    sums[threadIdx.y][threadIdx.x] = acc;
    bias_rows_tree(sums);
    const bool writer = threadIdx.y == 0 && col < out;
    if (gridDim.y == 1) {
        if (writer) db[col] = accumulate ? db[col] + sums[0][threadIdx.x] : sums[0][threadIdx.x];
        return;
    }
    // Several slices: each block leaves its sums in partials; the last block of these 32
    // columns to finish (a ticket, integers only) sums the slices in a fixed order and resets
    // the ticket for the next launch.
    if (writer) partials[static_cast<long long>(blockIdx.y) * out + col] = sums[0][threadIdx.x];
    if (!fh::device::last_block_to_arrive(&tickets[blockIdx.x], gridDim.y)) return;
    float s = 0.f;  // slices threadIdx.y, threadIdx.y + kBiasGradRows, ... in order, then the tree
    if (col < out)
        for (unsigned k = threadIdx.y; k < gridDim.y; k += fh::abi::kBiasGradRows)
            s += __ldcg(&partials[static_cast<long long>(k) * out + col]);
    sums[threadIdx.y][threadIdx.x] = s;
    bias_rows_tree(sums);
    if (writer) db[col] = accumulate ? db[col] + sums[0][threadIdx.x] : sums[0][threadIdx.x];
    if (threadIdx.x == 0 && threadIdx.y == 0) tickets[blockIdx.x] = 0;
}

}  // namespace

// Two blocks of kBiasGradRows warps per SM (32 registers a thread) where an SM holds 2,048 threads:
// a streaming pass needs the whole SM's warps (sm_86 holds 1,536: one block).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 860
#define FH_BIAS_GRAD_BLOCKS_PER_SM 1
#else
#define FH_BIAS_GRAD_BLOCKS_PER_SM 2
#endif
extern "C" __global__ void __launch_bounds__(32 * fh::abi::kBiasGradRows, FH_BIAS_GRAD_BLOCKS_PER_SM)
    network_act_bias_grad_kernel(float* __restrict__ dy, float* __restrict__ db, float* __restrict__ partials,
                                 unsigned* __restrict__ tickets, const float* __restrict__ y, Activation act,
                                 int accumulate, int batch, int out, int rows_per_slice) {
    act_bias_grad(dy, db, partials, tickets, y, act, accumulate, batch, out, rows_per_slice);
}

extern "C" __global__ void __launch_bounds__(32 * fh::abi::kBiasGradRows, FH_BIAS_GRAD_BLOCKS_PER_SM)
    network_act_bias_grad_batched_kernel(float* __restrict__ dy, float* __restrict__ db, float* __restrict__ partials,
                                         unsigned* __restrict__ tickets, const float* __restrict__ y, Activation act,
                                         int accumulate, int batch, int out, int rows_per_slice, long long net_stride,
                                         long long db_stride) {
    const long long z = blockIdx.z;  // this block's network
    act_bias_grad(dy + z * net_stride, db == nullptr ? nullptr : db + z * db_stride,
                  partials == nullptr ? nullptr : partials + z * gridDim.y * out,
                  tickets == nullptr ? nullptr : tickets + z * gridDim.x, y + z * net_stride, act, accumulate, batch,
                  out, rows_per_slice);
}

// A value head's backward and its hidden layer's activation and bias backward in one pass over
// the hidden output (ABI: core_network.h). One block per SM with U rows' loads in flight per
// thread (three sums per thread do not fit the bias-gradient kernel's 32 registers).
extern "C" __global__ void __launch_bounds__(32 * fh::abi::kBiasGradRows, 1)
    network_scalar_head_backward_kernel(fh::abi::HeadBackwardArgs a) {
    __shared__ float hidden[fh::abi::kBiasGradRows][32], head[fh::abi::kBiasGradRows][32],
        head_b[fh::abi::kBiasGradRows][32];
    constexpr int K = fh::abi::kBiasGradRows, U = 8;
    const long long z = blockIdx.z;  // this block's network
    const int in = a.in;
    const long long slice_floats = fh::abi::head_backward_partial_floats(in, 1);
    float* __restrict__ dz = a.dz + z * a.x_stride;
    const float* __restrict__ x = a.x + z * a.x_stride;
    const float* __restrict__ dout = a.dout + z * a.batch;
    const int col = blockIdx.x * 32 + threadIdx.x;
    const bool sums_head_b = blockIdx.x == 0 && threadIdx.x == 0;
    const long long row0 = static_cast<long long>(blockIdx.y) * a.rows_per_slice;
    long long row_end = row0 + a.rows_per_slice;
    if (row_end > a.batch) row_end = a.batch;
    float acc_hidden = 0.f, acc_head = 0.f, acc_head_b = 0.f;
    if (col < in) {
        const float wj = round_operand(a.w[z * a.param_stride + col], a.round_bf16);
        // dZ of row i as network_act_bias_grad_kernel rounds it (each product rounded, no FMA
        // contraction), summed in the same row order: the hidden db's bits are the two passes'.
        const auto row = [&](long long r, float d, float xv) {
            const float dp = round_operand(d, a.round_bf16);  // the products' operands
            const float dx = __fmul_rn(dp, wj);
            const float v = a.act == Activation::none ? dx : __fmul_rn(dx, fh::core::activation_derivative(xv, a.act));
            dz[r * in + col] = v;
            acc_hidden += v;
            acc_head = __fmaf_rn(dp, round_operand(xv, a.round_bf16), acc_head);
            if (sums_head_b) acc_head_b += d;
        };
        long long r = row0 + threadIdx.y;
        for (; r + (U - 1) * K < row_end; r += U * K) {  // U rows' loads in flight, summed in order
            float d[U], xv[U];
#pragma unroll
            for (int u = 0; u < U; ++u) d[u] = dout[r + u * K];
#pragma unroll
            for (int u = 0; u < U; ++u) xv[u] = x[(r + u * K) * in + col];
#pragma unroll
            for (int u = 0; u < U; ++u) row(r + u * K, d[u], xv[u]);
        }
        for (; r < row_end; r += K) row(r, dout[r], x[r * in + col]);
    }
    // The three sums of every thread row, over the block's rows (bias_rows_tree): row 0 holds them.
    // (One tree for the three, bias_rows_trees, measured 1.2 us slower for ppo small and iql 256.)
    const auto block_sums = [&](float s_hidden, float s_head, float s_head_b) {
        hidden[threadIdx.y][threadIdx.x] = s_hidden;
        head[threadIdx.y][threadIdx.x] = s_head;
        head_b[threadIdx.y][threadIdx.x] = s_head_b;
        bias_rows_tree(hidden);
        bias_rows_tree(head);
        bias_rows_tree(head_b);
    };
    block_sums(acc_hidden, acc_head, acc_head_b);
    const bool writer = threadIdx.y == 0 && col < in;
    const auto finish = [&](float s_hidden, float s_head, float s_head_b) {
        float* const hidden_db = a.hidden_db == nullptr ? nullptr : a.hidden_db + z * a.param_stride;
        float* const head_dw = a.head_dw + z * a.param_stride;
        if (writer) {
            if (hidden_db != nullptr) hidden_db[col] = a.accumulate ? hidden_db[col] + s_hidden : s_hidden;
            head_dw[col] = a.accumulate ? head_dw[col] + s_head : s_head;
        }
        if (sums_head_b && threadIdx.y == 0 && a.head_db != nullptr) {
            float* const head_db = a.head_db + z * a.param_stride;
            head_db[0] = a.accumulate ? head_db[0] + s_head_b : s_head_b;
        }
    };
    if (gridDim.y == 1) return finish(hidden[0][threadIdx.x], head[0][threadIdx.x], head_b[0][threadIdx.x]);
    // Several slices: partials, then the last block of these 32 columns adds them in slice order.
    float* const partials = a.partials + z * gridDim.y * slice_floats;
    float* const slice = partials + static_cast<long long>(blockIdx.y) * slice_floats;
    if (writer) {
        slice[col] = hidden[0][threadIdx.x];
        slice[in + col] = head[0][threadIdx.x];
    }
    if (sums_head_b && threadIdx.y == 0) slice[2 * in] = head_b[0][threadIdx.x];
    if (!fh::device::last_block_to_arrive(&a.tickets[z * gridDim.x + blockIdx.x], gridDim.y)) return;
    float s_hidden = 0.f, s_head = 0.f, s_head_b = 0.f;  // slices threadIdx.y, + K, ... in order
    for (unsigned k = threadIdx.y; k < gridDim.y; k += K) {
        const float* const p = partials + static_cast<long long>(k) * slice_floats;
        if (col < in) {
            s_hidden += __ldcg(&p[col]);
            s_head += __ldcg(&p[in + col]);
        }
        if (sums_head_b) s_head_b += __ldcg(&p[2 * in]);
    }
    block_sums(s_hidden, s_head, s_head_b);
    finish(hidden[0][threadIdx.x], head[0][threadIdx.x], head_b[0][threadIdx.x]);
    if (threadIdx.x == 0 && threadIdx.y == 0) a.tickets[z * gridDim.x + blockIdx.x] = 0;
}

// A narrow head's backward (2 to kHeadBackwardMaxOut outputs) and its hidden layer's activation
// and bias backward in one pass over the hidden output (ABI: core_network.h). The block stages
// kHeadBackwardStagedRows rows of dout and its 32 columns of W in shared memory; each thread
// keeps one sum per output for its column (the head's dW), the hidden db and, in column group 0,
// one output's db.
extern "C" __global__ void __launch_bounds__(32 * fh::abi::kBiasGradRows, 1)
    network_narrow_head_backward_kernel(fh::abi::HeadBackwardArgs a) {
    constexpr int K = fh::abi::kBiasGradRows, H = fh::abi::kHeadBackwardMaxOut, R = fh::abi::kHeadBackwardStagedRows;
    __shared__ float rows_d[R * H];  // dout rows [r0, r0 + R) of this step, out floats each
    __shared__ float w_cols[H][32];  // W[h, column] of this block's 32 columns
    constexpr int G = fh::abi::kHeadBackwardTreeSums;
    __shared__ float red[G][K][32];  // G block sums at a time (bias_rows_trees)
    const long long z = blockIdx.z;  // this block's network
    const int in = a.in, out = a.out;
    const int tid = threadIdx.y * 32 + threadIdx.x;
    const long long slice_floats = fh::abi::head_backward_partial_floats(in, out);
    float* __restrict__ dz = a.dz + z * a.x_stride;
    const float* __restrict__ x = a.x + z * a.x_stride;
    const float* __restrict__ dout = a.dout + z * a.batch * out;
    const int col = blockIdx.x * 32 + threadIdx.x;
    const bool has_col = col < in;
    const bool sums_head_b = blockIdx.x == 0 && threadIdx.x < out;  // thread x sums output x's db
    if (threadIdx.y < out)
        w_cols[threadIdx.y][threadIdx.x] =
            has_col ? round_operand(a.w[z * a.param_stride + threadIdx.y * in + col], a.round_bf16) : 0.f;
    const long long row0 = static_cast<long long>(blockIdx.y) * a.rows_per_slice;
    long long row_end = row0 + a.rows_per_slice;
    if (row_end > a.batch) row_end = a.batch;
    float acc_hidden = 0.f, acc_head_b = 0.f, acc_head[H];
#pragma unroll
    for (int h = 0; h < H; ++h) acc_head[h] = 0.f;
    for (long long r0 = row0; r0 < row_end; r0 += R) {
        const int n = static_cast<int>(row_end - r0 < R ? row_end - r0 : R);
        __syncthreads();  // the step before no longer reads rows_d (and w_cols is written)
        for (int i = tid; i < n * out; i += 32 * K) rows_d[i] = dout[r0 * out + i];
        __syncthreads();
        float xv[R / K];  // this thread's rows y, y + K, ...: their loads in flight together
#pragma unroll
        for (int u = 0; u < R / K; ++u) {
            const int rr = threadIdx.y + u * K;
            xv[u] = has_col && rr < n ? x[(r0 + rr) * in + col] : 0.f;
        }
#pragma unroll
        for (int u = 0; u < R / K; ++u) {
            const int rr = threadIdx.y + u * K;
            if (rr >= n) break;
            const float* d = rows_d + rr * out;
            if (has_col) {
                float dx = 0.f;
                const float xp = round_operand(xv[u], a.round_bf16);  // the products' operands
#pragma unroll
                for (int h = 0; h < H; ++h)
                    if (h < out) {
                        const float dh = round_operand(d[h], a.round_bf16);
                        dx = __fmaf_rn(dh, w_cols[h][threadIdx.x], dx);
                        acc_head[h] = __fmaf_rn(dh, xp, acc_head[h]);
                    }
                const float v =
                    a.act == Activation::none ? dx : __fmul_rn(dx, fh::core::activation_derivative(xv[u], a.act));
                dz[(r0 + rr) * in + col] = v;
                acc_hidden += v;
            }
            if (sums_head_b) acc_head_b += d[threadIdx.x];
        }
    }
    // Each sum over the block's thread rows (bias_rows_tree's order), G at a time through red
    // (bias_rows_trees: one barrier per level for the G): thread row 0 keeps them (the other
    // rows' sums are not used). The out + 2 sums in order: hidden db, head db, head dW per output.
    // Only thread (0, x) reads red[j][0][x], and it writes it next, so no barrier is needed
    // between two groups beyond the trees' own.
    const auto block_sums = [&] {
        constexpr int V = H + 2;
        float v[V];
        v[0] = acc_hidden;
        v[1] = acc_head_b;
#pragma unroll
        for (int h = 0; h < H; ++h) v[2 + h] = acc_head[h];
        const int n = out + 2;
#pragma unroll
        for (int g0 = 0; g0 < V; g0 += G) {
            if (g0 >= n) break;
#pragma unroll
            for (int j = 0; j < G; ++j)
                if (g0 + j < V && g0 + j < n) red[j][threadIdx.y][threadIdx.x] = v[g0 + j];
            bias_rows_trees<G>(red, n - g0 < G ? n - g0 : G);
#pragma unroll
            for (int j = 0; j < G; ++j)
                if (g0 + j < V && g0 + j < n) v[g0 + j] = threadIdx.y == 0 ? red[j][0][threadIdx.x] : 0.f;
        }
        acc_hidden = v[0];
        acc_head_b = v[1];
#pragma unroll
        for (int h = 0; h < H; ++h) acc_head[h] = v[2 + h];
    };
    block_sums();
    const bool writer = threadIdx.y == 0 && has_col;
    const bool writes_head_b = threadIdx.y == 0 && sums_head_b && a.head_db != nullptr;
    const auto finish = [&] {
        float* const hidden_db = a.hidden_db == nullptr ? nullptr : a.hidden_db + z * a.param_stride;
        float* const head_dw = a.head_dw + z * a.param_stride;
        if (writer) {
            if (hidden_db != nullptr) hidden_db[col] = a.accumulate ? hidden_db[col] + acc_hidden : acc_hidden;
#pragma unroll
            for (int h = 0; h < H; ++h)
                if (h < out) {
                    float& g = head_dw[static_cast<long long>(h) * in + col];
                    g = a.accumulate ? g + acc_head[h] : acc_head[h];
                }
        }
        if (writes_head_b) {
            float& g = a.head_db[z * a.param_stride + threadIdx.x];
            g = a.accumulate ? g + acc_head_b : acc_head_b;
        }
    };
    if (gridDim.y == 1) return finish();
    // Several slices: partials, then the last block of these 32 columns adds them in slice order.
    float* const partials = a.partials + z * gridDim.y * slice_floats;
    float* const slice = partials + static_cast<long long>(blockIdx.y) * slice_floats;
    if (writer) {
        slice[col] = acc_hidden;
#pragma unroll
        for (int h = 0; h < H; ++h)
            if (h < out) slice[in + static_cast<long long>(h) * in + col] = acc_head[h];
    }
    if (threadIdx.y == 0 && sums_head_b) slice[(1LL + out) * in + threadIdx.x] = acc_head_b;
    if (!fh::device::last_block_to_arrive(&a.tickets[z * gridDim.x + blockIdx.x], gridDim.y)) return;
    acc_hidden = acc_head_b = 0.f;  // slices threadIdx.y, + K, ... in order
#pragma unroll
    for (int h = 0; h < H; ++h) acc_head[h] = 0.f;
    for (unsigned k = threadIdx.y; k < gridDim.y; k += K) {
        const float* const p = partials + static_cast<long long>(k) * slice_floats;
        if (has_col) {
            acc_hidden += __ldcg(&p[col]);
#pragma unroll
            for (int h = 0; h < H; ++h)
                if (h < out) acc_head[h] += __ldcg(&p[in + static_cast<long long>(h) * in + col]);
        }
        if (sums_head_b) acc_head_b += __ldcg(&p[(1LL + out) * in + threadIdx.x]);
    }
    block_sums();
    finish();
    if (threadIdx.x == 0 && threadIdx.y == 0) a.tickets[z * gridDim.x + blockIdx.x] = 0;
}

namespace {

/// Sums one value per thread of a block of kNormThreads threads in a fixed tree order; thread 0
/// gets the result.
__device__ double block_sum_fixed(double v) {
    __shared__ double s[fh::abi::kNormThreads];
    s[threadIdx.x] = v;
    __syncthreads();
    for (int stride = fh::abi::kNormThreads / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < static_cast<unsigned>(stride)) s[threadIdx.x] += s[threadIdx.x + stride];
        __syncthreads();
    }
    return s[0];
}

/// This block's partial of the squared norm of x (thread 0 gets it): every thread's grid-stride
/// fma (grid_stride_sum_squares), then block_sum_fixed. The fma is explicit: the CPU emulations
/// (src/ops/dqn/cpu.cpp) use it.
__device__ double squared_norm_partial(const float* __restrict__ x, int n) {
    return block_sum_fixed(fh::device::grid_stride_sum_squares(x, n));
}

}  // namespace

extern "C" __global__ void network_norm_partials_kernel(float* __restrict__ partials, const float* __restrict__ x,
                                                        int n) {
    const double block = squared_norm_partial(x, n);
    if (threadIdx.x == 0) partials[blockIdx.x] = static_cast<float>(block);
}

extern "C" __global__ void network_norm_finish_kernel(float* __restrict__ out, const float* __restrict__ partials,
                                                      int n_partials) {
    double acc = 0.0;
    for (int i = threadIdx.x; i < n_partials; i += blockDim.x) acc += partials[i];
    const double total = block_sum_fixed(acc);
    if (threadIdx.x == 0) out[0] = static_cast<float>(sqrt(total));
}

extern "C" __global__ void network_norm_guard_kernel(float* grad_norm, float* __restrict__ scratch,
                                                     const float* __restrict__ x, int n, int* __restrict__ gate,
                                                     fh::nn::GuardState* __restrict__ state, const float* losses,
                                                     int n_losses, fh::core::CounterValue update,
                                                     float* __restrict__ accum, const float* stats, int n_stats) {
    const double block = squared_norm_partial(x, n);  // network_norm_partials_kernel's partial
    if (threadIdx.x == 0) scratch[blockIdx.x] = static_cast<float>(block);
    unsigned* ticket = reinterpret_cast<unsigned*>(scratch + fh::abi::kNormBlocks);
    if (!fh::device::last_block_to_arrive(ticket, gridDim.x)) return;
    double sum = 0.0;  // network_norm_finish_kernel's sum (its block is kNormThreads too)
    for (int i = threadIdx.x; i < fh::abi::kNormBlocks; i += blockDim.x) sum += __ldcg(&scratch[i]);
    const double total = block_sum_fixed(sum);
    if (threadIdx.x == 0) {
        const float norm = static_cast<float>(sqrt(total));
        *grad_norm = norm;
        fh::nn::GuardState s = *state;  // training_guard_kernel
        *gate = fh::nn::guard_decide(s, losses, n_losses, norm, update.value());
        *state = s;
        *ticket = 0;
    }
    if (accum != nullptr) {  // after the norm's write (stats may hold it): saxpy_f32_kernel's a = 1
        __syncthreads();
        for (int i = threadIdx.x; i < n_stats; i += blockDim.x)
            accum[i] = fh::core::saxpy_element(accum[i], 1.0f, stats[i]);
    }
}

extern "C" __global__ void network_split_k_reduce_kernel(float* __restrict__ dw, long long dw_stride,
                                                         const float* __restrict__ partials, int size, int splits,
                                                         int count, int accumulate) {
    const long long total = static_cast<long long>(size) * count;
    for (long long i = global_thread_index(); i < total; i += grid_thread_count()) {
        const long long k = i / size, j = i - k * size;
        const float* p = partials + k * splits * size + j;
        float sum = p[0];
        for (int s = 1; s < splits; ++s) sum = fh::core::add_rn(sum, p[static_cast<long long>(s) * size]);
        float& out = dw[k * dw_stride + j];
        out = accumulate ? fh::core::add_rn(out, sum) : sum;
    }
}

extern "C" __global__ void network_norm_guard_agents_kernel(float* __restrict__ scratch, const float* __restrict__ x,
                                                            int n, int* __restrict__ gate,
                                                            fh::nn::GuardState* __restrict__ state, float* stats,
                                                            int agents, int n_losses, int norm_index,
                                                            fh::core::CounterValue update, float* __restrict__ accum,
                                                            int n_stats, int accum_stride) {
    const int a = static_cast<int>(blockIdx.y);
    x += static_cast<long long>(a) * n;
    scratch += static_cast<long long>(a) * fh::abi::kNormGuardScratch;
    const double block = squared_norm_partial(x, n);  // network_norm_guard_kernel's, on agent a's slice
    if (threadIdx.x == 0) scratch[blockIdx.x] = static_cast<float>(block);
    unsigned* ticket = reinterpret_cast<unsigned*>(scratch + fh::abi::kNormBlocks);
    if (!fh::device::last_block_to_arrive(ticket, gridDim.x)) return;
    double sum = 0.0;
    for (int i = threadIdx.x; i < fh::abi::kNormBlocks; i += blockDim.x) sum += __ldcg(&scratch[i]);
    const double total = block_sum_fixed(sum);
    if (threadIdx.x == 0) {
        const float norm = static_cast<float>(sqrt(total));
        stats[static_cast<long long>(norm_index) * agents + a] = norm;
        float losses[fh::abi::kMaxAgentGuardLosses];
        for (int k = 0; k < n_losses; ++k) losses[k] = stats[static_cast<long long>(k) * agents + a];
        fh::nn::GuardState s = state[a];
        gate[a] = fh::nn::guard_decide(s, losses, n_losses, norm, update.agent(a).value());
        state[a] = s;
        *ticket = 0;
    }
    if (accum != nullptr) {
        __syncthreads();
        for (int k = threadIdx.x; k < n_stats; k += blockDim.x) {
            float& sum_k = accum[static_cast<long long>(a) * accum_stride + k];
            sum_k = fh::core::saxpy_element(sum_k, 1.0f, stats[static_cast<long long>(k) * agents + a]);
        }
    }
}

namespace {

/// kWidth consecutive floats of one array: a thread's unit of Adam's pass (float4 loads and
/// stores for 4).
template <int kWidth>
struct AdamUnit {
    float x[kWidth];
    __device__ static AdamUnit load(const float* a, long long unit) {
        AdamUnit u;
        if constexpr (kWidth == 4) {
            const float4 q = reinterpret_cast<const float4*>(a)[unit];
            u.x[0] = q.x, u.x[1] = q.y, u.x[2] = q.z, u.x[3] = q.w;
        } else {
            u.x[0] = a[unit];
        }
        return u;
    }
    __device__ void store(float* a, long long unit) const {
        if constexpr (kWidth == 4)
            reinterpret_cast<float4*>(a)[unit] = make_float4(x[0], x[1], x[2], x[3]);
        else
            a[unit] = x[0];
    }
};

/// The launch's constants: the host's c, or with the update number / learning rate in device
/// memory computed once per block (thread 0, then a barrier: the at_step chain of double
/// multiplications per thread measured slower than the barrier, bench/adam-probe.cu).
__device__ fh::core::AdamConstants adam_constants(fh::core::AdamConstants c, fh::core::CounterValue step,
                                                  const float* __restrict__ lr_from) {
    if (step.counter == nullptr && lr_from == nullptr) return c;
    __shared__ fh::core::AdamConstants at;
    if (threadIdx.x == 0) {
        at = step.counter != nullptr ? fh::core::at_step(c, step.value()) : c;
        if (lr_from != nullptr) at.lr = *lr_from;
    }
    __syncthreads();
    return at;
}

/// network_adam_kernel's pass, kWidth elements a thread's unit (network_adam_by4_kernel: 4).
/// Each thread issues its first unit's loads before it waits for the launch's scalars (the
/// counter, the gate, the norm), so the two memory round trips overlap instead of following each
/// other. Element i's floats are the same whatever the width and the grid.
template <int kWidth>
__device__ void adam_pass(float* __restrict__ params, float* __restrict__ m, float* __restrict__ v,
                          const float* __restrict__ grads, const float* __restrict__ grad_norm,
                          const int* __restrict__ gate, fh::core::CounterValue step, const float* __restrict__ lr_from,
                          fh::core::AdamConstants c, float* __restrict__ target, float target_tau, float target_keep,
                          int n) {
    using Unit = AdamUnit<kWidth>;
    const long long units = n / kWidth;
    const long long i = global_thread_index();
    const bool mine = i < units;  // the grid has a thread per unit (no grid-stride loop: fewer registers)
    Unit p{}, mi{}, vi{}, g{}, t{};
    if (mine) {
        p = Unit::load(params, i), mi = Unit::load(m, i), vi = Unit::load(v, i), g = Unit::load(grads, i);
        if (target != nullptr) t = Unit::load(target, i);
    }
    c = adam_constants(c, step, lr_from);
    const bool apply = gate == nullptr || *gate != 0;  // the guard's skip: uniform for the grid
    if (!apply && target == nullptr) return;
    const float scale = apply && c.clip_norm > 0.f ? fh::core::clip_scale(*grad_norm, c.clip_norm) : 1.f;
    // Element j's update, whichever unit holds it: the same floats.
    const auto element = [&](float& pj, float& mj, float& vj, float gj, float& tj) {
        if (apply) fh::core::adam_element(pj, mj, vj, gj, scale, c);
        if (target != nullptr) tj = fh::core::saxpy_element(__fmul_rn(tj, target_keep), target_tau, pj);
    };
    if (mine) {
#pragma unroll
        for (int j = 0; j < kWidth; ++j) element(p.x[j], mi.x[j], vi.x[j], g.x[j], t.x[j]);
        if (apply) p.store(params, i), mi.store(m, i), vi.store(v, i);
        if (target != nullptr) t.store(target, i);
    }
    if constexpr (kWidth > 1) {  // the last n % kWidth elements, one a thread
        const long long k = units * kWidth + i;
        if (k < n) {
            float pk = params[k], mk = m[k], vk = v[k], tk = target != nullptr ? target[k] : 0.f;
            element(pk, mk, vk, grads[k], tk);
            if (apply) params[k] = pk, m[k] = mk, v[k] = vk;
            if (target != nullptr) target[k] = tk;
        }
    }
}

}  // namespace

// One element a thread, at most 32 registers (a full SM of blocks of 256): below
// abi::kAdamVectorMinElements, more threads each with one element in flight measured faster than
// a quarter of them with four (bench/adam-probe.cu).
static_assert(fh::abi::kAdamThreads == 256, "FH_FULL_SM_BLOCKS_OF_256 counts blocks of 256");
extern "C" __global__ void __launch_bounds__(fh::abi::kAdamThreads, FH_FULL_SM_BLOCKS_OF_256)
    network_adam_kernel(float* __restrict__ params, float* __restrict__ m, float* __restrict__ v,
                        const float* __restrict__ grads, const float* __restrict__ grad_norm,
                        const int* __restrict__ gate, fh::core::CounterValue step, const float* __restrict__ lr_from,
                        fh::core::AdamConstants c, float* __restrict__ target, float target_tau, float target_keep,
                        int n) {
    adam_pass<1>(params, m, v, grads, grad_norm, gate, step, lr_from, c, target, target_tau, target_keep, n);
}

// Four elements a thread by float4 (every array 16-byte aligned, abi::adam_vectorized).
extern "C" __global__ void __launch_bounds__(fh::abi::kAdamThreads, 4)
    network_adam_by4_kernel(float* __restrict__ params, float* __restrict__ m, float* __restrict__ v,
                            const float* __restrict__ grads, const float* __restrict__ grad_norm,
                            const int* __restrict__ gate, fh::core::CounterValue step,
                            const float* __restrict__ lr_from, fh::core::AdamConstants c, float* __restrict__ target,
                            float target_tau, float target_keep, int n) {
    adam_pass<4>(params, m, v, grads, grad_norm, gate, step, lr_from, c, target, target_tau, target_keep, n);
}

extern "C" __global__ void network_mlp_infer_kernel(float* __restrict__ y, const float* __restrict__ x,
                                                    const float* __restrict__ params, fh::abi::MlpInferLayers L,
                                                    int batch, int round_bf16) {
    extern __shared__ float smem[];
    float* wt = smem;                  // this layer's W transposed: wt[k * out + j] = W[j, k]
    float* bias = wt + L.max_weights;  // (out)
    float* cur = bias + L.max_width;   // the layer's input rows (kMlpInferRows, in)
    float* nxt = cur + fh::abi::kMlpInferRows * L.max_width;
    const int row0 = blockIdx.x * fh::abi::kMlpInferRows;
    const int rows = min(fh::abi::kMlpInferRows, batch - row0);
    const int in0 = L.in[0];
    for (int i = threadIdx.x; i < rows * in0; i += blockDim.x)
        cur[i] = round_operand(x[static_cast<long long>(row0) * in0 + i], round_bf16);
    for (int l = 0; l < L.count; ++l) {
        const int in = L.in[l], out = L.out[l];
        const float* W = params + L.weight[l];
        __syncthreads();  // the previous layer no longer reads wt and has written cur
        for (int i = threadIdx.x; i < in * out; i += blockDim.x) {
            const int j = i / in, k = i - j * in;
            wt[k * out + j] = round_operand(W[i], round_bf16);
        }
        for (int j = threadIdx.x; j < out; j += blockDim.x) bias[j] = L.bias[l] >= 0 ? params[L.bias[l] + j] : 0.f;
        __syncthreads();
        const bool last = l + 1 == L.count;
        for (int i = threadIdx.x; i < rows * out; i += blockDim.x) {
            const int r = i / out, j = i - r * out;
            const float* a = cur + r * in;
            float acc = 0.f;
            for (int k = 0; k < in; ++k) acc = fmaf(a[k], wt[k * out + j], acc);
            const float v = fh::core::activate(acc + bias[j], L.act[l]);
            if (last)
                y[static_cast<long long>(row0 + r) * out + j] = v;
            else
                nxt[r * out + j] = round_operand(v, round_bf16);  // the next layer's input
        }
        float* t = cur;
        cur = nxt;
        nxt = t;
    }
}

extern "C" __global__ void network_round_bf16_kernel(fh::abi::RoundBf16Args a) {
    const int p = static_cast<int>(blockIdx.y);  // this block's pair
    const long long width = a.width[p], total = width * a.rows[p], pitch = a.src_pitch[p];
    unsigned short* __restrict__ dst = a.dst[p];
    const float* __restrict__ src = a.src[p];
    for (long long i = global_thread_index(); i < total; i += grid_thread_count()) {
        const long long r = i / width, c = i - r * width;
        dst[i] = fh::core::bf16_bits(src[r * pitch + c]);
    }
}

// A population's Adam: agent blockIdx.y's slices and scalars, then network_adam_kernel's pass.
extern "C" __global__ void __launch_bounds__(fh::abi::kAdamThreads, 4)
    network_adam_agents_kernel(float* __restrict__ params, float* __restrict__ m, float* __restrict__ v,
                               const float* __restrict__ grads, const float* __restrict__ grad_norm,
                               const int* __restrict__ gate, fh::core::CounterValue step, const float* __restrict__ lr,
                               fh::core::AdamConstants c, float* __restrict__ target,
                               const float* __restrict__ tau_keep, int n) {
    const long long a = blockIdx.y, at = a * n;
    adam_pass<1>(params + at, m + at, v + at, grads + at, grad_norm != nullptr ? grad_norm + a : nullptr,
                 gate != nullptr ? gate + a : nullptr, step.agent(a), lr + a, c,
                 target != nullptr ? target + at : nullptr, target != nullptr ? tau_keep[2 * a] : 0.f,
                 target != nullptr ? tau_keep[2 * a + 1] : 1.f, n);
}

FH_KERNELS_core_network(FH_CHECK_KERNEL_ABI)
