/* dqn_iqn.cu — the IQN head of the DQN trainer (dqn.head = "iqn"; docs/dqn.md, "IQN head").
 *
 * Math:        math/iqn.h: sample_tau / midpoint_tau and cos_feature (the fractions and the
 *              embedding's features), the Hadamard product and phi_gradient, sample_loss (the
 *              quantile Huber loss, double-DQN a*, CQL on the mean Q, the dueling backward),
 *              mean_row_element (acting: the mean embedding of its K midpoints). The GEMMs of
 *              the trunk, the embedding and the head layer are the network's (nn::Mlp).
 * Layout:      an update's rows are [s; s'] (2B), each with N fractions: row r * N + k; head rows
 *              (rows * N, W) with W = dqn::head_width of the scalar head; stats (kSampleStats, B).
 * Launch:      taus: a thread per (row, fraction), grid-stride. hadamard: grid-stride over the
 *              elements. hadamard_backward: a thread per (sample, feature). loss: a thread per
 *              sample, kIqnLossThreads per block, loss_scratch floats of dynamic shared memory per
 *              thread. mean_rows: a thread per (row, output), grid-stride.
 * Determinism: exact run to run and = CPU bit for bit (compiled with --fmad=false): every sum runs
 *              on one thread in the twins' order, cos(pi x) is a polynomial in IEEE double
 *              (iqn::cos_pi), no atomics. The one exception: the loss with CQL (cql_alpha > 0)
 *              takes expf/logf in the soft maximum, within an ulp of the CPU's.
 * Aliasing:    outputs overlap no other operand (checked in cuda/abi/dqn_iqn.h); the select and
 *              target head rows may be one buffer.
 * Signatures:  cuda/abi/dqn_iqn.h. Tests: tests/ops/test_iqn_ops.cpp ([gpu]).
 */
#include "abi/dqn_iqn.h"
#include "device_functions.cuh"

using fh::device::global_thread_index;
using fh::device::grid_thread_count;

extern "C" __global__ void iqn_taus_kernel(fh::abi::IqnTausArgs a) {
    const long long n = static_cast<long long>(a.rows) * a.quantiles;
    const long long update = a.agent != nullptr ? a.counters[0].updates + 1 : 0;
    for (long long t = global_thread_index(); t < n; t += grid_thread_count()) {
        const int r = static_cast<int>(t / a.quantiles), k = static_cast<int>(t % a.quantiles);
        const float tau = a.agent != nullptr ? fh::iqn::sample_tau(a.agent[0].seed, r, update, k)
                                             : fh::iqn::midpoint_tau(k, a.quantiles);
        a.taus[t] = tau;
        for (int i = 0; i < a.n_cos; ++i) a.features[t * a.n_cos + i] = fh::iqn::cos_feature(tau, i);
    }
}

extern "C" __global__ void iqn_hadamard_kernel(float* __restrict__ x, const float* __restrict__ phi,
                                               const float* __restrict__ psi, int count, int rows, int quantiles,
                                               int psi_rows, int width) {
    const long long per_net = static_cast<long long>(rows) * quantiles;
    const long long n = static_cast<long long>(count) * per_net * width;
    for (long long t = global_thread_index(); t < n; t += grid_thread_count()) {
        const long long h = t % width, xr = t / width;
        const long long c = xr / per_net, r = xr % per_net;
        x[t] = phi[(c * rows + r / quantiles) * width + h] * psi[(c * psi_rows + r % psi_rows) * width + h];
    }
}

extern "C" __global__ void iqn_hadamard_backward_kernel(float* __restrict__ d_phi, float* __restrict__ d_psi,
                                                        const float* __restrict__ dx, const float* __restrict__ phi,
                                                        const float* __restrict__ psi, int batch, int quantiles,
                                                        int width) {
    const long long n = static_cast<long long>(batch) * width;
    for (long long t = global_thread_index(); t < n; t += grid_thread_count()) {
        const long long b = t / width, h = t % width;
        const long long r0 = b * quantiles;
        const float p = phi[t];
        for (int k = 0; k < quantiles; ++k) d_psi[(r0 + k) * width + h] = dx[(r0 + k) * width + h] * p;
        d_phi[t] = fh::iqn::phi_gradient(dx + r0 * width, psi + r0 * width, quantiles, width, static_cast<int>(h));
    }
}

extern "C" __global__ void iqn_loss_kernel(fh::abi::IqnLossArgs a) {
    extern __shared__ float smem[];
    const fh::dqn::HeadParams& h = a.head_params;
    const long long b = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (b >= a.batch) return;
    const int N = a.quantiles, W = fh::dqn::head_width(h), A = h.num_actions;
    float* scratch = smem + threadIdx.x * fh::iqn::loss_scratch(h, N);
    const long long off = b * N * W;
    float* d = a.d_head + off;
    const int act = a.actions[b];
    if (act < 0 || act >= A) {  // a corrupt batch: NaN losses (the guard skips it), no gradient
        for (long long i = 0; i < static_cast<long long>(N) * W; ++i) d[i] = 0.f;
        for (int k = 0; k < fh::dqn::kSampleStats; ++k)
            a.stats[k * a.batch + b] = cuda::std::numeric_limits<float>::quiet_NaN();
        return;
    }
    float st[fh::dqn::kSampleStats];
    fh::iqn::sample_loss(a.head_s + off, a.head_select + off, a.head_target + off, a.taus + b * N, N, act, a.returns[b],
                         a.discounts[b], 1.0f / static_cast<float>(a.batch), a.agent[0].cql_alpha, h, d, scratch, st);
    for (int k = 0; k < fh::dqn::kSampleStats; ++k) a.stats[k * a.batch + b] = st[k];
}

extern "C" __global__ void iqn_mean_rows_kernel(float* __restrict__ out, const float* __restrict__ head, int n,
                                                int quantiles, int width) {
    const long long total = static_cast<long long>(n) * width;
    for (long long t = global_thread_index(); t < total; t += grid_thread_count()) {
        const long long e = t / width;
        out[t] = fh::iqn::mean_row_element(head + e * quantiles * width, quantiles, width, static_cast<int>(t % width));
    }
}

FH_KERNELS_dqn_iqn(FH_CHECK_KERNEL_ABI)
