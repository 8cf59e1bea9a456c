/// @file test_ppo_ops.cpp
/// @brief The PPO ops: the categorical policy against a double softmax, sampling frequencies,
///        the diversity penalty and GAE by hand, normalisation, the permutation shuffle and the
///        gather, the clipped loss's gradient against finite differences of a double-precision
///        loss, the curiosity input/error; [gpu] every PPO kernel against its CPU twin.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <tuple>
#include <vector>

#include "math/rng.h"
#include "math/env.h"
#include "math/policy.h"
#include "math/ppo.h"
#include "device/cpu_device.hpp"
#include "support/compare.hpp"
#include "support/error_model.hpp"
#include "support/gpu.hpp"
#include "ops/ppo/ops.hpp"

using fh::ppo::LossParams;
using fh::ppo::RolloutView;
using fh::test::random_floats;

namespace {

/// log softmax of a row, in double.
std::vector<double> log_softmax(const std::vector<double>& z) {
    const double m = *std::max_element(z.begin(), z.end());
    double s = 0;
    for (double v : z) s += std::exp(v - m);
    const double lse = m + std::log(s);
    std::vector<double> out(z.size());
    for (std::size_t j = 0; j < z.size(); ++j) out[j] = z[j] - lse;
    return out;
}

float draw_u(std::uint64_t seed, int e, std::uint64_t step) {
    return fh::rng::unit_float(
        fh::rng::draw(seed, fh::rng::Purpose::policy_sample, static_cast<std::uint32_t>(e), step).v[0]);
}

// ---- the PPO loss in double, written from the definition (not from math/ppo.h) ----------------

struct LossBatch {
    int B = 0, A = 0;
    std::vector<float> logits, values, old_log_probs, advantages, returns, old_values;
    std::vector<int> actions;
};

struct SampleTerms {
    double policy, value, entropy, kl;
    bool clipped;
};

SampleTerms ref_terms(const LossBatch& b, const std::vector<double>& z, const std::vector<double>& v, int i,
                      const LossParams& p) {
    const std::vector<double> row(z.begin() + i * b.A, z.begin() + (i + 1) * b.A);
    const auto lp = log_softmax(row);
    double H = 0;
    for (double l : lp) H -= std::exp(l) * l;
    const double logp = lp[b.actions[i]];
    const double ratio = std::exp(logp - b.old_log_probs[i]);
    const double eps = p.clip, adv = b.advantages[i];
    const double cr = std::clamp(ratio, 1.0 - eps, 1.0 + eps);
    const double s1 = ratio * adv, s2 = cr * adv;
    const double R = b.returns[i], vo = b.old_values[i];
    double lv = 0.5 * (v[i] - R) * (v[i] - R);
    if (p.clip_value) {
        const double vc = vo + std::clamp(v[i] - vo, -eps, eps);
        lv = 0.5 * std::max((v[i] - R) * (v[i] - R), (vc - R) * (vc - R));
    }
    return {-std::min(s1, s2), lv, H, b.old_log_probs[i] - logp, s2 < s1};
}

double ref_loss(const LossBatch& b, const std::vector<double>& z, const std::vector<double>& v, const LossParams& p) {
    double total = 0;
    for (int i = 0; i < b.B; ++i) {
        const auto t = ref_terms(b, z, v, i, p);
        total += t.policy + p.value_coef * t.value - p.entropy_coef * t.entropy;
    }
    return total / b.B;
}

struct LossOut {
    std::vector<float> stats, d_logits, d_values;
};

LossOut run_loss(fh::ops::Device& ops, const LossBatch& b, const LossParams& p) {
    auto logits = ops.from_host<float>(b.logits), values = ops.from_host<float>(b.values);
    auto actions = ops.from_host<int>(b.actions);
    auto olp = ops.from_host<float>(b.old_log_probs), adv = ops.from_host<float>(b.advantages);
    auto ret = ops.from_host<float>(b.returns), ov = ops.from_host<float>(b.old_values);
    auto stats = ops.alloc<float>(fh::ppo::kPpoLossStats * b.B), dl = ops.alloc<float>(b.B * b.A);
    auto dv = ops.alloc<float>(b.B);
    fh::ops::run(ops, fh::ops::PpoLoss{stats.view(), dl.view(), dv.view(), logits.cview(), values.cview(),
                                       actions.cview(), olp.cview(), adv.cview(), ret.cview(), ov.cview(), p});
    return {ops.to_host(stats.cview()), ops.to_host(dl.cview()), ops.to_host(dv.cview())};
}

/// A minibatch of 8 samples covering every branch of the loss (eps = 0.2): ratios inside and
/// outside the clip range with positive and negative advantages, value changes inside and outside
/// [-eps, eps] with either branch of the clipped value loss winning; all at least 0.05 from a kink.
LossBatch branch_batch() {
    LossBatch b;
    b.B = 8;
    b.A = 5;
    b.logits = random_floats(b.B * b.A, 17, -2.f, 2.f);
    b.actions = {0, 1, 2, 3, 4, 0, 2, 4};
    const double ratio[8] = {1.05, 1.5, 1.5, 0.6, 0.6, 0.93, 1.35, 0.7};
    b.advantages = {1.3f, 0.7f, -0.9f, -1.1f, 0.8f, -0.4f, 2.0f, 0.3f};
    b.values = {1.0f, 1.0f, 0.3f, -1.0f, -0.5f, 2.0f, 0.0f, 0.8f};
    b.old_values = {0.5f, 0.5f, 0.25f, 0.0f, -0.6f, 1.5f, 0.35f, 1.2f};
    b.returns = {2.0f, 0.0f, 1.0f, -3.0f, 0.4f, 1.6f, 0.5f, 1.5f};
    for (int i = 0; i < b.B; ++i) {
        const std::vector<double> row(b.logits.begin() + i * b.A, b.logits.begin() + (i + 1) * b.A);
        const double logp = log_softmax(row)[b.actions[i]];
        b.old_log_probs.push_back(static_cast<float>(logp - std::log(ratio[i])));
    }
    return b;
}

}  // namespace

// ---- the categorical policy (math/policy.h) ----------------------------------------------------

TEST_CASE("policy math: log-probabilities and entropy equal a double softmax", "[ppo]") {
    for (int A : {1, 2, 5, 33, 300}) {
        for (std::uint64_t seed = 1; seed <= 4; ++seed) {
            INFO("A " << A << " seed " << seed);
            const auto z = random_floats(A, seed * 100 + A, -6.f, 6.f);
            const std::vector<double> zd(z.begin(), z.end());
            const auto lp = log_softmax(zd);
            double H = 0;
            for (double l : lp) H -= std::exp(l) * l;
            for (int a = 0; a < A; ++a) REQUIRE(fh::policy::log_prob(z.data(), A, a) == Approx(lp[a]).margin(5e-5));
            CHECK(fh::policy::entropy(z.data(), A) == Approx(H).margin(5e-5));
            const double lse = zd[0] - lp[0];
            CHECK(fh::policy::log_sum_exp(z.data(), A) == Approx(lse).margin(5e-5));
        }
    }
    SECTION("huge logits do not overflow") {
        const std::vector<float> z{1000.f, 0.f, -1000.f};
        CHECK(fh::policy::log_prob(z.data(), 3, 0) == Approx(0.0).margin(1e-6));
        CHECK(fh::policy::log_prob(z.data(), 3, 1) == Approx(-1000.0).margin(1e-3));
        CHECK(fh::policy::entropy(z.data(), 3) == Approx(0.0).margin(1e-6));
        CHECK(std::isfinite(fh::policy::log_sum_exp(z.data(), 3)));
    }
    SECTION("uniform logits: entropy log A") {
        const std::vector<float> z(7, 0.25f);
        CHECK(fh::policy::entropy(z.data(), 7) == Approx(std::log(7.0)).margin(1e-6));
    }
}

TEST_CASE("policy sampling: frequencies follow the softmax and every action is valid", "[ppo]") {
    const std::vector<float> z{0.5f, -1.f, 2.f, 0.f, -3.f, 1.f};
    const int A = 6, N = 200000;
    const auto lp = log_softmax(std::vector<double>(z.begin(), z.end()));
    std::vector<int> hist(A, 0);
    for (int k = 0; k < N; ++k) {
        const int a = fh::policy::sample(z.data(), A, draw_u(7, 0, static_cast<std::uint64_t>(k)));
        REQUIRE(a >= 0);
        REQUIRE(a < A);
        ++hist[a];
    }
    double chi2 = 0;
    for (int a = 0; a < A; ++a) {
        const double expect = N * std::exp(lp[a]);
        chi2 += (hist[a] - expect) * (hist[a] - expect) / expect;
    }
    INFO("chi-square " << chi2 << " (5 degrees of freedom; P(chi2 > 30) < 2e-5)");
    CHECK(chi2 < 30.0);
    SECTION("u at the ends of [0, 1) and a near-zero last probability still give valid actions") {
        const std::vector<float> skew{0.f, 0.f, -100.f};
        for (float u : {0.0f, 0.5f, 0.99999994f}) {
            const int a = fh::policy::sample(skew.data(), 3, u);
            CHECK(a >= 0);
            CHECK(a < 3);
        }
        CHECK(fh::policy::sample(skew.data(), 3, 0.0f) == 0);
        CHECK(fh::policy::sample(z.data(), A, 0.0f) == 0);
        CHECK(fh::policy::sample(z.data(), 1, 0.99999994f) == 0);
    }
}

TEST_CASE("ppo_sample draws Philox(seed, policy_sample, e, step) and returns the log-probability", "[ppo]") {
    fh::ops::CpuDevice ops;
    const int n = 257, A = 9;
    const auto z = random_floats(n * A, 3, -3.f, 3.f);
    auto logits = ops.from_host<float>(z);
    auto actions = ops.alloc<int>(n);
    auto lps = ops.alloc<float>(n);
    fh::ops::run(ops, fh::ops::PpoSample{actions.view(), lps.view(), logits.cview(), A, 11, 5});
    const auto a5 = ops.to_host(actions.cview());
    const auto l5 = ops.to_host(lps.cview());
    for (int e = 0; e < n; ++e) {
        const float* row = z.data() + e * A;
        REQUIRE(a5[e] == fh::policy::sample(row, A, draw_u(11, e, 5)));
        REQUIRE(l5[e] == fh::policy::log_prob(row, A, a5[e]));
        const auto lp = log_softmax(std::vector<double>(row, row + A));
        REQUIRE(l5[e] == Approx(lp[a5[e]]).margin(1e-5));
    }
    fh::ops::run(ops, fh::ops::PpoSample{actions.view(), lps.view(), logits.cview(), A, 11, 6});
    const auto a6 = ops.to_host(actions.cview());
    CHECK(a6 != a5);  // another step, other draws
    // The step from a counter in device memory: counter 2, scale 2, offset 1 is step 5.
    auto counter = ops.from_host<long long>(std::vector<long long>{2});
    fh::ops::run(ops, fh::ops::PpoSample{actions.view(), lps.view(), logits.cview(), A, 11,
                                         fh::ops::counter_value(counter.cview(), 2, 1)});
    CHECK(ops.to_host(actions.cview()) == a5);
    CHECK(ops.to_host(lps.cview()) == l5);
}

TEST_CASE("ppo_learning_rate writes the schedule's rate at the rollout count in device memory", "[ppo]") {
    fh::ops::CpuDevice ops;
    auto lr = ops.alloc<float>(1);
    auto rollouts = ops.from_host<long long>(std::vector<long long>{0});
    for (long long r : {0LL, 1LL, 7LL, 10LL, 12LL}) {
        INFO("rollouts " << r);
        ops.upload<long long>(rollouts.view(), std::vector<long long>{r});
        fh::ops::run(ops,
                     fh::ops::PpoLearningRate{lr.view(), 3e-4, true, 10.0, fh::ops::counter_value(rollouts.cview())});
        CHECK(ops.to_host(lr.cview())[0] ==
              static_cast<float>(3e-4 * std::max(0.0, 1.0 - static_cast<double>(r) / 10.0)));
        fh::ops::run(ops,
                     fh::ops::PpoLearningRate{lr.view(), 3e-4, false, 10.0, fh::ops::counter_value(rollouts.cview())});
        CHECK(ops.to_host(lr.cview())[0] == 3e-4f);
    }
    CHECK_THROWS_AS(fh::ops::run(ops, fh::ops::PpoLearningRate{lr.view(), 3e-4, true, 0.0, 0}), std::invalid_argument);
}

// ---- the diversity penalty -------------------------------------------------------------------

TEST_CASE("diversity penalty: the window fills, the ring forgets old actions, threshold 0.5", "[ppo]") {
    using fh::ppo::diversity_penalty;
    SECTION("the formula") {
        CHECK(fh::ppo::kDiversityThreshold == 0.5f);
        CHECK(diversity_penalty(5, 10, 1.f) == 0.f);  // exactly half: no penalty
        CHECK(diversity_penalty(3, 10, 1.f) == 0.f);
        CHECK(diversity_penalty(6, 10, 1.f) == Approx(0.2f));
        CHECK(diversity_penalty(10, 10, 0.7f) == 0.7f);  // one action fills the window: coef
    }
    SECTION("two environments over 9 steps, W = 4, A = 3, coef 2") {
        fh::ops::CpuDevice ops;
        const int n = 2, A = 3, W = 4;
        auto window = ops.from_host<int>(std::vector<int>(n * W, 0));
        auto counts = ops.from_host<int>(std::vector<int>(n * A, 0));
        auto penalty = ops.alloc<float>(n);
        auto acts = ops.alloc<int>(n);
        const int seq0[9] = {0, 0, 0, 0, 1, 2, 1, 1, 1};
        const int seq1[9] = {2, 1, 0, 2, 1, 0, 2, 1, 0};
        // env 0: counts after each step [1,0,0] [2,0,0] [3,0,0] [4,0,0] (full: share 1 -> 2)
        // [3,1,0] (0.75 -> 1) [2,1,1] (0.5 -> 0) [1,2,1] (0) [0,3,1] (1) [0,3,1] (slot 0 drops a 1: 1)
        const float want0[9] = {0, 0, 0, 2, 1, 0, 0, 1, 1};
        for (int step = 0; step < 9; ++step) {
            INFO("step " << step);
            ops.upload<int>(acts.view(), std::vector<int>{seq0[step], seq1[step]});
            fh::ops::run(ops, fh::ops::PpoDiversity{window.view(), counts.view(), penalty.view(), acts.cview(), A, W,
                                                    2.f, static_cast<std::uint64_t>(step)});
            const auto p = ops.to_host(penalty.cview());
            CHECK(p[0] == want0[step]);
            CHECK(p[1] == 0.f);  // env 1 never has more than half the window on one action
        }
        CHECK(ops.to_host(window.cview()) == std::vector<int>{1, 2, 1, 1, 0, 0, 2, 1});
        CHECK(ops.to_host(counts.cview()) == std::vector<int>{0, 3, 1, 2, 1, 1});
    }
    SECTION("a window of one is always full of one action") {
        fh::ops::CpuDevice ops;
        auto window = ops.from_host<int>(std::vector<int>{0});
        auto counts = ops.from_host<int>(std::vector<int>{0, 0});
        auto penalty = ops.alloc<float>(1);
        auto acts = ops.from_host<int>(std::vector<int>{1});
        for (std::uint64_t step = 0; step < 3; ++step) {
            fh::ops::run(ops, fh::ops::PpoDiversity{window.view(), counts.view(), penalty.view(), acts.cview(), 2, 1,
                                                    0.3f, step});
            CHECK(ops.to_host(penalty.cview())[0] == 0.3f);
            CHECK(ops.to_host(counts.cview()) == std::vector<int>{0, 1});
        }
    }
}

// ---- GAE -------------------------------------------------------------------------------------

TEST_CASE("GAE: a hand-computed rollout with a termination, a truncation and the end bootstrap", "[ppo]") {
    // T = 4, n = 2, gamma = lambda = 0.5 (gamma * lambda = 0.25); every number is a binary fraction,
    // so float arithmetic is exact. Row t * 2 + e.
    // env 0: done = running, TERMINATED, running, running (the last step bootstraps V(s_T) = 3).
    //   t=3: delta = 4 + 0.5*3 - 2 = 3.5                        gae 3.5    return 5.5
    //   t=2: delta = 3 + 0.5*2 - 1.5 = 2.5; + 0.25*3.5           gae 3.375  return 4.875
    //   t=1: terminated: delta = 2 + 0 - 1 = 1 (V=8 of the terminal obs ignored), no carry
    //                                                           gae 1      return 2
    //   t=0: delta = 1 + 0.5*1 - 0.5 = 1; + 0.25*1               gae 1.25   return 1.75
    // env 1: done = TRUNCATED, running, running, running (V(s_T) = -4).
    //   t=3: delta = -2 + 0.5*(-4) - 0 = -4                      gae -4     return -4
    //   t=2: delta = 2 + 0.5*0 - 0.5 = 1.5; + 0.25*(-4)          gae 0.5    return 1
    //   t=1: delta = 0.5 + 0.5*0.5 + 1 = 1.75; + 0.25*0.5        gae 1.875  return 0.875
    //   t=0: truncated: bootstraps the terminal obs (V=4) but does not carry:
    //        delta = -1 + 0.5*4 - 1 = 0                          gae 0      return 1
    using fh::env::kRunning;
    using fh::env::kTerminated;
    using fh::env::kTruncated;
    const std::vector<float> rewards{1, -1, 2, 0.5f, 3, 2, 4, -2};
    const std::vector<float> values{0.5f, 1, 1, -1, 1.5f, 0.5f, 2, 0};
    const std::vector<float> next_values{1, 4, 8, 0.5f, 2, 0, 3, -4};
    const std::vector<std::uint8_t> done{kRunning, kTruncated, kTerminated, kRunning,
                                         kRunning, kRunning,   kRunning,    kRunning};
    fh::ops::CpuDevice ops;
    auto r = ops.from_host<float>(rewards), v = ops.from_host<float>(values), nv = ops.from_host<float>(next_values);
    auto d = ops.from_host<std::uint8_t>(done);
    auto adv = ops.alloc<float>(8), ret = ops.alloc<float>(8);
    fh::ops::run(ops,
                 fh::ops::PpoGae{adv.view(), ret.view(), r.cview(), v.cview(), nv.cview(), d.cview(), 0.5f, 0.5f, 4});
    CHECK(ops.to_host(adv.cview()) == std::vector<float>{1.25f, 0, 1, 1.875f, 3.375f, 0.5f, 3.5f, -4});
    CHECK(ops.to_host(ret.cview()) == std::vector<float>{1.75f, 1, 2, 0.875f, 4.875f, 1, 5.5f, -4});
    SECTION("gamma = lambda = 1 and no dones: gae_0 is the sum of the deltas") {
        // env 0: sum r 10 + sum next_values 14 - sum values 5 = 19, return 19 + 0.5.
        // env 1: sum r -0.5 + sum next_values 0.5 - sum values 0.5 = -0.5, return -0.5 + 1.
        const std::vector<std::uint8_t> running(8, kRunning);
        auto dr = ops.from_host<std::uint8_t>(running);
        fh::ops::run(
            ops, fh::ops::PpoGae{adv.view(), ret.view(), r.cview(), v.cview(), nv.cview(), dr.cview(), 1.f, 1.f, 4});
        const auto a = ops.to_host(adv.cview());
        const auto rt = ops.to_host(ret.cview());
        CHECK(a[0] == 19.f);
        CHECK(rt[0] == 19.5f);
        CHECK(a[1] == -0.5f);
        CHECK(rt[1] == 0.5f);
    }
}

// ---- bootstrap values of truncated episodes ----------------------------------------------------

TEST_CASE(
    "ppo_collect_truncated gathers truncated episodes in environment order; their observations are rebuilt; "
    "ppo_scatter_values puts values back",
    "[ppo]") {
    using fh::env::kRunning;
    using fh::env::kTerminated;
    using fh::env::kTruncated;
    fh::ops::CpuDevice ops;
    const int n = 5, dim = 4, market_dim = 2, capacity = 4;  // two portfolio features per observation
    std::vector<float> next(n * dim);
    for (int i = 0; i < n * dim; ++i) next[i] = static_cast<float>(i);  // row e = 4e .. 4e+3
    std::vector<fh::env::StepInfo> info(n);
    for (int e = 0; e < n; ++e) info[e].bar = 100 + e;
    auto o = ops.from_host<float>(next);
    auto inf = ops.from_host<fh::env::StepInfo>(info);
    auto rows = ops.from_host<int>(std::vector<int>(capacity, -1));
    auto bars = ops.from_host<int>(std::vector<int>(capacity, -1));
    auto pf = ops.from_host<float>(std::vector<float>(capacity * 2, -1.f));
    auto count = ops.from_host<int>(std::vector<int>{77});  // stale: restart ignores it
    auto d1 = ops.from_host<std::uint8_t>(
        std::vector<std::uint8_t>{kRunning, kTruncated, kTerminated, kTruncated, kTruncated});
    const auto collect = [&](fh::ops::View<const std::uint8_t> done, int row_base, bool restart) {
        fh::ops::run(ops, fh::ops::PpoCollectTruncated{rows.view(), bars.view(), pf.view(), count.view(), o.cview(),
                                                       inf.cview(), done, market_dim, row_base, restart});
    };
    collect(d1.cview(), 10, true);
    CHECK(ops.to_host(count.cview()) == std::vector<int>{3});
    CHECK(ops.to_host(rows.cview()) == std::vector<int>{11, 13, 14, -1});
    // Appending: entry 3 takes environment 0 (row 15); environment 4 (row 19) is counted past the capacity.
    auto d2 =
        ops.from_host<std::uint8_t>(std::vector<std::uint8_t>{kTruncated, kRunning, kRunning, kTerminated, kTruncated});
    collect(d2.cview(), 15, false);
    CHECK(ops.to_host(count.cview()) == std::vector<int>{5});
    CHECK(ops.to_host(rows.cview()) == std::vector<int>{11, 13, 14, 15});
    CHECK(ops.to_host(bars.cview()) == std::vector<int>{101, 103, 104, 100});
    CHECK(ops.to_host(pf.cview()) == std::vector<float>{6, 7, 14, 15, 18, 19, 2, 3});

    // Observations: the market features of the bar (3 bars of 2 here), then the portfolio features.
    auto features = ops.from_host<float>(std::vector<float>{0.5f, 1.5f, 2.5f, 3.5f, 4.5f, 5.5f});
    auto obs_bars = ops.from_host<int>(std::vector<int>{2, 0, 3});  // bar 3 is outside: NaN
    auto obs = ops.alloc<float>(3 * dim);
    fh::ops::run(ops, fh::ops::PpoTerminalObservations{obs.view(), obs_bars.cview(), pf.cview().subview(0, 6),
                                                       features.cview(), market_dim});
    const auto got = ops.to_host(obs.cview());
    CHECK(std::vector<float>(got.begin(), got.begin() + 8) == std::vector<float>{4.5f, 5.5f, 6, 7, 0.5f, 1.5f, 14, 15});
    CHECK(std::isnan(got[8]));
    CHECK(std::isnan(got[9]));
    CHECK(got[10] == 18.f);
    CHECK(got[11] == 19.f);

    auto dst = ops.from_host<float>(std::vector<float>(8, 0.f));
    auto vals = ops.from_host<float>(std::vector<float>{1.5f, 2.5f, 3.5f});
    auto at = ops.from_host<int>(std::vector<int>{5, 0, 8});  // 8 is outside dst: skipped
    fh::ops::run(ops, fh::ops::PpoScatterValues{dst.view(), vals.cview(), at.cview()});
    CHECK(ops.to_host(dst.cview()) == std::vector<float>{2.5f, 0, 0, 0, 0, 1.5f, 0, 0});

    // Sizes and overlaps are checked.
    CHECK_THROWS_AS(
        fh::ops::run(ops, fh::ops::PpoCollectTruncated{rows.view(), bars.view(), pf.view().subview(0, 7), count.view(),
                                                       o.cview(), inf.cview(), d1.cview(), market_dim, 0, true}),
        std::invalid_argument);  // 7 floats for 4 entries of 2
    CHECK_THROWS_AS(fh::ops::run(ops, fh::ops::PpoCollectTruncated{rows.view(), bars.view(), pf.view(), count.view(),
                                                                   o.cview().subview(0, 18), inf.cview(), d1.cview(),
                                                                   market_dim, 0, true}),
                    std::invalid_argument);  // 18 floats for 5 environments
    CHECK_THROWS_AS(fh::ops::run(ops, fh::ops::PpoCollectTruncated{rows.view(), bars.view(), pf.view(), count.view(),
                                                                   o.cview(), inf.cview(), d1.cview(), 5, 0, true}),
                    std::invalid_argument);  // market_dim above state_dim
    CHECK_THROWS_AS(
        fh::ops::run(ops, fh::ops::PpoCollectTruncated{rows.view(), bars.view(), pf.view(), count.view(), o.cview(),
                                                       inf.cview(), d1.cview(), market_dim, -1, true}),
        std::invalid_argument);  // a negative row
    CHECK_THROWS_AS(
        fh::ops::run(ops, fh::ops::PpoCollectTruncated{rows.view(), rows.view(), pf.view(), count.view(), o.cview(),
                                                       inf.cview(), d1.cview(), market_dim, 0, true}),
        std::invalid_argument);  // rows and bars overlap
    CHECK_THROWS_AS(
        fh::ops::run(ops, fh::ops::PpoTerminalObservations{obs.view(), obs_bars.cview(), pf.cview().subview(0, 5),
                                                           features.cview(), market_dim}),
        std::invalid_argument);  // 5 portfolio floats for 3 rows of 2
    CHECK_THROWS_AS(
        fh::ops::run(ops, fh::ops::PpoTerminalObservations{obs.view(), obs_bars.cview(), pf.cview().subview(0, 6),
                                                           features.cview().subview(0, 5), market_dim}),
        std::invalid_argument);  // features not whole bars
    CHECK_THROWS_AS(fh::ops::run(ops, fh::ops::PpoScatterValues{dst.view(), vals.cview(), at.cview().subview(0, 2)}),
                    std::invalid_argument);  // 2 rows for 3 values
    CHECK_THROWS_AS(fh::ops::run(ops, fh::ops::PpoScatterValues{dst.view(), dst.cview().subview(0, 3), at.cview()}),
                    std::invalid_argument);  // values inside dst
}

// ---- advantage normalisation ---------------------------------------------------------------------

TEST_CASE("normalize: mean 0 and population std 1, any size", "[ppo]") {
    fh::ops::CpuDevice ops;
    auto scratch = ops.alloc<float>(fh::ops::normalize_scratch_size());
    for (std::size_t n : {2u, 3u, 1001u, 100000u}) {
        INFO("n " << n);
        const auto x0 = random_floats(n, n, 3.f, 9.f);
        auto x = ops.from_host<float>(x0);
        fh::ops::run(ops, fh::ops::Normalize{x.view(), scratch.view()});
        const auto y = ops.to_host(x.cview());
        double m = 0, s = 0;
        for (float v : x0) m += v;
        m /= static_cast<double>(n);
        for (float v : x0) s += (v - m) * (v - m);
        const double sd = std::sqrt(s / static_cast<double>(n));
        double ym = 0, ys = 0;
        for (std::size_t i = 0; i < n; ++i) {
            REQUIRE(y[i] == Approx((x0[i] - m) / (sd + 1e-8)).margin(1e-5));
            ym += y[i];
        }
        ym /= static_cast<double>(n);
        for (float v : y) ys += (v - ym) * (v - ym);
        CHECK(ym == Approx(0.0).margin(1e-6));
        CHECK(std::sqrt(ys / static_cast<double>(n)) == Approx(1.0).epsilon(1e-5));
    }
    SECTION("one element, or all equal: zeros") {
        auto one = ops.from_host<float>(std::vector<float>{42.f});
        fh::ops::run(ops, fh::ops::Normalize{one.view(), scratch.view()});
        CHECK(ops.to_host(one.cview())[0] == 0.f);
        auto same = ops.from_host<float>(std::vector<float>(50, -3.5f));
        fh::ops::run(ops, fh::ops::Normalize{same.view(), scratch.view()});
        for (float v : ops.to_host(same.cview())) CHECK(v == 0.f);
    }
}

// ---- the permutation shuffle and the gather ---------------------------------------------------

TEST_CASE("permute is a bijection of [0, m) and the epoch changes the order", "[ppo]") {
    using fh::ppo::permute;
    for (std::uint32_t m : {1u, 2u, 3u, 5u, 7u, 8u, 64u, 100u, 1000u, 4096u, 4097u, 65537u}) {
        for (std::uint64_t epoch : {0ull, 1ull, 12345678901ull}) {
            INFO("m " << m << " epoch " << epoch);
            std::vector<char> seen(m, 0);
            for (std::uint32_t i = 0; i < m; ++i) {
                const std::uint32_t v = permute(i, m, 99, epoch);
                REQUIRE(v < m);
                REQUIRE_FALSE(seen[v]);
                seen[v] = 1;
            }
        }
    }
    SECTION("the raw Feistel network is a bijection of [0, 2^bits) for every bit count") {
        for (int bits = 0; bits <= 13; ++bits) {
            const std::uint32_t size = 1u << bits;
            std::vector<char> seen(size, 0);
            for (std::uint32_t x = 0; x < size; ++x) {
                const std::uint32_t v = fh::ppo::feistel(x, bits, 5, 9);
                REQUIRE(v < size);
                REQUIRE_FALSE(seen[v]);
                seen[v] = 1;
            }
        }
    }
    SECTION("epochs and seeds give different orders, never the identity") {
        const std::uint32_t m = 1000;
        int differ_epoch = 0, differ_seed = 0, fixed = 0;
        for (std::uint32_t i = 0; i < m; ++i) {
            differ_epoch += permute(i, m, 99, 0) != permute(i, m, 99, 1);
            differ_seed += permute(i, m, 99, 0) != permute(i, m, 100, 0);
            fixed += permute(i, m, 99, 0) == i;
        }
        CHECK(differ_epoch > 950);  // ~999 expected
        CHECK(differ_seed > 950);
        CHECK(fixed < 10);  // ~1 expected
    }
    SECTION("m = 2: both orders occur over the epochs") {
        int swapped = 0;
        for (std::uint64_t epoch = 0; epoch < 64; ++epoch) swapped += permute(0, 2, 7, epoch) == 1;
        CHECK(swapped > 10);
        CHECK(swapped < 54);
    }
    SECTION("where row 0 lands is uniform over the epochs") {
        const std::uint32_t m = 10;
        const int N = 20000;
        std::vector<int> hist(m, 0);
        for (int epoch = 0; epoch < N; ++epoch) ++hist[permute(0, m, 3, static_cast<std::uint64_t>(epoch))];
        double chi2 = 0;
        for (int h : hist) chi2 += (h - N / 10.0) * (h - N / 10.0) / (N / 10.0);
        INFO("chi-square " << chi2 << " (9 degrees of freedom)");
        CHECK(chi2 < 40.0);
    }
}

TEST_CASE("ppo_gather takes the permuted rows; the minibatches of an epoch partition the rollout", "[ppo]") {
    fh::ops::CpuDevice ops;
    const int M = 37, D = 3;
    std::vector<float> st(M * D), lp(M), adv(M), ret(M), val(M);
    std::vector<int> act(M);
    for (int r = 0; r < M; ++r) {
        for (int c = 0; c < D; ++c) st[r * D + c] = 100.f * r + c;
        act[r] = r;
        lp[r] = -1.f * r;
        adv[r] = 0.5f * r;
        ret[r] = 2.f * r;
        val[r] = 3.f * r;
    }
    auto bs = ops.from_host<float>(st), blp = ops.from_host<float>(lp), badv = ops.from_host<float>(adv);
    auto bret = ops.from_host<float>(ret), bval = ops.from_host<float>(val);
    auto bact = ops.from_host<int>(act);
    const RolloutView rollout{bs.cview().data(),
                              bact.cview().data(),
                              blp.cview().data(),
                              badv.cview().data(),
                              bret.cview().data(),
                              bval.cview().data(),
                              M,
                              D};
    auto gather = [&](int B, int offset, std::uint64_t epoch) {
        auto s = ops.alloc<float>(B * D), l = ops.alloc<float>(B), a2 = ops.alloc<float>(B), r2 = ops.alloc<float>(B),
             v = ops.alloc<float>(B);
        auto a = ops.alloc<int>(B);
        fh::ops::run(ops, fh::ops::PpoGather{s.view(), a.view(), l.view(), a2.view(), r2.view(), v.view(), rollout, 5,
                                             epoch, offset});
        const auto hs = ops.to_host(s.cview());
        const auto ha = ops.to_host(a.cview());
        const auto hl = ops.to_host(l.cview()), hadv = ops.to_host(a2.cview()), hr = ops.to_host(r2.cview()),
                   hv = ops.to_host(v.cview());
        for (int i = 0; i < B; ++i) {
            const int row = static_cast<int>(fh::ppo::permute(static_cast<std::uint32_t>(offset + i), M, 5, epoch));
            REQUIRE(ha[i] == row);
            for (int c = 0; c < D; ++c) REQUIRE(hs[i * D + c] == 100.f * row + c);
            REQUIRE(hl[i] == -1.f * row);
            REQUIRE(hadv[i] == 0.5f * row);
            REQUIRE(hr[i] == 2.f * row);
            REQUIRE(hv[i] == 3.f * row);
        }
        return ha;
    };
    gather(10, 20, 3);
    std::vector<int> all;
    for (int offset : {0, 10, 20}) {
        const auto a = gather(10, offset, 4);
        all.insert(all.end(), a.begin(), a.end());
    }
    const auto last = gather(7, 30, 4);
    all.insert(all.end(), last.begin(), last.end());
    std::vector<int> first_order = all;
    std::sort(all.begin(), all.end());
    std::vector<int> want(M);
    std::iota(want.begin(), want.end(), 0);
    CHECK(all == want);
    std::vector<int> identity(M);
    std::iota(identity.begin(), identity.end(), 0);
    CHECK(first_order != identity);
}

// ---- the loss ---------------------------------------------------------------------------------

TEST_CASE("PPO loss: stats and gradients match a double-precision loss and its finite differences", "[ppo]") {
    fh::ops::CpuDevice ops;
    const LossBatch b = branch_batch();
    for (int clip_value : {0, 1}) {
        INFO("clip_value " << clip_value);
        const LossParams p{0.2f, 0.5f, 0.05f, clip_value};
        const LossOut out = run_loss(ops, b, p);
        std::vector<double> z(b.logits.begin(), b.logits.end()), v(b.values.begin(), b.values.end());
        // Stats against the definition.
        const bool want_clipped[8] = {false, true, false, true, false, false, true, false};
        for (int i = 0; i < b.B; ++i) {
            INFO("sample " << i);
            const auto t = ref_terms(b, z, v, i, p);
            CHECK(t.clipped == want_clipped[i]);
            CHECK(out.stats[0 * b.B + i] == Approx(t.policy).margin(1e-5));
            CHECK(out.stats[1 * b.B + i] == Approx(t.value).margin(1e-5));
            CHECK(out.stats[2 * b.B + i] == Approx(t.entropy).margin(1e-5));
            CHECK(out.stats[3 * b.B + i] == Approx(t.kl).margin(1e-5));
            CHECK(out.stats[4 * b.B + i] == (t.clipped ? 1.f : 0.f));
        }
        // Gradients against central differences of the double loss.
        const double h = 1e-4;
        for (int k = 0; k < b.B * b.A; ++k) {
            INFO("logit " << k);
            auto zp = z, zm = z;
            zp[k] += h;
            zm[k] -= h;
            const double fd = (ref_loss(b, zp, v, p) - ref_loss(b, zm, v, p)) / (2 * h);
            CHECK(out.d_logits[k] == Approx(fd).margin(2e-5).epsilon(1e-3));
        }
        for (int i = 0; i < b.B; ++i) {
            INFO("value " << i);
            auto vp = v, vm = v;
            vp[i] += h;
            vm[i] -= h;
            const double fd = (ref_loss(b, z, vp, p) - ref_loss(b, z, vm, p)) / (2 * h);
            CHECK(out.d_values[i] == Approx(fd).margin(2e-5).epsilon(1e-3));
        }
        // The clipped samples' policy gradient is the entropy term alone; the branches of the
        // clipped value loss that won with a clipped change give no value gradient.
        if (clip_value) {
            CHECK(out.d_values[0] == 0.f);
            CHECK(out.d_values[3] == 0.f);
        } else {
            CHECK(out.d_values[0] == Approx(0.5 * (1.0 - 2.0) / 8).margin(1e-7));
        }
    }
    SECTION("without the entropy bonus a clipped sample has no logit gradient") {
        const LossParams p{0.2f, 1.f, 0.f, 0};
        const LossOut out = run_loss(ops, b, p);
        for (int i : {1, 3, 6})
            for (int j = 0; j < b.A; ++j) CHECK(out.d_logits[i * b.A + j] == 0.f);
        for (int i : {0, 2, 4, 5, 7}) {
            float sum = 0, mag = 0;
            for (int j = 0; j < b.A; ++j) {
                sum += out.d_logits[i * b.A + j];
                mag += std::abs(out.d_logits[i * b.A + j]);
            }
            CHECK(sum == Approx(0.0).margin(1e-6));  // softmax gradients sum to 0 over a row
            CHECK(mag > 1e-3f);
        }
    }
}

// ---- curiosity ---------------------------------------------------------------------------------

TEST_CASE("curiosity input and error by hand; d_pred matches finite differences", "[ppo]") {
    fh::ops::CpuDevice ops;
    SECTION("input = [state | one-hot(action)]") {
        auto states = ops.from_host<float>(std::vector<float>{1, 2, 3, 4, 5, 6});
        auto acts = ops.from_host<int>(std::vector<int>{2, 0});
        auto input = ops.alloc<float>(2 * 7);
        fh::ops::run(ops, fh::ops::CuriosityInput{input.view(), states.cview(), acts.cview(), 4});
        CHECK(ops.to_host(input.cview()) == std::vector<float>{1, 2, 3, 0, 0, 1, 0, 4, 5, 6, 1, 0, 0, 0});
    }
    SECTION("error and gradient, by hand") {
        // n = 2, state_dim = 4, P = 2. env 0: diffs (1, -2): error 0.5 * 5 / 2 = 1.25,
        // d_pred (1, -2) / 4. env 1: diffs (-1, 0): error 0.25, d_pred (-0.25, 0).
        auto pred = ops.from_host<float>(std::vector<float>{1, 2, 0.5f, -1});
        auto next = ops.from_host<float>(std::vector<float>{0, 4, 9, 9, 1.5f, -1, 7, 7});
        auto err = ops.alloc<float>(2), dp = ops.alloc<float>(4);
        fh::ops::run(ops, fh::ops::CuriosityError{err.view(), dp.view(), pred.cview(), next.cview(), 4});
        CHECK(ops.to_host(err.cview()) == std::vector<float>{1.25f, 0.25f});
        CHECK(ops.to_host(dp.cview()) == std::vector<float>{0.25f, -0.5f, -0.25f, 0.f});
    }
    SECTION("d_pred is the gradient of mean_e error[e]") {
        const int n = 5, S = 7, P = 4;
        const auto pr = random_floats(n * P, 1), nx = random_floats(n * S, 2);
        auto pred = ops.from_host<float>(pr), next = ops.from_host<float>(nx);
        auto err = ops.alloc<float>(n), dp = ops.alloc<float>(n * P);
        fh::ops::run(ops, fh::ops::CuriosityError{err.view(), dp.view(), pred.cview(), next.cview(), S});
        const auto e = ops.to_host(err.cview()), d = ops.to_host(dp.cview());
        auto f = [&](const std::vector<double>& q) {
            double total = 0;
            for (int r = 0; r < n; ++r) {
                double s = 0;
                for (int j = 0; j < P; ++j) s += (q[r * P + j] - nx[r * S + j]) * (q[r * P + j] - nx[r * S + j]);
                total += 0.5 * s / P;
            }
            return total / n;
        };
        const std::vector<double> q(pr.begin(), pr.end());
        for (int r = 0; r < n; ++r) {
            double s = 0;
            for (int j = 0; j < P; ++j) s += (q[r * P + j] - nx[r * S + j]) * (q[r * P + j] - nx[r * S + j]);
            CHECK(e[r] == Approx(0.5 * s / P).epsilon(1e-6));
        }
        const double h = 1e-3;
        for (int k = 0; k < n * P; ++k) {
            auto qp = q, qm = q;
            qp[k] += h;
            qm[k] -= h;
            CHECK(d[k] == Approx((f(qp) - f(qm)) / (2 * h)).margin(1e-7).epsilon(1e-5));
        }
    }
}

// ---- argument checks ----------------------------------------------------------------------------

TEST_CASE("PPO ops: sizes are checked; read-only inputs may share, outputs may not overlap", "[ppo][aliasing]") {
    fh::ops::CpuDevice ops;
    auto buf = ops.from_host<float>(random_floats(64, 1));
    auto f = [&](std::size_t off, std::size_t n) { return buf.view().subview(off, n); };
    auto cf = [&](std::size_t off, std::size_t n) { return fh::ops::View<const float>(f(off, n)); };
    auto done = ops.from_host<std::uint8_t>(std::vector<std::uint8_t>(8, 0));
    auto adv = ops.alloc<float>(8), ret = ops.alloc<float>(8);
    // values and next_values may be the same read-only buffer ...
    CHECK_NOTHROW(fh::ops::run(
        ops, fh::ops::PpoGae{adv.view(), ret.view(), cf(0, 8), cf(8, 8), cf(8, 8), done.cview(), 0.9f, 0.9f, 4}));
    // ... an output aliasing an input may not.
    CHECK_THROWS_AS(fh::ops::run(ops, fh::ops::PpoGae{adv.view(), ret.view(), adv.cview(), cf(8, 8), cf(8, 8),
                                                      done.cview(), 0.9f, 0.9f, 4}),
                    std::invalid_argument);
    CHECK_THROWS_AS(fh::ops::run(ops, fh::ops::PpoGae{adv.view(), ret.view(), cf(0, 8), cf(8, 8), cf(8, 8),
                                                      done.cview(), 0.9f, 0.9f, 3}),
                    std::invalid_argument);  // 8 rows are not a multiple of T = 3

    auto scratch = ops.alloc<float>(fh::ops::normalize_scratch_size());
    CHECK_THROWS_AS(fh::ops::run(ops, fh::ops::Normalize{f(0, 8), f(8, 16)}),
                    std::invalid_argument);  // scratch too small
    CHECK_THROWS_AS(fh::ops::run(ops, fh::ops::Normalize{fh::ops::View<float>(), scratch.view()}),
                    std::invalid_argument);

    auto acts = ops.from_host<int>(std::vector<int>{0, 1, 2, 0});
    auto stats = ops.alloc<float>(fh::ppo::kPpoLossStats * 4), dl = ops.alloc<float>(12), dv = ops.alloc<float>(4);
    const LossParams p{0.2f, 0.5f, 0.01f, 1};
    CHECK_NOTHROW(fh::ops::run(
        ops, fh::ops::PpoLoss{stats.view(), dl.view(), dv.view(), cf(0, 12), cf(12, 4), acts.cview(), cf(16, 4),
                              cf(20, 4), cf(24, 4), cf(12, 4), p}));  // old_values == values: fine
    CHECK_THROWS_AS(fh::ops::run(ops, fh::ops::PpoLoss{stats.view(), dl.view(), f(12, 4), cf(0, 12), cf(12, 4),
                                                       acts.cview(), cf(16, 4), cf(20, 4), cf(24, 4), cf(28, 4), p}),
                    std::invalid_argument);  // d_values is the values buffer
    CHECK_THROWS_AS(fh::ops::run(ops, fh::ops::PpoLoss{stats.view(), dl.view(), dv.view(), cf(0, 13), cf(12, 4),
                                                       acts.cview(), cf(16, 4), cf(20, 4), cf(24, 4), cf(28, 4), p}),
                    std::invalid_argument);  // 13 logits for 4 samples

    const RolloutView r{buf.cview().data(),
                        acts.cview().data(),
                        buf.cview().data(),
                        buf.cview().data(),
                        buf.cview().data(),
                        buf.cview().data(),
                        4,
                        2};
    auto gs = ops.alloc<float>(4), g1 = ops.alloc<float>(2), g2 = ops.alloc<float>(2), g3 = ops.alloc<float>(2),
         g4 = ops.alloc<float>(2);
    auto ga = ops.alloc<int>(2);
    CHECK_NOTHROW(fh::ops::run(
        ops, fh::ops::PpoGather{gs.view(), ga.view(), g1.view(), g2.view(), g3.view(), g4.view(), r, 1, 0, 2}));
    CHECK_THROWS_AS(fh::ops::run(ops, fh::ops::PpoGather{gs.view(), ga.view(), g1.view(), g2.view(), g3.view(),
                                                         g4.view(), r, 1, 0, 3}),
                    std::invalid_argument);  // rows [3, 5) of 4
    CHECK_THROWS_AS(fh::ops::run(ops, fh::ops::PpoGather{f(0, 4), ga.view(), g1.view(), g2.view(), g3.view(), g4.view(),
                                                         r, 1, 0, 0}),
                    std::invalid_argument);  // the output overlaps the rollout

    auto err = ops.alloc<float>(2), dp = ops.alloc<float>(10);
    CHECK_THROWS_AS(fh::ops::run(ops, fh::ops::CuriosityError{err.view(), dp.view(), cf(0, 10), cf(10, 8), 4}),
                    std::invalid_argument);

    auto window = ops.from_host<int>(std::vector<int>(8, 0)), counts = ops.from_host<int>(std::vector<int>(12, 0));
    auto pen = ops.alloc<float>(4);
    CHECK_THROWS_AS(
        fh::ops::run(ops, fh::ops::PpoDiversity{window.view(), counts.view(), pen.view(), acts.cview(), 3, 0, 1.f, 0}),
        std::invalid_argument);  // window 0
    CHECK_NOTHROW(
        fh::ops::run(ops, fh::ops::PpoDiversity{window.view(), counts.view(), pen.view(), acts.cview(), 3, 2, 1.f, 0}));
}

// ---- [gpu] the kernels against their CPU twins ---------------------------------------------------

TEST_CASE("PPO sampling and diversity kernels equal their CPU twins", "[gpu][ppo]") {
    fh::ops::CpuDevice cpu;
    auto& gpu = fh::test::gpu_ops();
    const int n = 4099, A = 9, W = 7;
    const auto z = random_floats(n * A, 21, -3.f, 3.f);
    auto sample = [&](fh::ops::Device& ops, std::uint64_t step) {
        auto logits = ops.from_host<float>(z);
        auto actions = ops.alloc<int>(n);
        auto lps = ops.alloc<float>(n);
        // Odd steps from a counter in device memory (step = counter * 1 + 0), even ones from the host.
        auto counter = ops.from_host<long long>(std::vector<long long>{static_cast<long long>(step)});
        if (step % 2 == 1)
            fh::ops::run(ops, fh::ops::PpoSample{actions.view(), lps.view(), logits.cview(), A, 77,
                                                 fh::ops::counter_value(counter.cview())});
        else
            fh::ops::run(ops, fh::ops::PpoSample{actions.view(), lps.view(), logits.cview(), A, 77, step});
        return std::pair{ops.to_host(actions.cview()), ops.to_host(lps.cview())};
    };
    for (std::uint64_t step : {0ull, 1ull, 1000003ull}) {
        INFO("step " << step);
        const auto [ca, cl] = sample(cpu, step);
        const auto [ga, gl] = sample(gpu, step);
        // expf/logf round differently on the device: an action may differ where u lies within
        // rounding of a CDF boundary (a rate of ~1e-7 per draw); allow 1e-3 of the envs.
        int mismatches = 0;
        for (int e = 0; e < n; ++e) {
            REQUIRE(ga[e] >= 0);
            REQUIRE(ga[e] < A);
            if (ga[e] != ca[e]) {
                ++mismatches;
                continue;
            }
            // log pi(a) = l_a - lse: log_sum_exp_bound of the row and the subtraction's u a side.
            const auto s = fh::test::log_sum_exp_bound(z.data() + e * A, A);
            const double lp = z[static_cast<std::size_t>(e * A + ga[e])] - s.lse;
            REQUIRE(std::abs(static_cast<double>(gl[e]) - cl[e]) <= s.bound + 2 * fh::test::kFloatU * std::abs(lp));
        }
        CHECK(mismatches <= n / 1000);
    }
    // The diversity penalty on identical actions: integers and IEEE division, bit for bit.
    auto diversity = [&](fh::ops::Device& ops) {
        auto window = ops.from_host<int>(std::vector<int>(n * W, 0));
        auto counts = ops.from_host<int>(std::vector<int>(n * A, 0));
        auto penalty = ops.alloc<float>(n);
        auto acts = ops.alloc<int>(n);
        auto counter = ops.from_host<long long>(std::vector<long long>{0});
        std::vector<std::vector<float>> penalties;
        for (int step = 0; step < 3 * W + 2; ++step) {
            std::vector<int> a(n);
            for (int e = 0; e < n; ++e)  // some envs stuck on one action, others varied
                a[e] = e % 3 == 0 ? e % A : static_cast<int>((e * 7u + static_cast<unsigned>(step) * (e % 5)) % A);
            ops.upload<int>(acts.view(), a);
            // The step from device memory: counter = step / 2, step = counter * 2 + step % 2.
            ops.upload<long long>(counter.view(), std::vector<long long>{step / 2});
            fh::ops::run(ops, fh::ops::PpoDiversity{window.view(), counts.view(), penalty.view(), acts.cview(), A, W,
                                                    0.37f, fh::ops::counter_value(counter.cview(), 2, step % 2)});
            penalties.push_back(ops.to_host(penalty.cview()));
        }
        return std::tuple{penalties, ops.to_host(window.cview()), ops.to_host(counts.cview())};
    };
    const auto cd = diversity(cpu);
    const auto gd = diversity(gpu);
    CHECK(std::get<0>(gd) == std::get<0>(cd));
    CHECK(std::get<1>(gd) == std::get<1>(cd));
    CHECK(std::get<2>(gd) == std::get<2>(cd));
}

TEST_CASE("GAE and normalize kernels equal their CPU twins", "[gpu][ppo]") {
    fh::ops::CpuDevice cpu;
    auto& gpu = fh::test::gpu_ops();
    const int T = 33, n = 257, M = T * n;
    const auto rewards = random_floats(M, 31), values = random_floats(M, 32), next_values = random_floats(M, 33);
    std::vector<std::uint8_t> done(M);
    for (int i = 0; i < M; ++i)
        done[i] = static_cast<std::uint8_t>(i % 29 == 0   ? fh::env::kTerminated
                                            : i % 13 == 0 ? fh::env::kTruncated
                                                          : fh::env::kRunning);
    auto gae = [&](fh::ops::Device& ops) {
        auto r = ops.from_host<float>(rewards), v = ops.from_host<float>(values),
             nv = ops.from_host<float>(next_values);
        auto d = ops.from_host<std::uint8_t>(done);
        auto adv = ops.alloc<float>(M), ret = ops.alloc<float>(M);
        fh::ops::run(
            ops, fh::ops::PpoGae{adv.view(), ret.view(), r.cview(), v.cview(), nv.cview(), d.cview(), 0.99f, 0.95f, T});
        return std::pair{ops.to_host(adv.cview()), ops.to_host(ret.cview())};
    };
    const auto c = gae(cpu), g = gae(gpu);
    CHECK(g.first == c.first);  // --fmad=false: bit for bit
    CHECK(g.second == c.second);

    for (std::size_t size : {1u, 7u, 1000u, 65539u, 300001u}) {
        INFO("size " << size);
        const auto x0 = random_floats(size, size + 5, -4.f, 10.f);
        auto norm = [&](fh::ops::Device& ops) {
            auto x = ops.from_host<float>(x0);
            auto scratch = ops.alloc<float>(fh::ops::normalize_scratch_size());
            fh::ops::run(ops, fh::ops::Normalize{x.view(), scratch.view()});
            return ops.to_host(x.cview());
        };
        const auto cn = norm(cpu), gn = norm(gpu), gn2 = norm(gpu);
        // Both sides sum the moments in double (the kernel's partials as float pairs): mean and
        // denom round to the same float or one ulp apart (2 u each); (x - mean) / denom then
        // rounds twice on each side (--fmad=false).
        double mean = 0, var = 0;
        for (float x : x0) mean += x;
        mean /= static_cast<double>(size);
        for (float x : x0) var += (x - mean) * (x - mean);
        const double denom = std::sqrt(var / static_cast<double>(size)) + 1e-8, u = fh::test::kFloatU;
        fh::test::Bounds bound(size);
        for (std::size_t i = 0; i < size; ++i)
            bound[i] = 2 * u * (std::abs(mean) + std::abs(x0[i] - mean)) / denom +
                       2 * u * std::abs(x0[i] - mean) / denom + 4 * u * std::abs(cn[i]);
        FH_REQUIRE_WITHIN(gn, cn, bound);
        CHECK(gn2 == gn);  // run to run identical
    }
}

TEST_CASE("the truncated-episode kernels (collect, observations, scatter) equal their CPU twins", "[gpu][ppo]") {
    fh::ops::CpuDevice cpu;
    auto& gpu = fh::test::gpu_ops();
    // 2,500 environments (three tiles of kCollectThreads, the last partial) of 50 floats (42
    // market, 8 portfolio), three steps appended; the capacity is reached during the third, so its
    // last entries are counted only.
    static_assert(2 * fh::ppo::kCollectThreads < 2500 && 2500 < 3 * fh::ppo::kCollectThreads);
    const int n = 2500, dim = 50, market_dim = 42, P = dim - market_dim, steps = 3, capacity = 1300, n_bars = 700;
    std::vector<std::vector<std::uint8_t>> done(steps, std::vector<std::uint8_t>(n));
    std::mt19937 rng(41);
    for (auto& d : done)
        for (auto& x : d) {
            const auto r = rng() % 10;
            x = static_cast<std::uint8_t>(r < 2   ? fh::env::kTruncated
                                          : r < 3 ? fh::env::kTerminated
                                                  : fh::env::kRunning);
        }
    done[1][0] = done[1][n - 1] = fh::env::kTruncated;  // the first and last environment
    std::vector<fh::env::StepInfo> info(n);
    for (auto& i : info) i.bar = static_cast<int>(rng() % n_bars);
    const auto next = random_floats(static_cast<std::size_t>(n) * dim, 42);
    const auto features = random_floats(static_cast<std::size_t>(n_bars) * market_dim, 44);
    auto run = [&](fh::ops::Device& ops) {
        auto o = ops.from_host<float>(next);
        auto inf = ops.from_host<fh::env::StepInfo>(info);
        auto rows = ops.from_host<int>(std::vector<int>(capacity, -1));
        auto bars = ops.from_host<int>(std::vector<int>(capacity, -1));
        auto pf = ops.from_host<float>(std::vector<float>(static_cast<std::size_t>(capacity) * P, 0.f));
        auto count = ops.from_host<int>(std::vector<int>{123});
        std::vector<int> counts;
        for (int s = 0; s < steps; ++s) {
            auto d = ops.from_host<std::uint8_t>(done[static_cast<std::size_t>(s)]);
            fh::ops::run(ops, fh::ops::PpoCollectTruncated{rows.view(), bars.view(), pf.view(), count.view(), o.cview(),
                                                           inf.cview(), d.cview(), market_dim, s * n, s == 0});
            counts.push_back(ops.to_host(count.cview())[0]);
        }
        auto f = ops.from_host<float>(features);
        auto obs = ops.alloc<float>(static_cast<std::size_t>(capacity) * dim);
        fh::ops::run(ops,
                     fh::ops::PpoTerminalObservations{obs.view(), bars.cview(), pf.cview(), f.cview(), market_dim});
        return std::tuple{ops.to_host(rows.cview()), ops.to_host(bars.cview()), ops.to_host(pf.cview()), counts,
                          ops.to_host(obs.cview())};
    };
    const auto c = run(cpu), g = run(gpu);
    REQUIRE(std::get<3>(c)[1] < capacity);      // two steps fit ...
    REQUIRE(std::get<3>(c).back() > capacity);  // ... the third reaches the capacity
    CHECK(std::get<3>(g) == std::get<3>(c));
    CHECK(std::get<0>(g) == std::get<0>(c));
    CHECK(std::get<1>(g) == std::get<1>(c));
    CHECK(std::get<2>(g) == std::get<2>(c));
    CHECK(std::get<4>(g) == std::get<4>(c));

    // Scatter: 3,000 values to a permutation of dst's 3,001 rows, two of them moved outside.
    const int size = 3001, m = 3000;
    std::vector<int> at(m);
    for (int i = 0; i < m; ++i)
        at[static_cast<std::size_t>(i)] = static_cast<int>((static_cast<long long>(i) * 1237) % m);
    at[17] = -5;
    at[m - 1] = size + 10;
    const auto vals = random_floats(m, 43);
    auto scatter = [&](fh::ops::Device& ops) {
        auto dst = ops.from_host<float>(std::vector<float>(size, 0.5f));
        auto v = ops.from_host<float>(vals);
        auto r = ops.from_host<int>(at);
        fh::ops::run(ops, fh::ops::PpoScatterValues{dst.view(), v.cview(), r.cview()});
        return ops.to_host(dst.cview());
    };
    CHECK(scatter(gpu) == scatter(cpu));
}

TEST_CASE("the PPO gather kernel equals its CPU twin", "[gpu][ppo]") {
    fh::ops::CpuDevice cpu;
    auto& gpu = fh::test::gpu_ops();
    // A warp per abi::kPpoGatherRowsPerWarp rows (300 rows: a partial last warp for other counts),
    // its lanes over the rows' states as one span: states narrower than a warp, PPO's 50 features,
    // more than two warps' worth.
    for (const int D : {11, 50, 70}) {
        INFO("state_dim " << D);
        const int M = 1000, B = 300;
        const auto st = random_floats(M * D, 41), lp = random_floats(M, 42), adv = random_floats(M, 43),
                   ret = random_floats(M, 44), val = random_floats(M, 45);
        std::vector<int> act(M);
        for (int r = 0; r < M; ++r) act[r] = (r * 31) % 9;
        auto run = [&](fh::ops::Device& ops, int offset, fh::ops::CounterValue epoch) {
            auto bs = ops.from_host<float>(st), blp = ops.from_host<float>(lp), badv = ops.from_host<float>(adv),
                 bret = ops.from_host<float>(ret), bval = ops.from_host<float>(val);
            auto bact = ops.from_host<int>(act);
            const RolloutView r{bs.cview().data(),
                                bact.cview().data(),
                                blp.cview().data(),
                                badv.cview().data(),
                                bret.cview().data(),
                                bval.cview().data(),
                                M,
                                D};
            auto s = ops.alloc<float>(B * D), l = ops.alloc<float>(B), a2 = ops.alloc<float>(B),
                 r2 = ops.alloc<float>(B), v = ops.alloc<float>(B);
            auto a = ops.alloc<int>(B);
            fh::ops::run(ops, fh::ops::PpoGather{s.view(), a.view(), l.view(), a2.view(), r2.view(), v.view(), r, 123,
                                                 epoch, offset});
            return std::tuple{ops.to_host(s.cview()),  ops.to_host(a.cview()),  ops.to_host(l.cview()),
                              ops.to_host(a2.cview()), ops.to_host(r2.cview()), ops.to_host(v.cview())};
        };
        for (int offset : {0, 600, 700}) {
            for (std::uint64_t epoch : {0ull, 5ull}) {
                INFO("offset " << offset << " epoch " << epoch);
                CHECK(run(gpu, offset, epoch) == run(cpu, offset, epoch));
            }
        }
        // The epoch from a counter in device memory: 2 * 2 + 1 = 5.
        auto counter = gpu.from_host<long long>(std::vector<long long>{2});
        CHECK(run(gpu, 600, fh::ops::counter_value(counter.cview(), 2, 1)) == run(cpu, 600, 5));
    }
}

TEST_CASE("the PPO learning-rate kernel equals its CPU twin", "[gpu][ppo]") {
    fh::ops::CpuDevice cpu;
    auto& gpu = fh::test::gpu_ops();
    for (long long r : {0LL, 3LL, 999LL, 1000LL, 5000LL})
        for (bool linear : {false, true}) {
            INFO("rollouts " << r << " linear " << linear);
            std::vector<float> got[2];
            fh::ops::Device* backends[2] = {&cpu, &gpu};
            for (int k = 0; k < 2; ++k) {
                auto lr = backends[k]->alloc<float>(1);
                auto counter = backends[k]->from_host<long long>(std::vector<long long>{r});
                fh::ops::run(*backends[k], fh::ops::PpoLearningRate{lr.view(), 2.5e-4, linear, 1000.0,
                                                                    fh::ops::counter_value(counter.cview())});
                got[k] = backends[k]->to_host(lr.cview());
            }
            CHECK(got[1] == got[0]);
        }
}

TEST_CASE("the PPO loss kernel equals its CPU twin", "[gpu][ppo]") {
    fh::ops::CpuDevice cpu;
    auto& gpu = fh::test::gpu_ops();
    for (int A : {3, 9, 130}) {
        for (int B : {1, 7, 257}) {
            for (int clip_value : {0, 1}) {
                INFO("A " << A << " B " << B << " clip_value " << clip_value);
                LossBatch b;
                b.B = B;
                b.A = A;
                b.logits = random_floats(B * A, 51 + A + B, -3.f, 3.f);
                b.values = random_floats(B, 52 + B);
                b.returns = random_floats(B, 53 + B);
                b.advantages = random_floats(B, 54 + B);
                b.old_values = random_floats(B, 55 + B);
                auto noise = random_floats(B, 56 + B, -0.5f, 0.5f);  // ratios ~ [0.6, 1.65]
                for (int i = 0; i < B; ++i) {
                    // Keep each ratio clear of the clip edges 0.8 and 1.2, where the last bit of
                    // expf could flip the clipped branch between the backends.
                    const double ratio = std::exp(-static_cast<double>(noise[i]));
                    if (std::abs(ratio - 0.8) < 1e-3 || std::abs(ratio - 1.2) < 1e-3) noise[i] += 0.01f;
                    b.actions.push_back((i * 7 + 1) % A);
                    b.old_log_probs.push_back(fh::policy::log_prob(b.logits.data() + i * A, A, b.actions[i]) +
                                              noise[i]);
                }
                const LossParams p{0.2f, 0.5f, 0.01f, clip_value};
                const LossOut c = run_loss(cpu, b, p), g = run_loss(gpu, b, p);
                // Norm-relative chains (fh::test::chain_bounds): the statistics, batch means of
                // per-row terms through a log-sum-exp (2 levels of up to max(A, B) terms; expf,
                // logf and the ratio's expf), the largest statistic as the scale; d_logits, one
                // level of A terms (the softmax) and those three, the tensor's largest as the
                // scale (pi - 1 cancels); d_values, a few roundings (one level of 2 terms).
                const int terms = std::max(A, B);
                FH_REQUIRE_WITHIN(g.stats, c.stats, fh::test::chain_bounds(c.stats, c.stats.size(), 2, terms, 3));
                FH_REQUIRE_WITHIN(g.d_logits, c.d_logits,
                                  fh::test::chain_bounds(c.d_logits, c.d_logits.size(), 1, A, 3));
                FH_REQUIRE_WITHIN(g.d_values, c.d_values,
                                  fh::test::chain_bounds(c.d_values, c.d_values.size(), 1, 2, 0));
            }
        }
    }
}

TEST_CASE("the curiosity kernels equal their CPU twins", "[gpu][ppo]") {
    fh::ops::CpuDevice cpu;
    auto& gpu = fh::test::gpu_ops();
    const int n = 1025, D = 37, A = 9, P = 29;
    const auto st = random_floats(n * D, 61), pr = random_floats(n * P, 62), nx = random_floats(n * D, 63);
    std::vector<int> act(n);
    for (int e = 0; e < n; ++e) act[e] = (e * 5) % A;
    auto run = [&](fh::ops::Device& ops) {
        auto s = ops.from_host<float>(st), p = ops.from_host<float>(pr), x = ops.from_host<float>(nx);
        auto a = ops.from_host<int>(act);
        auto in = ops.alloc<float>(n * (D + A)), err = ops.alloc<float>(n), dp = ops.alloc<float>(n * P);
        fh::ops::run(ops, fh::ops::CuriosityInput{in.view(), s.cview(), a.cview(), A});
        fh::ops::run(ops, fh::ops::CuriosityError{err.view(), dp.view(), p.cview(), x.cview(), D});
        return std::tuple{ops.to_host(in.cview()), ops.to_host(err.cview()), ops.to_host(dp.cview())};
    };
    const auto c = run(cpu), g = run(gpu);
    CHECK(std::get<0>(g) == std::get<0>(c));
    CHECK(std::get<1>(g) == std::get<1>(c));  // --fmad=false, same order: bit for bit
    CHECK(std::get<2>(g) == std::get<2>(c));
}
