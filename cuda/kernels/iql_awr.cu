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
 * Aliasing:    outputs are distinct from every other operand (checked by ops::awr_policy_loss);
 *              read-only inputs may share memory.
 * Signatures:  cuda/abi/iql_awr.h.
 */
#include "abi/iql_awr.h"
#include "device_functions.cuh"

using fh::device::global_thread_index;
using fh::device::grid_thread_count;

extern "C" __global__ void awr_policy_loss_kernel(float* __restrict__ loss, float* __restrict__ weights,
                                                  float* __restrict__ d_logits, const float* __restrict__ logits,
                                                  const float* __restrict__ q1, const float* __restrict__ q2,
                                                  const float* __restrict__ v, const int* __restrict__ actions,
                                                  float beta, float max_weight, int num_actions, int batch,
                                                  const fh::iql::LossScalars* __restrict__ scalars, int agents) {
    const float scale = 1.0f / static_cast<float>(batch);
    const long long rows = static_cast<long long>(batch) * agents;
    for (long long b = global_thread_index(); b < rows; b += grid_thread_count()) {
        const bool own = scalars != nullptr;
        fh::iql::awr_row(b, loss, weights, d_logits, logits, q1, q2, v, actions, own ? scalars[b / batch].beta : beta,
                         own ? scalars[b / batch].max_weight : max_weight, num_actions, scale);
    }
}

FH_KERNELS_iql_awr(FH_CHECK_KERNEL_ABI)
