/// @file ppo_gae.h
/// @brief Signatures of cuda/kernels/ppo_gae.cu: generalised advantage estimation and the
///        deterministic in-place normalisation of the advantages.
#pragma once

#include <cstdint>

#include "math/ppo.h"

namespace fh::abi {

/// For e < n: ppo::gae_env(e, n, T, ...); every buffer (T, n), row t * n + e. Outputs distinct
/// from each other and from the inputs (values and next_values may share: read-only).
using PpoGae = void(float* __restrict__ advantages, float* __restrict__ returns,
                    const float* __restrict__ rewards, const float* __restrict__ values,
                    const float* __restrict__ next_values, const std::uint8_t* __restrict__ done,
                    float gamma, float lambda, int T, int n);
/// Launch exactly ppo::kNormalizeBlocks x ppo::kNormalizeThreads. partials (kNormalizeScratch):
/// block b writes the double sums of d = x - x[0] and d^2 over its grid-stride share, each as a
/// float pair (hi, lo = d - hi) at 4b..4b+3; block 0 writes x[0] at 4 * kNormalizeBlocks.
using PpoNormalizePartials = void(float* __restrict__ partials, const float* __restrict__ x, int n);
/// Any 1-D grid of kNormalizeThreads-thread blocks: every block reduces the partials in the same
/// fixed order (identical moments in every block), then x[i] = ppo::normalize_element(x[i], ...).
using PpoNormalizeApply = void(float* __restrict__ x, const float* __restrict__ partials, int n);

}  // namespace fh::abi

#define FH_KERNELS_ppo_gae(FH_KERNEL)                                                 \
    FH_KERNEL(ppo_gae, ppo_gae_kernel, PpoGae)                                 \
    FH_KERNEL(ppo_gae, ppo_normalize_partials_kernel, PpoNormalizePartials)    \
    FH_KERNEL(ppo_gae, ppo_normalize_apply_kernel, PpoNormalizeApply)
