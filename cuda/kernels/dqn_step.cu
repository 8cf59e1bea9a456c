/* dqn_step.cu — the DQN trainer's fused device steps (docs/dqn.md, "The update on the device").
 *
 * Math:        cuda/math/dqn.h: head_logit / head_mean_adv (the dueling C51 head), softmax over
 *              the atoms, expected Q, policy::epsilon_greedy; the C51 projection in gather form
 *              (projection_position, projection_weight), the cross-entropy, the MSE on the
 *              expected Q and their blend (blended_logit_gradient); finish_update (guard,
 *              monitor, Adam constants, target copy, counters); adam_target_element.
 * Layout:      head rows (rows, W) with W = dqn::head_width: [value (Z) | advantages (A, Z)];
 *              stats (4, B); parameters flat (n). Per agent: buffers are [agents][...].
 * Launch:      act, loss: one warp per row, kDqnWarpsPerBlock warps per block, grid (ceil(rows /
 *              warps), agents), dynamic shared memory dqn_step_smem_floats floats per warp.
 *              finish: one block of kDqnFinishThreads per agent. adam_target: any 1-D grid
 *              (grid-stride) x agents. advance: one thread.
 * Determinism: exact run to run: warp reductions are xor butterflies (every lane ends with the
 *              same value, in a fixed order), block sums are fixed trees, no float atomics (the
 *              action histogram counts with integer atomics). The CPU twins
 *              (src/ops/dqn/cpu.cpp) sum in their own order: equal within rounding, except the
 *              finish, whose twin emulates the same trees and equals it bit for bit.
 * Aliasing:    outputs overlap no other operand; the select and target head rows may be one
 *              buffer (checked in src/ops/dqn/ops.hpp).
 * Signatures:  cuda/abi/dqn_step.h. Tests: tests/ops/test_dqn_step_ops.cpp ([gpu]).
 */
#include <cuda/std/limits>

#include "abi/dqn_step.h"
#include "device_functions.cuh"

using fh::device::global_thread_index;
using fh::device::grid_thread_count;
using namespace fh::dqn;

namespace {

constexpr unsigned kFullMask = 0xffffffffu;

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, o));
    return v;
}
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
    return v;
}

/// mean[z] = head_mean_adv(row, z) for the lane's atoms (z = lane, lane + 32, ...).
__device__ void mean_advantages(float* mean, const float* row, const HeadParams& h, int lane) {
    for (int z = lane; z < h.num_atoms; z += 32) mean[z] = head_mean_adv(row, z, h);
    __syncwarp();
}

/// The softmax over the atoms of action a of a head row: its maximum logit and the sum of
/// exp(logit - max), identical on every lane.
struct Softmax {
    float max, sum;
};
__device__ Softmax softmax_of(const float* row, const float* mean, int a, const HeadParams& h, int lane) {
    float mx = -cuda::std::numeric_limits<float>::infinity();
    for (int z = lane; z < h.num_atoms; z += 32) mx = fmaxf(mx, head_logit(row, mean[z], a, z, h));
    mx = warp_max(mx);
    float s = 0.f;
    for (int z = lane; z < h.num_atoms; z += 32) s += expf(head_logit(row, mean[z], a, z, h) - mx);
    return Softmax{mx, warp_sum(s)};
}

/// Q(a) = sum_z softmax_z * atom_z of a head row.
__device__ float q_of(const float* row, const float* mean, int a, const HeadParams& h, int lane) {
    const Softmax sm = softmax_of(row, mean, a, h, lane);
    float q = 0.f;
    for (int z = lane; z < h.num_atoms; z += 32)
        q += expf(head_logit(row, mean[z], a, z, h) - sm.max) / sm.sum * atom<float>(h, z);
    return warp_sum(q);
}

/// Sums one double per thread of a kDqnFinishThreads block in a fixed tree; all threads get it.
__device__ double block_sum(double v, double* shared) {
    shared[threadIdx.x] = v;
    __syncthreads();
    for (int stride = fh::abi::kDqnFinishThreads / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < static_cast<unsigned>(stride)) shared[threadIdx.x] += shared[threadIdx.x + stride];
        __syncthreads();
    }
    const double r = shared[0];
    __syncthreads();
    return r;
}
__device__ float block_min_max(float v, bool is_max, float* shared) {
    shared[threadIdx.x] = v;
    __syncthreads();
    for (int stride = fh::abi::kDqnFinishThreads / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < static_cast<unsigned>(stride)) {
            const float o = shared[threadIdx.x + stride];
            shared[threadIdx.x] = is_max ? fmaxf(shared[threadIdx.x], o) : fminf(shared[threadIdx.x], o);
        }
        __syncthreads();
    }
    const float r = shared[0];
    __syncthreads();
    return r;
}

}  // namespace

extern "C" __global__ void dqn_act_kernel(fh::abi::DqnActArgs a) {
    extern __shared__ float smem[];
    const HeadParams& h = a.head_params;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int agent = blockIdx.y;
    const long long e = static_cast<long long>(blockIdx.x) * fh::abi::kDqnWarpsPerBlock + warp;
    if (e >= a.n) return;
    float* mean = smem + warp * fh::abi::dqn_step_smem_floats(h);
    float* q = mean + 2 * h.num_atoms;
    const int W = head_width(h), A = h.num_actions;
    const long long row_index = static_cast<long long>(agent) * a.n + e;
    const float* row = a.head + row_index * W;
    mean_advantages(mean, row, h, lane);
    for (int act = 0; act < A; ++act) {
        const float qa = q_of(row, mean, act, h, lane);
        if (lane == 0) q[act] = qa;
    }
    __syncwarp();
    if (lane == 0) {
        int action;
        if (a.agent != nullptr) {
            const AgentParams& p = a.agent[agent];
            const long long step = a.counters[agent].steps;
            action = fh::policy::epsilon_greedy(q, A, epsilon_at(p, step), p.seed, static_cast<int>(e),
                                                static_cast<std::uint64_t>(step));
        } else {
            action = fh::policy::argmax(q, A);
        }
        a.actions[row_index] = action;
        if (a.histogram != nullptr) atomicAdd(a.histogram + static_cast<long long>(agent) * A + action, 1ull);
    }
    if (a.q != nullptr)
        for (int act = lane; act < A; act += 32) a.q[row_index * A + act] = q[act];
}

extern "C" __global__ void dqn_loss_kernel(fh::abi::DqnLossArgs a) {
    extern __shared__ float smem[];
    const HeadParams& h = a.head_params;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int agent = blockIdx.y;
    const long long b = static_cast<long long>(blockIdx.x) * fh::abi::kDqnWarpsPerBlock + warp;
    if (b >= a.batch) return;
    const int Z = h.num_atoms, A = h.num_actions, W = head_width(h);
    // Per warp: buf0 and buf1 (Z floats each), reused as the steps below go.
    float* buf0 = smem + warp * fh::abi::dqn_step_smem_floats(h);
    float* buf1 = buf0 + Z;
    const long long row_index = static_cast<long long>(agent) * a.batch + b;
    const float* hs = a.head_s + row_index * W;
    const float* hsel = a.head_select + row_index * W;
    const float* ht = a.head_target + row_index * W;
    float* d = a.d_head + row_index * W;
    float* stats = a.stats + static_cast<long long>(agent) * fh::dqn::kSampleStats * a.batch;
    const int act = a.actions[row_index];
    const float ret = a.returns[row_index], disc = a.discounts[row_index];
    const float scale = 1.0f / static_cast<float>(a.batch);
    const float alpha = a.agent[agent].mse_alpha;

    if (act < 0 || act >= A) {  // a corrupt batch: NaN losses (the guard skips it), no gradient
        for (int i = lane; i < W; i += 32) d[i] = 0.f;
        if (lane == 0)
            for (int k = 0; k < fh::dqn::kSampleStats; ++k)
                stats[k * a.batch + b] = cuda::std::numeric_limits<float>::quiet_NaN();
        return;
    }

    // 1. a* = the first maximal Q of the select row (double DQN: the online network at s').
    mean_advantages(buf0, hsel, h, lane);
    int a_star = 0;
    float best = 0.f;
    for (int x = 0; x < A; ++x) {
        const float qx = q_of(hsel, buf0, x, h, lane);
        if (x == 0 || qx > best) best = qx, a_star = x;
    }
    __syncwarp();

    // 2. The target network's distribution of a* at s' (p_next in buf1) and its Q.
    mean_advantages(buf0, ht, h, lane);
    const Softmax tsm = softmax_of(ht, buf0, a_star, h, lane);
    float q_target = 0.f;
    for (int z = lane; z < Z; z += 32) {
        const float p = expf(head_logit(ht, buf0[z], a_star, z, h) - tsm.max) / tsm.sum;
        buf1[z] = p;
        q_target += p * atom<float>(h, z);
    }
    q_target = warp_sum(q_target);
    __syncwarp();

    // 3. The projection m (in buf0): every target atom gathers from every source atom in order.
    const float* p_next = buf1;
    float* m = buf0;
    for (int i = lane; i < Z; i += 32) {
        float mi = 0.f;
        for (int j = 0; j < Z; ++j) mi += p_next[j] * projection_weight(projection_position(ret, disc, j, h), i);
        m[i] = mi;
    }
    __syncwarp();

    // 4. The online network at s, taken action (its means in buf1): log-softmax, cross-entropy,
    //    expected Q, MSE.
    float* mean_s = buf1;
    mean_advantages(mean_s, hs, h, lane);
    const Softmax ssm = softmax_of(hs, mean_s, act, h, lane);
    const float log_sum = ssm.max + logf(ssm.sum);
    float ce = 0.f, q = 0.f;
    for (int z = lane; z < Z; z += 32) {
        const float l = head_logit(hs, mean_s[z], act, z, h);
        ce -= m[z] * (l - log_sum);
        q += expf(l - ssm.max) / ssm.sum * atom<float>(h, z);
    }
    ce = warp_sum(ce);
    q = warp_sum(q);
    const float y = ret + disc * q_target;
    const float td = q - y;

    // 5. The blended gradient of the taken action's logits, then the head's backward: the value
    //    row gets g, advantage row a' gets (a' == a ? g : 0) - g / A (dueling), or g at a alone.
    const int off = h.dueling ? Z : 0;
    for (int z = lane; z < Z; z += 32) {
        const float l = head_logit(hs, mean_s[z], act, z, h);
        const float p = expf(l - ssm.max) / ssm.sum;
        const float g = blended_logit_gradient(p, m[z], td, atom<float>(h, z), q, scale, alpha);
        if (h.dueling) d[z] = g;
        const float share = h.dueling ? g / static_cast<float>(A) : 0.f;
        for (int x = 0; x < A; ++x) d[off + x * Z + z] = (x == act ? g : 0.f) - share;
    }
    if (lane == 0) {
        stats[fh::dqn::kStatC51 * a.batch + b] = ce;
        stats[fh::dqn::kStatMse * a.batch + b] = 0.5f * td * td;
        stats[fh::dqn::kStatTd * a.batch + b] = td;
        stats[fh::dqn::kStatQ * a.batch + b] = q;
    }
}

extern "C" __global__ void dqn_finish_kernel(fh::abi::DqnFinishArgs a) {
    __shared__ double dsum[fh::abi::kDqnFinishThreads];
    __shared__ float fext[fh::abi::kDqnFinishThreads];
    const int agent = blockIdx.x;
    const int t = threadIdx.x, T = fh::abi::kDqnFinishThreads;
    const float* partials = a.norm_partials + static_cast<long long>(agent) * fh::abi::kNormBlocks;
    const float* stats = a.sample_stats + static_cast<long long>(agent) * fh::dqn::kSampleStats * a.batch;

    double norm = 0.0;
    for (int i = t; i < fh::abi::kNormBlocks; i += T) norm += partials[i];
    norm = block_sum(norm, dsum);
    double s[4] = {0.0, 0.0, 0.0, 0.0};  // C51, MSE, Q, |TD|
    float q_min = cuda::std::numeric_limits<float>::infinity(), q_max = -q_min;
    for (int b = t; b < a.batch; b += T) {
        s[0] += stats[fh::dqn::kStatC51 * a.batch + b];
        s[1] += stats[fh::dqn::kStatMse * a.batch + b];
        const float qb = stats[fh::dqn::kStatQ * a.batch + b];
        s[2] += qb;
        const float td = stats[fh::dqn::kStatTd * a.batch + b];
        s[3] += td < 0 ? -td : td;
        q_min = fminf(q_min, qb);
        q_max = fmaxf(q_max, qb);
    }
    BatchSums sums{};
    sums.c51 = block_sum(s[0], dsum);
    sums.mse = block_sum(s[1], dsum);
    sums.q = block_sum(s[2], dsum);
    sums.td_abs = block_sum(s[3], dsum);
    sums.q_min = block_min_max(q_min, false, fext);
    sums.q_max = block_min_max(q_max, true, fext);
    if (t == 0) {
        UpdateStep step{};
        fh::nn::GuardState guard = a.guard[agent];
        MonitorStats monitor = a.stats[agent];
        Counters counters = a.counters[agent];
        finish_update(step, guard, monitor, counters, a.agent[agent], sums, static_cast<float>(sqrt(norm)), a.batch,
                      a.inject_nan);
        a.step[agent] = step;
        a.guard[agent] = guard;
        a.stats[agent] = monitor;
        a.counters[agent] = counters;
    }
}

extern "C" __global__ void dqn_adam_target_kernel(fh::abi::DqnAdamTargetArgs a) {
    const int agent = blockIdx.y;
    const UpdateStep step = a.step[agent];
    const AgentParams& p = a.agent[agent];
    const float clip = step.adam.clip_norm > 0.f ? fh::core::clip_scale(step.grad_norm, step.adam.clip_norm) : 1.f;
    const long long base = static_cast<long long>(agent) * a.n;
    for (long long i = global_thread_index(); i < a.n; i += grid_thread_count()) {
        const long long k = base + i;
        float param = a.params[k], m = a.m[k], v = a.v[k], target = a.target[k];
        adam_target_element(param, m, v, target, a.grads[k], clip, step, p);
        a.params[k] = param;
        a.m[k] = m;
        a.v[k] = v;
        a.target[k] = target;
    }
}

extern "C" __global__ void dqn_advance_kernel(fh::dqn::Counters* counters, int n_agents) {
    for (long long i = global_thread_index(); i < n_agents; i += grid_thread_count()) {
        counters[i].steps += 1;
        counters[i].pushed += 1;
    }
}

extern "C" __global__ void dqn_collect_kernel(fh::abi::DqnCollectArgs a) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int agent = blockIdx.y;
    const long long e = static_cast<long long>(blockIdx.x) * fh::abi::kDqnWarpsPerBlock + warp;
    if (e >= a.n) return;
    const fh::env::EnvParams& p = a.params;
    const int D = p.state_dim, M = p.market_dim;
    const long long k = static_cast<long long>(agent) * a.n + e;  // this agent's environment e
    const fh::abi::DqnRing& r = a.ring;
    const long long ring_rows = static_cast<long long>(r.capacity_steps) * r.n_envs;
    const long long row = static_cast<long long>(agent) * ring_rows +
                          (a.counters[agent].pushed % r.capacity_steps) * r.n_envs + e;
    float* obs = a.states + k * D;
    float* pf = a.portfolio + k * fh::env::PORTFOLIO_STRIDE;
    for (int c = lane; c < D; c += 32) r.states[row * D + c] = obs[c];  // s_t, before the step
    fh::env::EnvState s{};
    std::uint8_t done = 0;
    if (lane == 0) {
        s = a.state[k];
        fh::env::StepInfo info;
        const int action = a.actions[k];
        r.rewards[row] = fh::env::step_env(s, action, a.market, p, info, done);
        r.done[row] = done;
        r.actions[row] = action;
        fh::env::portfolio_features(s, a.market, p, pf);
    }
    __syncwarp();
    int t = __shfl_sync(kFullMask, s.t, 0);
    for (int c = lane; c < D; c += 32)  // the observation after the step (terminal when done)
        r.next_states[row * D + c] = c < M ? a.market.features[static_cast<long long>(t) * M + c] : pf[c - M];
    __syncwarp();
    if (lane == 0) {
        if (done != 0) {
            fh::env::reset_env(s, static_cast<int>(e), a.market, p);
            fh::env::portfolio_features(s, a.market, p, pf);
        }
        a.state[k] = s;
    }
    __syncwarp();
    t = __shfl_sync(kFullMask, s.t, 0);
    for (int c = lane; c < D; c += 32)  // the next decision's observation
        obs[c] = c < M ? a.market.features[static_cast<long long>(t) * M + c] : pf[c - M];
}

extern "C" __global__ void dqn_sample_kernel(fh::abi::DqnSampleArgs a) {
    const int agent = blockIdx.y;
    const fh::abi::DqnRing& r = a.ring;
    const Counters c = a.counters[agent];
    const AgentParams& p = a.agent[agent];
    const long long ring_rows = static_cast<long long>(r.capacity_steps) * r.n_envs;
    const long long base = static_cast<long long>(agent) * ring_rows;
    const fh::replay::ReplayView view{r.states + base * r.state_dim, r.next_states + base * r.state_dim,
                                      r.actions + base, r.rewards + base, r.done + base, r.capacity_steps,
                                      r.n_envs, r.state_dim};
    const long long oldest = c.pushed > r.capacity_steps ? c.pushed - r.capacity_steps : 0;
    const fh::replay::SampleParams sp{p.seed, static_cast<std::uint64_t>(c.updates + 1), oldest,
                                      c.pushed - (p.n_step - 1) - oldest, p.n_step, p.gamma};
    const int D = r.state_dim;
    float* x = a.x + static_cast<long long>(agent) * 2 * a.batch * D;
    const long long v = static_cast<long long>(agent) * a.batch;
    for (long long b = global_thread_index(); b < a.batch; b += grid_thread_count())
        fh::replay::sample_nstep(static_cast<int>(b), view, sp, x + b * D, x + (a.batch + b) * D, a.actions[v + b],
                                 a.returns[v + b], a.discounts[v + b]);
}

FH_KERNELS_dqn_step(FH_CHECK_KERNEL_ABI)
