/// @file dqn.h
/// @brief The per-sample math of the distributional DQN, written once for the kernels (float),
///        the CPU twins (float) and the gradient check (double): the dueling C51 head, the C51
///        projection and cross-entropy, the MSE loss on the expected Q, double-DQN action
///        selection. Reads like the papers (Bellemare et al. 2017, Wang et al. 2016).
#pragma once

#include <cstdint>

#include "math/core.h"
#include "math/nn.h"
#include "math/rng.h"
#include "math/policy.h"
#include "math/replay.h"
#include "math/host_device.h"

#if defined(__CUDACC__)
#include <cuda/std/cmath>
#include <cuda/std/limits>
#define FH_MATH_NS cuda::std
#else
#include <cmath>
#include <limits>
#define FH_MATH_NS std
#endif

namespace fh::dqn {

/// Scalars of the head and its losses. Passed to kernels by value.
struct HeadParams {
    int num_actions;  ///< A
    int num_atoms;    ///< Z (the C51 head)
    int dueling;      ///< 1: logits = V + A - mean_a A; 0: logits = A
    float v_min;      ///< support [v_min, v_max], Z atoms
    float v_max;
    int scalar = 0;    ///< 1: dqn.head = "mse": one output per action, Q itself (no atoms, no support)
    int ensemble = 1;  ///< K heads on the shared trunk (dqn.ensemble_size): K head rows side by side per sample
};

/// Outputs per action (and of the value stream): Z for the C51 head, 1 for the scalar head.
FH_HD int head_atoms(const HeadParams& h) {
    return h.scalar ? 1 : h.num_atoms;
}

/// Atom j of the support: v_min + j * (v_max - v_min) / (Z - 1).
template <class T>
FH_HD T atom(const HeadParams& h, int j) {
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
template <class T>
FH_HD void head_backward(const T* d_logits, T* d_value, T* d_adv, const HeadParams& h) {
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

/// CQL (Kumar et al. 2020) on the expected Q of the head: logsumexp_x Q(s, x) - Q(s, a) for the
/// taken action a. Its gradient with respect to Q(s, x) is softmax_x(Q) - [x == a]: it lowers
/// the actions the data did not take, in proportion to how much the soft maximum favours them,
/// and raises the taken one. Stable: exponentials after the maximum.
template <class T>
struct SoftMaximum {
    T max, sum;  ///< max_x Q_x and sum_x exp(Q_x - max), summed in action order
};
template <class T>
FH_HD SoftMaximum<T> cql_soft_maximum(const T* q, int A) {
    T mx = q[0];
    for (int x = 1; x < A; ++x) mx = q[x] > mx ? q[x] : mx;
    T sum = 0;
    for (int x = 0; x < A; ++x) sum += FH_MATH_NS::exp(q[x] - mx);
    return {mx, sum};
}
/// The term logsumexp_x Q_x - Q_a.
template <class T>
FH_HD T cql_term(const T* q, int a, SoftMaximum<T> s) {
    return s.max + FH_MATH_NS::log(s.sum) - q[a];
}
/// dL/dQ_x times `weight` (the term's weight times 1/B): (softmax_x - [x == a]) * weight.
template <class T>
FH_HD T cql_coefficient(const T* q, int x, int a, SoftMaximum<T> s, T weight) {
    return (FH_MATH_NS::exp(q[x] - s.max) / s.sum - (x == a ? T(1) : T(0))) * weight;
}

/// The CQL gradient of logit z of action x: coef_x * dQ_x/dlogit_z = coef_x * p_z * (atom_z - Q_x).
template <class T>
FH_HD T cql_logit_gradient(T coef, T p, T atom_z, T q_x) {
    return coef * p * (atom_z - q_x);
}

/// The action whose next-state distribution is the target: argmax of q_next_select, which is the
/// online network's Q(s') for double DQN (van Hasselt et al. 2016), else the target network's.
template <class T>
FH_HD int target_action(const T* q_next_select_row, const HeadParams& h) {
    return policy::argmax(q_next_select_row, h.num_actions);
}

/// The C51 loss of batch row b: projects the target distribution of a* at s' into the taken
/// action's gradient row, takes the cross-entropy against p(s, a_b) and leaves (p - m) * scale
/// there; the other actions' rows are zero. Arrays are the whole batch's.
template <class T>
FH_HD T c51_sample_loss(long long b, const T* logits, const T* probs, const T* q_next_select,
                        const T* probs_next_target, const int* actions, const T* returns, const T* discounts,
                        T* d_logits, T scale, const HeadParams& h) {
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

/// The CQL term of batch row b and its gradient (every action's logits; weight `scale`) from the
/// head's probabilities and Q (B, A, Z) and (B, A).
template <class T>
FH_HD T cql_sample_loss(long long b, const T* probs, const T* q, const int* actions, T* d_logits, T scale,
                        const HeadParams& h) {
    const int A = h.num_actions, Z = h.num_atoms;
    const long long AZ = static_cast<long long>(A) * Z;
    const T* qb = q + b * A;
    const int a = actions[b];
    const SoftMaximum<T> sm = cql_soft_maximum(qb, A);
    for (int x = 0; x < A; ++x) {
        const T coef = cql_coefficient(qb, x, a, sm, scale);
        for (int z = 0; z < Z; ++z) {
            const long long i = b * AZ + static_cast<long long>(x) * Z + z;
            d_logits[i] = cql_logit_gradient(coef, probs[i], atom<T>(h, z), qb[x]);
        }
    }
    return cql_term(qb, a, sm);
}

/// The MSE loss of batch row b on the expected Q: y = R + discount * Q_target(s', a*).
template <class T>
FH_HD T mse_sample_loss(long long b, const T* probs, const T* q, const T* q_next_select, const T* q_next_target,
                        const int* actions, const T* returns, const T* discounts, T* d_logits, T* td, T scale,
                        const HeadParams& h) {
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

// ---- the device-side steps of the DQN trainer (cuda/kernels/dqn_step.cu) -------------------
// Collection and updates are fixed kernel sequences (captured once in CUDA Graphs): every value
// that changes from one step to the next lives in device memory, in these structs. Each is an
// array with one entry per agent (a population trains N agents at once; N = 1 for a single run),
// kernels index it with their agent index.

/// One agent's constants: exploration schedule, sampling, loss blend, target network, Adam.
struct AgentParams {
    std::uint64_t seed;  ///< run.seed: every Philox draw of this agent
    double epsilon_start, epsilon_end;
    double epsilon_decay_env_steps;  ///< 0: epsilon_end from the first step
    int n_envs;                      ///< environments per collection step
    int n_step;                      ///< n-step returns
    float gamma;
    float mse_alpha;       ///< loss = alpha * C51 + (1 - alpha) * MSE (+ cql_alpha * CQL)
    float cql_alpha;       ///< weight of the CQL term; 0: off (the loss kernel skips it)
    float curiosity_coef;  ///< weight of the curiosity bonus in the stored reward (with dqn.curiosity)
    float bootstrap_prob;  ///< ensemble: probability that a head trains on a transition (1: all do)
    float ucb;             ///< ensemble: collection acts on mean + ucb * spread of the heads' Q; 0: the mean
    float tau;             ///< soft target update rate; 0: a copy every target_period
    float one_minus_tau;   ///< float(1 - tau) computed in double (as the host did)
    long long target_period;
    /// Steps the agent's ring holds before its first update (dqn_replay_steps' before_updates): an
    /// update of an agent whose ring holds fewer (a batched population's slot that started a new
    /// point while the others train) leaves every state of the agent as it was (finish_update).
    long long min_pushed;
    float lr, beta1, beta2, adam_eps, clip_norm, weight_decay;  ///< Adam (core::adam_element)
    // dqn.her (math/her.h): episode goals, relabelling and the goal reward.
    float her_ratio;                   ///< probability that a replayed row gets a future achieved goal
    float her_reward;                  ///< the goal reward (per step at or above the goal)
    float her_goal_min, her_goal_max;  ///< episode goals, percent of the initial equity
    int her_horizon;                   ///< the longest episode, steps (the relabelling's future scan)
};

/// One agent's counters, advanced by the kernels (the host keeps a mirror for logging and
/// checkpoints; a checkpoint's counters are uploaded here on resume).
struct Counters {
    long long steps;    ///< collection steps taken
    long long updates;  ///< gradient updates taken (skipped ones included)
    long long pushed;   ///< steps pushed to the replay ring
};

/// What one update's finish decided, read by the update's last kernel (Adam + target).
struct UpdateStep {
    int gate;                  ///< 1: apply the update (the training guard)
    int wait;                  ///< 1: no update at all: the agent's ring is not ready (AgentParams::min_pushed)
    int copy_target;           ///< 1: periodic target copy at this update
    float grad_norm;           ///< global norm of the gradient, before clipping
    float losses[3];           ///< batch-mean C51, MSE and CQL terms (what the guard checked)
    core::AdamConstants adam;  ///< this update's Adam constants (bias corrections of its step)
};

/// The steps an update may sample: the update runs while the collection of step `pushed` writes
/// its slot (the two overlap on the device), so when the ring is full its oldest step, whose
/// slot that collection overwrites, is not sampled; the n-1 newest steps wait for their futures.
/// Sample start steps are [oldest, oldest + count).
struct SampleRange {
    long long oldest, count;
};
FH_HD SampleRange sample_range(long long pushed, int capacity_steps, int n_step) {
    const long long oldest = pushed >= capacity_steps ? pushed + 1 - capacity_steps : 0;
    return {oldest, pushed - (n_step - 1) - oldest};
}

/// What agent `agent`'s next update samples from: its part of a population's ring (each agent's
/// capacity_steps * n_envs rows after the previous agents') and the sample parameters (the update
/// number counters.updates + 1, sample_range of its pushed steps). The sampling kernels and their
/// CPU twins both start here.
struct AgentSampling {
    replay::ReplayView view;
    replay::SampleParams params;
};
FH_HD AgentSampling agent_sampling(const float* states, const float* next_states, const int* actions,
                                   const float* rewards, const std::uint8_t* done, int capacity_steps, int n_envs,
                                   int state_dim, long long agent, const Counters& c, const AgentParams& p) {
    const long long base = agent * capacity_steps * n_envs;
    SampleRange range = sample_range(c.pushed, capacity_steps, p.n_step);
    // An agent whose ring is not ready yet (AgentParams::min_pushed) draws from the ring's first
    // step, whatever it holds: its update is discarded (finish_update).
    if (range.count < 1) range.count = 1;
    return AgentSampling{replay::ReplayView{states + base * state_dim, next_states + base * state_dim, actions + base,
                                            rewards + base, done + base, capacity_steps, n_envs, state_dim},
                         replay::SampleParams{p.seed, static_cast<std::uint64_t>(c.updates + 1), range.oldest,
                                              range.count, p.n_step, p.gamma}};
}

/// Epsilon of collection step `step`: linear from epsilon_start to epsilon_end over
/// epsilon_decay_env_steps environment steps, in double.
FH_HD float epsilon_at(const AgentParams& p, long long step) {
    const double env_steps = static_cast<double>(step) * p.n_envs;
    double frac = 1.0;
    if (p.epsilon_decay_env_steps > 0) {
        frac = env_steps / p.epsilon_decay_env_steps;
        frac = frac < 1.0 ? frac : 1.0;
    }
    return static_cast<float>(p.epsilon_start + frac * (p.epsilon_end - p.epsilon_start));
}

/// Adam's constants for update number `step` (1-based): bias corrections 1 - beta^step in double.
FH_HD core::AdamConstants adam_constants(const AgentParams& p, long long step) {
    core::AdamConstants c{};
    c.lr = p.lr;
    c.beta1 = p.beta1;
    c.beta2 = p.beta2;
    c.eps = p.adam_eps;
    c.clip_norm = p.clip_norm;
    c.weight_decay = p.weight_decay;
    return core::at_step(c, step);
}

/// Floats of one sample's head output: [value (Z) | advantages (A, Z)] with dueling, the
/// advantages alone without. The head is one linear layer of this width.
FH_HD int head_width(const HeadParams& h) {
    return (h.dueling ? head_atoms(h) : 0) + h.num_actions * head_atoms(h);
}
/// Floats of one sample's network output: the K = ensemble heads' rows side by side, so the
/// outputs of B samples are also B * K head rows (row b * K + k is head k of sample b).
FH_HD int output_width(const HeadParams& h) {
    return h.ensemble * head_width(h);
}

/// Logit (a, z) of a head row: value[z] + adv[a, z] - mean_adv[z] with dueling, adv[a, z]
/// without. mean_adv[z] = (sum over a of adv[a, z]) / A, summed in action order.
template <class T>
FH_HD T head_logit(const T* row, T mean_adv_z, int a, int z, const HeadParams& h) {
    const T* adv = row + (h.dueling ? head_atoms(h) : 0);
    const T x = adv[a * head_atoms(h) + z];
    return h.dueling ? row[z] + x - mean_adv_z : x;
}
template <class T>
FH_HD T head_mean_adv(const T* row, int z, const HeadParams& h) {
    if (!h.dueling) return T(0);
    const T* adv = row + head_atoms(h);
    T sum = 0;
    for (int a = 0; a < h.num_actions; ++a) sum += adv[a * head_atoms(h) + z];
    return sum / static_cast<T>(h.num_actions);
}

/// The C51 projection as a gather: source atom j of the target distribution lands at position
/// b_j = (clamp(r + discount * z_j) - v_min) / dz on the support, and target atom i receives
/// p_j * max(0, 1 - |b_j - i|) from it (the two neighbouring atoms share the mass; an exact hit
/// gives all of it). Each target atom sums its shares in the order j = 0, 1, ...: no scatter,
/// no atomics, the same order on every backend.
template <class T>
FH_HD T projection_position(T reward, T discount, int j, const HeadParams& h) {
    const T vmin = static_cast<T>(h.v_min), vmax = static_cast<T>(h.v_max);
    const T dz = (vmax - vmin) / static_cast<T>(h.num_atoms - 1);
    T tz = reward + discount * atom<T>(h, j);
    tz = tz < vmin ? vmin : (tz > vmax ? vmax : tz);
    return (tz - vmin) / dz;
}
template <class T>
FH_HD T projection_weight(T position, int i) {
    const T d = position - static_cast<T>(i);
    const T w = T(1) - (d < 0 ? -d : d);
    return w > 0 ? w : T(0);
}

/// The blended gradient of one logit z of the taken action, scaled by 1/B:
/// alpha * (p - m) + (1 - alpha) * td * p * (z - q), rounded as the separate C51 gradient,
/// MSE gradient and in-place blend (scale, then fused multiply-add) were.
FH_HD float blended_logit_gradient(float p, float m, float td, float atom_z, float q, float scale, float alpha) {
    const float d_c51 = (p - m) * scale;
    const float d_mse = td * p * (atom_z - q) * scale;
    return core::saxpy_element(d_c51 * alpha, 1.0f - alpha, d_mse);
}

/// The per-sample statistics of the fused loss, rows of its (kSampleStats, B) output. The CQL
/// row is 0 when the term is off.
enum SampleStat : int { kStatC51 = 0, kStatMse = 1, kStatTd = 2, kStatQ = 3, kStatCql = 4, kSampleStats = 5 };

/// The losses an update reports (UpdateStep::losses, MonitorStats::loss_sum): C51, MSE, CQL.
inline constexpr int kUpdateLosses = 3;

// ---- the scalar head (dqn.head = "mse") -----------------------------------------------
// One output per action, Q itself: Q(a) = V + A(a) - mean_a A (dueling) or A(a). The loss is the
// MSE 0.5 (Q(s, a) - y)^2, y = R + discount * Q_target(s', a*), plus the CQL term when weighted.
// Written once for one sample (a kernel runs it on one lane; the CPU twin and the double
// gradient check call it as is).

/// Q of every action of a scalar head row into q (A).
template <class T>
FH_HD void scalar_q(const T* row, const HeadParams& h, T* q) {
    const T mean = head_mean_adv(row, 0, h);
    for (int a = 0; a < h.num_actions; ++a) q[a] = head_logit(row, mean, a, 0, h);
}

/// The loss of one sample on the scalar head: d_row (W) = dL/d(head outputs of s), scale = 1/B;
/// stats[kSampleStats] as the C51 head's (C51 row 0). q_scratch holds 2A values. target_action
/// >= 0 is a* (an ensemble's, from the heads' mean), else a* = argmax of row_select's Q.
template <class T>
FH_HD void scalar_sample_loss(const T* row_s, const T* row_select, const T* row_target, int act, T ret, T disc, T scale,
                              T cql_alpha, const HeadParams& h, T* d_row, T* q_scratch, T* stats,
                              int target_action = -1) {
    const int A = h.num_actions;
    T* q_s = q_scratch;
    T* q_x = q_scratch + A;
    int a_star = target_action;
    if (a_star < 0) {
        scalar_q(row_select, h, q_x);
        a_star = policy::argmax(q_x, A);
    }
    scalar_q(row_target, h, q_x);
    const T y = ret + disc * q_x[a_star];
    scalar_q(row_s, h, q_s);
    const T td = q_s[act] - y;
    // dL/dQ(x): the MSE's on the taken action, the CQL coefficients on every action.
    T* g = d_row + (h.dueling ? 1 : 0);
    for (int x = 0; x < A; ++x) g[x] = x == act ? td * scale : T(0);
    T cql = 0;
    if (cql_alpha != T(0)) {
        const SoftMaximum<T> sm = cql_soft_maximum(q_s, A);
        for (int x = 0; x < A; ++x) g[x] += cql_coefficient(q_s, x, act, sm, cql_alpha * scale);
        cql = cql_term(q_s, act, sm);
    }
    if (h.dueling) {  // d_value = sum_x g_x; d_adv(x) = g_x - mean_x g
        T sum = 0;
        for (int x = 0; x < A; ++x) sum += g[x];
        d_row[0] = sum;
        const T mean = sum / static_cast<T>(A);
        for (int x = 0; x < A; ++x) g[x] -= mean;
    }
    stats[kStatC51] = 0;
    stats[kStatMse] = T(0.5) * td * td;
    stats[kStatTd] = td;
    stats[kStatQ] = q_s[act];
    stats[kStatCql] = cql;
}

// ---- the ensemble (dqn.ensemble_size = K > 1) --------------------------------------------
// K heads on one trunk (Osband et al. 2016, bootstrapped DQN): each head is a whole C51 or scalar
// head; each trains on the transitions its bootstrap mask gives it; acting and the target action
// use the heads' mean Q.

/// The heads' mean Q of action a from q_k (K, A), summed in head order, and their spread (the
/// population standard deviation over heads, two-pass).
template <class T>
struct EnsembleQ {
    T mean, spread;
};
template <class T>
FH_HD EnsembleQ<T> ensemble_q(const T* q_heads, int K, int A, int a) {
    T sum = 0;
    for (int k = 0; k < K; ++k) sum += q_heads[k * A + a];
    const T mean = sum / static_cast<T>(K);
    T var = 0;
    for (int k = 0; k < K; ++k) {
        const T d = q_heads[k * A + a] - mean;
        var += d * d;
    }
    return {mean, FH_MATH_NS::sqrt(var / static_cast<T>(K))};
}

/// The score acting maximises: the mean Q, plus ucb times the spread when exploring with a UCB
/// bonus (collection only; evaluation and the target action use the mean).
template <class T>
FH_HD T ensemble_score(EnsembleQ<T> e, T ucb) {
    return ucb > T(0) ? e.mean + ucb * e.spread : e.mean;
}

/// Bootstrap mask of head k for the transition that environment `env` collected at step `step`:
/// 1 with probability p, else 0, from Philox(seed, bootstrap_mask, env, step * 8 + k / 4), word
/// k % 4. A function of the transition's identity, so a transition keeps its mask for its whole
/// life in the ring without storing it (K <= 32).
FH_HD float bootstrap_mask(std::uint64_t seed, int env, long long step, int k, float p) {
    if (p >= 1.0f) return 1.0f;
    const rng::U32x4 u = rng::draw(seed, rng::Purpose::bootstrap_mask, static_cast<std::uint32_t>(env),
                                   static_cast<std::uint64_t>(step) * 8u + static_cast<std::uint64_t>(k / 4));
    return rng::unit_float(u.v[k % 4]) < p ? 1.0f : 0.0f;
}
/// masks[k] = bootstrap_mask(seed, env, step, k, p) for k = first, first + stride, ... < K: one
/// sample's K heads' masks, or a lane's share of them (the CPU twins: first 0, stride 1).
FH_HD void bootstrap_masks(float* masks, int K, std::uint64_t seed, int env, long long step, float p, int first = 0,
                           int stride = 1) {
    for (int k = first; k < K; k += stride) masks[k] = bootstrap_mask(seed, env, step, k, p);
}
inline constexpr int kMaxEnsemble = 32;

// ---- monitoring ------------------------------------------------------------------------

/// Sums since the last read-back.
struct MonitorStats {
    double loss_sum[kUpdateLosses];  ///< batch-mean C51, MSE and CQL terms, summed over updates
    double q_sum;                    ///< Q(s, a) of sampled transitions, summed
    double td_abs_sum;               ///< |TD error| of the expected Q, summed
    double grad_norm_sum;            ///< pre-clipping gradient norm, summed over updates
    float q_min, q_max;
    float grad_norm_max;
    int updates;
    long long samples;
};

/// The batch's sums, reduced in a fixed order (the update's finish, cuda/kernels/dqn_step.cu).
struct BatchSums {
    double c51, mse, q, td_abs, cql;
    float q_min, q_max;
};

/// One update's contribution: its batch-mean losses, gradient norm and batch sums.
FH_HD void monitor_accumulate(MonitorStats& s, const float* losses, float grad_norm, const BatchSums& b, int batch) {
    for (int i = 0; i < kUpdateLosses; ++i) s.loss_sum[i] += losses[i];
    s.grad_norm_sum += grad_norm;
    if (s.updates == 0 || grad_norm > s.grad_norm_max) s.grad_norm_max = grad_norm;
    s.q_sum += b.q;
    s.td_abs_sum += b.td_abs;
    if (s.updates == 0 || b.q_min < s.q_min) s.q_min = b.q_min;
    if (s.updates == 0 || b.q_max > s.q_max) s.q_max = b.q_max;
    s.samples += batch;
    s.updates += 1;
}

/// The update's scalar bookkeeping after the batch sums and the gradient norm are known: the
/// batch-mean losses, the training guard's decision (`inject_nan` makes the C51 loss NaN: tests),
/// the monitor, this update's Adam constants and target copy, and the update counter. Shared by
/// the finish kernel (one thread) and its CPU twin.
FH_HD void finish_update(UpdateStep& out, nn::GuardState& guard, MonitorStats& stats, Counters& counters,
                         const AgentParams& p, const BatchSums& sums, float grad_norm, int batch, int inject_nan) {
    out.wait = counters.pushed < p.min_pushed ? 1 : 0;
    if (out.wait) {  // no update: the guard, the monitor, the counters and (adam_target_element) the weights as they
                     // were
        out.gate = 0;
        out.copy_target = 0;
        return;
    }
    const long long u = counters.updates + 1;
    out.losses[0] = static_cast<float>(sums.c51 / batch);
    out.losses[1] = static_cast<float>(sums.mse / batch);
    out.losses[2] = static_cast<float>(sums.cql / batch);
    if (inject_nan) out.losses[0] = FH_MATH_NS::numeric_limits<float>::quiet_NaN();
    out.grad_norm = grad_norm;
    out.gate = nn::guard_decide(guard, out.losses, kUpdateLosses, grad_norm, u);
    monitor_accumulate(stats, out.losses, grad_norm, sums, batch);
    out.adam = adam_constants(p, u);
    out.copy_target = (p.tau <= 0.0f && p.target_period > 0 && u % p.target_period == 0) ? 1 : 0;
    counters.updates = u;
}

// ---- curiosity (the forward model's bonus, dqn.curiosity) ------------------------------

/// The bonus's sums since the last read-back: the forward model's error per collected
/// transition (before curiosity_coef), summed in a fixed order.
struct CuriosityStats {
    double error_sum;
    long long transitions;
};

/// A collected transition's stored reward: the environment's reward plus the weighted bonus
/// (no fused multiply-add on either backend).
FH_HD float reward_with_bonus(float reward, float coef, float error) {
    return reward + coef * error;
}

/// One parameter's Adam step (when the guard applied the update) and its target update: soft,
/// target = fma(tau, p, target * (1 - tau)), or a copy when copy_target.
FH_HD void adam_target_element(float& param, float& m, float& v, float& target, float grad, float clip_factor,
                               const UpdateStep& step, const AgentParams& p) {
    if (step.wait) return;
    if (step.gate) core::adam_element(param, m, v, grad, clip_factor, step.adam);
    if (p.tau > 0.0f)
        target = core::saxpy_element(target * p.one_minus_tau, p.tau, param);
    else if (step.copy_target)
        target = param;
}

}  // namespace fh::dqn
