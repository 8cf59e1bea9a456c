/// @file device_functions.cuh
/// @brief Device-only helpers shared by the kernel modules (index math, grid-stride loops, the
///        last block's ticket, lane reductions in a fixed order).
///        Scalar math that the CPU twins also need lives in cuda/abi/ instead.
#pragma once

#include <type_traits>

/// Blocks of 256 threads that fill a multiprocessor's threads (sm_86 and sm_89 run 1,536 a
/// multiprocessor, sm_80 and sm_90 2,048): the minimum blocks of __launch_bounds__ for a
/// streaming kernel that wants a full SM of blocks (the register cap follows from it).
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ == 860 || __CUDA_ARCH__ == 870 || __CUDA_ARCH__ == 890)
#define FH_FULL_SM_BLOCKS_OF_256 6
#else
#define FH_FULL_SM_BLOCKS_OF_256 8
#endif

namespace fh::device {

/// Global thread index and the grid's total thread count, as 64-bit values so that
/// grid-stride loops over large arrays cannot overflow.
__device__ __forceinline__ long long global_thread_index() {
    return static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ long long grid_thread_count() {
    return static_cast<long long>(gridDim.x) * blockDim.x;
}

/// This thread's grid-stride sum of squares of x[0, n) in double: fma(x_i, x_i, acc) over i =
/// thread, thread + grid, ... in that order. Its loads go out kLoads at a time before their fmas:
/// a plain loop (a division for its trip count, then a remainder loop with one load a trip) waits
/// for L2 once per element, this once per kLoads elements. The same floats as the plain loop.
__device__ __forceinline__ double grid_stride_sum_squares(const float* __restrict__ x, long long n) {
    constexpr int kLoads = 4;
    const long long stride = grid_thread_count();
    double acc = 0.0;
    for (long long i = global_thread_index(); i < n; i += kLoads * stride) {
        float v[kLoads];
#pragma unroll
        for (int u = 0; u < kLoads; ++u) v[u] = i + u * stride < n ? x[i + u * stride] : 0.f;
#pragma unroll
        for (int u = 0; u < kLoads; ++u)
            if (i + u * stride < n) {
                const double xi = v[u];
                acc = fma(xi, xi, acc);
            }
    }
    return acc;
}

/// Called by every thread of a block once it has written its share of a grid-wide result: true
/// in every thread of the last block to arrive, after the other blocks' writes are visible (read
/// them with __ldcg). An integer ticket counts the blocks, so which block finishes never changes
/// what it computes; that block resets the ticket to zero for the next launch.
__device__ __forceinline__ bool last_block_to_arrive(unsigned* ticket, unsigned blocks) {
    __shared__ bool last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0 && threadIdx.y == 0) last = atomicAdd(ticket, 1u) == blocks - 1;
    __syncthreads();
    if (last) __threadfence();
    return last;
}

/// v combined over each group of `Lanes` adjacent lanes (a power of two up to 32) by a fixed xor
/// butterfly, op(own, partner's) per step: with a commutative op (a sum, a maximum) every lane of
/// a group ends with the same value. All 32 lanes of the warp must call it together.
template <int Lanes, class Op>
__device__ __forceinline__ float lanes_reduce(float v, Op op) {
    static_assert(Lanes >= 1 && Lanes <= 32 && (Lanes & (Lanes - 1)) == 0, "lane groups tile the warp");
    for (int o = Lanes / 2; o > 0; o /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

}  // namespace fh::device

/// Ties a kernel definition to its declaration in cuda/abi/ (the host launches through that
/// declaration): a changed parameter list on either side fails to compile.
#define FH_CHECK_KERNEL_ABI(module, kernel, signature)                    \
    static_assert(std::is_same_v<decltype(kernel), ::fh::abi::signature>, \
                  #kernel " differs from its declaration fh::abi::" #signature);
