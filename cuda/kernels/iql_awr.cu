/* iql_awr.cu — the advantage-weighted regression (AWR) policy loss of Implicit
 * Q-Learning (docs/iql.md).
 *
 * Math:        iql::awr_row in math/iql.h: adv = min(q1, q2)[a] - v of the TARGET twins,
 *              w = min(exp(min(beta adv, 80)), max_weight) (a constant: no gradient through it),
 *              loss = -w log pi(a|s), d_logits = w (softmax - onehot(a)) / B; the softmax is
 *              policy::log_sum_exp (math/policy.h). CPU twin in src/ops/iql/cpu.cpp.
 * Layout:      logits, q1, q2, d_logits (B, A) row-major; v, actions, loss, weights (B).
 * Launch:      one thread per batch row (of every agent), any 1-D grid (grid-stride loop).
 * Determinism: run-to-run exact (no reductions across threads, no atomics); versus the CPU
 *              within float rounding (device expf/logf differ from glibc's in the last bits).
 * Aliasing:    outputs are distinct from every other operand (checked by ops::AwrPolicyLoss's check);
 *              read-only inputs may share memory.
 * Signatures:  cuda/abi/iql_awr.h.
 */
#include "abi/iql_awr.h"
#include "device_functions.cuh"

using fh::device::global_thread_index;
using fh::device::grid_thread_count;

extern "C" __global__ void awr_policy_loss_kernel(fh::ops::AwrPolicyLoss a) {
    const fh::ops::IqlRows r = fh::ops::iql_rows(a.v.size(), a.logits.size(), a.scalars.empty() ? 1 : a.scalars.size());
    for (long long b = global_thread_index(); b < r.rows; b += grid_thread_count()) {
        const bool own = a.scalars != nullptr;
        fh::iql::awr_row(b, a.loss, a.weights, a.d_logits, a.logits, a.q1, a.q2, a.v, a.actions,
                         own ? a.scalars[b / r.batch].beta : a.beta,
                         own ? a.scalars[b / r.batch].max_weight : a.max_weight, r.num_actions, r.scale);
    }
}

FH_KERNELS_iql_awr(FH_CHECK_KERNEL_ABI)
