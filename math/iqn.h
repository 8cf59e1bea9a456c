/// @file iqn.h
/// @brief The per-sample math of the IQN head (Dabney et al. 2018, Implicit Quantile Networks),
///        written once for the kernels (float, cuda/kernels/dqn_iqn.cu), the CPU twins (float,
///        src/ops/iqn/cpu.cpp) and the gradient check (double): the quantile fractions of an
///        update (Philox) and of acting (fixed midpoints), the cosine embedding's features, the
///        Hadamard product phi(s) * psi(tau) and its backward, the quantile Huber loss with the
///        head's backward, and acting's mean over its fractions.
///
/// The head layer's outputs per (sample, tau) are the scalar head's row (dqn::HeadParams with
/// scalar = 1): [value | advantages] with dueling, Z_tau(a) = V + A(a) - mean_a A, or the
/// advantages alone. Every function below uses only IEEE +, -, *, / and floor (the CPU builds
/// with -ffp-contract=off, the module with --fmad=false), so the kernels equal the twins bit for
/// bit.
#pragma once

#include <cstdint>

#include "math/dqn.h"
#include "math/host_device.h"
#include "math/policy.h"
#include "math/rng.h"

#if defined(__CUDACC__)
#include <cuda/std/cmath>
#define FH_IQN_NS cuda::std
#else
#include <cmath>
#define FH_IQN_NS std
#endif

namespace fh::iqn {

/// The IQN head's sizes (dqn.iqn_quantiles, dqn.iqn_act_quantiles, dqn.iqn_embedding).
struct Params {
    int quantiles = 0;      ///< N = N': online fractions at s and target fractions at s' per sample
    int act_quantiles = 0;  ///< K: the fixed midpoints acting averages over
    int n_cos = 0;          ///< the cosine features of the embedding, i = 0 .. n_cos - 1
};

/// The counter packs the fraction index's group of four into 8 bits: N <= 4 * 256.
inline constexpr int kMaxQuantiles = 1024;

/// cos(pi x) in double with IEEE +, -, *, floor only (the same bits on every backend): x = n + d
/// with n the nearest integer and |d| <= 1/2, cos(pi x) = (-1)^n cos(pi d), the cosine's Taylor
/// series to u^22 (u = pi d, |u| <= pi / 2: remainder below 1e-19), Horner's scheme in u^2.
FH_HD double cos_pi(double x) {
    const double n = FH_IQN_NS::floor(x + 0.5);
    const double u = (x - n) * 3.141592653589793;
    const double u2 = u * u;
    double c = 1.0 / 1124000727777607680000.0;  // 1/22!
    c = 1.0 / 2432902008176640000.0 - u2 * c;   // 1/20!
    c = 1.0 / 6402373705728000.0 - u2 * c;      // 1/18!
    c = 1.0 / 20922789888000.0 - u2 * c;        // 1/16!
    c = 1.0 / 87178291200.0 - u2 * c;           // 1/14!
    c = 1.0 / 479001600.0 - u2 * c;             // 1/12!
    c = 1.0 / 3628800.0 - u2 * c;               // 1/10!
    c = 1.0 / 40320.0 - u2 * c;                 // 1/8!
    c = 1.0 / 720.0 - u2 * c;                   // 1/6!
    c = 1.0 / 24.0 - u2 * c;                    // 1/4!
    c = 0.5 - u2 * c;                           // 1/2!
    c = 1.0 - u2 * c;
    const long long k = static_cast<long long>(n);
    return (k & 1) ? -c : c;
}

/// Feature i of the embedding of fraction tau: cos(pi i tau) (i tau exact in double).
FH_HD float cos_feature(float tau, int i) {
    return static_cast<float>(cos_pi(static_cast<double>(i) * static_cast<double>(tau)));
}

/// Fraction k of batch row `row` (the rows of [s; s']) at update number `update` (1-based):
/// Philox(seed, iqn_tau, row, (update << 8) | k / 4), word k % 4, 23 bits + 1/2 over 2^23: in
/// (0, 1), never 0 or 1, exact in float.
FH_HD float sample_tau(std::uint64_t seed, int row, long long update, int k) {
    const rng::U32x4 w = rng::draw(seed, rng::Purpose::iqn_tau, static_cast<std::uint32_t>(row),
                                   (static_cast<std::uint64_t>(update) << 8) | static_cast<std::uint64_t>(k >> 2));
    return (static_cast<float>(w.v[k & 3] >> 9) + 0.5f) * (1.0f / 8388608.0f);
}

/// Acting's fraction k of K: the midpoint (k + 1/2) / K (deterministic).
FH_HD float midpoint_tau(int k, int K) {
    return (static_cast<float>(k) + 0.5f) / static_cast<float>(K);
}

/// d phi[h] = sum_k dx[k][h] psi[k][h] over one sample's N rows (x = phi * psi), in order k = 0, 1, ...
template <class T>
FH_HD T phi_gradient(const T* dx, const T* psi, int N, int H, int h) {
    T s = 0;
    for (int k = 0; k < N; ++k) s += dx[static_cast<long long>(k) * H + h] * psi[static_cast<long long>(k) * H + h];
    return s;
}

/// Element w of the mean of K rows (K, W), summed in order, then / K. Acting averages the
/// embeddings psi(tau_k) of its K midpoints: the head layer and the dueling combination are
/// linear in psi, so the scalar head's Q of phi(s) * mean_k psi(tau_k) is the mean over the K
/// fractions of Z_tau(a) (up to rounding), at the cost of one head row per sample.
template <class T>
FH_HD T mean_row_element(const T* rows, int K, int W, int w) {
    T s = 0;
    for (int k = 0; k < K; ++k) s += rows[static_cast<long long>(k) * W + w];
    return s / static_cast<T>(K);
}

/// The quantile Huber loss (kappa = 1) of one pair, u = T_j - Z_i: rho = |tau - 1{u < 0}|
/// Huber(u) with Huber(u) = u^2 / 2 for |u| <= 1, |u| - 1/2 beyond; and d rho / d Z_i =
/// -|tau - 1{u < 0}| Huber'(u) (the target T_j is a constant).
template <class T>
FH_HD void quantile_huber(T u, T tau, T& rho, T& d_z) {
    const T au = u < 0 ? -u : u;
    const T w = u < 0 ? T(1) - tau : tau;
    rho = w * (au <= T(1) ? T(0.5) * u * u : au - T(0.5));
    const T dh = au <= T(1) ? u : (u < 0 ? T(-1) : T(1));
    d_z = -(w * dh);
}

/// Floats of scratch sample_loss needs: 2A + N.
FH_HD int loss_scratch(const dqn::HeadParams& h, int N) {
    return 2 * h.num_actions + N;
}

/// The loss of one sample on the IQN head (the whole update's math for one sample):
///   rows_s (N, W): the online network at s under the fractions taus (N);
///   rows_select, rows_target (N, W): the selecting network (online for double DQN, else the
///   target) and the target network at s' under the fractions tau' (the same for both);
///   a* = argmax_a mean_j Z_select_j(a) (the first maximum), T_j = ret + disc Z_target_j(a*);
///   loss = sum_i (1/N) sum_j rho(T_j - Z_i(act)); with cql_alpha, the CQL term on
///   Q(s, a) = mean_i Z_i(a).
/// d_rows (N, W) = the gradient of scale * (loss + cql_alpha * CQL) w.r.t. rows_s (through the
/// dueling combination); stats[dqn::kSampleStats]: C51 row 0, the loss in the MSE row, TD =
/// mean_i Z_i(act) - mean_j T_j, Q = mean_i Z_i(act), the CQL term. scratch: loss_scratch floats.
/// Sums run in index order (x, then j, then i): the kernel runs this on one thread per sample.
template <class T>
FH_HD void sample_loss(const T* rows_s, const T* rows_select, const T* rows_target, const T* taus, int N, int act,
                       T ret, T disc, T scale, T cql_alpha, const dqn::HeadParams& h, T* d_rows, T* scratch, T* stats) {
    const int A = h.num_actions, W = dqn::head_width(h), off = h.dueling ? 1 : 0;
    T* qa = scratch;      // one row's Z(a), then the CQL coefficients
    T* qm = scratch + A;  // the mean over fractions of Z(a)
    T* target = scratch + 2 * A;
    const T n = static_cast<T>(N);
    // 1. a*: the first maximal mean over the selecting network's fractions.
    for (int x = 0; x < A; ++x) qm[x] = 0;
    for (int j = 0; j < N; ++j) {
        dqn::scalar_q(rows_select + static_cast<long long>(j) * W, h, qa);
        for (int x = 0; x < A; ++x) qm[x] += qa[x];
    }
    for (int x = 0; x < A; ++x) qm[x] /= n;
    const int a_star = policy::argmax(qm, A);
    // 2. The targets T_j.
    T t_sum = 0;
    for (int j = 0; j < N; ++j) {
        dqn::scalar_q(rows_target + static_cast<long long>(j) * W, h, qa);
        target[j] = ret + disc * qa[a_star];
        t_sum += target[j];
    }
    // 3. Every online fraction i against every target: the loss and dL/dZ_i(act).
    for (int x = 0; x < A; ++x) qm[x] = 0;
    T loss = 0, z_sum = 0;
    for (int i = 0; i < N; ++i) {
        dqn::scalar_q(rows_s + static_cast<long long>(i) * W, h, qa);
        for (int x = 0; x < A; ++x) qm[x] += qa[x];
        const T z = qa[act];
        z_sum += z;
        T li = 0, gi = 0;
        for (int j = 0; j < N; ++j) {
            T rho, dz;
            quantile_huber(target[j] - z, taus[i], rho, dz);
            li += rho;
            gi += dz;
        }
        loss += li / n;
        T* g = d_rows + static_cast<long long>(i) * W + off;
        for (int x = 0; x < A; ++x) g[x] = x == act ? gi / n * scale : T(0);
    }
    for (int x = 0; x < A; ++x) qm[x] /= n;
    // 4. CQL on the mean Q: dQ(x)/dZ_i(x) = 1/N.
    T cql = 0;
    if (cql_alpha != T(0)) {
        const dqn::SoftMaximum<T> sm = dqn::cql_soft_maximum(qm, A);
        for (int x = 0; x < A; ++x) qa[x] = dqn::cql_coefficient(qm, x, act, sm, cql_alpha * scale) / n;
        for (int i = 0; i < N; ++i) {
            T* g = d_rows + static_cast<long long>(i) * W + off;
            for (int x = 0; x < A; ++x) g[x] += qa[x];
        }
        cql = dqn::cql_term(qm, act, sm);
    }
    // 5. The dueling backward of every row: d_value = sum_x g_x, d_adv(x) = g_x - mean_x g.
    if (h.dueling)
        for (int i = 0; i < N; ++i) {
            T* d = d_rows + static_cast<long long>(i) * W;
            T sum = 0;
            for (int x = 0; x < A; ++x) sum += d[1 + x];
            d[0] = sum;
            const T mean = sum / static_cast<T>(A);
            for (int x = 0; x < A; ++x) d[1 + x] -= mean;
        }
    stats[dqn::kStatC51] = 0;
    stats[dqn::kStatMse] = loss;
    stats[dqn::kStatTd] = z_sum / n - t_sum / n;
    stats[dqn::kStatQ] = qm[act];
    stats[dqn::kStatCql] = cql;
}

}  // namespace fh::iqn

#undef FH_IQN_NS
