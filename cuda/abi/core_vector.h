/// @file core_vector.h
/// @brief The signatures of cuda/kernels/core_vector.cu and their per-element math, written once:
///        the .cu static_asserts its kernels against them and the host builds typed handles from them.
#pragma once

#include "math/core.h"

namespace fh::abi {

// Parameter order: outputs, inputs, then sizes. Every array has n elements.

/// y[i] = value.
using FillF32 = void(float* y, float value, int n);
/// dst[i] = src[i]. dst and src must not overlap (__restrict__).
using CopyF32 = void(float* __restrict__ dst, const float* __restrict__ src, int n);
/// Up to kCopyGroupMax independent copies in one launch (a rollout step's stores): copy c
/// (grid.y = the copies given) moves rows[c] rows of bytes[c] bytes, row r from src[c] + r
/// src_pitch[c] to dst[c] + r dst_pitch[c] (one row: a plain copy), in 4-byte words where the
/// pointers, the size and the pitches allow, else byte by byte; grid.x blocks stride over the
/// longest copy. No copy's dst may overlap another copy's src or dst, nor its own src.
constexpr int kCopyGroupMax = 8;
struct CopyGroupArgs {
    void* dst[kCopyGroupMax];
    const void* src[kCopyGroupMax];
    long long bytes[kCopyGroupMax];
    long long rows[kCopyGroupMax];
    long long dst_pitch[kCopyGroupMax];
    long long src_pitch[kCopyGroupMax];
};
using CopyGroup = void(CopyGroupArgs args);
/// y[i] += a * x[i] (one fused multiply-add). x and y must not overlap (__restrict__):
/// for y *= alpha use ScaleF32, never saxpy(y, y, alpha - 1) (undefined under __restrict__: an
/// aliased saxpy can produce NaNs).
using SaxpyF32 = void(float* __restrict__ y, const float* __restrict__ x, float a, int n);
/// y[i] *= alpha, in place; a single pointer, so nothing can alias.
using ScaleF32 = void(float* y, float alpha, int n);

/// out[s] = (sum of x[s n, (s + 1) n)) / n for each of the grid's segments. Launch one block of
/// kMeanThreads threads per segment (grid.x): each thread sums a fixed stride, then a fixed tree
/// (deterministic run to run). out and x must not overlap.
using MeanF32 = void(float* __restrict__ out, const float* __restrict__ x, int n);
constexpr int kMeanThreads = 256;

/// counter[0] += 1: a trainer's update number kept on the device, so a captured update reads
/// it instead of taking it from the host. Launch one thread.
using IncrementI64 = void(long long* counter);
/// dst[i] = src[i] when counter[0] % period == 0 (period >= 1), else nothing: a periodic copy
/// (e.g. a target network's) decided on the device. dst and src must not overlap.
using CopyEveryF32 = void(float* __restrict__ dst, const float* __restrict__ src, const long long* __restrict__ counter,
                          long long period, int n);

}  // namespace fh::abi

// FH_KERNEL(module, kernel symbol, signature in fh::abi) for each kernel of the module.
#define FH_KERNELS_core_vector(FH_KERNEL)                      \
    FH_KERNEL(core_vector, fill_f32_kernel, FillF32)           \
    FH_KERNEL(core_vector, copy_f32_kernel, CopyF32)           \
    FH_KERNEL(core_vector, copy_group_kernel, CopyGroup)       \
    FH_KERNEL(core_vector, saxpy_f32_kernel, SaxpyF32)         \
    FH_KERNEL(core_vector, scale_f32_kernel, ScaleF32)         \
    FH_KERNEL(core_vector, mean_f32_kernel, MeanF32)           \
    FH_KERNEL(core_vector, increment_i64_kernel, IncrementI64) \
    FH_KERNEL(core_vector, copy_every_f32_kernel, CopyEveryF32)
