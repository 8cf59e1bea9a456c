/// @file nstep_abi.h
/// @brief Signature of cuda/nstep_kernel.cu: uniform replay sampling with n-step returns.
#pragma once

#include "abi/dqn_math.h"

namespace fh::abi {

/// Row b of the batch = dqn::sample_nstep(b, replay, params): states, next_states (B, D),
/// actions, returns, discounts (B). Outputs distinct from each other and from the ring.
using NstepSample = void(float* __restrict__ states, float* __restrict__ next_states,
                         int* __restrict__ actions, float* __restrict__ returns,
                         float* __restrict__ discounts, dqn::ReplayView replay,
                         dqn::SampleParams params, int batch);

}  // namespace fh::abi

#define FH_NSTEP_KERNELS(FH_KERNEL) FH_KERNEL(nstep_kernel, nstep_sample_kernel, NstepSample)
