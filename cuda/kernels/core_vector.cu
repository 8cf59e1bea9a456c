/* core_vector.cu — elementwise vector utilities used by every trainer.
 *
 * Math:       fill  y[i] = value
 *             copy  dst[i] = src[i]
 *             copy_group  up to kCopyGroupMax (8) copies (any element type) in one launch, one per grid.y
 *             saxpy y[i] = fma(a, x[i], y[i])        (core::saxpy_element)
 *             scale y[i] = y[i] * alpha              (in place)
 *             mean  out[s] = sum(x segment s) / n    (a block per segment, fixed-order tree)
 *             increment counter[0] += 1             (one thread: a device-side update number)
 *             copy_every dst[i] = src[i] if counter[0] % period == 0
 * Layout:     flat float arrays of n elements (n < 2^31).
 * Launch:     1-D, any grid and block size: grid-stride loops (the launch rules, cuda/abi/core_vector.h, use
 *             256 threads and enough blocks to cover n, capped).
 * Determinism: exact and run-to-run identical (no atomics); fill/copy/saxpy/scale are
 *             bit-identical to the CPU twins in src/ops/core/cpu.cpp (same fma); mean sums
 *             in another order than the CPU, so it agrees within float rounding. Tests: tests/ops/.
 * Aliasing:   copy and saxpy take __restrict__ pointers: their buffers must not overlap (the ops'
 *             checks refuse overlap). In-place scaling is scale_f32_kernel, a single pointer,
 *             never saxpy(y, y, alpha - 1), which is undefined behaviour under __restrict__ (an
 *             aliased saxpy can produce NaNs).
 * Signatures: cuda/abi/core_vector.h (checked below).
 */
#include "abi/core_vector.h"
#include "device_functions.cuh"

using fh::device::global_thread_index;
using fh::device::grid_thread_count;

extern "C" __global__ void fill_f32_kernel(fh::ops::Fill a) {
    const long long n = static_cast<long long>(a.y.size());
    for (long long i = global_thread_index(); i < n; i += grid_thread_count()) a.y[i] = a.value;
}

extern "C" __global__ void copy_f32_kernel(fh::ops::Copy a) {
    const long long n = static_cast<long long>(a.dst.size());
    float* __restrict__ dst = a.dst;
    const float* __restrict__ src = a.src;
    for (long long i = global_thread_index(); i < n; i += grid_thread_count()) dst[i] = src[i];
}

extern "C" __global__ void copy_group_kernel(fh::abi::CopyGroupArgs args) {
    const int c = static_cast<int>(blockIdx.y);
    const long long bytes = args.bytes[c], rows = args.rows[c];
    const long long dst_pitch = args.dst_pitch[c], src_pitch = args.src_pitch[c];
    const auto* src = static_cast<const unsigned char*>(args.src[c]);
    auto* dst = static_cast<unsigned char*>(args.dst[c]);
    const long long step = static_cast<long long>(gridDim.x) * blockDim.x;
    const long long first = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (((reinterpret_cast<unsigned long long>(src) | reinterpret_cast<unsigned long long>(dst) |
          static_cast<unsigned long long>(bytes) | static_cast<unsigned long long>(dst_pitch) |
          static_cast<unsigned long long>(src_pitch)) &
         3ULL) == 0) {
        const long long words = bytes / 4;  // a row's
        for (long long i = first; i < words * rows; i += step) {
            const long long r = i / words, w = i - r * words;
            reinterpret_cast<unsigned*>(dst + r * dst_pitch)[w] =
                reinterpret_cast<const unsigned*>(src + r * src_pitch)[w];
        }
    } else {
        for (long long i = first; i < bytes * rows; i += step) {
            const long long r = i / bytes, b = i - r * bytes;
            dst[r * dst_pitch + b] = src[r * src_pitch + b];
        }
    }
}

extern "C" __global__ void saxpy_f32_kernel(fh::ops::Saxpy a) {
    const long long n = static_cast<long long>(a.y.size());
    float* __restrict__ y = a.y;
    const float* __restrict__ x = a.x;
    for (long long i = global_thread_index(); i < n; i += grid_thread_count())
        y[i] = fh::core::saxpy_element(y[i], a.a, x[i]);
}

extern "C" __global__ void scale_f32_kernel(fh::ops::Scale a) {
    const long long n = static_cast<long long>(a.y.size());
    for (long long i = global_thread_index(); i < n; i += grid_thread_count()) a.y[i] *= a.alpha;
}

extern "C" __global__ void mean_f32_kernel(fh::ops::Mean a) {
    __shared__ float partial[fh::ops::kMeanThreads];
    const int n = static_cast<int>(a.x.size() / a.out.size());
    const float* __restrict__ x = a.x.data() + static_cast<long long>(blockIdx.x) * n;  // this block's segment
    float sum = 0.0f;
    for (int i = threadIdx.x; i < n; i += fh::ops::kMeanThreads) sum += x[i];
    partial[threadIdx.x] = sum;
    __syncthreads();
    for (int stride = fh::ops::kMeanThreads / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x == 0) a.out.data()[blockIdx.x] = partial[0] / static_cast<float>(n);
}

extern "C" __global__ void increment_i64_kernel(fh::ops::Increment a) {
    const long long n = static_cast<long long>(a.counter.size());
    for (long long i = global_thread_index(); i < n; i += grid_thread_count()) a.counter.data()[i] += 1;
}

extern "C" __global__ void copy_every_f32_kernel(fh::ops::CopyEvery a) {
    const unsigned agent = blockIdx.y;  // one row of blocks per agent's slice
    if (a.counter.data()[agent] % a.period != 0) return;
    const long long n = static_cast<long long>(a.dst.size() / a.counter.size());
    float* __restrict__ dst = a.dst.data() + agent * n;
    const float* __restrict__ src = a.src.data() + agent * n;
    for (long long i = global_thread_index(); i < n; i += grid_thread_count()) dst[i] = src[i];
}

FH_KERNELS_core_vector(FH_CHECK_KERNEL_ABI)
