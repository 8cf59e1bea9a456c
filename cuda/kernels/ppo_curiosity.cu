/* ppo_curiosity.cu — the elementwise parts of the ICM-style curiosity bonus: the
 * forward model's input and its prediction error (docs/ppo.md, "Kernel-level math"). The forward
 * model itself is an nn::Mlp on the network ops.
 *
 * Math:        input row e = [state row e (D) | one-hot(action e) (A)] (ppo::curiosity_input_row);
 *              error[e] = 0.5 * mean_j (pred[e, j] - next_state[e, j])^2 over the first P columns,
 *              d_pred[e, j] = (pred[e, j] - next_state[e, j]) / (n P), the gradient of mean_e error
 *              (ppo::curiosity_error_row).
 * Layout:      states (n, D), input (n, D + A), actions (n); pred, d_pred (n, P), next_states
 *              (n, state_dim), error (n).
 * Launch:      one thread per environment row, any 1-D grid (grid-stride).
 * Determinism: exact; float sums in order in one thread, IEEE division, --fmad=false: = CPU twin
 *              bit for bit.
 * Aliasing:    __restrict__ everywhere: outputs distinct from each other and from the inputs
 *              (checked by ops::curiosity_input / ops::curiosity_error, src/ops/ppo/ops.hpp).
 * Signatures:  cuda/abi/ppo_curiosity.h. CPU twins: src/ops/ppo/cpu.cpp.
 */
#include "abi/ppo_curiosity.h"
#include "device_functions.cuh"

using fh::device::global_thread_index;
using fh::device::grid_thread_count;

extern "C" __global__ void curiosity_input_kernel(float* __restrict__ input, const float* __restrict__ states,
                                                  const int* __restrict__ actions, int D, int num_actions, int n) {
    const long long width = static_cast<long long>(D) + num_actions;
    for (long long e = global_thread_index(); e < n; e += grid_thread_count())
        fh::ppo::curiosity_input_row(input + e * width, states + e * D, actions[e], D, num_actions);
}

extern "C" __global__ void curiosity_error_kernel(float* __restrict__ error, float* __restrict__ d_pred,
                                                  const float* __restrict__ pred, const float* __restrict__ next_states,
                                                  int P, int state_dim, int n) {
    for (long long e = global_thread_index(); e < n; e += grid_thread_count())
        error[e] = fh::ppo::curiosity_error_row(d_pred + e * P, pred + e * P, next_states + e * state_dim, P, n);
}

FH_KERNELS_ppo_curiosity(FH_CHECK_KERNEL_ABI)
