/* ppo_loss.cu — the PPO loss (clipped surrogate, value, entropy) and its gradients with
 * respect to the policy logits and the critic's values (docs/ppo.md, "Kernel-level math").
 *
 * Math:        ppo::loss_sample: ratio = exp(logp - old_logp);
 *              L = mean_i [ -min(ratio adv, clip(ratio, 1-eps, 1+eps) adv) + value_coef Lv
 *                           - entropy_coef H ],
 *              Lv = 0.5 (v - R)^2 or 0.5 max((v - R)^2, (v_old + clip(v - v_old, -eps, eps) - R)^2);
 *              d_logits = dL/dlogits, d_values = dL/dv (the minibatch mean's gradient, 1/B inside).
 *              stats: policy loss, value loss, entropy, approx KL (old - new), clipped (0/1).
 * Layout:      logits, d_logits (B, A); values, actions, old_log_probs, advantages, returns,
 *              old_values, d_values (B); stats (ppo::kPpoLossStats, B): stat k of sample i at k B + i,
 *              so each stat is contiguous for ops::mean.
 * Launch:      one thread per sample, any 1-D grid (grid-stride); A up to a few hundred.
 * Determinism: exact (no atomics, each sample's sums in order in one thread); ≈ CPU twin (expf,
 *              logf and FMA contraction round differently from the host).
 * Aliasing:    __restrict__ everywhere: outputs distinct from each other and from every input
 *              (checked by ops::ppo_loss, src/ops/ppo/ops.hpp); read-only inputs may share.
 * Signatures:  cuda/abi/ppo_loss.h. CPU twin: src/ops/ppo/cpu.cpp.
 */
#include "abi/ppo_loss.h"
#include "device_functions.cuh"

using fh::device::global_thread_index;
using fh::device::grid_thread_count;

extern "C" __global__ void ppo_loss_kernel(float* __restrict__ stats, float* __restrict__ d_logits,
                                           float* __restrict__ d_values, const float* __restrict__ logits,
                                           const float* __restrict__ values, const int* __restrict__ actions,
                                           const float* __restrict__ old_log_probs,
                                           const float* __restrict__ advantages, const float* __restrict__ returns,
                                           const float* __restrict__ old_values, fh::ppo::LossParams params,
                                           int num_actions, int batch) {
    for (long long i = global_thread_index(); i < batch; i += grid_thread_count())
        fh::ppo::loss_sample(static_cast<int>(i), batch, num_actions, logits, values, actions, old_log_probs,
                             advantages, returns, old_values, params, stats, d_logits, d_values);
}

FH_KERNELS_ppo_loss(FH_CHECK_KERNEL_ABI)
