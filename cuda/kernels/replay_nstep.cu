/* replay_nstep.cu — uniform sampling from the replay ring with n-step returns.
 *
 * Math:        replay::sample_nstep in math/dqn.h: row b draws (step, env) from Philox(seed,
 *              replay_sample, b, update); R = sum_{k<n} gamma^k r_{t+k} up to the first done;
 *              discount = gamma^(k+1), or 0 after a termination. CPU twin in
 *              src/ops/replay/cpu.cpp.
 * Layout:      the ring (capacity_steps * n_envs rows, slot = step % capacity_steps); outputs
 *              states/next_states (B, state_dim), actions/returns/discounts (B).
 * Launch:      one warp per batch row (replay::warp_sample_nstep: the pick drawn by every lane,
 *              step k's reward and done flag read by lane k at once beside both state rows (the
 *              next state's row guessed as the n-th step's, read again when a done flag came
 *              first), the return formed by every lane through shuffles; consecutive lanes on
 *              consecutive columns), 1-D blocks of a multiple of 32 threads, any grid
 *              (grid-stride over rows). With `advance`, the last block to finish (an integer
 *              ticket) advances the update counter every block read at its start.
 *              nstep_sample_agents_kernel: the same for each agent of a population (gridDim.y),
 *              its ring and sampling from abi::SampleAgent, every agent at one update number.
 * Determinism: exact, and bit-identical to the CPU twin (module built with --fmad=false).
 * Aliasing:    outputs are distinct buffers, disjoint from the ring.
 * Signatures:  cuda/abi/replay_nstep.h.
 */
#include "abi/replay_nstep.h"
#include "device_functions.cuh"

using fh::device::global_thread_index;
using fh::device::grid_thread_count;

extern "C" __global__ void nstep_sample_kernel(float* __restrict__ states, float* __restrict__ next_states,
                                               int* __restrict__ actions, float* __restrict__ returns,
                                               float* __restrict__ discounts, fh::replay::ReplayView replay,
                                               fh::replay::SampleParams params,
                                               const long long* __restrict__ update_from,
                                               long long* __restrict__ advance, unsigned* __restrict__ ticket,
                                               int batch) {
    if (advance != nullptr)
        params.update = static_cast<std::uint64_t>(*advance + 1);
    else if (update_from != nullptr)
        params.update = static_cast<std::uint64_t>(*update_from);
    const int lane = static_cast<int>(threadIdx.x % 32);
    const int D = replay.state_dim;
    for (long long b = global_thread_index() / 32; b < batch; b += grid_thread_count() / 32) {
        // b is the same on every lane of the warp (blocks are whole warps): a warp per row.
        const fh::replay::NstepDraw d = fh::replay::warp_sample_nstep(static_cast<int>(b), replay, params, lane,
                                                                      states + b * D, next_states + b * D);
        if (lane == 0) {
            actions[b] = d.action;
            returns[b] = d.ret;
            discounts[b] = d.discount;
        }
    }
    // Every block read the counter above; the last one to finish advances it for the ops after.
    if (advance != nullptr && fh::device::last_block_to_arrive(ticket, gridDim.x) && threadIdx.x == 0) {
        *advance += 1;
        *ticket = 0;
    }
}

extern "C" __global__ void nstep_sample_agents_kernel(float* __restrict__ states, float* __restrict__ next_states,
                                                      int* __restrict__ actions, float* __restrict__ returns,
                                                      float* __restrict__ discounts,
                                                      const fh::abi::SampleAgent* __restrict__ agents,
                                                      long long out_stride, long long* __restrict__ advance,
                                                      int advance_stride, unsigned* __restrict__ ticket, int batch) {
    const fh::abi::SampleAgent agent = agents[blockIdx.y];
    fh::replay::SampleParams params = agent.params;
    params.update = static_cast<std::uint64_t>(advance[blockIdx.y * advance_stride] + 1);
    states += blockIdx.y * out_stride;
    next_states += blockIdx.y * out_stride;
    const long long rows = static_cast<long long>(blockIdx.y) * batch;
    actions += rows, returns += rows, discounts += rows;
    const int lane = static_cast<int>(threadIdx.x % 32);
    const int D = agent.ring.state_dim;
    for (long long b = global_thread_index() / 32; b < batch; b += grid_thread_count() / 32) {
        const fh::replay::NstepDraw d = fh::replay::warp_sample_nstep(static_cast<int>(b), agent.ring, params, lane,
                                                                      states + b * D, next_states + b * D);
        if (lane == 0) {
            actions[b] = d.action;
            returns[b] = d.ret;
            discounts[b] = d.discount;
        }
    }
    if (fh::device::last_block_to_arrive(ticket, gridDim.x * gridDim.y) && threadIdx.x == 0) {
        for (unsigned a = 0; a < (advance_stride == 0 ? 1u : gridDim.y); ++a) advance[a] += 1;
        *ticket = 0;
    }
}

FH_KERNELS_replay_nstep(FH_CHECK_KERNEL_ABI)
