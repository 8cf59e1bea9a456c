/// @file replay_nstep.h
/// @brief Signature of cuda/kernels/replay_nstep.cu: uniform replay sampling with n-step returns.
#pragma once

#include "math/replay.h"

namespace fh::abi {

/// Row b of the batch = replay::sample_nstep(b, replay, params): states, next_states (B, D),
/// actions, returns, discounts (B). Outputs distinct from each other and from the ring.
/// update_from (1) or null: the RNG's update number read from device memory instead of
/// params.update (a captured update). advance (1) or null: instead, the update number is
/// advance[0] + 1 and the launch leaves it in advance[0] (the last block to finish, counted on
/// ticket (1), zero before and after): a captured update's counter advanced without a launch of
/// its own. Launch one warp per row: blocks of a multiple of 32 threads.
using NstepSample = void(float* __restrict__ states, float* __restrict__ next_states, int* __restrict__ actions,
                         float* __restrict__ returns, float* __restrict__ discounts, replay::ReplayView replay,
                         replay::SampleParams params, const long long* __restrict__ update_from,
                         long long* __restrict__ advance, unsigned* __restrict__ ticket, int batch);

/// One agent of a population's batch draw: its ring and its sampling (seed, sampleable range,
/// n, gamma; the update number comes from the shared counter).
struct SampleAgent {
    replay::ReplayView ring;
    replay::SampleParams params;
};
/// nstep_sample_kernel for every agent of a population at once: agent a = blockIdx.y draws its
/// batch from agents[a].ring with agents[a].params at the update number advance[0] + 1 (every
/// agent's), into states + a * out_stride, next_states + a * out_stride (B, D each) and actions,
/// returns, discounts + a * B; the last of all blocks leaves the number in advance[0] (ticket as
/// nstep_sample_kernel's). Agent a's rows are nstep_sample_kernel's on its ring. Launch one warp
/// per row in x (blocks of a multiple of 32 threads, any grid), gridDim.y = agents.
using NstepSampleAgents = void(float* __restrict__ states, float* __restrict__ next_states, int* __restrict__ actions,
                               float* __restrict__ returns, float* __restrict__ discounts,
                               const SampleAgent* __restrict__ agents, long long out_stride,
                               long long* __restrict__ advance, unsigned* __restrict__ ticket, int batch);

}  // namespace fh::abi

#define FH_KERNELS_replay_nstep(FH_KERNEL)                    \
    FH_KERNEL(replay_nstep, nstep_sample_kernel, NstepSample) \
    FH_KERNEL(replay_nstep, nstep_sample_agents_kernel, NstepSampleAgents)
