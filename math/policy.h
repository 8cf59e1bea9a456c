/// @file policy.h
/// @brief The categorical (softmax) policy shared by PPO and IQL, for ONE row of logits over
///        num_actions actions: log-sum-exp, log-probabilities, entropy, inverse-CDF sampling and
///        the most likely action. Compiled by nvcc (kernels) and g++ (CPU twins) from this one
///        definition. Accumulation in float, max-shifted (no overflow for any finite logits).
#pragma once

#include <cmath>
#include <cstdint>

#include "math/host_device.h"
#include "math/rng.h"

namespace fh::policy {

/// log(sum_a exp(logits[a])), shifted by the maximum.
FH_HD float log_sum_exp(const float* logits, int num_actions) {
    float m = logits[0];
    for (int a = 1; a < num_actions; ++a) m = logits[a] > m ? logits[a] : m;
    float sum = 0.0f;
    for (int a = 0; a < num_actions; ++a) sum += expf(logits[a] - m);
    return m + logf(sum);
}

/// log pi(action) under softmax(logits).
FH_HD float log_prob(const float* logits, int num_actions, int action) {
    return logits[action] - log_sum_exp(logits, num_actions);
}

/// Entropy -sum_a pi(a) log pi(a) of softmax(logits), in nats.
FH_HD float entropy(const float* logits, int num_actions) {
    const float lse = log_sum_exp(logits, num_actions);
    float h = 0.0f;
    for (int a = 0; a < num_actions; ++a) {
        const float lp = logits[a] - lse;
        h -= expf(lp) * lp;
    }
    return h;
}

/// The action whose cumulative probability first exceeds u in [0, 1) (inverse CDF); the last
/// action absorbs rounding, so the result is always a valid action.
FH_HD int sample(const float* logits, int num_actions, float u) {
    const float lse = log_sum_exp(logits, num_actions);
    float cdf = 0.0f;
    for (int a = 0; a < num_actions - 1; ++a) {
        cdf += expf(logits[a] - lse);
        if (u < cdf) return a;
    }
    return num_actions - 1;
}

/// The first action of maximal logit: the policy's most likely action (evaluation).
FH_HD int most_likely(const float* logits, int num_actions) {
    int best = 0;
    for (int a = 1; a < num_actions; ++a)
        if (logits[a] > logits[best]) best = a;
    return best;
}

/// First index of the maximum (ties go to the lowest action, on every backend).
template <class T>
FH_HD int argmax(const T* x, int n) {
    int best = 0;
    for (int i = 1; i < n; ++i)
        if (x[i] > x[best]) best = i;
    return best;
}

/// Epsilon-greedy's draw for environment e at collection step `step`: the random action when it
/// explores (probability epsilon), else -1 (take the argmax). It does not depend on Q, so a
/// kernel may draw it before Q is known.
FH_HD int epsilon_explore(int num_actions, float epsilon, std::uint64_t seed, int e, std::uint64_t step) {
    const rng::U32x4 u = rng::draw(seed, rng::Purpose::exploration, static_cast<std::uint32_t>(e), step);
    return rng::unit_float(u.v[0]) < epsilon
               ? static_cast<int>(rng::below(u.v[1], static_cast<std::uint32_t>(num_actions)))
               : -1;
}

/// Epsilon-greedy for environment e at collection step `step`: a random action with probability
/// epsilon, else the first action of maximal Q.
FH_HD int epsilon_greedy(const float* q, int num_actions, float epsilon, std::uint64_t seed, int e,
                         std::uint64_t step) {
    const int explored = epsilon_explore(num_actions, epsilon, seed, e, step);
    return explored >= 0 ? explored : argmax(q, num_actions);
}

}  // namespace fh::policy
