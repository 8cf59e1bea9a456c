/// @file supervised.h
/// @brief The supervised forecaster baseline (docs/supervised.md) for ONE row: the batch gather
///        (a training sample's market features and label), the regression / classification loss
///        and its gradient, and the signal adapter that turns a forecast into one of the
///        environment's actions (a target position level and an order type). Compiled by nvcc
///        (cuda/kernels/supervised_forecast.cu, supervised_signal.cu, one thread per row) and by
///        g++ (src/ops/supervised/cpu.cpp, a loop over rows), from this one definition.
#pragma once

#include <cmath>
#include <cstdint>

#include "math/core.h"
#include "math/env.h"
#include "math/host_device.h"
#include "math/rng.h"

namespace fh::supervised {

/// What the network predicts (supervised.target). Values are part of the kernel ABI.
enum Target : int {
    kReturn = 0,     ///< regression of the label r / label_scale, mean squared error
    kDirection = 1,  ///< classification of up (r > 0) against down, one logit, binary cross-entropy
};

/// How the adapter sizes a position (supervised.sizing). Values are part of the kernel ABI.
enum Sizing : int {
    kFixed = 0,      ///< the full position whenever |score| >= entry_threshold
    kMagnitude = 1,  ///< min(1, |score| / full_score) of the full position
};

/// Floats after the network's parameters in the weights a checkpoint stores as params/online:
/// the adapter's calibration, fixed at the start of training from the training split.
///   [0] mean of the raw volatility feature (rv_32) over the training split (its normalisation mean)
///   [1] its standard deviation (normalisation stddev)
///   [2] label_scale: the root mean square of the training labels (log-return units)
///   [3] the horizon in bars (informational)
constexpr int kCalibrationFloats = 4;

/// Where a batch's rows come from: sample i is row index[i] (or row i when index is null) of
/// `rows` (n_rows, stride), of which the first `cols` floats are copied; its label is labels[i]
/// (when labels is not null).
struct RowSource {
    const float* rows;
    const int* index;
    const float* labels;
    long long n_samples;
    int stride;
    int cols;
};

/// Which samples a batch holds: random (uniform over [0, n_samples), Philox(seed,
/// supervised_sample, row, update)) or the consecutive samples first, first + 1, ...
struct GatherParams {
    std::uint64_t seed;
    core::CounterValue update;  ///< the RNG counter of random batches (the update number)
    long long first;            ///< sequential batches: the first sample
    int random;                 ///< 1 random, 0 sequential
};

/// The sample batch row b holds.
FH_HD long long sample_of_row(long long b, const RowSource& s, const GatherParams& g) {
    if (!g.random) return g.first + b;
    const rng::U32x4 u = rng::draw(g.seed, rng::Purpose::supervised_sample, static_cast<std::uint32_t>(b),
                                   static_cast<std::uint64_t>(g.update.value()));
    const std::uint64_t pick = (static_cast<std::uint64_t>(u.v[0]) << 32) | u.v[1];
    return static_cast<long long>(pick % static_cast<std::uint64_t>(s.n_samples));
}

/// Batch row b: x[b * cols ...] = the sample's features, y[b] = its label (y may be null).
FH_HD void gather_row(long long b, float* x, float* y, const RowSource& s, const GatherParams& g) {
    const long long i = sample_of_row(b, s, g);
    const long long row = s.index != nullptr ? static_cast<long long>(s.index[i]) : i;
    const float* src = s.rows + row * s.stride;
    float* dst = x + b * s.cols;
    for (int c = 0; c < s.cols; ++c) dst[c] = src[c];
    if (y != nullptr) y[b] = s.labels[i];
}

/// The logistic function, written so that neither branch overflows.
FH_HD float sigmoid(float z) {
    if (z >= 0.0f) return 1.0f / (1.0f + expf(-z));
    const float e = expf(z);
    return e / (1.0f + e);
}

/// Loss of row b and, when d_pred is not null, the gradient of the batch-mean loss
/// (scale = 1 / B). Return: loss = (p - y)^2, d = 2 (p - y) scale. Direction: p is a logit,
/// y in {0, 0.5, 1}: loss = max(p, 0) - y p + log(1 + exp(-|p|)) (binary cross-entropy, stable),
/// d = (sigmoid(p) - y) scale.
FH_HD void loss_row(long long b, float* loss, float* d_pred, const float* pred, const float* y, int target,
                    float scale) {
    const float p = pred[b], t = y[b];
    if (target == kDirection) {
        const float a = p < 0.0f ? -p : p;
        loss[b] = (p > 0.0f ? p : 0.0f) - t * p + log1pf(expf(-a));
        if (d_pred != nullptr) d_pred[b] = (sigmoid(p) - t) * scale;
        return;
    }
    const float e = p - t;
    loss[b] = e * e;
    if (d_pred != nullptr) d_pred[b] = 2.0f * e * scale;
}

/// The signal adapter's settings (docs/supervised.md, "The signal adapter").
struct SignalParams {
    int target;             ///< Target
    int sizing;             ///< Sizing
    int volatility_sizing;  ///< 1: divide the size by the volatility ratio
    int vol_feature;        ///< column of the volatility feature (rv_32) in a state row
    int market_dim;         ///< market features per state row (the portfolio features follow)
    int state_dim;
    int position_levels;  ///< L (odd)
    int urgency_levels;
    int max_contracts;
    int urgency;             ///< the order type of every order: 0 market, 1 passive limit, 2 far limit
    float entry_threshold;   ///< |score| needed to open or resize a position
    float exit_threshold;    ///< |score| needed to keep a position of the score's sign (<= entry)
    float full_score;        ///< magnitude sizing: |score| of the full position
    float volatility_floor;  ///< the volatility ratio is at least this
};

/// The adapter's score of a prediction: return: the prediction itself (the forecast return in
/// units of label_scale); direction: 2 sigmoid(logit) - 1 = P(up) - P(down), in (-1, 1).
FH_HD float signal_score(float pred, int target) {
    return target == kDirection ? 2.0f * sigmoid(pred) - 1.0f : pred;
}

/// The volatility ratio of a state row: the raw volatility feature (denormalised with the
/// training split's statistics) over its training mean, at least volatility_floor; 1 when the
/// calibration has no positive mean.
FH_HD float volatility_ratio(const float* state, const float* calibration, const SignalParams& p) {
    const float mean = calibration[0], sd = calibration[1];
    if (!(mean > 0.0f)) return 1.0f;
    const float r = (mean + sd * state[p.vol_feature]) / mean;
    return r > p.volatility_floor ? r : p.volatility_floor;
}

/// The position level the environment holds now: the level whose target equals the position
/// feature (contracts / max_contracts) times max_contracts; the middle (flat) level when none does.
FH_HD int current_level(const float* state, const env::EnvParams& e) {
    const float frac = state[e.market_dim];
    const float c = frac * static_cast<float>(e.max_contracts);
    const int contracts = static_cast<int>(c < 0.0f ? c - 0.5f : c + 0.5f);
    const int half = (e.position_levels - 1) / 2;
    if (contracts == 0) return half;
    // Levels of the position's sign, from the middle outwards: the first with that target.
    const int step = contracts > 0 ? 1 : -1;
    for (int k = 1; k <= half; ++k)
        if (env::target_contracts(half + step * k, e) == contracts) return half + step * k;
    return half;
}

/// The action for one row: prediction `pred` of the network, the state row (state_dim floats)
/// the environment gave, the calibration (kCalibrationFloats). Let s = score, a = |s|:
///  - size f = 1 (fixed) or min(1, a / full_score) (magnitude); with volatility sizing
///    f = min(1, f / volatility_ratio); k = round(f * half) levels of the sign of s;
///  - a >= entry_threshold and k >= 1: target level half + sign(s) k (open, resize or reverse);
///  - else, when the position held has the sign of s and a >= exit_threshold: keep it;
///  - else flat. Every order is of type `urgency`.
FH_HD int signal_action(float pred, const float* state, const float* calibration, const SignalParams& p) {
    env::EnvParams e{};
    e.position_levels = p.position_levels;
    e.max_contracts = p.max_contracts;
    e.market_dim = p.market_dim;
    const int half = (p.position_levels - 1) / 2;
    const float s = signal_score(pred, p.target);
    const float a = s < 0.0f ? -s : s;
    const int sign = (s > 0.0f) - (s < 0.0f);
    float f = 1.0f;
    if (p.sizing == kMagnitude) f = a < p.full_score ? a / p.full_score : 1.0f;
    if (p.volatility_sizing) {
        const float r = volatility_ratio(state, calibration, p);
        f = f / r;
        if (f > 1.0f) f = 1.0f;
    }
    if (!(f >= 0.0f)) f = 0.0f;  // a NaN prediction: flat
    int k = static_cast<int>(f * static_cast<float>(half) + 0.5f);
    if (k > half) k = half;
    int level = half;
    if (sign != 0 && a >= p.entry_threshold && k >= 1) {
        level = half + sign * k;
    } else if (sign != 0 && a >= p.exit_threshold) {
        const int held = current_level(state, e);
        if ((held - half) * sign > 0) level = held;
    }
    return level * p.urgency_levels + p.urgency;
}

}  // namespace fh::supervised
