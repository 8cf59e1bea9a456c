/* nn_select.cu — exploration for DQN collection.
 *
 * Math:        policy::epsilon_greedy in math/dqn.h: with probability epsilon a uniform
 *              action, else the first argmax of Q; coins from Philox(seed, exploration, e, step).
 * Layout:      q (n, num_actions), actions (n).
 * Launch:      one thread per environment, any 1-D grid.
 * Determinism: exact; equal to the CPU twin (src/ops/nn/cpu.cpp) given equal Q.
 * Aliasing:    actions and q are distinct buffers.
 * Signatures:  cuda/abi/nn_select.h.
 */
#include "abi/nn_select.h"
#include "device_functions.cuh"

using fh::device::global_thread_index;
using fh::device::grid_thread_count;

extern "C" __global__ void epsilon_greedy_kernel(int* __restrict__ actions, const float* __restrict__ q,
                                                 int num_actions, float epsilon, std::uint64_t seed, std::uint64_t step,
                                                 int n) {
    for (long long e = global_thread_index(); e < n; e += grid_thread_count())
        actions[e] =
            fh::policy::epsilon_greedy(q + e * num_actions, num_actions, epsilon, seed, static_cast<int>(e), step);
}

extern "C" __global__ void action_histogram_kernel(unsigned long long* __restrict__ histogram,
                                                   const int* __restrict__ actions, int num_actions, int n,
                                                   int rows_per_agent) {
    for (long long e = global_thread_index(); e < n; e += grid_thread_count()) {
        const int a = actions[e];
        if (a >= 0 && a < num_actions) atomicAdd(histogram + e / rows_per_agent * num_actions + a, 1ull);
    }
}

FH_KERNELS_nn_select(FH_CHECK_KERNEL_ABI)
