/// @file ppo_minibatch.h
/// @brief Signature of cuda/kernels/ppo_minibatch.cu: a shuffled minibatch of the rollout.
#pragma once

#include <cstdint>

#include "math/ppo.h"

namespace fh::abi {

/// For i < batch: ppo::gather_row(i, rollout, seed, epoch, offset, ...): states (batch,
/// state_dim), the rest (batch). Outputs distinct from each other and from the rollout.
using PpoGather = void(float* __restrict__ states, int* __restrict__ actions,
                       float* __restrict__ old_log_probs, float* __restrict__ advantages,
                       float* __restrict__ returns, float* __restrict__ old_values,
                       ppo::RolloutView rollout, std::uint64_t seed, std::uint64_t epoch, int offset,
                       int batch);

}  // namespace fh::abi

#define FH_KERNELS_ppo_minibatch(FH_KERNEL) \
    FH_KERNEL(ppo_minibatch, ppo_gather_kernel, PpoGather)
