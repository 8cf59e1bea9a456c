/* ppo_gae.cu — generalised advantage estimation (Schulman et al. 2016) over a rollout, the
 * deterministic in-place normalisation of the advantages (docs/ppo.md, "Kernel-level math"), and
 * the bootstrap values of truncated episodes (docs/ppo.md, "The rollout").
 *
 * Math:        GAE (ppo::gae_env), per env backwards from t = T-1 with gae_T = 0:
 *                delta = r + gamma * (done == kTerminated ? 0 : next_value) - value
 *                gae   = delta + gamma * lambda * (done != kRunning ? 0 : gae_next)
 *                advantage = gae, return = gae + value.
 *              normalize: x = (x - mean) / (std + 1e-8), population std; moments from double sums
 *                of d = x - x[0] and d^2 (ppo::normalize_moments, ppo::normalize_element).
 *              collect truncated: stream compaction of the rows with done == kTruncated, in
 *                environment order (row, bar, portfolio features); terminal observations: the
 *                market features of the bar, then the portfolio features
 *                (ppo::terminal_observation_value); scatter: dst[rows[i]] = values[i].
 * Layout:      rollout buffers (T, n), row t * n + e; normalize: x (n) flat, partials
 *              (ppo::kNormalizeScratch floats).
 * Launch:      GAE: one thread per environment, any 1-D grid. Normalize: partials with exactly
 *              kNormalizeBlocks x kNormalizeThreads, then apply with any 1-D grid of
 *              kNormalizeThreads-thread blocks. Collect: one block of kCollectThreads (tiles of
 *              kCollectThreads environments; a warp ballot and a serial scan of the warp counts
 *              place each row). Terminal observations, scatter: any 1-D grid.
 * Determinism: exact. GAE: float arithmetic in the order of ppo::gae_env, --fmad=false: = CPU twin
 *              bit for bit. Normalize: a fixed grid (independent of the SM count) and fixed tree
 *              orders in double, no atomics; each block's partials are stored as float pairs
 *              (hi + lo, ~48 bits); every apply block reduces them in the same order, so all blocks
 *              use identical moments. ≈ CPU (the CPU sums sequentially). Collect, terminal
 *              observations and scatter move values without arithmetic and no atomics: = CPU twin
 *              bit for bit.
 * Aliasing:    __restrict__ everywhere: GAE's outputs are distinct from each other and from the
 *              inputs (values and next_values may share, read-only); x and the scratch are distinct
 *              and so are the buffers of collect, terminal observations and scatter (checked by
 *              ops::ppo_gae, ops::normalize, ops::ppo_collect_truncated,
 *              ops::ppo_terminal_observations, ops::ppo_scatter_values, src/ops/ppo/ops.hpp).
 * Signatures:  cuda/abi/ppo_gae.h. CPU twins: src/ops/ppo/cpu.cpp.
 */
#include "abi/ppo_gae.h"
#include "device_functions.cuh"

using fh::device::global_thread_index;
using fh::device::grid_thread_count;
using fh::ppo::kNormalizeBlocks;
using fh::ppo::kNormalizeThreads;

namespace {

/// Sum over the block (blockDim.x == kNormalizeThreads, a power of two) in a fixed tree order;
/// every thread gets the total.
__device__ double block_sum_fixed(double v, double* s) {
    s[threadIdx.x] = v;
    __syncthreads();
    for (int stride = kNormalizeThreads / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < static_cast<unsigned>(stride)) s[threadIdx.x] += s[threadIdx.x + stride];
        __syncthreads();
    }
    const double total = s[0];
    __syncthreads();  // s may be reused by the caller
    return total;
}

}  // namespace

extern "C" __global__ void ppo_gae_kernel(float* __restrict__ advantages, float* __restrict__ returns,
                                          const float* __restrict__ rewards, const float* __restrict__ values,
                                          const float* __restrict__ next_values, const std::uint8_t* __restrict__ done,
                                          float gamma, float lambda, int T, int n,
                                          const float* __restrict__ agent_gamma_lambda, int agents) {
    // Agent g's environments are e in [g n, (g + 1) n), its (T, n) rows from g T n (one agent: g 0).
    for (long long e = global_thread_index(); e < static_cast<long long>(n) * agents; e += grid_thread_count()) {
        const long long g = e / n, rows = g * T * n;
        fh::ppo::gae_env(static_cast<int>(e - g * n), n, T, rewards + rows, values + rows, next_values + rows,
                         done + rows, agent_gamma_lambda == nullptr ? gamma : agent_gamma_lambda[2 * g],
                         agent_gamma_lambda == nullptr ? lambda : agent_gamma_lambda[2 * g + 1], advantages + rows,
                         returns + rows);
    }
}

extern "C" __global__ void ppo_normalize_partials_kernel(float* __restrict__ partials, const float* __restrict__ x,
                                                         int n) {
    __shared__ double s[kNormalizeThreads];
    const float shift = x[0];
    double s1 = 0.0, s2 = 0.0;
    for (long long i = global_thread_index(); i < n; i += grid_thread_count()) {
        const double d = static_cast<double>(x[i]) - static_cast<double>(shift);
        s1 += d;
        s2 += d * d;
    }
    const double b1 = block_sum_fixed(s1, s);
    const double b2 = block_sum_fixed(s2, s);
    if (threadIdx.x == 0) {
        float* p = partials + 4 * blockIdx.x;
        p[0] = static_cast<float>(b1);
        p[1] = static_cast<float>(b1 - static_cast<double>(p[0]));
        p[2] = static_cast<float>(b2);
        p[3] = static_cast<float>(b2 - static_cast<double>(p[2]));
        if (blockIdx.x == 0) partials[4 * kNormalizeBlocks] = shift;
    }
}

extern "C" __global__ void ppo_normalize_apply_kernel(float* __restrict__ x, const float* __restrict__ partials,
                                                      int n) {
    __shared__ double s[kNormalizeThreads];
    __shared__ float moments[2];
    double s1 = 0.0, s2 = 0.0;
    for (int b = threadIdx.x; b < kNormalizeBlocks; b += kNormalizeThreads) {
        s1 += static_cast<double>(partials[4 * b]) + static_cast<double>(partials[4 * b + 1]);
        s2 += static_cast<double>(partials[4 * b + 2]) + static_cast<double>(partials[4 * b + 3]);
    }
    const double t1 = block_sum_fixed(s1, s);
    const double t2 = block_sum_fixed(s2, s);
    if (threadIdx.x == 0) fh::ppo::normalize_moments(t1, t2, n, partials[4 * kNormalizeBlocks], moments[0], moments[1]);
    __syncthreads();
    const float mean = moments[0], denom = moments[1];
    for (long long i = global_thread_index(); i < n; i += grid_thread_count())
        x[i] = fh::ppo::normalize_element(x[i], mean, denom);
}

extern "C" __global__ void ppo_collect_truncated_kernel(int* __restrict__ rows, int* __restrict__ bars,
                                                        float* __restrict__ portfolio, int* __restrict__ count,
                                                        const float* __restrict__ next_states,
                                                        const fh::env::StepInfo* __restrict__ info,
                                                        const std::uint8_t* __restrict__ done, int n, int state_dim,
                                                        int market_dim, int row_base, int capacity, int restart) {
    constexpr int kWarps = fh::ppo::kCollectThreads / 32;
    {  // block b: agent b's environments and lists (one block: a single agent's)
        const int agent = static_cast<int>(blockIdx.x);
        const long long envs = static_cast<long long>(agent) * n;
        rows += static_cast<long long>(agent) * capacity;
        bars += static_cast<long long>(agent) * capacity;
        portfolio += static_cast<long long>(agent) * capacity * (state_dim - market_dim);
        count += agent;
        next_states += envs * state_dim;
        info += envs;
        done += envs;
    }
    __shared__ int warp_offset[kWarps];
    __shared__ int tile_envs[fh::ppo::kCollectThreads];  // the tile's truncated environments, in order
    __shared__ int tile_total, start;
    if (threadIdx.x == 0) start = restart ? 0 : *count;
    __syncthreads();
    int base = start;
    const int P = state_dim - market_dim;
    const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
    for (int first = 0; first < n; first += fh::ppo::kCollectThreads) {
        const int e = first + static_cast<int>(threadIdx.x);
        const bool take = e < n && done[e] == fh::env::kTruncated;
        const unsigned mask = __ballot_sync(0xffffffffu, take);
        if (lane == 0) warp_offset[warp] = __popc(mask);
        __syncthreads();
        if (threadIdx.x == 0) {  // exclusive scan of kWarps counts
            int sum = 0;
            for (int w = 0; w < kWarps; ++w) {
                const int c = warp_offset[w];
                warp_offset[w] = sum;
                sum += c;
            }
            tile_total = sum;
        }
        __syncthreads();
        if (take) tile_envs[warp_offset[warp] + __popc(mask & ((1u << lane) - 1u))] = e;
        __syncthreads();
        const int total = tile_total;
        for (int k = static_cast<int>(threadIdx.x); k < total; k += static_cast<int>(blockDim.x)) {
            const long long entry = static_cast<long long>(base) + k;
            if (entry < 0 || entry >= capacity) continue;
            rows[entry] = row_base + tile_envs[k];
            bars[entry] = info[tile_envs[k]].bar;
        }
        const long long values = static_cast<long long>(total) * P;
        for (long long i = threadIdx.x; i < values; i += blockDim.x) {
            const long long k = i / P, j = i - k * P;
            const long long entry = base + k;
            if (entry >= 0 && entry < capacity)
                portfolio[entry * P + j] =
                    next_states[static_cast<long long>(tile_envs[k]) * state_dim + market_dim + j];
        }
        base += total;
        __syncthreads();  // the next tile reuses the shared arrays
    }
    if (threadIdx.x == 0) *count = base;
}

extern "C" __global__ void ppo_terminal_observations_kernel(float* __restrict__ observations,
                                                            const int* __restrict__ bars,
                                                            const float* __restrict__ portfolio,
                                                            const float* __restrict__ features, int n_bars, int rows,
                                                            int state_dim, int market_dim) {
    const long long total = static_cast<long long>(rows) * state_dim;
    const int P = state_dim - market_dim;
    for (long long i = global_thread_index(); i < total; i += grid_thread_count()) {
        const long long r = i / state_dim;
        const int c = static_cast<int>(i - r * state_dim);
        observations[i] =
            fh::ppo::terminal_observation_value(features, n_bars, bars[r], market_dim, portfolio + r * P, c);
    }
}

extern "C" __global__ void ppo_scatter_values_kernel(float* __restrict__ dst, const float* __restrict__ values,
                                                     const int* __restrict__ rows, int count, int size) {
    for (long long i = global_thread_index(); i < count; i += grid_thread_count()) {
        const int row = rows[i];
        if (row >= 0 && row < size) dst[row] = values[i];
    }
}

FH_KERNELS_ppo_gae(FH_CHECK_KERNEL_ABI)
