/// @file iql.h
/// @brief Implicit Q-Learning (Kostrikov et al., "Offline Reinforcement Learning with Implicit
///        Q-Learning", ICLR 2022) for ONE batch row: the expectile value loss, the twin-Q TD loss,
///        the advantage-weighted (AWR) policy loss, and the behaviour policy that generates an
///        offline data set. Compiled by nvcc (cuda/kernels/iql_value.cu, kernels/iql_awr.cu,
///        kernels/iql_behaviour.cu, one thread per row) and by g++ (src/ops/iql/cpu.cpp,
///        a loop over rows), from this one definition. docs/iql.md states the math.
///
///        Layout: q1, q2, logits and their gradients are (B, A) row-major; every other vector is
///        (B). Gradients are those of the batch-MEAN loss: `scale` = 1 / B.
///
///        An action outside [0, A) (a corrupt batch) reads nothing out of bounds: the row's loss
///        is NaN, so the training guard skips the update, and its gradients are 0.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "math/rng.h"
#include "math/host_device.h"
#include "math/policy.h"

namespace fh::iql {

/// The AWR exponent beta * advantage is clamped to at most this before exp(): exp(80) ~ 5.5e34
/// is finite in float, and so is its product with any log-probability of a finite logit row.
constexpr float kMaxAwrExponent = 80.0f;

/// One agent's loss coefficients in a population trained at once (iql.expectile, iql.beta,
/// iql.max_weight): the losses' kernels read agent a's for rows [a B, (a + 1) B).
struct LossScalars {
    float expectile, beta, max_weight;
};

/// A quiet NaN: the loss of a row whose action is out of range.
FH_HD float invalid_loss() {
#if defined(__CUDA_ARCH__)
    return __int_as_float(0x7fffffff);
#else
    return std::numeric_limits<float>::quiet_NaN();
#endif
}

FH_HD bool valid_action(int a, int num_actions) {
    return a >= 0 && a < num_actions;
}

/// min(q1[a], q2[a]): the clipped double-Q estimate of one row.
FH_HD float twin_min(const float* q1_row, const float* q2_row, int a) {
    return q1_row[a] < q2_row[a] ? q1_row[a] : q2_row[a];
}

/// The expectile weight |tau - 1(u < 0)|: tau for u >= 0, 1 - tau for u < 0.
FH_HD float expectile_weight(float u, float tau) {
    return u < 0.0f ? 1.0f - tau : tau;
}

/// Value loss of row b: q = min(q1[b, a], q2[b, a]) (target twins), u = q - v[b],
/// loss[b] = w u^2, d_v[b] = -2 w u * scale (scale = 1/B: the gradient of the batch mean).
FH_HD void value_row(long long b, float* loss, float* d_v, const float* v, const float* q1, const float* q2,
                     const int* actions, float tau, int num_actions, float scale) {
    const int a = actions[b];
    if (!valid_action(a, num_actions)) {
        loss[b] = invalid_loss();
        d_v[b] = 0.0f;
        return;
    }
    const long long row = b * num_actions;
    const float u = twin_min(q1 + row, q2 + row, a) - v[b];
    const float w = expectile_weight(u, tau);
    loss[b] = w * u * u;
    d_v[b] = -2.0f * w * u * scale;
}

/// Twin-Q TD loss of row b: y = rewards[b] + discounts[b] * v_next[b] (discounts already hold
/// gamma * (1 - terminated)); loss[b] = (q1[b, a] - y)^2 + (q2[b, a] - y)^2; the rows of d_q1
/// and d_q2 are 2 (q - y) * scale at column a and 0 elsewhere.
FH_HD void q_row(long long b, float* loss, float* d_q1, float* d_q2, const float* q1, const float* q2,
                 const int* actions, const float* rewards, const float* discounts, const float* v_next, int num_actions,
                 float scale) {
    const long long row = b * num_actions;
    for (int j = 0; j < num_actions; ++j) {
        d_q1[row + j] = 0.0f;
        d_q2[row + j] = 0.0f;
    }
    const int a = actions[b];
    if (!valid_action(a, num_actions)) {
        loss[b] = invalid_loss();
        return;
    }
    const float y = rewards[b] + discounts[b] * v_next[b];
    const float e1 = q1[row + a] - y, e2 = q2[row + a] - y;
    loss[b] = e1 * e1 + e2 * e2;
    d_q1[row + a] = 2.0f * e1 * scale;
    d_q2[row + a] = 2.0f * e2 * scale;
}

/// The AWR weight min(exp(beta * adv), max_weight), the exponent clamped to kMaxAwrExponent so
/// that it never overflows. A NaN advantage gives a NaN weight (the guard sees it).
FH_HD float awr_weight(float adv, float beta, float max_weight) {
    float z = beta * adv;
    if (z > kMaxAwrExponent) z = kMaxAwrExponent;
    const float e = expf(z);
    return e > max_weight ? max_weight : e;
}

/// AWR policy loss of row b: adv = min(q1[b, a], q2[b, a]) - v[b] (target twins), weights[b] =
/// awr_weight(adv) (a constant: no gradient flows through it), loss[b] = -weights[b] log pi(a|s)
/// with pi = softmax(logits[b]); the row of d_logits = weights[b] (pi - onehot(a)) * scale.
FH_HD void awr_row(long long b, float* loss, float* weights, float* d_logits, const float* logits, const float* q1,
                   const float* q2, const float* v, const int* actions, float beta, float max_weight, int num_actions,
                   float scale) {
    const long long row = b * num_actions;
    const int a = actions[b];
    if (!valid_action(a, num_actions)) {
        loss[b] = invalid_loss();
        weights[b] = 0.0f;
        for (int j = 0; j < num_actions; ++j) d_logits[row + j] = 0.0f;
        return;
    }
    const float w = awr_weight(twin_min(q1 + row, q2 + row, a) - v[b], beta, max_weight);
    const float* l = logits + row;
    const float lse = policy::log_sum_exp(l, num_actions);
    for (int j = 0; j < num_actions; ++j) {
        const float p = expf(l[j] - lse);
        d_logits[row + j] = w * (p - (j == a ? 1.0f : 0.0f)) * scale;
    }
    weights[b] = w;
    loss[b] = -w * (l[a] - lse);
}

// ---- the behaviour policy of the offline data set -----------------------------------------

/// Scalars of iql_behaviour_kernel, passed by value.
struct BehaviourParams {
    int position_levels;    ///< L (env::EnvParams::position_levels)
    int urgency_levels;     ///< U; actions are level * U + urgency, A = L * U
    int market_dim;         ///< market features at the start of each state row
    int state_dim;          ///< floats per state row (market_dim + env::kPortfolioFeatures)
    float random_fraction;  ///< rule traders act uniformly at random with this probability
    std::uint64_t seed;     ///< Philox seed (Purpose::behaviour)
};

/// Trader types, by environment index e: e % 4.
enum BehaviourTrader : int { kRandomTrader = 0, kMomentumTrader = 1, kReversionTrader = 2, kTrendTrader = 3 };

/// The action of environment e at global step `step` seeing state row `row` (state_dim floats).
/// One Philox draw (seed, behaviour, e, step): word 0 is the rule traders' coin
/// (unit_float(word 0) < random_fraction: act at random), word 1 the random action
/// (below(word 1, L * U)). Random trader (e % 4 == 0): always the random action. Momentum (1):
/// sign s of feature 0 (ret_1); reversion (2): -s; trend (3): the sign of feature 4 (ret_16),
/// feature 0 when market_dim < 5. The sign picks the level: + -> L - 1 (longest), - -> 0
/// (shortest), 0 (or NaN) -> (L - 1) / 2 (flat); urgency 0 (market order). Integer and exact
/// float comparisons only: bit-identical on both backends.
FH_HD int behaviour_action(const float* row, int e, std::uint64_t step, const BehaviourParams& p) {
    const int num_actions = p.position_levels * p.urgency_levels;
    const rng::U32x4 r = rng::draw(p.seed, rng::Purpose::behaviour, static_cast<std::uint32_t>(e), step);
    const int random = static_cast<int>(rng::below(r.v[1], static_cast<std::uint32_t>(num_actions)));
    const int trader = e % 4;
    if (trader == kRandomTrader || rng::unit_float(r.v[0]) < p.random_fraction) return random;
    const int feature = (trader == kTrendTrader && p.market_dim >= 5) ? 4 : 0;
    const float x = row[feature];
    int sign = (x > 0.0f) - (x < 0.0f);
    if (trader == kReversionTrader) sign = -sign;
    const int level = sign > 0 ? p.position_levels - 1 : sign < 0 ? 0 : (p.position_levels - 1) / 2;
    return level * p.urgency_levels;
}

}  // namespace fh::iql
