/// @file test_supervised_ops.cpp
/// @brief The supervised ops: the gather (random batches uniform over the samples, sequential
///        batches in order, the features of the sample's own bar), the losses and their
///        gradients against central finite differences in double, the signal adapter's rules by
///        hand (thresholds, hysteresis, sizing, volatility, order type, direction scores, NaN);
///        [gpu] every supervised kernel against its CPU twin.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "math/supervised.h"
#include "device/cpu_device.hpp"
#include "abi/supervised_forecast.h"
#include "abi/supervised_signal.h"
#include "support/compare.hpp"
#include "support/error_model.hpp"
#include "support/gpu.hpp"

using fh::supervised::SignalParams;
using fh::test::random_floats;

namespace {

/// A market of `bars` rows of `cols` features: feature c of bar t = t + c / 100 (a row names its bar).
std::vector<float> named_rows(int bars, int cols) {
    std::vector<float> r;
    for (int t = 0; t < bars; ++t)
        for (int c = 0; c < cols; ++c) r.push_back(static_cast<float>(t) + static_cast<float>(c) / 100.0f);
    return r;
}

struct GatherOut {
    std::vector<float> x, y;
};
GatherOut run_gather(fh::ops::Device& ops, const std::vector<float>& rows, int stride, int cols,
                     const std::vector<int>& index, const std::vector<float>& labels, int batch,
                     fh::supervised::GatherParams g) {
    auto br = ops.from_host<float>(rows);
    fh::ops::Buffer<int> bi;
    fh::ops::Buffer<float> bl;
    fh::ops::GatherSource s;
    s.rows = br.cview();
    s.stride = stride;
    s.cols = cols;
    if (!index.empty()) {
        bi = ops.from_host<int>(index);
        s.index = bi.cview();
    }
    if (!labels.empty()) {
        bl = ops.from_host<float>(labels);
        s.labels = bl.cview();
    }
    auto x = ops.alloc<float>(static_cast<std::size_t>(batch * cols));
    auto y = ops.alloc<float>(static_cast<std::size_t>(batch));
    fh::ops::run(ops, fh::ops::SupervisedGather{x.view(), labels.empty() ? fh::ops::View<float>() : y.view(), s, g});
    return {ops.to_host(x.cview()), labels.empty() ? std::vector<float>() : ops.to_host(y.cview())};
}

struct LossOut {
    std::vector<float> loss, d;
};
LossOut run_loss(fh::ops::Device& ops, const std::vector<float>& pred, const std::vector<float>& y, int target) {
    auto bp = ops.from_host<float>(pred), by = ops.from_host<float>(y);
    auto loss = ops.alloc<float>(pred.size()), d = ops.alloc<float>(pred.size());
    fh::ops::run(ops, fh::ops::SupervisedLoss{loss.view(), d.view(), bp.cview(), by.cview(), target});
    return {ops.to_host(loss.cview()), ops.to_host(d.cview())};
}

std::vector<int> run_signal(fh::ops::Device& ops, const std::vector<float>& pred, const std::vector<float>& states,
                            const std::vector<float>& calibration, const SignalParams& p) {
    auto bp = ops.from_host<float>(pred), bs = ops.from_host<float>(states), bc = ops.from_host<float>(calibration);
    auto a = ops.alloc<int>(pred.size());
    fh::ops::run(ops, fh::ops::SupervisedSignal{a.view(), bp.cview(), bs.cview(), bc.cview(), p});
    return ops.to_host(a.cview());
}

/// 3 market features (column 1 the volatility feature), 8 portfolio features; 5 levels
/// (-2..+2 contracts), 3 urgencies, market orders, fixed sizing, thresholds 0.
SignalParams base_params() {
    SignalParams p{};
    p.target = fh::supervised::kReturn;
    p.sizing = fh::supervised::kFixed;
    p.volatility_sizing = 0;
    p.vol_feature = 1;
    p.market_dim = 3;
    p.state_dim = 11;
    p.position_levels = 5;
    p.urgency_levels = 3;
    p.max_contracts = 2;
    p.urgency = 0;
    p.entry_threshold = 0.0f;
    p.exit_threshold = 0.0f;
    p.full_score = 1.0f;
    p.volatility_floor = 0.25f;
    return p;
}

/// A state row with the volatility feature z and the position feature (contracts / max).
std::vector<float> state(float vol_z, float position_fraction) {
    std::vector<float> s(11, 0.0f);
    s[1] = vol_z;
    s[3] = position_fraction;
    return s;
}

/// The level (0..4) of the single-row action.
int level_of(float pred, const std::vector<float>& st, const SignalParams& p,
             const std::vector<float>& calibration = {2.0f, 1.0f, 0.01f, 1.0f}) {
    fh::ops::CpuDevice ops;
    const int a = run_signal(ops, {pred}, st, calibration, p)[0];
    CHECK(a % p.urgency_levels == p.urgency);
    return a / p.urgency_levels;
}

/// The direction loss's error model (supervised::loss_row) between two float evaluations, per
/// element from the prediction p, the label y and the reference's loss: max(p, 0) -
/// y p may fuse on the device (2 u of each term and of the loss, both sides); log1pf(expf(-|p|))
/// takes expf's and log1pf's 2 ulp (16 u of it, both sides); sigmoid(p) - y: expf, a sum and a
/// division (16 u of sigmoid, both sides), then the subtraction, the float scale 1 / B and the
/// product (8 u of the result, both sides). Returns the loss's and the gradient's bounds.
std::pair<fh::test::Bounds, fh::test::Bounds> direction_model(const std::vector<float>& pred,
                                                              const std::vector<float>& y,
                                                              const std::vector<float>& loss) {
    const double u = fh::test::kFloatU, scale = 1.0 / static_cast<double>(pred.size());
    fh::test::Bounds bl(pred.size()), bd(pred.size());
    for (std::size_t i = 0; i < pred.size(); ++i) {
        const double p = pred[i], t = y[i], soft = std::log1p(std::exp(-std::abs(p)));
        const double sig = 1 / (1 + std::exp(-p));
        bl[i] = 4 * u * (std::max(p, 0.0) + std::abs(t * p) + std::abs(static_cast<double>(loss[i]))) + 16 * u * soft;
        bd[i] = scale * (16 * u * sig + 8 * u * std::abs(sig - t));
    }
    return {bl, bd};
}

}  // namespace

TEST_CASE("supervised_gather: sequential batches in order, random ones uniform, each row its sample's bar",
          "[ops][supervised]") {
    fh::ops::CpuDevice ops;
    const int bars = 50, stride = 5, cols = 3;
    const auto rows = named_rows(bars, stride);
    std::vector<int> index;
    std::vector<float> labels;
    for (int t = 10; t < 40; ++t) {  // sample i is bar 10 + i, labelled with its bar
        index.push_back(t);
        labels.push_back(static_cast<float>(t) * 10.0f);
    }
    // Sequential: samples 5..12 = bars 15..22.
    auto g = run_gather(ops, rows, stride, cols, index, labels, 8, {0, 0, 5, 0});
    for (int b = 0; b < 8; ++b) {
        CHECK(g.x[static_cast<std::size_t>(b * cols)] == static_cast<float>(15 + b));
        CHECK(g.x[static_cast<std::size_t>(b * cols + 2)] == static_cast<float>(15 + b) + 0.02f);
        CHECK(g.y[static_cast<std::size_t>(b)] == static_cast<float>(15 + b) * 10.0f);
    }
    // Random: every row is a sample's own bar and label; over many updates every sample appears
    // about equally often.
    std::vector<int> count(index.size(), 0);
    for (long long u = 1; u <= 300; ++u) {
        g = run_gather(ops, rows, stride, cols, index, labels, 20, {7, u, 0, 1});
        for (int b = 0; b < 20; ++b) {
            const float bar = g.x[static_cast<std::size_t>(b * cols)];
            REQUIRE(bar >= 10.0f);
            REQUIRE(bar < 40.0f);
            CHECK(g.y[static_cast<std::size_t>(b)] == bar * 10.0f);
            ++count[static_cast<std::size_t>(bar) - 10];
        }
    }
    for (int c : count) CHECK(std::abs(c - 200) < 60);  // 6000 draws over 30 samples
    // The same (seed, update) gives the same batch; another update another one.
    const auto a = run_gather(ops, rows, stride, cols, index, labels, 20, {7, 3, 0, 1});
    const auto b = run_gather(ops, rows, stride, cols, index, labels, 20, {7, 3, 0, 1});
    const auto c = run_gather(ops, rows, stride, cols, index, labels, 20, {7, 4, 0, 1});
    CHECK(a.x == b.x);
    CHECK(a.x != c.x);
    // Without an index, sample i is row i; without labels, only features.
    g = run_gather(ops, rows, stride, cols, {}, {}, 4, {0, 0, 46, 0});
    CHECK(g.x[0] == 46.0f);
    CHECK(g.x[9] == 49.0f);
    // Past the samples: refused.
    CHECK_THROWS_AS(run_gather(ops, rows, stride, cols, {}, {}, 4, {0, 0, 47, 0}), std::invalid_argument);
    CHECK_THROWS_AS(run_gather(ops, rows, stride, 6, {}, {}, 4, {0, 0, 0, 0}), std::invalid_argument);
}

TEST_CASE("supervised_loss: squared error and binary cross-entropy with their gradients", "[ops][supervised]") {
    fh::ops::CpuDevice ops;
    const std::vector<float> pred{0.5f, -1.25f, 3.0f, -30.0f, 30.0f, 0.0f};
    const std::vector<float> yr{0.25f, 0.75f, 3.0f, 1.0f, -2.0f, 0.5f};
    const std::vector<float> yd{1.0f, 0.0f, 1.0f, 1.0f, 0.0f, 0.5f};
    const double B = static_cast<double>(pred.size());
    for (int target : {fh::supervised::kReturn, fh::supervised::kDirection}) {
        INFO("target " << target);
        const auto& y = target == fh::supervised::kReturn ? yr : yd;
        const auto out = run_loss(ops, pred, y, target);
        // An independent double re-implementation and its central differences.
        const auto f = [&](double p, double t) {
            if (target == fh::supervised::kReturn) return (p - t) * (p - t);
            return std::log1p(std::exp(-std::abs(p))) + std::max(p, 0.0) - t * p;
        };
        for (std::size_t i = 0; i < pred.size(); ++i) {
            INFO("row " << i);
            const double p = pred[i], t = y[i];
            CHECK(out.loss[i] == Approx(f(p, t)).margin(1e-5).epsilon(1e-5));
            const double h = 1e-4;
            const double numeric = (f(p + h, t) - f(p - h, t)) / (2 * h) / B;
            CHECK(out.d[i] == Approx(numeric).margin(1e-5).epsilon(1e-4));
        }
        CHECK(std::isfinite(out.loss[3]));  // a large logit stays finite
    }
    // The hand values: (0.5 - 0.25)^2; BCE at logit 0 with y = 0.5 is ln 2.
    CHECK(run_loss(ops, {0.5f}, {0.25f}, fh::supervised::kReturn).loss[0] == 0.0625f);
    CHECK(run_loss(ops, {0.0f}, {0.5f}, fh::supervised::kDirection).loss[0] == Approx(std::log(2.0)));
}

TEST_CASE("signal adapter: thresholds, hysteresis, sizing, volatility, order type", "[ops][supervised]") {
    auto p = base_params();
    // Fixed sizing, entry 0: the sign of the forecast, always the full position; 0 is flat.
    CHECK(level_of(0.3f, state(0, 0), p) == 4);
    CHECK(level_of(-0.001f, state(0, 0), p) == 0);
    CHECK(level_of(0.0f, state(0, 0.5f), p) == 2);
    // Entry threshold 0.5, exit 0.2: opens only at |score| >= 0.5 ...
    p.entry_threshold = 0.5f;
    p.exit_threshold = 0.2f;
    CHECK(level_of(0.4f, state(0, 0), p) == 2);
    CHECK(level_of(0.5f, state(0, 0), p) == 4);
    CHECK(level_of(-0.6f, state(0, 1.0f), p) == 0);  // reverses a long
    // ... keeps a position of the score's sign while |score| >= 0.2 (at its own size) ...
    CHECK(level_of(0.3f, state(0, 1.0f), p) == 4);
    CHECK(level_of(0.3f, state(0, 0.5f), p) == 3);
    CHECK(level_of(-0.3f, state(0, -0.5f), p) == 1);
    // ... and closes it below, or when the score's sign is the other one.
    CHECK(level_of(0.1f, state(0, 1.0f), p) == 2);
    CHECK(level_of(-0.3f, state(0, 1.0f), p) == 2);
    // Magnitude sizing: min(1, |s| / full_score) of the 2 levels a side, rounded.
    p = base_params();
    p.sizing = fh::supervised::kMagnitude;
    p.full_score = 1.0f;
    CHECK(level_of(0.2f, state(0, 0), p) == 2);   // 0.2 * 2 = 0.4 -> 0 levels: flat
    CHECK(level_of(0.3f, state(0, 0), p) == 3);   // 0.6 -> 1 level
    CHECK(level_of(-0.8f, state(0, 0), p) == 0);  // 1.6 -> 2 levels short
    CHECK(level_of(5.0f, state(0, 0), p) == 4);   // capped
    // A forecast too small for a level keeps a position of its sign (exit threshold 0).
    CHECK(level_of(0.2f, state(0, 0.5f), p) == 3);
    // Volatility sizing: the calibration's mean 2, stddev 1; z = 2 -> rv = 4, ratio 2: half the size.
    p = base_params();
    p.volatility_sizing = 1;
    CHECK(level_of(0.3f, state(2.0f, 0), p) == 3);
    CHECK(level_of(0.3f, state(0.0f, 0), p) == 4);   // ratio 1
    CHECK(level_of(0.3f, state(-1.0f, 0), p) == 4);  // ratio 0.5: capped at the full position
    CHECK(level_of(0.3f, state(6.0f, 0), p) == 3);   // ratio 4: 0.25 * 2 = 0.5 -> rounds to 1 level
    p.volatility_floor = 0.25f;
    CHECK(level_of(0.3f, state(-10.0f, 0), p) == 4);  // a negative raw value: the floor
    // No calibration (mean 0): the ratio is 1.
    CHECK(level_of(0.3f, state(6.0f, 0), p, {0.0f, 0.0f, 1.0f, 1.0f}) == 4);
    // Order types: the action's urgency.
    p = base_params();
    for (int u = 0; u < 3; ++u) {
        p.urgency = u;
        CHECK(level_of(1.0f, state(0, 0), p) == 4);
    }
    // Direction: the score is 2 sigmoid(logit) - 1; logit ln 3 -> P(up) 0.75 -> score 0.5.
    p = base_params();
    p.target = fh::supervised::kDirection;
    p.entry_threshold = 0.4f;
    CHECK(level_of(std::log(3.0f), state(0, 0), p) == 4);
    CHECK(level_of(std::log(1.4f), state(0, 0), p) == 2);  // score 1/6
    CHECK(level_of(-std::log(3.0f), state(0, 0), p) == 0);
    // A NaN forecast is flat.
    p = base_params();
    CHECK(level_of(std::numeric_limits<float>::quiet_NaN(), state(0, 1.0f), p) == 2);
    // Invalid settings are refused before anything runs.
    fh::ops::CpuDevice ops;
    p.exit_threshold = 1.0f;
    CHECK_THROWS_AS(run_signal(ops, {1.0f}, state(0, 0), {0, 0, 1, 1}, p), std::invalid_argument);
    p = base_params();
    p.urgency = 3;
    CHECK_THROWS_AS(run_signal(ops, {1.0f}, state(0, 0), {0, 0, 1, 1}, p), std::invalid_argument);
}

TEST_CASE("signal adapter: with 15 levels and 3 contracts the held position is found exactly", "[ops][supervised]") {
    auto p = base_params();
    p.position_levels = 15;
    p.max_contracts = 3;  // fewer contracts than levels a side: several levels share a target
    p.entry_threshold = 0.5f;
    p.exit_threshold = 0.1f;
    for (int c = -3; c <= 3; ++c) {
        INFO("held " << c);
        const float frac = static_cast<float>(c) / 3.0f;
        const int level = level_of(c >= 0 ? 0.2f : -0.2f, state(0, frac), p);
        fh::env::EnvParams e{};
        e.position_levels = 15;
        e.max_contracts = 3;
        // Kept: a level with the same target (no order), or flat when none was held.
        CHECK(fh::env::target_contracts(level, e) == c);
    }
}

TEST_CASE("the direction loss's error model: the CPU twin is within half its bound of the double loss",
          "[supervised][ops]") {
    // The [gpu] test's model covers two float sides; one side against the exact loss (the same
    // formula in double) takes at most half.
    fh::ops::CpuDevice cpu;
    const std::size_t B = 1000;
    const auto pred = random_floats(B, 31, -12.f, 12.f);
    std::vector<float> y(B);
    for (std::size_t i = 0; i < B; ++i) y[i] = static_cast<float>(i % 3) * 0.5f;
    const auto c = run_loss(cpu, pred, y, fh::supervised::kDirection);
    std::vector<double> loss(B), d(B);
    for (std::size_t i = 0; i < B; ++i) {
        const double p = pred[i];
        loss[i] = std::max(p, 0.0) - y[i] * p + std::log1p(std::exp(-std::abs(p)));
        d[i] = (1 / (1 + std::exp(-p)) - y[i]) / static_cast<double>(B);
    }
    const auto m = direction_model(pred, y, c.loss);
    FH_REQUIRE_WITHIN(c.loss, loss, fh::test::times(m.first, 0.5));
    FH_REQUIRE_WITHIN(c.d, d, fh::test::times(m.second, 0.5));
}

TEST_CASE("the supervised kernels equal their CPU twins", "[gpu][supervised]") {
    fh::ops::CpuDevice cpu;
    auto& gpu = fh::test::gpu_ops();
    const int bars = 3000, stride = 42;
    const auto rows = random_floats(static_cast<std::size_t>(bars * stride), 11);
    std::vector<int> index;
    for (int t = 128; t < 2900; t += 2) index.push_back(t);  // 1386 samples: room for B = 1000 from 17
    const auto labels = random_floats(index.size(), 12);
    for (int B : {1, 7, 129, 1000}) {
        INFO("B " << B);
        for (long long u : {1LL, 2LL, 77LL}) {
            const fh::supervised::GatherParams g{5, u, 0, 1};
            const auto c = run_gather(cpu, rows, stride, stride, index, labels, B, g);
            const auto d = run_gather(gpu, rows, stride, stride, index, labels, B, g);
            CHECK(c.x == d.x);
            CHECK(c.y == d.y);
        }
        const fh::supervised::GatherParams seq{0, 0, 17, 0};
        CHECK(run_gather(cpu, rows, stride, 30, index, labels, B, seq).x ==
              run_gather(gpu, rows, stride, 30, index, labels, B, seq).x);
        auto pred = random_floats(static_cast<std::size_t>(B), 13 + static_cast<std::uint64_t>(B), -6.f, 6.f);
        const auto yr = random_floats(static_cast<std::size_t>(B), 14);
        std::vector<float> yd(static_cast<std::size_t>(B));
        for (std::size_t i = 0; i < yd.size(); ++i) yd[i] = static_cast<float>(i % 3) * 0.5f;
        for (int target : {fh::supervised::kReturn, fh::supervised::kDirection}) {
            const auto& y = target == fh::supervised::kReturn ? yr : yd;
            const auto c = run_loss(cpu, pred, y, target), d = run_loss(gpu, pred, y, target);
            if (target == fh::supervised::kReturn) {  // a subtraction and products: exact
                FH_REQUIRE_CLOSE(d.loss, c.loss, 0, 0);
                FH_REQUIRE_CLOSE(d.d, c.d, 0, 0);
                continue;
            }
            const auto m = direction_model(pred, y, c.loss);
            FH_REQUIRE_WITHIN(d.loss, c.loss, m.first);
            FH_REQUIRE_WITHIN(d.d, c.d, m.second);
        }
        // The adapter on random states (positions on the levels), every setting.
        auto p = base_params();
        p.market_dim = 42;
        p.state_dim = 50;
        p.vol_feature = 10;
        p.position_levels = 7;
        p.max_contracts = 3;
        auto states = random_floats(static_cast<std::size_t>(B * 50), 15 + static_cast<std::uint64_t>(B));
        std::mt19937_64 rng(16);
        for (int i = 0; i < B; ++i)
            states[static_cast<std::size_t>(i * 50 + 42)] = static_cast<float>(static_cast<int>(rng() % 7) - 3) / 3.0f;
        const std::vector<float> calibration{0.002f, 0.001f, 0.003f, 1.0f};
        for (int target : {fh::supervised::kReturn, fh::supervised::kDirection})
            for (int sizing : {fh::supervised::kFixed, fh::supervised::kMagnitude})
                for (int vol : {0, 1}) {
                    INFO("target " << target << " sizing " << sizing << " vol " << vol);
                    p.target = target;
                    p.sizing = sizing;
                    p.volatility_sizing = vol;
                    p.entry_threshold = 0.5f;
                    p.exit_threshold = 0.2f;
                    p.full_score = 2.0f;
                    p.urgency = 2;
                    CHECK(run_signal(cpu, pred, states, calibration, p) ==
                          run_signal(gpu, pred, states, calibration, p));
                }
    }
}
