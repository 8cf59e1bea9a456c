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
 * Aliasing:    outputs are distinct from every other operand (checked by the ops' checks,
 *              cuda/abi/iql_value.h); read-only inputs may share memory.
 * Signatures:  cuda/abi/iql_value.h.
 */
#include "abi/iql_value.h"
#include "device_functions.cuh"

using fh::device::global_thread_index;
using fh::device::grid_thread_count;

extern "C" __global__ void iql_value_loss_kernel(fh::ops::IqlValueLoss a) {
    const fh::ops::IqlRows r = fh::ops::iql_rows(a.v.size(), a.q1.size(), a.scalars.empty() ? 1 : a.scalars.size());
    for (long long b = global_thread_index(); b < r.rows; b += grid_thread_count())
        fh::iql::value_row(b, a.loss, a.d_v, a.v, a.q1, a.q2, a.actions,
                           a.scalars != nullptr ? a.scalars[b / r.batch].expectile : a.expectile, r.num_actions,
                           r.scale);
}

extern "C" __global__ void iql_q_loss_kernel(fh::ops::IqlQLoss a) {
    const fh::ops::IqlRows r = fh::ops::iql_rows(a.actions.size(), a.q1.size(), static_cast<std::size_t>(a.agents));
    for (long long b = global_thread_index(); b < r.rows; b += grid_thread_count())
        fh::iql::q_row(b, a.loss, a.d_q1, a.d_q2, a.q1, a.q2, a.actions, a.rewards, a.discounts, a.v_next,
                       r.num_actions, r.scale);
}

FH_KERNELS_iql_value(FH_CHECK_KERNEL_ABI)
