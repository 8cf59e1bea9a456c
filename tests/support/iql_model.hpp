/// @file iql_model.hpp
/// @brief The error models of the IQL losses (math/iql.h) on the GPU against the CPU twin,
///        per row from the inputs (docs/testing.md, "GPU tolerances: the error models"); shared
///        by the IQL op tests and the population op tests.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "support/error_model.hpp"

namespace fh::test {

/// The error model of the twin-Q loss (iql::q_row), per row from the inputs: y = r + d v' (the
/// device may fuse it: 2 u of |r| + |d v'| between the sides), e = q - y (its rounding, u of |e|
/// each side), d_q = 2 e scale (scale = 1 / B in float: its own rounding and the product's, 2 u
/// each side), loss = e1^2 + e2^2 (three roundings each side, some
/// fused). Invalid rows: NaN loss, zero gradients, on both sides.
struct QBounds {
    Bounds loss, d_q1, d_q2;
};
inline QBounds q_model(const std::vector<float>& q1, const std::vector<float>& q2, const std::vector<int>& actions,
                       const std::vector<float>& rewards, const std::vector<float>& discounts,
                       const std::vector<float>& vn, int A) {
    const double u = kFloatU;
    const std::size_t B = actions.size();
    QBounds m{Bounds(B, 0.0), Bounds(B * A, 0.0), Bounds(B * A, 0.0)};
    for (std::size_t b = 0; b < B; ++b) {
        const int a = actions[b];
        if (a < 0 || a >= A) continue;
        const double dv = static_cast<double>(discounts[b]) * vn[b], y = rewards[b] + dv;
        const double dy = 2 * u * (std::abs(static_cast<double>(rewards[b])) + std::abs(dv) + std::abs(y));
        const double e1 = q1[b * A + a] - y, e2 = q2[b * A + a] - y;
        const double de1 = dy + 2 * u * std::abs(e1), de2 = dy + 2 * u * std::abs(e2);
        m.d_q1[b * A + a] = (2 * de1 + 8 * u * std::abs(e1)) / static_cast<double>(B);
        m.d_q2[b * A + a] = (2 * de2 + 8 * u * std::abs(e2)) / static_cast<double>(B);
        m.loss[b] = 2 * std::abs(e1) * de1 + 2 * std::abs(e2) * de2 + 6 * u * (e1 * e1 + e2 * e2);
    }
    return m;
}

/// The error model of the AWR policy loss (iql::awr_row), per row from the inputs: the weight
/// min(expf(beta adv), max) (adv and beta adv round alike on both sides: expf's 2 ulp, 8 u of w);
/// log pi(a) = l_a - lse (log_sum_exp_bound, the subtraction's u each side); loss = -w log pi
/// (u each side); d_logits_j = w (p_j - onehot) scale (softmax_bound; a subtraction, two
/// products and the float scale 1 / B, u each on each side).
struct AwrBounds {
    Bounds loss, weights, d_logits;
};
inline AwrBounds awr_model(const std::vector<float>& logits, const std::vector<float>& q1, const std::vector<float>& q2,
                           const std::vector<float>& v, const std::vector<int>& actions, float beta, float max_weight,
                           int A) {
    const double u = kFloatU;
    const std::size_t B = actions.size();
    AwrBounds m{Bounds(B, 0.0), Bounds(B, 0.0), Bounds(B * A, 0.0)};
    for (std::size_t b = 0; b < B; ++b) {
        const int a = actions[b];
        if (a < 0 || a >= A) continue;
        const float adv = std::min(q1[b * A + a], q2[b * A + a]) - v[b];
        const double e = std::exp(std::min(static_cast<double>(beta * adv), 80.0));
        const double w = std::min(e, static_cast<double>(max_weight)), dw = 8 * u * w;  // (clamped: near it)
        m.weights[b] = dw;
        const auto s = log_sum_exp_bound(logits.data() + b * A, A);
        const double lp = logits[b * A + a] - s.lse, dlp = s.bound + 2 * u * std::abs(lp);
        m.loss[b] = dw * std::abs(lp) + w * dlp + 2 * u * w * std::abs(lp);
        for (int j = 0; j < A; ++j) {
            const double p = std::exp(static_cast<double>(logits[b * A + j]) - s.lse), g = std::abs(p - (j == a));
            m.d_logits[b * A + j] =
                (dw * g + w * softmax_bound(s, logits[b * A + j]) + 8 * u * w * g) / static_cast<double>(B);
        }
    }
    return m;
}

}  // namespace fh::test
