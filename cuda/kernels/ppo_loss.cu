/* ppo_loss.cu — the PPO loss (clipped surrogate, value, entropy) and its gradients with
 * respect to the policy logits and the critic's values (docs/ppo.md, "Kernel-level math").
 *
 * Math:        ppo::loss_sample: ratio = exp(logp - old_logp);
 *              L = mean_i [ -min(ratio adv, clip(ratio, 1-eps, 1+eps) adv) + value_coef Lv
 *                           - entropy_coef H ],
 *              Lv = 0.5 (v - R)^2 or 0.5 max((v - R)^2, (v_old + clip(v - v_old, -eps, eps) - R)^2);
 *              d_logits = dL/dlogits, d_values = dL/dv (the minibatch mean's gradient, 1/B inside).
 *              stats: policy loss, value loss, entropy, approx KL (old - new), clipped (0/1).
 * Agents:      several agents' minibatches of rows_per_agent rows one after the other (B =
 *              agents x rows_per_agent), each with its agent_params (null: `params` for every
 *              row) and its own mean (1 / rows_per_agent); stats stay (kPpoLossStats, B), so stat
 *              k is (agents, rows_per_agent) and one ops::mean over it gives (stats, agents).
 * Layout:      logits, d_logits (B, A); values, actions, old_log_probs, advantages, returns,
 *              old_values, d_values (B); stats (ppo::kPpoLossStats, B): stat k of sample i at k B + i,
 *              so each stat is contiguous for ops::mean.
 * Launch:      kPpoLossLanes lanes per sample (blocks of kPpoLossThreads, grid-stride over groups of
 *              lanes); lane l of a group takes the actions l, l + kPpoLossLanes, ... of its row.
 * Determinism: exact (no atomics; a row's maximum, exp-sum and entropy are each a lane's sum in
 *              action order, then a fixed xor tree over the group's lanes, which leaves the same
 *              value in each of them); ≈ CPU twin, which sums each row in action order (expf, logf
 *              and FMA contraction also round differently from the host).
 * Aliasing:    __restrict__ everywhere: outputs distinct from each other and from every input
 *              (checked by ops::ppo_loss, src/ops/ppo/ops.hpp); read-only inputs may share.
 * Signatures:  cuda/abi/ppo_loss.h. CPU twin: src/ops/ppo/cpu.cpp.
 */
#include "abi/ppo_loss.h"
#include "device_functions.cuh"

using fh::device::global_thread_index;
using fh::device::grid_thread_count;

namespace {

constexpr int G = fh::abi::kPpoLossLanes;  // lanes per sample

/// The maximum (as `a > b ? a : b`, the CPU twin's) and the sum over a sample's G lanes: the same
/// value in each of them (fh::device::lanes_reduce).
__device__ __forceinline__ float group_max(float v) {
    return fh::device::lanes_reduce<G>(v, [](float own, float other) { return other > own ? other : own; });
}
__device__ __forceinline__ float group_sum(float v) {
    return fh::device::lanes_reduce<G>(v, [](float own, float other) { return own + other; });
}

}  // namespace

extern "C" __global__ void ppo_loss_kernel(float* __restrict__ stats, float* __restrict__ d_logits,
                                           float* __restrict__ d_values, const float* __restrict__ logits,
                                           const float* __restrict__ values, const int* __restrict__ actions,
                                           const float* __restrict__ old_log_probs,
                                           const float* __restrict__ advantages, const float* __restrict__ returns,
                                           const float* __restrict__ old_values, fh::ppo::LossParams params,
                                           int num_actions, int batch,
                                           const fh::ppo::LossParams* __restrict__ agent_params, int rows_per_agent) {
    const int lane = static_cast<int>(threadIdx.x) % G;
    const long long groups = grid_thread_count() / G;
    // A warp's groups take consecutive samples and step together (the same trip counts), so the
    // shuffles see the whole warp; a group past the batch computes on sample 0 and writes nothing.
    for (long long base = global_thread_index() / 32 * (32 / G); base < batch; base += groups) {
        const long long row = base + static_cast<int>(threadIdx.x) % 32 / G;
        const bool live = row < batch;
        const long long i = live ? row : 0;
        const float* z = logits + i * num_actions;
        float m = -INFINITY;
        for (int j = lane; j < num_actions; j += G) m = z[j] > m ? z[j] : m;
        m = group_max(m);
        float sum = 0.0f;
        for (int j = lane; j < num_actions; j += G) sum += expf(z[j] - m);
        const float lse = m + logf(group_sum(sum));
        float h = 0.0f;
        for (int j = lane; j < num_actions; j += G) {
            const float lp = z[j] - lse;
            h -= expf(lp) * lp;
        }
        const float H = group_sum(h);
        if (!live) continue;
        const int a = actions[i];
        const float logp = z[a] - lse;
        const fh::ppo::LossParams p = agent_params == nullptr ? params : agent_params[i / rows_per_agent];
        const fh::ppo::LossTerms t =
            fh::ppo::loss_terms(logp, old_log_probs[i], advantages[i], values[i], returns[i], old_values[i], p);
        const float scale = 1.0f / static_cast<float>(rows_per_agent);
        float* dz = d_logits + i * num_actions;
        for (int j = lane; j < num_actions; j += G)
            dz[j] = fh::ppo::loss_logit_grad(z[j] - lse, j == a, t, H, p.entropy_coef, scale);
        if (lane == 0)
            fh::ppo::loss_write_sample(static_cast<int>(i), batch, scale, t, H, logp, old_log_probs[i], p, stats,
                                       d_values);
    }
}

FH_KERNELS_ppo_loss(FH_CHECK_KERNEL_ABI)
