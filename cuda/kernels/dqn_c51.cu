/* dqn_c51.cu — the dueling C51 head and its distributional loss.
 *
 * Math:        dqn::head_forward, head_backward, c51_sample_loss in math/dqn.h (Bellemare et
 *              al. 2017; Wang et al. 2016), shared with the CPU twins in
 *              src/ops/dqn/cpu.cpp and run in double by the gradient check.
 * Layout:      value (B, Z), adv (B, A*Z), logits/probs/d_logits (B, A, Z), q (B, A), per-sample
 *              vectors (B); row-major. Every size (A, Z, B) is a parameter.
 * Launch:      one thread per sample, any 1-D grid (grid-stride); no shared memory (the C51
 *              projection is built in the taken action's gradient row).
 * Determinism: run-to-run exact (one thread per sample, fixed order, no atomics). Versus the
 *              CPU: within float rounding (FMA contraction, device expf/logf).
 *              Tests: tests/ops/test_dqn_ops.cpp ([gpu]).
 * Aliasing:    every launch gets distinct buffers (checked by the ops in src/ops/dqn/ops.hpp).
 * Signatures:  cuda/abi/dqn_c51.h.
 */
#include "abi/dqn_c51.h"
#include "device_functions.cuh"

using fh::device::global_thread_index;
using fh::device::grid_thread_count;
using fh::dqn::HeadParams;

extern "C" __global__ void c51_head_forward_kernel(float* __restrict__ logits, float* __restrict__ probs,
                                                   float* __restrict__ q, const float* __restrict__ value,
                                                   const float* __restrict__ adv, HeadParams head, int batch) {
    const long long AZ = static_cast<long long>(head.num_actions) * head.num_atoms;
    for (long long b = global_thread_index(); b < batch; b += grid_thread_count())
        fh::dqn::head_forward<float>(value ? value + b * head.num_atoms : nullptr, adv + b * AZ,
                                     logits + b * AZ, probs + b * AZ, q + b * head.num_actions, head);
}

extern "C" __global__ void c51_head_backward_kernel(float* __restrict__ d_value, float* __restrict__ d_adv,
                                                    const float* __restrict__ d_logits, HeadParams head,
                                                    int batch) {
    const long long AZ = static_cast<long long>(head.num_actions) * head.num_atoms;
    for (long long b = global_thread_index(); b < batch; b += grid_thread_count())
        fh::dqn::head_backward<float>(d_logits + b * AZ, d_value ? d_value + b * head.num_atoms : nullptr,
                                      d_adv + b * AZ, head);
}

extern "C" __global__ void c51_loss_kernel(float* __restrict__ loss, float* __restrict__ d_logits,
                                           const float* __restrict__ logits, const float* __restrict__ probs,
                                           const float* __restrict__ q_next_select,
                                           const float* __restrict__ probs_next_target,
                                           const int* __restrict__ actions, const float* __restrict__ returns,
                                           const float* __restrict__ discounts, HeadParams head, int batch) {
    const float scale = 1.0f / static_cast<float>(batch);  // the loss is the batch mean
    for (long long b = global_thread_index(); b < batch; b += grid_thread_count())
        loss[b] = fh::dqn::c51_sample_loss<float>(b, logits, probs, q_next_select, probs_next_target,
                                                  actions, returns, discounts, d_logits, scale, head);
}

FH_KERNELS_dqn_c51(FH_CHECK_KERNEL_ABI)
