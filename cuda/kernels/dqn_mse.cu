/* dqn_mse.cu — the MSE loss on the expected Q of the C51 head, blended
 * with the C51 loss by dqn.mse_blend_alpha (ops::blend_c51_mse_gradient: scale then saxpy).
 *
 * Math:        dqn::mse_sample_loss in math/dqn.h: y = R + discount * Q_target(s', a*),
 *              loss = 0.5 (Q(s, a) - y)^2, dQ/dlogit_z = p_z (atom_z - Q). CPU twin in
 *              src/ops/dqn/cpu.cpp.
 * Layout:      probs/d_logits (B, A, Z), q/q_next_* (B, A), per-sample vectors (B).
 * Launch:      one thread per sample, any 1-D grid.
 * Determinism: run-to-run exact; versus the CPU within float rounding.
 * Aliasing:    every launch gets distinct buffers (checked by the ops in src/ops/dqn/ops.hpp).
 * Signatures:  cuda/abi/dqn_mse.h.
 */
#include "abi/dqn_mse.h"
#include "device_functions.cuh"

using fh::device::global_thread_index;
using fh::device::grid_thread_count;

extern "C" __global__ void mse_loss_kernel(float* __restrict__ loss, float* __restrict__ d_logits,
                                           float* __restrict__ td, const float* __restrict__ probs,
                                           const float* __restrict__ q, const float* __restrict__ q_next_select,
                                           const float* __restrict__ q_next_target,
                                           const int* __restrict__ actions, const float* __restrict__ returns,
                                           const float* __restrict__ discounts, fh::dqn::HeadParams head,
                                           int batch) {
    const float scale = 1.0f / static_cast<float>(batch);
    for (long long b = global_thread_index(); b < batch; b += grid_thread_count())
        loss[b] = fh::dqn::mse_sample_loss<float>(b, probs, q, q_next_select, q_next_target, actions,
                                                  returns, discounts, d_logits, td, scale, head);
}

FH_KERNELS_dqn_mse(FH_CHECK_KERNEL_ABI)
