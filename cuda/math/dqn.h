/// @file dqn.h
/// @brief The per-sample math of the distributional DQN, written once for the kernels (float),
///        the CPU twins (float) and the gradient check (double): the dueling C51 head, the C51
///        projection and cross-entropy, the MSE loss on the expected Q, double-DQN action
///        selection. Reads like the papers (Bellemare et al. 2017, Wang et al. 2016).
#pragma once

#include <cstdint>

#include "math/rng.h"
#include "math/policy.h"
#include "math/host_device.h"

#if defined(__CUDACC__)
#include <cuda/std/cmath>
#define FH_MATH_NS cuda::std
#else
#include <cmath>
#define FH_MATH_NS std
#endif

namespace fh::dqn {

/// Scalars of the C51 head and its losses. Passed to kernels by value.
struct HeadParams {
    int num_actions;   ///< A
    int num_atoms;     ///< Z
    int dueling;       ///< 1: logits = V + A - mean_a A; 0: logits = A
    float v_min;       ///< support [v_min, v_max], Z atoms
    float v_max;
};

/// Atom j of the support: v_min + j * (v_max - v_min) / (Z - 1).
template <class T> FH_HD T atom(const HeadParams& h, int j) {
    return static_cast<T>(h.v_min) +
           static_cast<T>(j) * (static_cast<T>(h.v_max) - static_cast<T>(h.v_min)) / static_cast<T>(h.num_atoms - 1);
}


/// Dueling C51 head for one sample: value (Z) and advantage (A, Z) -> logits (A, Z),
/// probabilities (A, Z) = softmax over atoms, and Q (A) = sum_z p * atom_z.
template <class T>
FH_HD void head_forward(const T* value, const T* adv, T* logits, T* probs, T* q, const HeadParams& h) {
    const int A = h.num_actions, Z = h.num_atoms;
    for (int z = 0; z < Z; ++z) {
        T mean_adv = 0;
        if (h.dueling) {
            for (int a = 0; a < A; ++a) mean_adv += adv[a * Z + z];
            mean_adv /= static_cast<T>(A);
        }
        for (int a = 0; a < A; ++a)
            logits[a * Z + z] = h.dueling ? value[z] + adv[a * Z + z] - mean_adv : adv[a * Z + z];
    }
    for (int a = 0; a < A; ++a) {
        const T* l = logits + a * Z;
        T* p = probs + a * Z;
        T mx = l[0];
        for (int z = 1; z < Z; ++z) mx = l[z] > mx ? l[z] : mx;
        T sum = 0;
        for (int z = 0; z < Z; ++z) {
            p[z] = FH_MATH_NS::exp(l[z] - mx);
            sum += p[z];
        }
        T qa = 0;
        for (int z = 0; z < Z; ++z) {
            p[z] /= sum;
            qa += p[z] * atom<T>(h, z);
        }
        q[a] = qa;
    }
}

/// Backward of the dueling combination: d_value[z] = sum_a d_logits[a, z];
/// d_adv[a, z] = d_logits[a, z] - mean_a d_logits[a, z] (or d_logits without dueling).
template <class T> FH_HD void head_backward(const T* d_logits, T* d_value, T* d_adv, const HeadParams& h) {
    const int A = h.num_actions, Z = h.num_atoms;
    for (int z = 0; z < Z; ++z) {
        T sum = 0;
        for (int a = 0; a < A; ++a) sum += d_logits[a * Z + z];
        if (h.dueling) d_value[z] = sum;
        const T mean = h.dueling ? sum / static_cast<T>(A) : T(0);
        for (int a = 0; a < A; ++a) d_adv[a * Z + z] = d_logits[a * Z + z] - mean;
    }
}

/// The C51 projection of the target distribution p_next (Z) through r + discount * z onto the
/// support, into m (Z). discount = gamma^n, or 0 for a terminal transition (then all the mass
/// lands on the atoms around clamp(r)). Targets beyond [v_min, v_max] are clamped to the edges.
template <class T>
FH_HD void c51_project(const T* p_next, T reward, T discount, T* m, const HeadParams& h) {
    const int Z = h.num_atoms;
    const T vmin = static_cast<T>(h.v_min), vmax = static_cast<T>(h.v_max);
    const T dz = (vmax - vmin) / static_cast<T>(Z - 1);
    for (int j = 0; j < Z; ++j) m[j] = 0;
    for (int j = 0; j < Z; ++j) {
        T tz = reward + discount * atom<T>(h, j);
        tz = tz < vmin ? vmin : (tz > vmax ? vmax : tz);
        const T b = (tz - vmin) / dz;  // position on the support, in [0, Z-1]
        int l = static_cast<int>(FH_MATH_NS::floor(b));
        l = l < 0 ? 0 : (l > Z - 1 ? Z - 1 : l);
        const int u = l + 1 < Z ? l + 1 : Z - 1;
        const T frac = b - static_cast<T>(l);  // 0 when b sits exactly on atom l
        if (u == l) {
            m[l] += p_next[j];
        } else {
            m[l] += p_next[j] * (T(1) - frac);
            m[u] += p_next[j] * frac;
        }
    }
}

/// Cross-entropy -sum_z m_z log softmax(logits)_z for the taken action, and its gradient
/// d_logits = (p - m) * scale. `m` may be the same array as `d_logits` (each m_z is read before
/// d_z is written): the projection is built in the gradient row and replaced by the gradient.
template <class T>
FH_HD T c51_cross_entropy(const T* logits, const T* probs, const T* m, T* d_logits, T scale, int Z) {
    T mx = logits[0];
    for (int z = 1; z < Z; ++z) mx = logits[z] > mx ? logits[z] : mx;
    T sum = 0;
    for (int z = 0; z < Z; ++z) sum += FH_MATH_NS::exp(logits[z] - mx);
    const T log_sum = mx + FH_MATH_NS::log(sum);
    T loss = 0;
    for (int z = 0; z < Z; ++z) {
        const T mz = m[z];
        loss -= mz * (logits[z] - log_sum);
        d_logits[z] = (probs[z] - mz) * scale;
    }
    return loss;
}

/// 0.5 * (Q(s, a) - y)^2 on the expected Q of the taken action and its gradient with respect to
/// that action's logits: dQ/dlogit_z = p_z * (atom_z - Q). Returns the TD error Q - y in td.
template <class T>
FH_HD T mse_expected_q(const T* probs, T q, T y, T* d_logits, T scale, const HeadParams& h, T& td) {
    td = q - y;
    for (int z = 0; z < h.num_atoms; ++z) d_logits[z] = td * probs[z] * (atom<T>(h, z) - q) * scale;
    return T(0.5) * td * td;
}

/// The action whose next-state distribution is the target: argmax of q_next_select, which is the
/// online network's Q(s') for double DQN (van Hasselt et al. 2016), else the target network's.
template <class T> FH_HD int target_action(const T* q_next_select_row, const HeadParams& h) {
    return policy::argmax(q_next_select_row, h.num_actions);
}

/// The C51 loss of batch row b: projects the target distribution of a* at s' into the taken
/// action's gradient row, takes the cross-entropy against p(s, a_b) and leaves (p - m) * scale
/// there; the other actions' rows are zero. Arrays are the whole batch's.
template <class T>
FH_HD T c51_sample_loss(long long b, const T* logits, const T* probs, const T* q_next_select,
                        const T* probs_next_target, const int* actions, const T* returns,
                        const T* discounts, T* d_logits, T scale, const HeadParams& h) {
    const int A = h.num_actions, Z = h.num_atoms;
    const long long AZ = static_cast<long long>(A) * Z;
    const int a_star = target_action(q_next_select + b * A, h);
    const int a = actions[b];
    T* d = d_logits + b * AZ;
    for (long long i = 0; i < AZ; ++i) d[i] = 0;
    T* row = d + static_cast<long long>(a) * Z;
    c51_project(probs_next_target + b * AZ + static_cast<long long>(a_star) * Z, returns[b], discounts[b], row, h);
    const long long off = b * AZ + static_cast<long long>(a) * Z;
    return c51_cross_entropy(logits + off, probs + off, row, row, scale, Z);
}

/// The MSE loss of batch row b on the expected Q: y = R + discount * Q_target(s', a*).
template <class T>
FH_HD T mse_sample_loss(long long b, const T* probs, const T* q, const T* q_next_select,
                        const T* q_next_target, const int* actions, const T* returns,
                        const T* discounts, T* d_logits, T* td, T scale, const HeadParams& h) {
    const int A = h.num_actions, Z = h.num_atoms;
    const long long AZ = static_cast<long long>(A) * Z;
    const int a_star = target_action(q_next_select + b * A, h);
    const int a = actions[b];
    T* d = d_logits + b * AZ;
    for (long long i = 0; i < AZ; ++i) d[i] = 0;
    const T y = returns[b] + discounts[b] * q_next_target[b * A + a_star];
    return mse_expected_q(probs + b * AZ + static_cast<long long>(a) * Z, q[b * A + a], y,
                          d + static_cast<long long>(a) * Z, scale, h, td[b]);
}

// ---- monitoring ------------------------------------------------------------------------

/// Sums since the last read-back.
struct MonitorStats {
    double loss_sum[2];      ///< batch-mean C51 and MSE losses, summed over updates
    double q_sum;            ///< Q(s, a) of sampled transitions, summed
    double td_abs_sum;       ///< |TD error| of the expected Q, summed
    double grad_norm_sum;    ///< pre-clipping gradient norm, summed over updates
    float q_min, q_max;
    float grad_norm_max;
    int updates;
    long long samples;
};

/// One update's contribution, in a fixed order (shared by the kernel and the CPU twin).
FH_HD void monitor_accumulate(MonitorStats& s, const float* losses, const float* q, const int* actions,
                              const float* td, float grad_norm, int num_actions, int batch) {
    s.loss_sum[0] += losses[0];
    s.loss_sum[1] += losses[1];
    s.grad_norm_sum += grad_norm;
    if (s.updates == 0 || grad_norm > s.grad_norm_max) s.grad_norm_max = grad_norm;
    for (int b = 0; b < batch; ++b) {
        const float qa = q[static_cast<long long>(b) * num_actions + actions[b]];
        s.q_sum += qa;
        s.td_abs_sum += td[b] < 0 ? -td[b] : td[b];
        if ((s.updates == 0 && b == 0) || qa < s.q_min) s.q_min = qa;
        if ((s.updates == 0 && b == 0) || qa > s.q_max) s.q_max = qa;
    }
    s.samples += batch;
    s.updates += 1;
}

}  // namespace fh::dqn
