/* iql_value.cu — the two critic losses of Implicit Q-Learning (docs/iql.md).
 *
 * Math:        iql::value_row and iql::q_row in math/iql.h. Value: q = min(q1, q2)[a] of the
 *              TARGET twins, u = q - v, loss = |tau - 1(u < 0)| u^2, d_v = -2 w u / B. Twin Q:
 *              y = r + discount * V(s'), loss = (q1[a] - y)^2 + (q2[a] - y)^2 of the ONLINE
 *              twins, d_q = 2 (q - y) / B at column a, 0 elsewhere. CPU twins in
 *              src/ops/iql/cpu.cpp.
 * Layout:      q1, q2, d_q1, d_q2 (B, A) row-major; v, v_next, actions, rewards, discounts,
 *              loss, d_v (B).
 * Launch:      one thread per batch row (of every agent), any 1-D grid (grid-stride loop).
 * Determinism: run-to-run exact (no reductions, no atomics); versus the CPU within float rounding
 *              (nvcc may fuse r + discount * v_next into an FMA).
 * Aliasing:    outputs are distinct from every other operand (checked by ops::iql_value_loss /
 *              ops::iql_q_loss); read-only inputs may share memory.
 * Signatures:  cuda/abi/iql_value.h.
 */
#include "abi/iql_value.h"
#include "device_functions.cuh"

using fh::device::global_thread_index;
using fh::device::grid_thread_count;

extern "C" __global__ void iql_value_loss_kernel(float* __restrict__ loss, float* __restrict__ d_v,
                                                 const float* __restrict__ v, const float* __restrict__ q1,
                                                 const float* __restrict__ q2, const int* __restrict__ actions,
                                                 float expectile, int num_actions, int batch,
                                                 const fh::iql::LossScalars* __restrict__ scalars, int agents) {
    const float scale = 1.0f / static_cast<float>(batch);
    const long long rows = static_cast<long long>(batch) * agents;
    for (long long b = global_thread_index(); b < rows; b += grid_thread_count())
        fh::iql::value_row(b, loss, d_v, v, q1, q2, actions,
                           scalars != nullptr ? scalars[b / batch].expectile : expectile, num_actions, scale);
}

extern "C" __global__ void iql_q_loss_kernel(float* __restrict__ loss, float* __restrict__ d_q1,
                                             float* __restrict__ d_q2, const float* __restrict__ q1,
                                             const float* __restrict__ q2, const int* __restrict__ actions,
                                             const float* __restrict__ rewards, const float* __restrict__ discounts,
                                             const float* __restrict__ v_next, int num_actions, int batch, int agents) {
    const float scale = 1.0f / static_cast<float>(batch);
    const long long rows = static_cast<long long>(batch) * agents;
    for (long long b = global_thread_index(); b < rows; b += grid_thread_count())
        fh::iql::q_row(b, loss, d_q1, d_q2, q1, q2, actions, rewards, discounts, v_next, num_actions, scale);
}

FH_KERNELS_iql_value(FH_CHECK_KERNEL_ABI)
