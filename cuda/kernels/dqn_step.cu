/* dqn_step.cu — the DQN trainer's fused device steps (docs/dqn.md, "The update on the device").
 *
 * Math:        math/dqn.h: head_logit / head_mean_adv (the dueling C51 head), softmax over
 *              the atoms, expected Q, policy::epsilon_explore / epsilon_greedy; the C51
 *              projection in gather form (projection_position, projection_weight), the
 *              cross-entropy, the MSE on the expected Q and their blend
 *              (blended_logit_gradient); finish_update (guard, monitor, Adam constants, target
 *              copy, counters); adam_target_element.
 * Layout:      head rows (rows, W) with W = dqn::head_width: [value (Z) | advantages (A, Z)];
 *              an ensemble of K heads has K such rows per sample (network outputs (B, K * W) =
 *              head rows (B * K, W)); stats (kSampleStats, B * K); parameters flat (n). Per agent:
 *              buffers are [agents][...].
 * Launch:      act: one warp per row, kDqnWarpsPerBlock warps per block, grid (ceil(rows /
 *              warps), agents); loss (abi::dqn_loss_split): while the rows of all agents fit one
 *              wave of kDqnLossBlocksPerSm blocks per SM, dqn_loss_kernel: one block of
 *              kDqnLossWarps warps per row, grid (rows, agents) (the plain C51 row's independent
 *              steps side by side: the select row's Q split over three warps beside the online
 *              row's softmax, then a* and the target's softmax beside CQL's Q(s, .), the
 *              projection one atom per thread, the cross-entropy, and the head's backward one
 *              element per thread); more rows, and the scalar head: dqn_loss_rows_kernel, as
 *              act (a warp per row, every step in turn); dynamic shared memory
 *              dqn_step_smem_floats floats per warp.
 *              finish: one block of kDqnFinishThreads per agent. adam_target: blocks of
 *              kDqnAdamThreads, a thread per parameter (dqn_adam_blocks) x agents. advance: one
 *              thread. collect: a warp per environment, kDqnCollectWarps warps per block, grid
 *              (ceil(n / warps), agents).
 * Speed:       rows are latency and instruction bound: head_q takes the Q of all actions in
 *              register chunks whose reductions interleave and are scattered over the lanes
 *              (warp_reduce_scatter: the butterfly's pairs, fewer shuffles), and the projection
 *              sums each atom's window of nonzero weights only (binary search); both bit for bit
 *              the one-action-at-a-time softmax and the full gather. The environment step issues
 *              its independent reads together (collect_env), as sampling does (both state rows
 *              beside the n-step rewards: replay::warp_sample_nstep).
 * Determinism: exact run to run: warp reductions are xor butterflies (every lane ends with the
 *              same value, in a fixed order; scattered, each value on its lanes with the same
 *              floats), block sums are fixed trees, no float atomics (the
 *              action histogram counts with integer atomics). The CPU twins
 *              (src/ops/dqn/cpu.cpp) sum in their own order: equal within rounding, except the
 *              finish, whose twin emulates the same trees and equals it bit for bit.
 * Aliasing:    outputs overlap no other operand; the select and target head rows may be one
 *              buffer (checked in cuda/abi/dqn_step.h).
 * HER:         her_observe (collection's [observation | goal] rows and the ring's goal column),
 *              goal_states (evaluation's rows with a fixed goal), her_sample (dqn_sample with
 *              relabelling and the goal-conditioned return): math in math/her.h.
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
    return fh::device::lanes_reduce<32>(v, [](float a, float b) { return fmaxf(a, b); });
}
__device__ __forceinline__ float warp_sum(float v) {
    return fh::device::lanes_reduce<32>(v, [](float a, float b) { return a + b; });
}

/// Per-warp shared memory (abi::dqn_step_smem_floats): the atoms' values, three Z-float scratch
/// rows, the Q of every action (2A floats), each action's softmax maximum and sum (A each).
struct WarpScratch {
    float* atoms;
    float* buf0;
    float* buf1;
    float* buf2;
    float* q;
    float* q_max;    ///< (A) head_q_range's per-action softmax maximum, where asked for
    float* q_sum;    ///< (A) and its sum of exps
    float* q_heads;  ///< (K, A) with an ensemble
};
/// Warp `warp`'s scratch (pointers only).
__device__ WarpScratch scratch_at(float* smem, int warp, const HeadParams& h) {
    const int Z = h.num_atoms, A = h.num_actions;
    float* base = smem + warp * fh::abi::dqn_step_smem_floats(h);
    float* q = base + 4 * Z;
    return WarpScratch{base, base + Z, base + 2 * Z, base + 3 * Z, q, q + 2 * A, q + 3 * A, q + 4 * A};
}
/// This warp's scratch, its atoms filled in.
__device__ WarpScratch warp_scratch(float* smem, int warp, const HeadParams& h, int lane) {
    const WarpScratch w = scratch_at(smem, warp, h);
    for (int z = lane; z < h.num_atoms; z += 32) w.atoms[z] = atom<float>(h, z);
    __syncwarp();
    return w;
}

/// mean[z] = head_mean_adv(row, z) for the lane's atoms (z = lane, lane + 32, ...).
__device__ void mean_advantages(float* mean, const float* row, const HeadParams& h, int lane) {
    for (int z = lane; z < h.num_atoms; z += 32) mean[z] = head_mean_adv(row, z, h);
    __syncwarp();
}

/// Copies N rows of n floats (global memory, read-only while the kernel runs) to dst (shared,
/// row j at dst + j * n), by threads t of T: U loads of each row in flight per thread before
/// their stores, so rows of up to U * T floats take one round trip to L2 together. Callers
/// synchronise before reading dst.
template <int U, int N>
__device__ __forceinline__ void stage_rows(float* dst, const float* const (&src)[N], int n, int t, int T) {
    for (int k0 = t; k0 < n; k0 += U * T) {
        float v[N][U];
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
            for (int j = 0; j < N; ++j) v[j][u] = k0 + u * T < n ? __ldg(src[j] + k0 + u * T) : 0.f;
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
            for (int j = 0; j < N; ++j)
                if (k0 + u * T < n) dst[j * n + k0 + u * T] = v[j][u];
    }
}

/// The softmax over the atoms of action a of a head row, identical on every lane: its maximum
/// logit, the sum of e_z = exp(logit_z - max) (left in e for the lane's atoms) and
/// Q = (sum_z e_z atom_z) / sum.
struct Softmax {
    float max, sum, q;
};
__device__ Softmax softmax_q(const float* row, const float* mean, int a, const HeadParams& h, const float* atoms,
                             float* e, int lane) {
    float mx = -cuda::std::numeric_limits<float>::infinity();
    for (int z = lane; z < h.num_atoms; z += 32) {
        const float l = head_logit(row, mean[z], a, z, h);
        e[z] = l;
        mx = fmaxf(mx, l);
    }
    mx = warp_max(mx);
    float s = 0.f, q = 0.f;
    for (int z = lane; z < h.num_atoms; z += 32) {
        const float x = expf(e[z] - mx);
        e[z] = x;
        s += x;
        q += x * atoms[z];
    }
    s = warp_sum(s);
    return Softmax{mx, s, warp_sum(q) / s};
}

/// Actions per register chunk of head_q: a chunk's reductions interleave, so a row costs one
/// shuffle chain per chunk instead of one per action (these kernels are latency bound). 9 takes
/// the default action count in one chunk, and acting still fits 64 registers without spills
/// (16 blocks per SM: 4096 rows in one wave); larger chunks spill there.
constexpr int kQChunk = 9;

/// The smallest power of two >= n (n >= 1).
__host__ __device__ constexpr int pow2_at_least(int n) {
    return n <= 1 ? 1 : 2 * pow2_at_least((n + 1) / 2);
}
__host__ __device__ constexpr int log2_of(int n) {
    return n <= 1 ? 0 : 1 + log2_of(n / 2);
}

/// One level (xor distance O) of warp_reduce_scatter over the first Vc of x's values.
template <int V, int Vc, int O, class Op>
__device__ __forceinline__ void reduce_scatter_level(float (&x)[V], int lane, Op op) {
    if constexpr (O > 0) {
        if constexpr (Vc > 1) {  // keep one half (the upper lane of a pair the upper half), send the other
            constexpr int h = Vc / 2;
            const bool upper = (lane & O) != 0;
#pragma unroll
            for (int i = 0; i < h; ++i) {
                const float send = upper ? x[i] : x[i + h];
                const float keep = upper ? x[i + h] : x[i];
                x[i] = op(keep, __shfl_xor_sync(kFullMask, send, O));
            }
            reduce_scatter_level<V, h, O / 2>(x, lane, op);
        } else {
            x[0] = op(x[0], __shfl_xor_sync(kFullMask, x[0], O));
            reduce_scatter_level<V, 1, O / 2>(x, lane, op);
        }
    }
}
/// V values per lane (a power of two, at most 32) combined over the warp, each by the pairs and
/// operand order of lanes_reduce<32>'s xor butterfly (op(own, partner's) at distances 16, 8, ...,
/// 1), so the same floats, with fewer shuffles: at each distance a lane sends the half of its
/// values its partner keeps. Lane L ends with value number L >> (5 - log2 V) in x[0].
template <int V, class Op>
__device__ __forceinline__ void warp_reduce_scatter(float (&x)[V], int lane, Op op) {
    static_assert(V >= 1 && V <= 32 && (V & (V - 1)) == 0, "a power of two of values, at most one per lane");
    reduce_scatter_level<V, V, 16>(x, lane, op);
}

/// Q of actions [a0, a0 + N) exactly as softmax_q computes each (the same per-lane atom order,
/// max, expf and accumulation; the warp's sums and maxima over the butterfly's pairs, scattered:
/// warp_reduce_scatter), written to q_out, with softmax_q's max and sum to max_out and sum_out
/// where given (action c's by lane c << (5 - log2 of the sums' count)). Logits are recomputed
/// rather than kept, which gives the same floats.
template <int N>
__device__ __forceinline__ void head_q_chunk(const float* row, const float* mean, int a0, const HeadParams& h,
                                             const float* atoms, float* q_out, float* max_out, float* sum_out,
                                             int lane) {
    constexpr int VM = pow2_at_least(N);  // the maxima, padded
    constexpr int VS = 2 * VM;            // the exps' sums (c) and their atom-weighted sums (VM + c), padded
    float mx[VM], sq[VS];
#pragma unroll
    for (int c = 0; c < VM; ++c) mx[c] = -cuda::std::numeric_limits<float>::infinity();
#pragma unroll 1
    for (int z = lane; z < h.num_atoms; z += 32) {
        const float mz = mean[z];
#pragma unroll
        for (int c = 0; c < N; ++c) mx[c] = fmaxf(mx[c], head_logit(row, mz, a0 + c, z, h));
    }
    warp_reduce_scatter<VM>(mx, lane, [](float a, float b) { return fmaxf(a, b); });
    float m[N];  // every lane needs every maximum: from the lanes that hold them
#pragma unroll
    for (int c = 0; c < N; ++c) m[c] = __shfl_sync(kFullMask, mx[0], c << (5 - log2_of(VM)));
#pragma unroll
    for (int c = 0; c < VS; ++c) sq[c] = 0.f;
#pragma unroll 1
    for (int z = lane; z < h.num_atoms; z += 32) {
        const float mz = mean[z], atom_z = atoms[z];
#pragma unroll
        for (int c = 0; c < N; ++c) {
            const float x = expf(head_logit(row, mz, a0 + c, z, h) - m[c]);
            sq[c] += x;
            sq[VM + c] += x * atom_z;
        }
    }
    warp_reduce_scatter<VS>(sq, lane, [](float a, float b) { return a + b; });
    // Lane c << shift holds action c's sum, lane (c << shift) + 16 its atom-weighted sum.
    constexpr int shift = 5 - log2_of(VS);
    const float weighted = __shfl_down_sync(kFullMask, sq[0], 16);
    const int c = lane >> shift;
    const float max_c = max_out != nullptr ? __shfl_sync(kFullMask, mx[0], (c & (VM - 1)) << (5 - log2_of(VM))) : 0.f;
    if (lane < 16 && (lane & ((1 << shift) - 1)) == 0 && c < N) {
        q_out[a0 + c] = weighted / sq[0];
        if (max_out != nullptr) max_out[a0 + c] = max_c, sum_out[a0 + c] = sq[0];
    }
}
template <int N>
__device__ void head_q_dispatch(int n, const float* row, const float* mean, int a0, const HeadParams& h,
                                const float* atoms, float* q_out, float* max_out, float* sum_out, int lane) {
    if (n == N)
        head_q_chunk<N>(row, mean, a0, h, atoms, q_out, max_out, sum_out, lane);
    else if constexpr (N > 1)
        head_q_dispatch<N - 1>(n, row, mean, a0, h, atoms, q_out, max_out, sum_out, lane);
}
/// The Q of actions [begin, end) of a head row into q_out[begin..end) (lane 0 writes, every lane
/// may read after), bit for bit softmax_q(...).q; with max_out and sum_out (or null), softmax_q's
/// max and sum of each action too. Chunks of equal size, at most kQChunk: no idle slots.
__device__ void head_q_range(const float* row, const float* mean, int begin, int end, const HeadParams& h,
                             const float* atoms, float* q_out, int lane, float* max_out = nullptr,
                             float* sum_out = nullptr) {
    const int n = end - begin;
    if (n > 0) {
        const int chunks = (n + kQChunk - 1) / kQChunk, per = (n + chunks - 1) / chunks;
        for (int a0 = begin; a0 < end; a0 += per)
            head_q_dispatch<kQChunk>(min(per, end - a0), row, mean, a0, h, atoms, q_out, max_out, sum_out, lane);
    }
    __syncwarp();
}
/// The Q of every action of a head row (head_q_range over all of them).
__device__ void head_q(const float* row, const float* mean, const HeadParams& h, const float* atoms, float* q_out,
                       int lane) {
    head_q_range(row, mean, 0, h.num_actions, h, atoms, q_out, lane);
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
/// block_sum of N values per thread at once: one tree (kDqnFinishThreads / 2 ... 1) for all N,
/// each value summed in block_sum's order, so the results equal N block_sum calls bit for bit
/// with one barrier per level instead of one per level and value. All threads get them.
template <int N>
__device__ void block_sums(double (&v)[N], double (*shared)[fh::abi::kDqnFinishThreads]) {
    for (int k = 0; k < N; ++k) shared[k][threadIdx.x] = v[k];
    __syncthreads();
    for (int stride = fh::abi::kDqnFinishThreads / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < static_cast<unsigned>(stride))
            for (int k = 0; k < N; ++k) shared[k][threadIdx.x] += shared[k][threadIdx.x + stride];
        __syncthreads();
    }
    for (int k = 0; k < N; ++k) v[k] = shared[k][0];
    __syncthreads();
}
/// The block's minimum of lo and maximum of hi in one tree.
__device__ void block_min_and_max(float& lo, float& hi, float (*shared)[fh::abi::kDqnFinishThreads]) {
    shared[0][threadIdx.x] = lo;
    shared[1][threadIdx.x] = hi;
    __syncthreads();
    for (int stride = fh::abi::kDqnFinishThreads / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < static_cast<unsigned>(stride)) {
            shared[0][threadIdx.x] = fminf(shared[0][threadIdx.x], shared[0][threadIdx.x + stride]);
            shared[1][threadIdx.x] = fmaxf(shared[1][threadIdx.x], shared[1][threadIdx.x + stride]);
        }
        __syncthreads();
    }
    lo = shared[0][0];
    hi = shared[1][0];
    __syncthreads();
}

}  // namespace

extern "C" __global__ void __launch_bounds__(32 * fh::abi::kDqnWarpsPerBlock, fh::abi::kDqnActBlocksPerSm)
    dqn_act_kernel(fh::ops::DqnAct a) {
    extern __shared__ float smem[];
    const HeadParams& h = a.head_params;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int agent = blockIdx.y;
    const long long e = static_cast<long long>(blockIdx.x) * fh::abi::kDqnWarpsPerBlock + warp;
    if (e >= a.n) return;
    const WarpScratch w = warp_scratch(smem, warp, h, lane);
    const int W = head_width(h), A = h.num_actions, K = h.ensemble;
    const long long row_index = static_cast<long long>(agent) * a.n + e;
    const float* row = a.head + row_index * output_width(h);
    const bool explore = a.agent != nullptr && a.explore != 0;
    // Epsilon-greedy's draw depends on the counters, not on Q: taken first, its loads and Philox
    // rounds overlap the head row's instead of following the argmax (the same action).
    int explored = -1;
    if (explore) {
        const AgentParams& p = a.agent[agent];
        const long long step = a.counters[agent].steps;
        explored = fh::policy::epsilon_explore(A, epsilon_at(p, step), p.seed, static_cast<int>(e),
                                               static_cast<std::uint64_t>(step));
    }
    for (int k = 0; k < K; ++k) {  // each head's Q (the one head's into w.q)
        const float* hk = row + static_cast<long long>(k) * W;
        if (h.scalar) {  // the scalar head: Q is the output
            if (lane == 0) scalar_q(hk, h, w.q);
            __syncwarp();
        } else {
            mean_advantages(w.buf0, hk, h, lane);
            head_q(hk, w.buf0, h, w.atoms, w.q, lane);
        }
        if (K > 1) {
            for (int x = lane; x < A; x += 32) w.q_heads[k * A + x] = w.q[x];
            __syncwarp();
        }
    }
    const float* score = w.q;  // what acting maximises
    if (K > 1) {               // the heads' mean into w.q, the exploring score beside it
        if (lane == 0) {
            const float ucb = explore ? a.agent[agent].ucb : 0.f;
            for (int x = 0; x < A; ++x) {
                const EnsembleQ<float> eq = ensemble_q(w.q_heads, K, A, x);
                w.q[x] = eq.mean;
                w.q[A + x] = ensemble_score(eq, ucb);
            }
        }
        __syncwarp();
        score = w.q + A;
    }
    if (lane == 0) {
        const int action = explored >= 0 ? explored : fh::policy::argmax(explore ? score : w.q, A);
        a.actions[row_index] = action;
        if (a.histogram != nullptr) atomicAdd(a.histogram + static_cast<long long>(agent) * A + action, 1ull);
    }
    if (a.q != nullptr)
        for (int act = lane; act < A; act += 32) a.q[row_index * A + act] = w.q[act];
}

namespace {

/// The projection's inputs from the target's softmax exps e (a warp, each lane its atoms): the
/// probabilities p_z = e_z / sum in place in e, every source atom's position on the support in
/// pos, and whether project_atom may sum windows only (every p finite and the positions
/// non-decreasing), the same on every lane.
__device__ bool projection_inputs(float* e, float* pos, float sum, float ret, float disc, const HeadParams& h,
                                  int lane) {
    const int Z = h.num_atoms;
    bool finite = true;
    for (int z = lane; z < Z; z += 32) {
        const float p = e[z] / sum;
        e[z] = p;
        pos[z] = projection_position(ret, disc, z, h);
        finite = finite && cuda::std::isfinite(p);
    }
    __syncwarp();
    bool monotone = true;
    for (int z = lane + 1; z < Z; z += 32) monotone = monotone && pos[z - 1] <= pos[z];
    return __all_sync(kFullMask, finite && monotone);
}

/// Target atom i of the projection: it gathers from every source atom j, in order. Source j's
/// weight for atom i is exactly +0 unless -1 < pos[j] - i < 1, and a finite p_j * +0 added to
/// m_i (+0 or positive, never -0) leaves it unchanged: with finite p and positions
/// non-decreasing in j (then so is pos[j] - i), the sum over the window [lo, hi) found by binary
/// search equals the full sum bit for bit (`windowed`). Otherwise (NaN p, a negative or NaN
/// discount) the full sum.
__device__ float project_atom(int i, const float* p, const float* pos, int Z, bool windowed) {
    const float fi = static_cast<float>(i);
    int lo = 0, hi = Z;  // lo: sources with pos[j] - i <= -1; hi: with pos[j] - i < 1
    if (windowed) {
        hi = 0;
        for (int step = 1 << (31 - __clz(Z)); step > 0; step >>= 1) {
            if (lo + step <= Z && !(pos[lo + step - 1] - fi > -1.f)) lo += step;
            if (hi + step <= Z && pos[hi + step - 1] - fi < 1.f) hi += step;
        }
    }
    float mi = 0.f;
    for (int j = lo; j < hi; ++j) mi += p[j] * projection_weight(pos[j], i);
    return mi;
}

/// The softmax over the actions' Q (CQL's logsumexp): the maximum, then the sum of exps in
/// action order; every lane computes it. dqn::cql_soft_maximum's values for finite Q, with the
/// fmaxf this kernel has always taken the maximum with.
__device__ SoftMaximum<float> q_softmax(const float* q, int A) {
    float qmax = q[0], qsum = 0.f;
    for (int x = 1; x < A; ++x) qmax = fmaxf(qmax, q[x]);
    for (int x = 0; x < A; ++x) qsum += expf(q[x] - qmax);
    return SoftMaximum<float>{qmax, qsum};
}

/// The CQL gradient of logit (x, z) of an online row hs (advantage mean mean_z): its softmax
/// probability p from the logit and the action's maximum and sum (q_max, q_sum: head_q_range's),
/// times the coefficient (q[A + x]) and (atom_z - Q_x) (q[x]).
__device__ __forceinline__ float cql_element(const float* hs, float mean_z, int x, int z, float atom_z, const float* q,
                                             const float* q_max, const float* q_sum, const HeadParams& h) {
    const float p = expf(head_logit(hs, mean_z, x, z, h) - q_max[x]) / q_sum[x];
    return cql_logit_gradient(q[h.num_actions + x], p, atom_z, q[x]);
}

/// Atom z of a CQL row's head backward: every action x's logit gradient cql_coefficient_x * p_xz *
/// (atom_z - Q_x) (p from the logit, w.q_max and w.q_sum; the coefficient in w.q[A + x]), added to
/// the taken action's blended gradient already in d, then the dueling backward (the value row
/// gets the sum over x in action order, each advantage row its gradient less sum / A). The
/// floats of a softmax_q per action and a pass per action, atom by atom.
__device__ void cql_atom_gradient(float* d, const float* hs, const WarpScratch& w, int z, int act,
                                  const HeadParams& h) {
    const int Z = h.num_atoms, A = h.num_actions, off = h.dueling ? Z : 0;
    const float mz = w.buf2[z], atom_z = w.atoms[z];
    float sum = 0.f;
    for (int x = 0; x < A; ++x) {
        const float cg = cql_element(hs, mz, x, z, atom_z, w.q, w.q_max, w.q_sum, h);
        float* dx = d + off + x * Z + z;
        const float v = x == act ? *dx + cg : cg;
        *dx = v;
        sum += v;
    }
    if (h.dueling) {
        d[z] = sum;
        const float share = sum / static_cast<float>(A);
        for (int x = 0; x < A; ++x) d[off + x * Z + z] -= share;
    }
}

/// A row whose action is out of range (a corrupt batch): NaN statistics (the guard skips the
/// update) and no gradient; `threads` threads from index t write it.
__device__ void corrupt_row(float* d, float* stats, long long R, long long b, int W, int t, int threads) {
    for (int i = t; i < W; i += threads) d[i] = 0.f;
    if (t == 0)
        for (int k = 0; k < fh::dqn::kSampleStats; ++k)
            stats[k * R + b] = cuda::std::numeric_limits<float>::quiet_NaN();
}

/// Head row b of the loss (row b of the B * K rows: head b % K of sample b / K; K = 1: the
/// sample) by one warp, every step in turn: dqn_loss_rows_kernel's rows (batches past one wave of
/// four-warp blocks, and the scalar head); dqn_loss_kernel's four warps compute the same floats.
__device__ void loss_row_one_warp(const fh::ops::DqnLoss& a, int agent, long long b, const WarpScratch& w, int lane) {
    const HeadParams& h = a.head_params;
    const long long R = static_cast<long long>(a.batch) * h.ensemble;
    const int Z = h.num_atoms, A = h.num_actions, W = head_width(h);
    const long long row_index = static_cast<long long>(agent) * R + b;
    const long long sample = static_cast<long long>(agent) * a.batch + b / h.ensemble;
    const float* hs = a.head_s + row_index * W;
    const float* hsel = a.head_select + row_index * W;
    const float* ht = a.head_target + row_index * W;
    float* d = a.d_head + row_index * W;
    float* stats = a.stats + static_cast<long long>(agent) * fh::dqn::kSampleStats * R;
    const int act = a.actions[sample];
    const float ret = a.returns[sample], disc = a.discounts[sample];
    float scale = 1.0f / static_cast<float>(R);
    if (a.masks != nullptr) scale *= a.masks[row_index];
    const float alpha = a.agent[agent].mse_alpha;

    if (act < 0 || act >= A) {
        corrupt_row(d, stats, R, b, W, lane, 32);
        return;
    }
    if (h.scalar) {  // the scalar head: a few dozen flops per sample, on one lane
        if (lane == 0) {
            float st[fh::dqn::kSampleStats];
            const int a_star = a.target_actions != nullptr ? a.target_actions[sample] : -1;
            scalar_sample_loss(hs, hsel, ht, act, ret, disc, scale, a.agent[agent].cql_alpha, h, d, w.q, st, a_star);
            for (int k = 0; k < fh::dqn::kSampleStats; ++k) stats[k * R + b] = st[k];
        }
        return;
    }

    // 1. a* = the first maximal Q of the select row (double DQN: the online network at s'), or
    //    the ensemble's a* (the heads' mean Q, computed before).
    int a_star = 0;
    if (a.target_actions != nullptr) {
        a_star = a.target_actions[sample];
    } else {
        mean_advantages(w.buf0, hsel, h, lane);
        head_q(hsel, w.buf0, h, w.atoms, w.q, lane);
        float best = 0.f;
        for (int x = 0; x < A; ++x) {
            const float qx = w.q[x];
            if (x == 0 || qx > best) best = qx, a_star = x;
        }
        __syncwarp();
    }

    // 2. The target network's distribution of a* at s' (p_next in buf1), its Q, and every source
    //    atom's position on the support (buf2).
    mean_advantages(w.buf0, ht, h, lane);
    const Softmax tsm = softmax_q(ht, w.buf0, a_star, h, w.atoms, w.buf1, lane);
    const bool windowed = projection_inputs(w.buf1, w.buf2, tsm.sum, ret, disc, h, lane);

    // 3. The projection m (buf0): project_atom for every target atom.
    for (int i = lane; i < Z; i += 32) w.buf0[i] = project_atom(i, w.buf1, w.buf2, Z, windowed);
    __syncwarp();

    // 4. The online network at s, taken action (means in buf2, exps in buf1): log-softmax,
    //    cross-entropy, expected Q, MSE.
    const float* m = w.buf0;
    mean_advantages(w.buf2, hs, h, lane);
    const Softmax ssm = softmax_q(hs, w.buf2, act, h, w.atoms, w.buf1, lane);
    const float log_sum = ssm.max + logf(ssm.sum);
    float ce = 0.f;
    for (int z = lane; z < Z; z += 32) ce -= m[z] * (head_logit(hs, w.buf2[z], act, z, h) - log_sum);
    ce = warp_sum(ce);
    const float q = ssm.q;
    const float td = q - (ret + disc * tsm.q);

    // 5. The blended gradient of the taken action's logits, then the head's backward: the value
    //    row gets g, advantage row a' gets (a' == a ? g : 0) - g / A (dueling), or g at a alone.
    const int off = h.dueling ? Z : 0;
    const float cql = a.agent[agent].cql_alpha;
    float cql_loss = 0.f;
    if (cql == 0.f) {
        for (int z = lane; z < Z; z += 32) {
            const float p = w.buf1[z] / ssm.sum;
            const float g = blended_logit_gradient(p, m[z], td, w.atoms[z], q, scale, alpha);
            if (h.dueling) d[z] = g;
            const float share = h.dueling ? g / static_cast<float>(A) : 0.f;
            for (int x = 0; x < A; ++x) d[off + x * Z + z] = (x == act ? g : 0.f) - share;
        }
    } else {
        // 6. CQL: every action's logits get cql_coefficient * p * (atom - Q), the taken one on
        //    top of its blended gradient (written to d first). Q(s, x), each action's softmax
        //    maximum and sum in one pass (w.q, q_max, q_sum; w.q is free since step 1), the
        //    coefficients (w.q + A), then every (action, atom) element at once: each p recomputed
        //    from the logit, max and sum as softmax_q's, the same floats as a softmax per action.
        for (int z = lane; z < Z; z += 32)
            d[off + act * Z + z] = blended_logit_gradient(w.buf1[z] / ssm.sum, m[z], td, w.atoms[z], q, scale, alpha);
        head_q_range(hs, w.buf2, 0, A, h, w.atoms, w.q, lane, w.q_max, w.q_sum);
        const SoftMaximum<float> sm = q_softmax(w.q, A);
        for (int x = lane; x < A; x += 32) w.q[A + x] = cql_coefficient(w.q, x, act, sm, cql * scale);
        __syncwarp();
        for (int z = lane; z < Z; z += 32) cql_atom_gradient(d, hs, w, z, act, h);
        cql_loss = cql_term(w.q, act, sm);
    }
    if (lane == 0) {
        stats[fh::dqn::kStatC51 * R + b] = ce;
        stats[fh::dqn::kStatMse * R + b] = 0.5f * td * td;
        stats[fh::dqn::kStatTd * R + b] = td;
        stats[fh::dqn::kStatQ * R + b] = q;
        stats[fh::dqn::kStatCql * R + b] = cql_loss;
    }
}

}  // namespace

/// The many-rows shape (abi::dqn_loss_split false): a warp per head row, kDqnWarpsPerBlock rows
/// per block.
extern "C" __global__ void __launch_bounds__(32 * fh::abi::kDqnWarpsPerBlock) dqn_loss_rows_kernel(fh::ops::DqnLoss a) {
    extern __shared__ float smem[];
    const HeadParams& h = a.head_params;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const long long R = static_cast<long long>(a.batch) * h.ensemble;
    const long long b = static_cast<long long>(blockIdx.x) * fh::abi::kDqnWarpsPerBlock + warp;
    if (b < R) loss_row_one_warp(a, blockIdx.y, b, warp_scratch(smem, warp, h, lane), lane);
}

/// The few-rows shape: a block of kDqnLossWarps warps per C51 head row (the scalar head takes
/// dqn_loss_rows_kernel). At most 64 registers, so that kDqnLossBlocksPerSm blocks fit an SM
/// (1,056 rows in one wave on an H200).
extern "C" __global__ void __launch_bounds__(32 * fh::abi::kDqnLossWarps, fh::abi::kDqnLossBlocksPerSm)
    dqn_loss_kernel(fh::ops::DqnLoss a) {
    extern __shared__ float smem[];
    __shared__ Softmax s_target, s_online;
    __shared__ float s_td;
    __shared__ bool s_windowed;
    constexpr int kWarps = fh::abi::kDqnLossWarps, kSelectWarps = kWarps - 1, kLast = kWarps - 1;
    const HeadParams& h = a.head_params;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int agent = blockIdx.y;
    const long long R = static_cast<long long>(a.batch) * h.ensemble;
    const long long b = blockIdx.x;  // one head row per block
    if (b >= R) return;
    const WarpScratch w = warp_scratch(smem, warp, h, lane);
    const int Z = h.num_atoms, A = h.num_actions, W = head_width(h);
    const long long row_index = static_cast<long long>(agent) * R + b;
    const long long sample = static_cast<long long>(agent) * a.batch + b / h.ensemble;
    // The sample's scalars and (staged) its three rows are read in one round, and only then is the
    // action checked: the rows' loads do not wait for it.
    const int act = a.actions[sample];
    // The plain C51 row by four warps, each step's floats exactly loss_row_one_warp's (the same
    // functions over the same lanes' atoms); only independent steps run side by side.
    const float* hs = a.head_s + row_index * W;
    const float* hsel = a.head_select + row_index * W;
    const float* ht = a.head_target + row_index * W;
    float* d = a.d_head + row_index * W;
    float* stats = a.stats + static_cast<long long>(agent) * fh::dqn::kSampleStats * R;
    const float ret = a.returns[sample], disc = a.discounts[sample];
    float scale = 1.0f / static_cast<float>(R);
    if (a.masks != nullptr) scale *= a.masks[row_index];
    const float alpha = a.agent[agent].mse_alpha, cql = a.agent[agent].cql_alpha;
    const WarpScratch first = scratch_at(smem, 0, h), last = scratch_at(smem, kLast, h);
    if (a.stage_rows != 0) {  // the three rows in shared memory after the warps' scratch (abi::dqn_loss_stages_rows)
        float* const rows = smem + kWarps * fh::abi::dqn_step_smem_floats(h);
        const float* const src[3] = {hs, hsel, ht};
        stage_rows<4>(rows, src, W, threadIdx.x, blockDim.x);
        __syncthreads();
        hs = rows;
        hsel = rows + W;
        ht = rows + 2 * W;
    }
    if (act < 0 || act >= A) {  // the same for the block
        corrupt_row(d, stats, R, b, W, threadIdx.x, blockDim.x);
        return;
    }

    // 1. Side by side: the select row's Q, a third of the actions per warp (into first.q; the
    //    ensemble's a* is given instead); the last warp: the target and online rows' advantage
    //    means (last.buf0, last.buf2) and the online softmax of the taken action (exps in last.buf1).
    if (warp < kSelectWarps) {
        if (a.target_actions == nullptr) {
            mean_advantages(w.buf0, hsel, h, lane);
            const int per = (A + kSelectWarps - 1) / kSelectWarps;
            const int begin = min(A, warp * per), end = min(A, begin + per);
            head_q_range(hsel, w.buf0, begin, end, h, w.atoms, first.q, lane);
        }
    } else {
        mean_advantages(w.buf0, ht, h, lane);
        mean_advantages(w.buf2, hs, h, lane);
        const Softmax online = softmax_q(hs, w.buf2, act, h, w.atoms, w.buf1, lane);
        if (lane == 0) s_online = online;
    }
    __syncthreads();

    // 2. The first warp: a* (the first maximal Q), the target's distribution of a* (first.buf1),
    //    every source atom's position (first.buf2), and whether the projection may use windows.
    if (warp == 0) {
        int a_star = 0;
        if (a.target_actions != nullptr) {
            a_star = a.target_actions[sample];
        } else {
            float best = 0.f;
            for (int x = 0; x < A; ++x) {
                const float qx = first.q[x];
                if (x == 0 || qx > best) best = qx, a_star = x;
            }
        }
        const Softmax target = softmax_q(ht, last.buf0, a_star, h, w.atoms, w.buf1, lane);
        const bool windowed = projection_inputs(w.buf1, w.buf2, target.sum, ret, disc, h, lane);
        if (lane == 0) s_target = target, s_windowed = windowed;
    } else if (cql != 0.f) {  // beside it, CQL's Q(s, x) with each softmax's max and sum, a third each
        const int per = (A + kWarps - 2) / (kWarps - 1);
        const int begin = min(A, (warp - 1) * per), end = min(A, begin + per);
        head_q_range(hs, last.buf2, begin, end, h, w.atoms, last.q, lane, last.q_max, last.q_sum);
    }
    __syncthreads();

    // 3. The projection m (first.buf0), one target atom per thread.
    for (int i = threadIdx.x; i < Z; i += blockDim.x)
        first.buf0[i] = project_atom(i, first.buf1, first.buf2, Z, s_windowed);
    __syncthreads();
    const float* m = first.buf0;

    // 4. The last warp: cross-entropy against m, the TD error, the statistics.
    if (warp == kLast) {
        const Softmax online = s_online;
        const float log_sum = online.max + logf(online.sum);
        float ce = 0.f;
        for (int z = lane; z < Z; z += 32) ce -= m[z] * (head_logit(hs, w.buf2[z], act, z, h) - log_sum);
        ce = warp_sum(ce);
        const float td = online.q - (ret + disc * s_target.q);
        if (lane == 0) {
            s_td = td;
            stats[fh::dqn::kStatC51 * R + b] = ce;
            stats[fh::dqn::kStatMse * R + b] = 0.5f * td * td;
            stats[fh::dqn::kStatTd * R + b] = td;
            stats[fh::dqn::kStatQ * R + b] = online.q;
        }
        float cql_loss = 0.f;
        if (cql != 0.f) {  // the softmax over Q(s, .), CQL's coefficients (last.q + A) and term
            const SoftMaximum<float> sm = q_softmax(last.q, A);
            for (int x = lane; x < A; x += 32) last.q[A + x] = cql_coefficient(last.q, x, act, sm, cql * scale);
            cql_loss = cql_term(last.q, act, sm);
        }
        if (lane == 0) stats[fh::dqn::kStatCql * R + b] = cql_loss;
    }
    __syncthreads();

    // 5. The head's backward: each atom's blended gradient g once (into first.buf2, free since
    //    the projection), then the whole row (value row, then each action's), element k being
    //    atom z = k % Z of row k / Z, written as loss_row_one_warp writes it.
    const Softmax online = s_online;
    const float td = s_td;
    for (int z = threadIdx.x; z < Z; z += blockDim.x)
        first.buf2[z] =
            blended_logit_gradient(last.buf1[z] / online.sum, m[z], td, first.atoms[z], online.q, scale, alpha);
    __syncthreads();
    const int value_rows = h.dueling ? 1 : 0;
    if (cql == 0.f) {
        for (int k = threadIdx.x; k < W; k += blockDim.x) {
            const int r = k / Z, z = k - r * Z;
            const float g = first.buf2[z];
            if (r < value_rows) {
                d[k] = g;
            } else {
                const int x = r - value_rows;
                const float share = h.dueling ? g / static_cast<float>(A) : 0.f;
                d[k] = (x == act ? g : 0.f) - share;
            }
        }
        return;
    }
    // 6. CQL (cql_atom_gradient's floats, one element per thread): every advantage element's
    //    gradient, the taken action's on top of g; then each atom's sum over the actions in order
    //    (the value row) and its share (first.buf0, free since step 5's g), taken off each element.
    const int off = value_rows * Z;
    for (int k = threadIdx.x; k < A * Z; k += blockDim.x) {
        const int x = k / Z, z = k - x * Z;
        const float cg = cql_element(hs, last.buf2[z], x, z, first.atoms[z], last.q, last.q_max, last.q_sum, h);
        d[off + k] = x == act ? first.buf2[z] + cg : cg;
    }
    if (!h.dueling) return;
    __syncthreads();  // the block's global writes above are visible to it after the barrier
    for (int z = threadIdx.x; z < Z; z += blockDim.x) {
        float sum = 0.f;
        for (int x = 0; x < A; ++x) sum += d[off + x * Z + z];
        d[z] = sum;
        first.buf0[z] = sum / static_cast<float>(A);
    }
    __syncthreads();
    for (int k = threadIdx.x; k < A * Z; k += blockDim.x) d[off + k] -= first.buf0[k % Z];
}

extern "C" __global__ void dqn_finish_kernel(fh::ops::DqnUpdateFinish a) {
    __shared__ double dsum[6][fh::abi::kDqnFinishThreads];
    __shared__ float fext[2][fh::abi::kDqnFinishThreads];
    const int agent = blockIdx.y;
    const int t = threadIdx.x, T = fh::abi::kDqnFinishThreads;
    float* partials = a.norm_partials + static_cast<long long>(agent) * fh::abi::kDqnFinishScratch;
    unsigned* ticket = reinterpret_cast<unsigned*>(partials + fh::abi::kNormBlocks);
    const float* stats = a.sample_stats + static_cast<long long>(agent) * fh::dqn::kSampleStats * a.batch;

    // This block's partial: network_norm_partials_kernel's grid-stride fma and tree (the same bits).
    {
        double acc[1] = {fh::device::grid_stride_sum_squares(a.grads + static_cast<long long>(agent) * a.n, a.n)};
        block_sums(acc, dsum);
        if (t == 0) partials[blockIdx.x] = static_cast<float>(acc[0]);
    }
    // The agent's last block to get here finishes (its ticket), once every partial is written.
    if (!fh::device::last_block_to_arrive(ticket, gridDim.x)) return;

    // Per thread, then over the block in one tree: the norm's partials and the batch's sums.
    double s[6] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0};  // C51, MSE, Q, |TD|, CQL, squared norm
    for (int i = t; i < fh::abi::kNormBlocks; i += T) s[5] += __ldcg(&partials[i]);
    float q_min = cuda::std::numeric_limits<float>::infinity(), q_max = -q_min;
    for (int b = t; b < a.batch; b += T) {
        s[0] += stats[fh::dqn::kStatC51 * a.batch + b];
        s[1] += stats[fh::dqn::kStatMse * a.batch + b];
        const float qb = stats[fh::dqn::kStatQ * a.batch + b];
        s[2] += qb;
        const float td = stats[fh::dqn::kStatTd * a.batch + b];
        s[3] += td < 0 ? -td : td;
        s[4] += stats[fh::dqn::kStatCql * a.batch + b];
        q_min = fminf(q_min, qb);
        q_max = fmaxf(q_max, qb);
    }
    block_sums(s, dsum);
    block_min_and_max(q_min, q_max, fext);
    const double norm = s[5];
    BatchSums sums{};
    sums.c51 = s[0];
    sums.mse = s[1];
    sums.q = s[2];
    sums.td_abs = s[3];
    sums.cql = s[4];
    sums.q_min = q_min;
    sums.q_max = q_max;
    if (t == 0) {
        UpdateStep step{};
        fh::nn::GuardState guard = a.guard[agent];
        MonitorStats monitor = a.stats[agent];
        Counters counters = a.counters[agent];
        finish_update(step, guard, monitor, counters, a.agent[agent], sums, static_cast<float>(sqrt(norm)), a.batch,
                      agent < 32 ? static_cast<int>((static_cast<unsigned>(a.inject_nan) >> agent) & 1u) : 0);
        a.step[agent] = step;
        a.guard[agent] = guard;
        a.stats[agent] = monitor;
        a.counters[agent].updates = counters.updates;  // only this field: the collection reads the others meanwhile
        *ticket = 0;
    }
}

// A thread per parameter (no grid-stride loop) and at most 32 registers, so a full SM of blocks:
// the element's loads go out before the agent's step is waited for (as network_adam_kernel,
// docs/performance-log.md "Adam: the loads before the wait, ...").
static_assert(fh::abi::kDqnAdamThreads == 256, "FH_FULL_SM_BLOCKS_OF_256 counts blocks of 256");
extern "C" __global__ void __launch_bounds__(fh::abi::kDqnAdamThreads, FH_FULL_SM_BLOCKS_OF_256)
    dqn_adam_target_kernel(fh::ops::DqnAdamTarget a) {
    const int agent = blockIdx.y;
    const long long i = global_thread_index();
    const bool mine = i < a.n;
    const long long k = static_cast<long long>(agent) * a.n + i;
    if (mine) {
        float param = a.params[k], m = a.m[k], v = a.v[k], target = a.target[k];
        const float grad = a.grads[k];
        const UpdateStep& step = a.step[agent];  // its fields as used (a copy would spill)
        const AgentParams& p = a.agent[agent];
        const float clip = step.adam.clip_norm > 0.f ? fh::core::clip_scale(step.grad_norm, step.adam.clip_norm) : 1.f;
        adam_target_element(param, m, v, target, grad, clip, step, p);
        a.params[k] = param;
        a.m[k] = m;
        a.v[k] = v;
        a.target[k] = target;
    }
    if (a.advance != nullptr && blockIdx.x == 0 && threadIdx.x == 0) {  // dqn_advance_kernel's step
        a.advance[agent].steps += 1;
        a.advance[agent].pushed += 1;
    }
}

extern "C" __global__ void dqn_advance_kernel(fh::dqn::Counters* counters, int n_agents) {
    for (long long i = global_thread_index(); i < n_agents; i += grid_thread_count()) {
        counters[i].steps += 1;
        counters[i].pushed += 1;
    }
}

namespace {

/// Columns per lane that dqn_collect_kernel's copies hold in registers between their loads and
/// their stores (state rows of up to 32 * kCollectCols floats in one pass).
constexpr int kCollectCols = 4;

/// dst[c] = src[c] for c in [0, n): every load of a pass in flight before its stores (the two
/// may alias as far as the compiler knows, so a plain loop waits for each load in turn). Plain
/// loads, not stage_rows' read-only ones: the step rewrites the observations it copies.
__device__ __forceinline__ void warp_copy(float* dst, const float* src, int n, int lane) {
    for (int c0 = 0; c0 < n; c0 += 32 * kCollectCols) {
        float v[kCollectCols];
#pragma unroll
        for (int u = 0; u < kCollectCols; ++u) {
            const int c = c0 + u * 32 + lane;
            v[u] = c < n ? src[c] : 0.f;
        }
#pragma unroll
        for (int u = 0; u < kCollectCols; ++u) {
            const int c = c0 + u * 32 + lane;
            if (c < n) dst[c] = v[u];
        }
    }
}

/// Environment e's step of dqn_collect_kernel (a warp; pf_row: the warp's PORTFOLIO_STRIDE floats
/// of shared memory). The step is a chain of dependent reads, so it is ordered to wait as few
/// times as possible: the state, action and observation first, together; then, with the bar
/// known, the step's prices (lane 0) beside the next bar's market features (every lane); then
/// only arithmetic and stores. The portfolio features go through shared memory, not back
/// through L2; the next observation re-reads the market features just read (L1), or a new
/// episode's first bar. The same floats as env::step_env, portfolio_features and
/// observation_value in the order the CPU twin calls them.
__device__ __forceinline__ void collect_env(const fh::ops::DqnCollect& a, const fh::env::MarketView& market,
                                            const fh::env::EnvParams& p, long long e, int agent, int lane,
                                            float* pf_row) {
    const int D = p.state_dim, M = p.market_dim;
    const long long k = static_cast<long long>(agent) * a.n + e;  // this agent's environment e
    const fh::ops::DqnRing& r = a.ring;
    const long long ring_rows = static_cast<long long>(r.capacity_steps) * r.n_envs;
    const long long row =
        static_cast<long long>(agent) * ring_rows + (a.counters[agent].pushed % r.capacity_steps) * r.n_envs + e;
    float* obs = a.states + k * D;
    const float* features = market.features;
    fh::env::EnvState s{};
    int action = 0;
    if (lane == 0) {
        s = a.state[k];
        action = a.actions[k];
    }
    warp_copy(r.states + row * D, obs, D, lane);  // s_t, before the step
    const int t1 = __shfl_sync(kFullMask, s.t, 0) + 1;
    fh::env::StepPrices bar{};
    if (lane == 0) bar = fh::env::step_prices(market, s.t);
    warp_copy(r.next_states + row * D, features + static_cast<long long>(t1) * M, M, lane);  // s_{t+1}: market
    std::uint8_t done = 0;
    if (lane == 0) {
        fh::env::StepInfo info;
        r.rewards[row] = fh::env::step_env_at(s, action, bar, p, info, done);
        r.done[row] = done;
        r.actions[row] = action;
        fh::env::portfolio_features_at(s, bar.c1, p, pf_row);  // s.t is t1 now
    }
    __syncwarp();
    for (int c = M + lane; c < D; c += 32) r.next_states[row * D + c] = pf_row[c - M];  // s_{t+1}: portfolio
    __syncwarp();
    if (lane == 0) {
        if (done != 0) {
            fh::env::reset_env(s, static_cast<int>(e), market, p);
            fh::env::portfolio_features(s, market, p, pf_row);
        }
        a.state[k] = s;
    }
    __syncwarp();
    const int t = __shfl_sync(kFullMask, s.t, 0);
    for (int c = lane; c < D; c += 32)  // the next decision's observation
        obs[c] = fh::env::observation_value(features, t, M, pf_row, c);
    float* pf = a.portfolio + k * fh::env::PORTFOLIO_STRIDE;
    for (int c = lane; c < fh::env::PORTFOLIO_STRIDE; c += 32) pf[c] = pf_row[c];
}

}  // namespace

/// dqn_collect_kernel's body; kAgents: a population's agents each with its own market and episode
/// seed (a.agents). Two kernels, so that the single run's keeps its registers (one body with
/// both branches spilled).
template <bool kAgents>
__device__ __forceinline__ void collect_step(const fh::ops::DqnCollect& a) {
    __shared__ float portfolio_rows[fh::abi::kDqnCollectWarps][fh::env::PORTFOLIO_STRIDE];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int agent = blockIdx.y;
    const long long e = static_cast<long long>(blockIdx.x) * fh::abi::kDqnCollectWarps + warp;
    if (e < a.n) {
        if constexpr (kAgents) {
            fh::env::EnvParams p = a.params;
            p.seed = a.agents[agent].seed;
            collect_env(a, a.agents[agent].market, p, e, agent, lane, portfolio_rows[warp]);
        } else {
            collect_env(a, a.market, a.params, e, agent, lane, portfolio_rows[warp]);
        }
    }
    // Every block has read the counters before it takes its ticket, so the last may advance them.
    if (a.advance.counters != nullptr && fh::device::last_block_to_arrive(a.advance.tickets + agent, gridDim.x) &&
        threadIdx.x == 0) {
        a.advance.counters[agent].steps += 1;
        a.advance.counters[agent].pushed += 1;
        a.advance.tickets[agent] = 0;
    }
}

extern "C" __global__ void __launch_bounds__(32 * fh::abi::kDqnCollectWarps, fh::abi::kDqnCollectBlocksPerSm)
    dqn_collect_kernel(fh::ops::DqnCollect a) {
    collect_step<false>(a);
}

// The agent's market in registers: the single run's 64 registers would spill.
extern "C" __global__ void __launch_bounds__(32 * fh::abi::kDqnCollectWarps, fh::abi::kDqnCollectAgentsBlocksPerSm)
    dqn_collect_agents_kernel(fh::ops::DqnCollect a) {
    collect_step<true>(a);
}

/// A warp's row of the per-row kernels with a grid row per agent: warp w of block (x, agent) takes
/// row b = x * warps + w of the agent's rows (a sample, an environment).
struct WarpRow {
    int lane, agent;
    long long b;
};
__device__ __forceinline__ WarpRow warp_row(unsigned warps) {
    return WarpRow{static_cast<int>(threadIdx.x & 31), static_cast<int>(blockIdx.y),
                   static_cast<long long>(blockIdx.x) * warps + (threadIdx.x >> 5)};
}

/// The samplers' finish: sample b's action, return and discount (lane 0's draw) and each head's
/// bootstrap mask of its first transition (env, step: the warp's).
template <class Sample>
__device__ __forceinline__ void write_sample(const Sample& a, const WarpRow& w, const fh::replay::NstepDraw& draw,
                                             int env, long long step, const AgentParams& p) {
    const long long v = static_cast<long long>(w.agent) * a.batch + w.b;
    if (w.lane == 0) {
        a.actions[v] = draw.action;
        a.returns[v] = draw.ret;
        a.discounts[v] = draw.discount;
    }
    if (a.masks != nullptr)
        bootstrap_masks(a.masks + v * a.ensemble, a.ensemble, p.seed, env, step, p.bootstrap_prob, w.lane, 32);
}

extern "C" __global__ void dqn_sample_kernel(fh::ops::DqnSample a) {
    const WarpRow w = warp_row(blockDim.x / 32);
    if (w.b >= a.batch) return;
    const AgentParams& p = a.agent[w.agent];
    const auto [view, sp] = fh::ops::ring_sampling(a.ring, w.agent, a.counters[w.agent], p);
    const int D = a.ring.state_dim;
    float* x = a.x + static_cast<long long>(w.agent) * 2 * a.batch * D;
    const fh::replay::NstepDraw draw =
        fh::replay::warp_sample_nstep(static_cast<int>(w.b), view, sp, w.lane, x + w.b * D, x + (a.batch + w.b) * D);
    write_sample(a, w, draw, draw.env, draw.step, p);
}

extern "C" __global__ void dqn_curiosity_gather_kernel(fh::ops::DqnCuriosityGather a) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int agent = blockIdx.y;
    const long long e = static_cast<long long>(blockIdx.x) * fh::abi::kDqnWarpsPerBlock + warp;
    if (e >= a.n) return;
    const fh::ops::DqnRing& r = a.ring;
    const int D = r.state_dim, A = a.num_actions, M = a.market_dim;
    const long long ring_rows = static_cast<long long>(r.capacity_steps) * r.n_envs;
    const long long row =
        static_cast<long long>(agent) * ring_rows + (a.counters[agent].pushed % r.capacity_steps) * r.n_envs + e;
    const long long k = static_cast<long long>(agent) * a.n + e;
    float* in = a.input + k * (D + A);
    const int action = r.actions[row];
    for (int c = lane; c < D; c += 32) in[c] = r.states[row * D + c];  // ppo::curiosity_input_row
    for (int c = lane; c < A; c += 32) in[D + c] = c == action ? 1.0f : 0.0f;
    for (int c = lane; c < M; c += 32) a.next_market[k * M + c] = r.next_states[row * D + c];
}

extern "C" __global__ void dqn_curiosity_bonus_kernel(fh::ops::DqnCuriosityBonus a) {
    __shared__ double dsum[fh::abi::kDqnFinishThreads];
    const int agent = blockIdx.x;
    const long long slot_row = static_cast<long long>(agent) * a.ring.capacity_steps * a.ring.n_envs +
                               (a.counters[agent].pushed % a.ring.capacity_steps) * a.ring.n_envs;
    const float coef = a.agent[agent].curiosity_coef;
    const float* error = a.error + static_cast<long long>(agent) * a.ring.n_envs;
    double sum = 0.0;
    for (long long e = threadIdx.x; e < a.ring.n_envs; e += fh::abi::kDqnFinishThreads) {
        const float err = error[e];
        a.ring.rewards[slot_row + e] = fh::dqn::reward_with_bonus(a.ring.rewards[slot_row + e], coef, err);
        sum += err;
    }
    sum = block_sum(sum, dsum);
    if (threadIdx.x == 0) {
        a.stats[agent].error_sum += sum;
        a.stats[agent].transitions += a.ring.n_envs;
    }
}

/// her::goal_state_row over a warp: the lanes copy the state's D columns, lane 0 adds the goal's.
__device__ __forceinline__ void warp_goal_state_row(float* obs, const float* state, int D, float goal, int lane) {
    for (int c = lane; c < D; c += 32) obs[c] = state[c];
    if (lane == 0) fh::her::goal_features(goal, state[fh::her::achieved_column(D)], obs + D);
}

extern "C" __global__ void dqn_her_observe_kernel(fh::ops::DqnHerObserve a) {
    const WarpRow w = warp_row(fh::abi::kDqnWarpsPerBlock);
    const long long e = w.b;
    if (e >= a.n) return;
    const int D = a.state_dim;
    const long long k = static_cast<long long>(w.agent) * a.n + e;
    const AgentParams& p = a.agent[w.agent];
    const float goal =
        fh::her::episode_goal(p.seed, static_cast<int>(e), a.state[k].episode, p.her_goal_min, p.her_goal_max);
    warp_goal_state_row(a.obs + k * (D + fh::her::kGoalFeatures), a.states + k * D, D, goal, w.lane);
    if (w.lane == 0) {
        const long long ring_rows = static_cast<long long>(a.capacity_steps) * a.n;
        a.goals[w.agent * ring_rows + (a.counters[w.agent].pushed % a.capacity_steps) * a.n + e] = goal;
    }
}

extern "C" __global__ void dqn_goal_states_kernel(fh::ops::DqnGoalStates a) {
    const WarpRow w = warp_row(fh::abi::kDqnWarpsPerBlock);
    if (w.b >= a.n) return;
    const int D = a.state_dim;
    const long long k = static_cast<long long>(w.agent) * a.n + w.b;
    warp_goal_state_row(a.obs + k * (D + fh::her::kGoalFeatures), a.states + k * D, D, a.goal[w.agent], w.lane);
}

extern "C" __global__ void dqn_her_sample_kernel(fh::ops::DqnHerSample a) {
    const WarpRow w = warp_row(blockDim.x / 32);
    const int lane = w.lane, agent = w.agent;
    const long long b = w.b;
    if (b >= a.batch) return;
    const fh::ops::DqnRing& r = a.ring;
    const Counters c = a.counters[agent];
    const AgentParams& p = a.agent[agent];
    const auto [view, sp] = fh::ops::ring_sampling(r, agent, c, p);
    const long long base = static_cast<long long>(agent) * r.capacity_steps * r.n_envs;  // this agent's goal column
    const int D = r.state_dim, DG = D + fh::her::kGoalFeatures, col = fh::her::achieved_column(D);
    const fh::her::RelabelParams hp{p.her_ratio, p.her_reward, p.her_horizon, col, c.pushed - 1};
    // her::draw_goal_nstep with the future scan spread over the warp: lane 0 draws the transition
    // and the coin; when it relabels, the lanes look at 32 steps at a time for the episode's first
    // done flag (the same j as her::future_last); lane 0 finishes.
    fh::replay::NstepDraw draw{};
    fh::rng::U32x4 u{};
    int relabel = 0;
    if (lane == 0) {
        draw = fh::replay::draw_nstep(static_cast<int>(b), view, sp);
        u = fh::her::relabel_words(sp.seed, static_cast<int>(b), sp.update);
        relabel = fh::her::relabels(u, hp.ratio) ? 1 : 0;
    }
    relabel = __shfl_sync(kFullMask, relabel, 0);
    int future_end = 0;
    if (relabel) {
        const long long step = __shfl_sync(kFullMask, draw.step, 0);
        const int env = __shfl_sync(kFullMask, draw.env, 0);
        const int limit = fh::her::future_limit(step, hp);
        future_end = limit - 1;
        for (int base_j = 0; base_j < limit; base_j += 32) {
            const int j = base_j + lane;
            const bool done =
                j < limit &&
                view.done[static_cast<long long>((step + j) % r.capacity_steps) * r.n_envs + env] != fh::env::kRunning;
            const unsigned hit = __ballot_sync(kFullMask, done);
            if (hit != 0u) {
                future_end = base_j + __ffs(static_cast<int>(hit)) - 1;
                break;
            }
        }
    }
    fh::her::GoalDraw gd{};
    if (lane == 0) gd = fh::her::finish_goal_draw(draw, u, relabel != 0, future_end, view, a.goals + base, sp, hp);
    const long long first = __shfl_sync(kFullMask, gd.draw.first, 0), last = __shfl_sync(kFullMask, gd.draw.last, 0);
    const float goal = __shfl_sync(kFullMask, gd.goal, 0);
    float* x = a.x + static_cast<long long>(agent) * 2 * a.batch * DG;
    for (int k = lane; k < D; k += 32) {
        x[b * DG + k] = view.states[first * D + k];
        x[(a.batch + b) * DG + k] = view.next_states[last * D + k];
    }
    if (lane == 0) {
        fh::her::goal_features(goal, view.states[first * D + col], x + b * DG + D);
        fh::her::goal_features(goal, view.next_states[last * D + col], x + (a.batch + b) * DG + D);
        if (a.goals_out != nullptr) a.goals_out[static_cast<long long>(agent) * a.batch + b] = goal;
    }
    const int env = __shfl_sync(kFullMask, gd.draw.env, 0);
    const long long step = __shfl_sync(kFullMask, gd.draw.step, 0);
    write_sample(a, w, gd.draw, env, step, p);
}

FH_KERNELS_dqn_step(FH_CHECK_KERNEL_ABI)
