/// @file dqn_utility_abi.h
/// @brief The signatures of cuda/dqn_utility_kernels.cu and their per-element math, written once:
///        the .cu static_asserts its kernels against them and the host builds typed handles from them.
#pragma once

#include "abi/host_device.h"

namespace fh::abi {

// Parameter order: outputs, inputs, then sizes. Every array has n elements.

/// y[i] = value.
using DqnFillF32 = void(float* y, float value, int n);
/// dst[i] = src[i]. dst and src must not overlap (__restrict__).
using DqnCopyF32 = void(float* __restrict__ dst, const float* __restrict__ src, int n);
/// y[i] += a * x[i] (one fused multiply-add). x and y must not overlap (__restrict__):
/// for y *= alpha use DqnScaleF32, never saxpy(y, y, alpha - 1) (seeds/003, SPEC section 2).
using DqnSaxpyF32 = void(float* __restrict__ y, const float* __restrict__ x, float a, int n);
/// y[i] *= alpha, in place; a single pointer, so nothing can alias.
using DqnScaleF32 = void(float* y, float alpha, int n);

/// out[0] = (sum of x) / n. Launch exactly one block of kMeanThreads threads: each thread sums a
/// fixed stride, then a fixed tree (deterministic run to run). out and x must not overlap.
using DqnMeanF32 = void(float* __restrict__ out, const float* __restrict__ x, int n);
constexpr int kMeanThreads = 256;

/// The saxpy element, shared by the kernel and the CPU twin so both round identically
/// (an explicit fma: nvcc would contract a*x+y into one anyway, g++ on x86-64 would not).
FH_HD float saxpy_element(float y, float a, float x) { return __builtin_fmaf(a, x, y); }

}  // namespace fh::abi

// FH_KERNEL(module, kernel symbol, signature in fh::abi) for each kernel of the module.
#define FH_DQN_UTILITY_KERNELS(FH_KERNEL)                          \
    FH_KERNEL(dqn_utility_kernels, dqn_fill_f32_kernel, DqnFillF32)   \
    FH_KERNEL(dqn_utility_kernels, dqn_copy_f32_kernel, DqnCopyF32)   \
    FH_KERNEL(dqn_utility_kernels, dqn_saxpy_f32_kernel, DqnSaxpyF32) \
    FH_KERNEL(dqn_utility_kernels, dqn_scale_f32_kernel, DqnScaleF32) \
    FH_KERNEL(dqn_utility_kernels, dqn_mean_f32_kernel, DqnMeanF32)
