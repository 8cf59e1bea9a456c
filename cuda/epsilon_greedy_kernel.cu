/* epsilon_greedy_kernel.cu — exploration for DQN collection (SPEC section 7).
 *
 * Math:        dqn::epsilon_greedy in abi/dqn_math.h: with probability epsilon a uniform
 *              action, else the first argmax of Q; coins from Philox(seed, exploration, e, step).
 * Layout:      q (n, num_actions), actions (n).
 * Launch:      one thread per environment, any 1-D grid.
 * Determinism: exact; equal to the CPU twin (src/ops/cpu/cpu_dqn_ops.cpp) given equal Q.
 * Aliasing:    actions and q are distinct buffers.
 * Signatures:  cuda/abi/epsilon_greedy_abi.h.
 */
#include "abi/epsilon_greedy_abi.h"
#include "common_device_functions.cuh"

using fh::device::global_thread_index;
using fh::device::grid_thread_count;

extern "C" __global__ void epsilon_greedy_kernel(int* __restrict__ actions, const float* __restrict__ q,
                                                 int num_actions, float epsilon, std::uint64_t seed,
                                                 std::uint64_t step, int n) {
    for (long long e = global_thread_index(); e < n; e += grid_thread_count())
        actions[e] = fh::dqn::epsilon_greedy(q + e * num_actions, num_actions, epsilon, seed,
                                             static_cast<int>(e), step);
}

FH_EPSILON_GREEDY_KERNELS(FH_CHECK_KERNEL_ABI)
