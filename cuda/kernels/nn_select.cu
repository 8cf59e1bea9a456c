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

extern "C" __global__ void epsilon_greedy_kernel(fh::ops::EpsilonGreedy a) {
    const long long n = static_cast<long long>(a.actions.size());
    for (long long e = global_thread_index(); e < n; e += grid_thread_count())
        a.actions[e] = fh::policy::epsilon_greedy(a.q + e * a.num_actions, a.num_actions, a.epsilon, a.seed,
                                                  static_cast<int>(e), a.step);
}

extern "C" __global__ void action_histogram_kernel(fh::ops::ActionHistogram a) {
    const long long n = static_cast<long long>(a.actions.size());
    const int rows_per_agent = static_cast<int>(n / a.agents);
    for (long long e = global_thread_index(); e < n; e += grid_thread_count()) {
        const int action = a.actions[e];
        if (action >= 0 && action < a.num_actions)
            atomicAdd(a.histogram + e / rows_per_agent * a.num_actions + action, 1ull);
    }
}

FH_KERNELS_nn_select(FH_CHECK_KERNEL_ABI)
