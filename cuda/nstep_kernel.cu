/* nstep_kernel.cu — uniform sampling from the replay ring with n-step returns (SPEC section 7).
 *
 * Math:        dqn::sample_nstep in abi/dqn_math.h: row b draws (step, env) from Philox(seed,
 *              replay_sample, b, update); R = sum_{k<n} gamma^k r_{t+k} up to the first done;
 *              discount = gamma^(k+1), or 0 after a termination. CPU twin in
 *              src/ops/cpu/cpu_dqn_ops.cpp.
 * Layout:      the ring (capacity_steps * n_envs rows, slot = step % capacity_steps); outputs
 *              states/next_states (B, state_dim), actions/returns/discounts (B).
 * Launch:      one thread per batch row, any 1-D grid.
 * Determinism: exact, and bit-identical to the CPU twin (module built with --fmad=false).
 * Aliasing:    outputs are distinct buffers, disjoint from the ring.
 * Signatures:  cuda/abi/nstep_abi.h.
 */
#include "abi/nstep_abi.h"
#include "common_device_functions.cuh"

using fh::device::global_thread_index;
using fh::device::grid_thread_count;

extern "C" __global__ void nstep_sample_kernel(float* __restrict__ states, float* __restrict__ next_states,
                                               int* __restrict__ actions, float* __restrict__ returns,
                                               float* __restrict__ discounts, fh::dqn::ReplayView replay,
                                               fh::dqn::SampleParams params, int batch) {
    for (long long b = global_thread_index(); b < batch; b += grid_thread_count())
        fh::dqn::sample_nstep(static_cast<int>(b), replay, params, states + b * replay.state_dim,
                              next_states + b * replay.state_dim, actions[b], returns[b], discounts[b]);
}

FH_NSTEP_KERNELS(FH_CHECK_KERNEL_ABI)
