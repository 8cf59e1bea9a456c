// small-gemm-probe.cu: an experiment, not part of the build (docs/performance-log.md quotes it).
// A hand-written FP32 GEMM for the trainers' small linear layers (tiles of 32x32 to 64x64,
// 4-byte cp.async pipelines, K split across blocks with a fixed-order reduction and across
// thread groups of a block, bias/activation epilogues) timed against cuBLAS SGEMM for every
// shape the trainers use, each replayed from a CUDA Graph, every variant checked bit for bit
// against a CPU sum in the kernel's order. Result on the H200: no variant beats cuBLAS by more
// than 1.3x on any shape, and most are slower, so the trainers keep cuBLAS.
//   nvcc -O3 -std=c++20 -arch=sm_90 -Icuda -o small-gemm-probe bench/small-gemm-probe.cu -lcublas && ./small-gemm-probe
#include "math/core.h"

namespace fh::core {

struct GemmProblem {
    float* c = nullptr;             ///< C(m, n) = c[m * ldc + n]
    const float* a = nullptr;       ///< A(m, k) = a[m * a_m + k * a_k]
    const float* b = nullptr;       ///< B(k, n) = b[k * b_k + n * b_n]
    const float* bias = nullptr;    ///< (N) or null
    const float* gate_y = nullptr;  ///< (M, N) with ldc, or null: v *= act'(gate_y) with gate_act
    float* column_sums = nullptr;   ///< (M) or null: sum over k of A(m, k) (+= with accumulate)
    long long a_m = 0, a_k = 0, b_k = 0, b_n = 0;
    long long batch_a = 0, batch_b = 0, batch_c = 0, batch_bias = 0;  ///< per-problem offsets
    int ldc = 0, m = 0, n = 0, k = 0, count = 1;
    int accumulate = 0;
    Activation act = Activation::none;  ///< applied after the bias
    Activation gate_act = Activation::none;
    int splits = 1, k_per_split = 0;  ///< from gemm_plan
};

/// The tile shapes the kernels are built for (cuda/kernels/core_gemm.cu): 256 threads each.
enum class GemmTile : int { t32x32 = 0, t32x64 = 1, t64x64 = 2 };
inline constexpr int kGemmTileK = 16;
inline constexpr int kGemmThreads = 256;
inline constexpr int kGemmMaxSplits = 8;

inline __host__ __device__ int gemm_tile_rows(GemmTile t) {
    return t == GemmTile::t64x64 ? 64 : 32;
}
inline __host__ __device__ int gemm_tile_cols(GemmTile t) {
    return t == GemmTile::t32x32 ? 32 : 64;
}

struct GemmPlan {
    GemmTile tile = GemmTile::t64x64;
    int splits = 1, k_per_split = 0;
};

/// The plan depends on the shape only (not on the GPU), so every GPU and the twin sum in the same
/// order. Aim: about two blocks per SM of a large GPU (>= 256 blocks) with no fewer than 64 k per
/// split, using the largest tile that still gives enough blocks.
inline __host__ __device__ GemmPlan gemm_plan(int m, int n, int k, int count) {
    GemmPlan p;
    const long long n_tiles = (n + 63) / 64;
    const long long tiles128 = (long long)((m + 127) / 128) * n_tiles * count;
    const long long tiles64 = (long long)((m + 63) / 64) * n_tiles * count;
    const long long tiles32 = (long long)((m + 31) / 32) * n_tiles * count;
    long long tiles;
    if (tiles64 >= 128) {
        p.tile = GemmTile::t64x64;
        tiles = tiles64;
    } else if (tiles32 >= 64) {
        p.tile = GemmTile::t32x64;
        tiles = tiles32;
    } else {
        p.tile = GemmTile::t32x32;
        tiles = tiles128;
    }
    int splits = 1;
    while (splits < kGemmMaxSplits && tiles * splits * 2 <= 512 && k / (splits * 2) >= 64) splits *= 2;
    const int steps = k > 0 ? (k + kGemmTileK - 1) / kGemmTileK : 1;
    const int steps_per_split = (steps + splits - 1) / splits;
    p.k_per_split = steps_per_split * kGemmTileK;
    p.splits = k > 0 ? (k + p.k_per_split - 1) / p.k_per_split : 1;
    return p;
}

}  // namespace fh::core

using fh::core::Activation;
using fh::core::GemmProblem;
using fh::core::kGemmThreads;

namespace {

constexpr int kTileK = fh::core::kGemmTileK;
constexpr int kThreadsAlongN = 16, kThreadsAlongM = kGemmThreads / kThreadsAlongN;
constexpr int kPad = 4;  // keeps 16-byte alignment, fewer bank conflicts

/// k steps in flight per group (hides the global-memory latency of small products), as many as
/// fit in 48 KB of static shared memory, 2 to 4.
template <int BM, int BN, int KG>
constexpr int stages_for() {
    constexpr int per_stage = KG * kTileK * (BM + BN + 2 * kPad) * 4;
    constexpr int n = (48 * 1024 - 64) / per_stage;
    return n > 4 ? 4 : n;
}
template <int BM, int BN, int KG>
struct Tiles {
    static constexpr int kStages = stages_for<BM, BN, KG>();
    static_assert(kStages >= 2);
    float a[KG][kStages][kTileK][BM + kPad];
    float b[KG][kStages][kTileK][BN + kPad];
};

/// Asynchronous 4-byte copy global -> shared; valid == false writes 0 (and reads nothing).
__device__ __forceinline__ void copy_async(float* dst, const float* src, bool valid) {
    const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src), "r"(valid ? 4 : 0));
}
__device__ __forceinline__ void copy_async_commit() {
    asm volatile("cp.async.commit_group;\n" ::);
}
template <int N>
__device__ __forceinline__ void copy_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

template <int N>
__device__ __forceinline__ void load_row(float (&v)[N], const float* p) {
    if constexpr (N == 2) {
        const float2 x = *reinterpret_cast<const float2*>(p);
        v[0] = x.x;
        v[1] = x.y;
    } else {
#pragma unroll
        for (int i = 0; i < N; i += 4) {
            const float4 x = *reinterpret_cast<const float4*>(p + i);
            v[i] = x.x;
            v[i + 1] = x.y;
            v[i + 2] = x.z;
            v[i + 3] = x.w;
        }
    }
}

/// acc += the tile's products for k in [0, kmax) (FULL: kmax = kTileK, unrolled); sums += A's
/// column of each of the thread's rows.
template <int BM, int BN, bool SUMS, bool FULL>
__device__ __forceinline__ void tile_products(const float (&As)[kTileK][BM + kPad],
                                              const float (&Bs)[kTileK][BN + kPad], int ty, int tx, int kmax,
                                              float (&acc)[BM / kThreadsAlongM][BN / kThreadsAlongN],
                                              float (&sums)[BM / kThreadsAlongM]) {
    constexpr int TM = BM / kThreadsAlongM, TN = BN / kThreadsAlongN;
#pragma unroll
    for (int kk = 0; kk < kTileK; ++kk) {
        if (!FULL && kk >= kmax) break;
        float a[TM], b[TN];
        load_row<TM>(a, &As[kk][ty * TM]);
        load_row<TN>(b, &Bs[kk][tx * TN]);
#pragma unroll
        for (int i = 0; i < TM; ++i) {
#pragma unroll
            for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
            if (SUMS) sums[i] += a[i];
        }
    }
}

__device__ __forceinline__ float finish_value(const GemmProblem& p, int problem, float v, long long idx, int col) {
    if (p.accumulate) v = p.c[idx] + v;
    if (p.bias != nullptr) v += p.bias[problem * p.batch_bias + col];
    v = fh::core::activate(v, p.act);
    if (p.gate_y != nullptr) v *= fh::core::activation_derivative(p.gate_y[idx], p.gate_act);
    return v;
}

template <int BM, int BN, int KG, bool A_K, bool B_K, bool SUMS>
__device__ __forceinline__ void gemm_body(const GemmProblem& p, float* __restrict__ partials,
                                          int* __restrict__ counters, Tiles<BM, BN, KG>& all_tiles, int& is_last) {
    constexpr int TM = BM / kThreadsAlongM, TN = BN / kThreadsAlongN;
    constexpr int kStages = Tiles<BM, BN, KG>::kStages;
    constexpr int kALoads = BM * kTileK / kGemmThreads;
    constexpr int kBLoads = BN * kTileK / kGemmThreads;
    static_assert(kALoads >= 1 && kBLoads >= 1 && TM >= 2 && TN >= 2);

    // KG groups of kGemmThreads threads share the tile; group g sums the g-th part of the block's
    // k range, then group 0 adds the groups' sums in order.
    const int group = static_cast<int>(threadIdx.x) / kGemmThreads;
    const int tid = static_cast<int>(threadIdx.x) % kGemmThreads;
    const int tx = tid % kThreadsAlongN, ty = tid / kThreadsAlongN;
    const int tiles_n = static_cast<int>(gridDim.x), tiles_m = static_cast<int>(gridDim.y);
    const int problem = static_cast<int>(blockIdx.z) / p.splits, split = static_cast<int>(blockIdx.z) % p.splits;
    const int m0 = static_cast<int>(blockIdx.y) * BM, n0 = static_cast<int>(blockIdx.x) * BN;
    const int block_begin = split * p.k_per_split;
    const int block_end = min(p.k, block_begin + p.k_per_split);
    const int group_steps = ((block_end - block_begin + kTileK - 1) / kTileK + KG - 1) / KG;
    const int k_begin = min(block_end, block_begin + group * group_steps * kTileK);
    const int k_end = min(block_end, k_begin + group_steps * kTileK);
    auto& tiles = all_tiles;
    const int gi = group;
    const float* __restrict__ A = p.a + problem * p.batch_a;
    const float* __restrict__ B = p.b + problem * p.batch_b;
    const bool sums_here = SUMS && blockIdx.x == 0;  // one column of blocks sums A's rows

    // Each thread copies the same tile positions at every k step: its source pointers at k_begin,
    // advanced by a fixed stride per step.
    const float* a_src[kALoads];
    const float* b_src[kBLoads];
    bool a_row_ok[kALoads], b_col_ok[kBLoads];
    int a_kk[kALoads], a_mm[kALoads], b_kk[kBLoads], b_nn[kBLoads];
#pragma unroll
    for (int i = 0; i < kALoads; ++i) {
        const int e = tid + i * kGemmThreads;
        a_kk[i] = A_K ? e % kTileK : e / BM;
        a_mm[i] = A_K ? e / kTileK : e % BM;
        a_row_ok[i] = m0 + a_mm[i] < p.m;
        a_src[i] = A + (a_row_ok[i] ? (m0 + a_mm[i]) * p.a_m + (k_begin + a_kk[i]) * p.a_k : 0);
    }
#pragma unroll
    for (int i = 0; i < kBLoads; ++i) {
        const int e = tid + i * kGemmThreads;
        b_kk[i] = B_K ? e % kTileK : e / BN;
        b_nn[i] = B_K ? e / kTileK : e % BN;
        b_col_ok[i] = n0 + b_nn[i] < p.n;
        b_src[i] = B + (b_col_ok[i] ? (k_begin + b_kk[i]) * p.b_k + (n0 + b_nn[i]) * p.b_n : 0);
    }
    const long long a_step = kTileK * p.a_k, b_step = kTileK * p.b_k;
    auto issue = [&](int step) {
        const int buf = step % kStages, k0 = k_begin + step * kTileK;
#pragma unroll
        for (int i = 0; i < kALoads; ++i) {
            const bool ok = a_row_ok[i] && k0 + a_kk[i] < k_end;
            copy_async(&tiles.a[gi][buf][a_kk[i]][a_mm[i]], ok ? a_src[i] + step * a_step : A, ok);
        }
#pragma unroll
        for (int i = 0; i < kBLoads; ++i) {
            const bool ok = b_col_ok[i] && k0 + b_kk[i] < k_end;
            copy_async(&tiles.b[gi][buf][b_kk[i]][b_nn[i]], ok ? b_src[i] + step * b_step : B, ok);
        }
    };

    float acc[TM][TN];
    float sums[TM];
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        sums[i] = 0.f;
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;
    }
    // Every group runs group_steps iterations (its __syncthreads are the block's); a group whose
    // range is shorter (the tail of K) skips the copies and products of the missing steps.
    const int steps = k_end > k_begin ? (k_end - k_begin + kTileK - 1) / kTileK : 0;
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
        if (s < steps) issue(s);
        copy_async_commit();
    }
    for (int s = 0; s < group_steps; ++s) {
        copy_async_wait<kStages - 2>();  // step s has landed (for this thread) ...
        __syncthreads();                 // ... for every thread, and step s - 1's buffer is free
        if (s + kStages - 1 < steps) issue(s + kStages - 1);
        copy_async_commit();
        if (s >= steps) continue;
        const int buf = s % kStages;
        const int kmax = min(kTileK, k_end - (k_begin + s * kTileK));
        if (kmax == kTileK) {
            if (sums_here)
                tile_products<BM, BN, SUMS, true>(tiles.a[gi][buf], tiles.b[gi][buf], ty, tx, kmax, acc, sums);
            else
                tile_products<BM, BN, false, true>(tiles.a[gi][buf], tiles.b[gi][buf], ty, tx, kmax, acc, sums);
        } else {
            if (sums_here)
                tile_products<BM, BN, SUMS, false>(tiles.a[gi][buf], tiles.b[gi][buf], ty, tx, kmax, acc, sums);
            else
                tile_products<BM, BN, false, false>(tiles.a[gi][buf], tiles.b[gi][buf], ty, tx, kmax, acc, sums);
        }
    }
    copy_async_wait<0>();
    if constexpr (KG > 1) {
        // Group 0 adds the other groups' sums in group order (through the tiles' shared memory).
        __syncthreads();
        float* red = &all_tiles.a[0][0][0][0];
        static_assert(sizeof(Tiles<BM, BN, KG>) >= sizeof(float) * (KG - 1) * (TM * TN + TM) * kGemmThreads);
        if (group > 0) {
            float* mine = red + (group - 1) * (TM * TN + TM) * kGemmThreads;
#pragma unroll
            for (int i = 0; i < TM; ++i) {
#pragma unroll
                for (int j = 0; j < TN; ++j) mine[(i * TN + j) * kGemmThreads + tid] = acc[i][j];
                mine[(TM * TN + i) * kGemmThreads + tid] = sums[i];
            }
        }
        __syncthreads();
        if (group == 0)
            for (int g = 1; g < KG; ++g) {
                const float* theirs = red + (g - 1) * (TM * TN + TM) * kGemmThreads;
#pragma unroll
                for (int i = 0; i < TM; ++i) {
#pragma unroll
                    for (int j = 0; j < TN; ++j) acc[i][j] += theirs[(i * TN + j) * kGemmThreads + tid];
                    sums[i] += theirs[(TM * TN + i) * kGemmThreads + tid];
                }
            }
    }
    const bool owner = group == 0;  // group 0 writes the results

    float* __restrict__ C = p.c + problem * p.batch_c;
    const int row0 = m0 + ty * TM, col0 = n0 + tx * TN;
    float* __restrict__ col_sums =
        SUMS && p.column_sums != nullptr ? p.column_sums + static_cast<long long>(problem) * p.m : nullptr;
    if (p.splits == 1) {
        if (!owner) return;
#pragma unroll
        for (int i = 0; i < TM; ++i) {
            const int r = row0 + i;
            if (r >= p.m) continue;
#pragma unroll
            for (int j = 0; j < TN; ++j) {
                const int c = col0 + j;
                if (c >= p.n) continue;
                const long long idx = static_cast<long long>(r) * p.ldc + c;
                C[idx] = finish_value(p, problem, acc[i][j], idx, c);
            }
            if (sums_here && tx == 0) col_sums[r] = p.accumulate ? col_sums[r] + sums[i] : sums[i];
        }
        return;
    }

    // Split K: write this split's sums, and let the tile's last block add them in split order.
    const long long mn = static_cast<long long>(p.m) * p.n;
    const long long total = static_cast<long long>(p.count) * p.splits * mn;
    float* __restrict__ mine = partials + (static_cast<long long>(problem) * p.splits + split) * mn;
#pragma unroll
    for (int i = 0; i < TM && owner; ++i) {
        const int r = row0 + i;
        if (r >= p.m) continue;
#pragma unroll
        for (int j = 0; j < TN; ++j)
            if (col0 + j < p.n) mine[static_cast<long long>(r) * p.n + col0 + j] = acc[i][j];
        if (sums_here && tx == 0)
            partials[total + (static_cast<long long>(problem) * p.splits + split) * p.m + r] = sums[i];
    }
    __threadfence();
    __syncthreads();
    const int tile_id = (problem * tiles_m + static_cast<int>(blockIdx.y)) * tiles_n + static_cast<int>(blockIdx.x);
    if (threadIdx.x == 0) is_last = atomicAdd(&counters[tile_id], 1) == p.splits - 1;
    __syncthreads();
    if (!is_last || !owner) return;
    __threadfence();
    const float* first = partials + static_cast<long long>(problem) * p.splits * mn;
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int r = row0 + i;
        if (r >= p.m) continue;
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int c = col0 + j;
            if (c >= p.n) continue;
            const long long at = static_cast<long long>(r) * p.n + c;
            float v = __ldcg(first + at);
            for (int s = 1; s < p.splits; ++s) v += __ldcg(first + s * mn + at);
            const long long idx = static_cast<long long>(r) * p.ldc + c;
            C[idx] = finish_value(p, problem, v, idx, c);
        }
        if (sums_here && tx == 0) {
            const float* row_sums = partials + total + static_cast<long long>(problem) * p.splits * p.m + r;
            float v = __ldcg(row_sums);
            for (int s = 1; s < p.splits; ++s) v += __ldcg(row_sums + static_cast<long long>(s) * p.m);
            col_sums[r] = p.accumulate ? col_sums[r] + v : v;
        }
    }
    if (threadIdx.x == 0) counters[tile_id] = 0;  // ready for the next product on this stream
}

}  // namespace

// Column sums (a bias gradient) are only asked of the weight-gradient layout (mm).
#define FH_DEFINE_GEMM(layout, A_K, B_K, BM, BN, KG)                                                             \
    extern "C" __global__ void __launch_bounds__(kGemmThreads* KG) gemm_##layout##_##BM##x##BN##_g##KG##_kernel( \
        GemmProblem p, float* __restrict__ partials, int* __restrict__ counters) {                               \
        __shared__ __align__(16) Tiles<BM, BN, KG> tiles;                                                        \
        __shared__ int is_last;                                                                                  \
        if (!A_K && !B_K && p.column_sums != nullptr)                                                            \
            gemm_body<BM, BN, KG, A_K, B_K, !A_K && !B_K>(p, partials, counters, tiles, is_last);                \
        else                                                                                                     \
            gemm_body<BM, BN, KG, A_K, B_K, false>(p, partials, counters, tiles, is_last);                       \
    }
// clang-format 14 reflows this list differently on each pass.
// clang-format off
#define FH_DEFINE_GEMM_TILES(layout, A_K, B_K)      \
    FH_DEFINE_GEMM(layout, A_K, B_K, 32, 32, 1)     \
    FH_DEFINE_GEMM(layout, A_K, B_K, 32, 32, 2)     \
    FH_DEFINE_GEMM(layout, A_K, B_K, 32, 32, 4)     \
    FH_DEFINE_GEMM(layout, A_K, B_K, 32, 64, 1)     \
    FH_DEFINE_GEMM(layout, A_K, B_K, 32, 64, 2)     \
    FH_DEFINE_GEMM(layout, A_K, B_K, 64, 64, 1)
// clang-format on

FH_DEFINE_GEMM_TILES(kk, true, true)
FH_DEFINE_GEMM_TILES(mm, false, false)
FH_DEFINE_GEMM_TILES(km, true, false)

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CK(x)                                                   \
    do {                                                        \
        auto e_ = (x);                                          \
        if ((int)e_) {                                          \
            printf("error %d at line %d\n", (int)e_, __LINE__); \
            exit(1);                                            \
        }                                                       \
    } while (0)

// kind 0: forward Y = X W^T (M rows, N out, K in); 1: dW = dZ^T X (M out, N in, K rows); 2: dX = dZ W (M rows, N in, K
// out)
struct Shape {
    const char* name;
    int kind, m, n, k, count;
};

static void problem_for(const Shape& s, const float* A, const float* B, float* C, GemmProblem& p) {
    p = GemmProblem{};
    p.m = s.m;
    p.n = s.n;
    p.k = s.k;
    p.count = s.count;
    p.c = C;
    p.ldc = s.n;
    p.a = A;
    p.b = B;
    if (s.kind == 0) {
        p.a_m = s.k;
        p.a_k = 1;
        p.b_k = 1;
        p.b_n = s.k;
    }  // A = X (M, K), B(k, n) = W[n][k]
    else if (s.kind == 1) {
        p.a_m = 1;
        p.a_k = s.m;
        p.b_k = s.n;
        p.b_n = 1;
    }  // A(m, k) = dZ[k][m], B = X (K, N)
    else {
        p.a_m = s.k;
        p.a_k = 1;
        p.b_k = s.n;
        p.b_n = 1;
    }  // A = dZ (M, K), B = W (K, N)
    p.batch_a = (long long)s.m * s.k;
    p.batch_b = (long long)s.k * s.n;
    p.batch_c = (long long)s.m * s.n;
}

using KernelFn = void (*)(GemmProblem, float*, int*);
struct Variant {
    int rows, cols, groups;
    KernelFn fn[3];
};
#define FH_VARIANT(R, C, G)                                                                                         \
    Variant {                                                                                                       \
        R, C, G, {                                                                                                  \
            gemm_kk_##R##x##C##_g##G##_kernel, gemm_mm_##R##x##C##_g##G##_kernel, gemm_km_##R##x##C##_g##G##_kernel \
        }                                                                                                           \
    }
static const Variant kVariants[] = {FH_VARIANT(32, 32, 1), FH_VARIANT(32, 32, 2), FH_VARIANT(32, 32, 4),
                                    FH_VARIANT(32, 64, 1), FH_VARIANT(32, 64, 2), FH_VARIANT(64, 64, 1)};

static void reference(const GemmProblem& p, int groups, const float* A, const float* B, std::vector<float>& C) {
    for (int q = 0; q < p.count; ++q)
        for (int m = 0; m < p.m; ++m)
            for (int n = 0; n < p.n; ++n) {
                float total = 0.f;
                for (int s = 0; s < p.splits; ++s) {
                    const int b0 = s * p.k_per_split, b1 = std::min(p.k, b0 + p.k_per_split);
                    const int gs = ((b1 - b0 + 15) / 16 + groups - 1) / groups;
                    float block = 0.f;
                    for (int g = 0; g < groups; ++g) {
                        const int k0 = std::min(b1, b0 + g * gs * 16), k1 = std::min(b1, k0 + gs * 16);
                        float acc = 0.f;
                        for (int k = k0; k < k1; ++k)
                            acc = std::fma(A[q * p.batch_a + m * p.a_m + k * p.a_k],
                                           B[q * p.batch_b + k * p.b_k + n * p.b_n], acc);
                        block = g == 0 ? acc : block + acc;
                    }
                    total = s == 0 ? block : total + block;
                }
                C[q * p.batch_c + (long long)m * p.ldc + n] = total;
            }
}

__global__ void empty_kernel() {}

int main(int argc, char** argv) {
    const bool check = argc < 2 || strcmp(argv[1], "--no-check") != 0;
    Shape shapes[] = {
        {"dqn fwd1 x2 [s;s'] 512x256x50", 0, 512, 256, 50, 2},
        {"dqn fwd2 x2 512x256x256", 0, 512, 256, 256, 2},
        {"dqn fwd3 x2 512x510x256", 0, 512, 510, 256, 2},
        {"dqn dW3 510x256 k256", 1, 510, 256, 256, 1},
        {"dqn dX3 256x256 k510", 2, 256, 256, 510, 1},
        {"dqn dW2 256x256 k256", 1, 256, 256, 256, 1},
        {"dqn dX2 256x256 k256", 2, 256, 256, 256, 1},
        {"dqn dW1 256x50 k256", 1, 256, 50, 256, 1},
        {"col fwd1 4096x256x50", 0, 4096, 256, 50, 1},
        {"col fwd2 4096x256x256", 0, 4096, 256, 256, 1},
        {"col fwd3 4096x510x256", 0, 4096, 510, 256, 1},
        {"col256 fwd2 256x256x256", 0, 256, 256, 256, 1},
        {"col256 fwd3 256x510x256", 0, 256, 510, 256, 1},
        {"iql fwd3 256x9x256", 0, 256, 9, 256, 1},
        {"iql dW3 9x256 k256", 1, 9, 256, 256, 1},
        {"full fwd2 x2 2048x512x512", 0, 2048, 512, 512, 2},
        {"full dW2 512x512 k1024", 1, 512, 512, 1024, 1},
        {"full dX2 1024x512 k512", 2, 1024, 512, 512, 1},
        {"full col fwd2 4096x512x512", 0, 4096, 512, 512, 1},
        {"ppo col fwd2 2048x512x512", 0, 2048, 512, 512, 1},

        {"ppo small fwd2 4096x64x64", 0, 4096, 64, 64, 1},
        {"ppo small dW2 64x64 k4096", 1, 64, 64, 4096, 1},
    };
    cublasHandle_t h;
    CK(cublasCreate(&h));
    cudaStream_t st;
    CK(cudaStreamCreate(&st));
    CK(cublasSetStream(h, st));
    void* ws;
    CK(cudaMalloc(&ws, 32u << 20));
    CK(cublasSetWorkspace(h, ws, 32u << 20));
    const size_t big = 40u << 20;
    float *A, *B, *C, *P;
    int* counters;
    CK(cudaMalloc(&A, big * 4));
    CK(cudaMalloc(&B, big * 4));
    CK(cudaMalloc(&C, big * 4));
    CK(cudaMalloc(&P, big * 4));
    CK(cudaMalloc(&counters, 1 << 20));
    CK(cudaMemset(counters, 0, 1 << 20));
    std::vector<float> ha(big), hb(big);
    unsigned long long x = 88172645463325252ull;
    for (size_t i = 0; i < big; ++i) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        ha[i] = (float)((x >> 11) * 0x1.0p-53) - 0.5f;
    }
    for (size_t i = 0; i < big; ++i) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        hb[i] = (float)((x >> 11) * 0x1.0p-53) - 0.5f;
    }
    CK(cudaMemcpy(A, ha.data(), big * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(B, hb.data(), big * 4, cudaMemcpyHostToDevice));
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    auto time_graph = [&](auto&& issue) {
        cudaGraph_t g;
        cudaGraphExec_t ge;
        CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
        for (int r = 0; r < 20; ++r) issue();
        CK(cudaStreamEndCapture(st, &g));
        CK(cudaGraphInstantiate(&ge, g, 0));
        CK(cudaGraphLaunch(ge, st));
        CK(cudaStreamSynchronize(st));
        cudaEventRecord(e0, st);
        for (int r = 0; r < 10; ++r) CK(cudaGraphLaunch(ge, st));
        cudaEventRecord(e1, st);
        CK(cudaEventSynchronize(e1));
        float ms;
        cudaEventElapsedTime(&ms, e0, e1);
        cudaGraphExecDestroy(ge);
        cudaGraphDestroy(g);
        return ms * 1000.f / 200.f;
    };
    {
        const float t = time_graph([&]() { empty_kernel<<<1, 32, 0, st>>>(); });
        printf("== empty kernel %.2f us\n", t);
    }
    for (const Shape& s : shapes) {
        const double flop = 2.0 * s.m * s.n * s.k * s.count;
        // cuBLAS, as src/device/cuda_linear.cpp issues it (column-major view of row-major buffers)
        const float one = 1.f, zero = 0.f;
        auto sgemm = [&]() {
            for (int q = 0; q < s.count; ++q) {
                const float* a = A + (long long)q * s.m * s.k;
                const float* b = B + (long long)q * s.k * s.n;
                float* c = C + (long long)q * s.m * s.n;
                if (s.kind == 0)
                    CK(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, s.n, s.m, s.k, &one, b, s.k, a, s.k, &zero, c, s.n));
                else if (s.kind == 1)
                    CK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, s.n, s.m, s.k, &one, b, s.n, a, s.m, &zero, c, s.n));
                else
                    CK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, s.n, s.m, s.k, &one, b, s.n, a, s.k, &zero, c, s.n));
            }
        };
        const float t_cublas = time_graph(sgemm);
        GemmProblem p;
        problem_for(s, A, B, C, p);
        const fh::core::GemmPlan plan = fh::core::gemm_plan(s.m, s.n, s.k, s.count);
        printf("== %-30s %8.1f MFLOP  cublas %7.2f us (%5.1f TFLOP/s)  plan tile #%d splits %d\n", s.name, flop / 1e6,
               t_cublas, flop / t_cublas / 1e6, (int)plan.tile, plan.splits);
        float best = 1e9;
        int best_v = -1, best_splits = 0;
        for (int v = 0; v < (int)(sizeof kVariants / sizeof kVariants[0]); ++v)
            for (int splits : {1, 2, 4, 8}) {
                const Variant& var = kVariants[v];
                const int steps = (s.k + 15) / 16, sps = (steps + splits - 1) / splits;
                p.k_per_split = sps * 16;
                p.splits = (s.k + p.k_per_split - 1) / p.k_per_split;
                if (p.splits != splits) continue;
                if (sps < var.groups) continue;
                if ((long long)s.count * splits * ((long long)s.m * s.n + s.m) > (long long)big) continue;
                const dim3 grid((s.n + var.cols - 1) / var.cols, (s.m + var.rows - 1) / var.rows, s.count * splits);
                KernelFn fn = var.fn[s.kind];
                const int threads = kGemmThreads * var.groups;
                const float t = time_graph([&]() { fn<<<grid, threads, 0, st>>>(p, P, counters); });
                CK(cudaGetLastError());
                bool exact = true;
                if (check && flop < 2e9) {
                    fn<<<grid, threads, 0, st>>>(p, P, counters);
                    CK(cudaStreamSynchronize(st));
                    std::vector<float> got((size_t)s.count * s.m * s.n), want(got.size());
                    CK(cudaMemcpy(got.data(), C, got.size() * 4, cudaMemcpyDeviceToHost));
                    reference(p, var.groups, ha.data(), hb.data(), want);
                    exact = memcmp(got.data(), want.data(), got.size() * 4) == 0;
                }
                printf("   tile %2dx%2d g%d splits %d blocks %6u  %7.2f us (%5.1f TFLOP/s) %s\n", var.rows, var.cols,
                       var.groups, splits, grid.x * grid.y * grid.z, t, flop / t / 1e6, exact ? "" : "MISMATCH");
                if (t < best) {
                    best = t;
                    best_v = v;
                    best_splits = splits;
                }
            }
        printf("   best %dx%d g%d splits %d %.2f us = %.2fx cublas\n", kVariants[best_v].rows, kVariants[best_v].cols,
               kVariants[best_v].groups, best_splits, best, t_cublas / best);
    }
    return 0;
}
