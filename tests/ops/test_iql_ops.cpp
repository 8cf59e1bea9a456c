/// @file test_iql_ops.cpp
/// @brief The IQL ops: the expectile value loss against hand-computed numbers and against its
///        minimiser (the mean for tau = 0.5, the expectile for tau = 0.9), every gradient against
///        central finite differences of an independent double-precision re-implementation, the
///        AWR weights (cap, extreme advantages), the behaviour traders by hand; [gpu] every IQL
///        kernel against its CPU twin.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "math/rng.h"
#include "math/iql.h"
#include "device/cpu_device.hpp"
#include "support/compare.hpp"
#include "support/error_model.hpp"
#include "support/iql_model.hpp"
#include "support/gpu.hpp"
#include "abi/iql_awr.h"
#include "abi/iql_behaviour.h"

using fh::iql::BehaviourParams;
using fh::test::random_floats;

namespace {

std::vector<int> random_actions(std::size_t n, int num_actions, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int> dist(0, num_actions - 1);
    std::vector<int> a(n);
    for (auto& x : a) x = dist(rng);
    return a;
}

struct ValueOut {
    std::vector<float> loss, d_v;
};
ValueOut run_value(fh::ops::Device& ops, const std::vector<float>& v, const std::vector<float>& q1,
                   const std::vector<float>& q2, const std::vector<int>& actions, float tau) {
    auto bv = ops.from_host<float>(v), b1 = ops.from_host<float>(q1), b2 = ops.from_host<float>(q2);
    auto ba = ops.from_host<int>(actions);
    auto loss = ops.alloc<float>(v.size()), d_v = ops.alloc<float>(v.size());
    fh::ops::run(ops,
                 fh::ops::IqlValueLoss{loss.view(), d_v.view(), bv.cview(), b1.cview(), b2.cview(), ba.cview(), tau});
    return {ops.to_host(loss.cview()), ops.to_host(d_v.cview())};
}

struct QOut {
    std::vector<float> loss, d_q1, d_q2;
};
QOut run_q(fh::ops::Device& ops, const std::vector<float>& q1, const std::vector<float>& q2,
           const std::vector<int>& actions, const std::vector<float>& rewards, const std::vector<float>& discounts,
           const std::vector<float>& v_next) {
    auto b1 = ops.from_host<float>(q1), b2 = ops.from_host<float>(q2);
    auto ba = ops.from_host<int>(actions);
    auto br = ops.from_host<float>(rewards), bd = ops.from_host<float>(discounts), bn = ops.from_host<float>(v_next);
    auto loss = ops.alloc<float>(actions.size()), d1 = ops.alloc<float>(q1.size()), d2 = ops.alloc<float>(q1.size());
    fh::ops::run(ops, fh::ops::IqlQLoss{loss.view(), d1.view(), d2.view(), b1.cview(), b2.cview(), ba.cview(),
                                        br.cview(), bd.cview(), bn.cview()});
    return {ops.to_host(loss.cview()), ops.to_host(d1.cview()), ops.to_host(d2.cview())};
}

struct AwrOut {
    std::vector<float> loss, weights, d_logits;
};
AwrOut run_awr(fh::ops::Device& ops, const std::vector<float>& logits, const std::vector<float>& q1,
               const std::vector<float>& q2, const std::vector<float>& v, const std::vector<int>& actions, float beta,
               float max_weight) {
    auto bl = ops.from_host<float>(logits), b1 = ops.from_host<float>(q1), b2 = ops.from_host<float>(q2);
    auto bv = ops.from_host<float>(v);
    auto ba = ops.from_host<int>(actions);
    auto loss = ops.alloc<float>(v.size()), w = ops.alloc<float>(v.size()), d = ops.alloc<float>(logits.size());
    fh::ops::run(ops, fh::ops::AwrPolicyLoss{loss.view(), w.view(), d.view(), bl.cview(), b1.cview(), b2.cview(),
                                             bv.cview(), ba.cview(), beta, max_weight});
    return {ops.to_host(loss.cview()), ops.to_host(w.cview()), ops.to_host(d.cview())};
}

std::vector<int> run_behaviour(fh::ops::Device& ops, const std::vector<float>& states, const BehaviourParams& p,
                               std::uint64_t step) {
    auto bs = ops.from_host<float>(states);
    auto ba = ops.alloc<int>(states.size() / static_cast<std::size_t>(p.state_dim));
    fh::ops::run(ops, fh::ops::BehaviourActions{ba.view(), bs.cview(), p, step});
    return ops.to_host(ba.cview());
}

// ---- independent double-precision re-implementations (the finite-difference oracles) ---------

double twin_min_d(const std::vector<double>& q1, const std::vector<double>& q2, int A, int b, int a) {
    return std::min(q1[b * A + a], q2[b * A + a]);
}

/// mean_i |tau - 1(u_i < 0)| u_i^2, u_i = min(q1, q2)[a_i] - v_i.
double value_mean_loss(const std::vector<double>& v, const std::vector<double>& q1, const std::vector<double>& q2,
                       const std::vector<int>& actions, double tau, int A) {
    const int B = static_cast<int>(v.size());
    double sum = 0;
    for (int b = 0; b < B; ++b) {
        const double u = twin_min_d(q1, q2, A, b, actions[b]) - v[b];
        sum += (u < 0 ? 1.0 - tau : tau) * u * u;
    }
    return sum / B;
}

/// mean_i (q1[a_i] - y_i)^2 + (q2[a_i] - y_i)^2, y_i = r_i + d_i v'_i.
double q_mean_loss(const std::vector<double>& q1, const std::vector<double>& q2, const std::vector<int>& actions,
                   const std::vector<double>& r, const std::vector<double>& d, const std::vector<double>& vn, int A) {
    const int B = static_cast<int>(actions.size());
    double sum = 0;
    for (int b = 0; b < B; ++b) {
        const double y = r[b] + d[b] * vn[b];
        const double e1 = q1[b * A + actions[b]] - y, e2 = q2[b * A + actions[b]] - y;
        sum += e1 * e1 + e2 * e2;
    }
    return sum / B;
}

double awr_weight_d(double adv, double beta, double max_weight) {
    return std::min(std::exp(std::min(beta * adv, 80.0)), max_weight);
}

/// mean_i -w_i log softmax(logits_i)[a_i] with the weights w_i held constant.
double awr_mean_loss(const std::vector<double>& logits, const std::vector<double>& w, const std::vector<int>& actions,
                     int A) {
    const int B = static_cast<int>(actions.size());
    double sum = 0;
    for (int b = 0; b < B; ++b) {
        double m = logits[b * A];
        for (int j = 1; j < A; ++j) m = std::max(m, logits[b * A + j]);
        double s = 0;
        for (int j = 0; j < A; ++j) s += std::exp(logits[b * A + j] - m);
        sum += -w[b] * (logits[b * A + actions[b]] - m - std::log(s));
    }
    return sum / B;
}

std::vector<double> to_double(const std::vector<float>& x) {
    return {x.begin(), x.end()};
}

/// Central differences of f with respect to every element of x (step h).
template <class F>
std::vector<double> central_differences(std::vector<double> x, F f, double h = 1e-6) {
    std::vector<double> g(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
        const double x0 = x[i];
        x[i] = x0 + h;
        const double up = f(x);
        x[i] = x0 - h;
        const double down = f(x);
        x[i] = x0;
        g[i] = (up - down) / (2 * h);
    }
    return g;
}

void require_gradient(const std::vector<float>& got, const std::vector<double>& fd) {
    REQUIRE(got.size() == fd.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
        INFO("element " << i << ": op " << got[i] << ", finite differences " << fd[i]);
        REQUIRE(static_cast<double>(got[i]) == Approx(fd[i]).margin(2e-6).epsilon(1e-4));
    }
}

/// The expectile tau of the values q by bisection on sum_i |tau - 1(q_i < e)| (q_i - e) = 0.
double expectile_by_bisection(const std::vector<double>& q, double tau) {
    double lo = *std::min_element(q.begin(), q.end()), hi = *std::max_element(q.begin(), q.end());
    for (int it = 0; it < 200; ++it) {
        const double e = 0.5 * (lo + hi);
        double f = 0;
        for (double x : q) f += (x - e < 0 ? 1.0 - tau : tau) * (x - e);
        (f > 0 ? lo : hi) = e;  // f decreases in e
    }
    return 0.5 * (lo + hi);
}

}  // namespace

TEST_CASE("IQL value loss: hand-computed losses and gradients for tau 0.5, 0.7, 0.9", "[iql]") {
    fh::ops::CpuDevice ops;
    // B = 2, A = 3. Row 0: a = 1, q = min(2.0, 1.25) = 1.25, v = 0.5, u = 0.75 >= 0 (weight tau).
    // Row 1: a = 0, q = min(-0.5, -1.0) = -1.0, v = 0.25, u = -1.25 < 0 (weight 1 - tau).
    const std::vector<float> v{0.5f, 0.25f};
    const std::vector<float> q1{1.0f, 2.0f, -1.0f, -0.5f, 3.0f, 0.75f};
    const std::vector<float> q2{1.5f, 1.25f, 0.0f, -1.0f, 2.0f, 1.0f};
    const std::vector<int> actions{1, 0};
    struct Case {
        float tau;
        float loss0, loss1, dv0, dv1;
    };
    // loss0 = tau * 0.5625, loss1 = (1 - tau) * 1.5625; d_v = -2 w u / 2 = -w u:
    // dv0 = -tau * 0.75, dv1 = (1 - tau) * 1.25.
    const Case cases[] = {
        {0.5f, 0.28125f, 0.78125f, -0.375f, 0.625f},
        {0.7f, 0.39375f, 0.46875f, -0.525f, 0.375f},
        {0.9f, 0.50625f, 0.15625f, -0.675f, 0.125f},
    };
    for (const Case& c : cases) {
        INFO("tau " << c.tau);
        const ValueOut o = run_value(ops, v, q1, q2, actions, c.tau);
        CHECK(o.loss[0] == Approx(c.loss0).epsilon(1e-6));
        CHECK(o.loss[1] == Approx(c.loss1).epsilon(1e-6));
        CHECK(o.d_v[0] == Approx(c.dv0).epsilon(1e-6));
        CHECK(o.d_v[1] == Approx(c.dv1).epsilon(1e-6));
    }
}

TEST_CASE("IQL value loss: gradient descent on one V reaches the mean (tau 0.5) and the expectile (tau 0.9)", "[iql]") {
    fh::ops::CpuDevice ops;
    const int B = 64, A = 3;
    const auto q1 = random_floats(B * A, 11, -2.f, 3.f), q2 = random_floats(B * A, 12, -2.f, 3.f);
    const auto actions = random_actions(B, A, 13);
    std::vector<double> targets(B);
    for (int b = 0; b < B; ++b) targets[b] = std::min(q1[b * A + actions[b]], q2[b * A + actions[b]]);
    double mean = 0;
    for (double t : targets) mean += t;
    mean /= B;
    auto descend = [&](float tau) {
        // A scalar V shared by every row: dL/dV = sum_i d_v[i] (d_v is already the mean's gradient).
        float V = -3.0f;
        for (int it = 0; it < 2000; ++it) {
            const ValueOut o = run_value(ops, std::vector<float>(B, V), q1, q2, actions, tau);
            double g = 0;
            for (float d : o.d_v) g += d;
            V -= static_cast<float>(0.5 * g);
        }
        return static_cast<double>(V);
    };
    const double v50 = descend(0.5f);
    CHECK(v50 == Approx(mean).margin(1e-5));
    CHECK(expectile_by_bisection(targets, 0.5) == Approx(mean).margin(1e-9));
    const double v90 = descend(0.9f);
    const double e90 = expectile_by_bisection(targets, 0.9);
    CHECK(v90 > mean + 0.1);
    CHECK(e90 > mean + 0.1);
    CHECK(v90 == Approx(e90).margin(1e-5));
}

TEST_CASE("IQL value loss gradient equals central finite differences", "[iql]") {
    fh::ops::CpuDevice ops;
    const int B = 13, A = 5;
    const auto v = random_floats(B, 21), q1 = random_floats(B * A, 22), q2 = random_floats(B * A, 23);
    const auto actions = random_actions(B, A, 24);
    for (float tau : {0.5f, 0.7f, 0.9f}) {
        INFO("tau " << tau);
        const ValueOut o = run_value(ops, v, q1, q2, actions, tau);
        const auto q1d = to_double(q1), q2d = to_double(q2);
        for (int b = 0; b < B; ++b) {  // away from the kink at u = 0
            const double u = twin_min_d(q1d, q2d, A, b, actions[b]) - v[b];
            REQUIRE(std::abs(u) > 1e-3);
            CHECK(o.loss[b] == Approx((u < 0 ? 1.0 - tau : static_cast<double>(tau)) * u * u).epsilon(1e-5));
        }
        const auto fd = central_differences(
            to_double(v), [&](const std::vector<double>& x) { return value_mean_loss(x, q1d, q2d, actions, tau, A); });
        require_gradient(o.d_v, fd);
    }
}

TEST_CASE("IQL twin-Q loss: hand-computed values, gradients equal central finite differences", "[iql]") {
    fh::ops::CpuDevice ops;
    SECTION("hand-computed") {
        // Row 0: a = 1, y = 0.5 + 0.9 * 1.0 = 1.4, e1 = 2.0 - 1.4 = 0.6, e2 = 1.25 - 1.4 = -0.15.
        // Row 1 (terminal, discount 0): a = 0, y = -0.25, e1 = -0.5 + 0.25 = -0.25, e2 = -0.75.
        // B = 2: d = 2 e / 2 = e at the taken column.
        const QOut o = run_q(ops, {1.0f, 2.0f, -1.0f, -0.5f, 3.0f, 0.75f}, {1.5f, 1.25f, 0.0f, -1.0f, 2.0f, 1.0f},
                             {1, 0}, {0.5f, -0.25f}, {0.9f, 0.0f}, {1.0f, 5.0f});
        CHECK(o.loss[0] == Approx(0.3825f).epsilon(1e-6));  // 0.36 + 0.0225
        CHECK(o.loss[1] == Approx(0.625f).epsilon(1e-6));   // 0.0625 + 0.5625
        const std::vector<float> d1{0.f, 0.6f, 0.f, -0.25f, 0.f, 0.f}, d2{0.f, -0.15f, 0.f, -0.75f, 0.f, 0.f};
        for (int i = 0; i < 6; ++i) {
            INFO("element " << i);
            CHECK(o.d_q1[i] == Approx(d1[i]).margin(1e-6));
            CHECK(o.d_q2[i] == Approx(d2[i]).margin(1e-6));
        }
    }
    SECTION("finite differences on random inputs") {
        const int B = 11, A = 4;
        const auto q1 = random_floats(B * A, 31), q2 = random_floats(B * A, 32);
        const auto actions = random_actions(B, A, 33);
        const auto r = random_floats(B, 34), vn = random_floats(B, 36);
        auto d = random_floats(B, 35, 0.5f, 0.99f);
        d[2] = 0.0f;  // a terminal transition
        const QOut o = run_q(ops, q1, q2, actions, r, d, vn);
        const auto q1d = to_double(q1), q2d = to_double(q2), rd = to_double(r), dd = to_double(d), vnd = to_double(vn);
        for (int b = 0; b < B; ++b) {
            const double y = rd[b] + dd[b] * vnd[b];
            const double e1 = q1d[b * A + actions[b]] - y, e2 = q2d[b * A + actions[b]] - y;
            CHECK(o.loss[b] == Approx(e1 * e1 + e2 * e2).epsilon(1e-5).margin(1e-6));
        }
        require_gradient(o.d_q1, central_differences(q1d, [&](const std::vector<double>& x) {
                             return q_mean_loss(x, q2d, actions, rd, dd, vnd, A);
                         }));
        require_gradient(o.d_q2, central_differences(q2d, [&](const std::vector<double>& x) {
                             return q_mean_loss(q1d, x, actions, rd, dd, vnd, A);
                         }));
    }
}

TEST_CASE("AWR weights and policy loss equal a direct computation; the cap holds and extremes stay finite", "[iql]") {
    fh::ops::CpuDevice ops;
    const int B = 17, A = 6;
    const auto logits = random_floats(B * A, 41, -3.f, 3.f), q1 = random_floats(B * A, 42),
               q2 = random_floats(B * A, 43), v = random_floats(B, 44);
    const auto actions = random_actions(B, A, 45);
    SECTION("weights, losses and gradients, with the cap active on some rows") {
        const float beta = 3.0f, max_weight = 20.0f;  // capped when adv > ln(20) / 3 ~ 1.0
        auto vc = v;
        vc[0] = vc[1] = -5.0f;  // adv >= 3: capped
        vc[2] = vc[3] = 5.0f;   // adv <= -3: not capped
        const AwrOut o = run_awr(ops, logits, q1, q2, vc, actions, beta, max_weight);
        int capped = 0, uncapped = 0;
        for (int b = 0; b < B; ++b) {
            INFO("row " << b);
            const int a = actions[b];
            const double adv = std::min<double>(q1[b * A + a], q2[b * A + a]) - vc[b];
            const double w = awr_weight_d(adv, beta, max_weight);
            if (w == max_weight) {
                ++capped;
                CHECK(o.weights[b] == max_weight);  // exactly the cap
            } else {
                ++uncapped;
                CHECK(o.weights[b] == Approx(w).epsilon(1e-5));
            }
            double m = logits[b * A];
            for (int j = 1; j < A; ++j) m = std::max<double>(m, logits[b * A + j]);
            double s = 0;
            for (int j = 0; j < A; ++j) s += std::exp(logits[b * A + j] - m);
            const double lse = m + std::log(s);
            CHECK(o.loss[b] == Approx(-w * (logits[b * A + a] - lse)).epsilon(1e-5).margin(1e-6));
            for (int j = 0; j < A; ++j) {
                const double want = w * (std::exp(logits[b * A + j] - lse) - (j == a ? 1.0 : 0.0)) / B;
                CHECK(o.d_logits[b * A + j] == Approx(want).epsilon(1e-5).margin(1e-7));
            }
        }
        CHECK(capped >= 2);
        CHECK(uncapped >= 2);
    }
    SECTION("extreme advantages give finite weights, losses and gradients") {
        auto q1x = q1, q2x = q2, vx = v;
        const float big = 3e38f;
        // Row 0: adv = +inf in float (3e38 - (-3e38) overflows): the exponent is clamped.
        q1x[0 * A + actions[0]] = big;
        q2x[0 * A + actions[0]] = big;
        vx[0] = -big;
        // Row 1: adv = 1e30, beta * adv = 1e31: clamped.
        q1x[1 * A + actions[1]] = 1e30f;
        q2x[1 * A + actions[1]] = 1e30f;
        vx[1] = 0.0f;
        // Row 2: adv = -inf: weight 0.
        q1x[2 * A + actions[2]] = -big;
        q2x[2 * A + actions[2]] = -big;
        vx[2] = big;
        for (float max_weight : {100.0f, std::numeric_limits<float>::max()}) {
            INFO("max_weight " << max_weight);
            const AwrOut o = run_awr(ops, logits, q1x, q2x, vx, actions, 10.0f, max_weight);
            for (float x : o.loss) REQUIRE(std::isfinite(x));
            for (float x : o.weights) REQUIRE(std::isfinite(x));
            for (float x : o.d_logits) REQUIRE(std::isfinite(x));
            const float top = std::min(std::exp(fh::iql::kMaxAwrExponent), max_weight);
            CHECK(o.weights[0] == Approx(top).epsilon(1e-6));
            CHECK(o.weights[1] == Approx(top).epsilon(1e-6));
            CHECK(o.weights[2] == 0.0f);
            CHECK(o.loss[2] == 0.0f);
        }
    }
}

TEST_CASE("AWR policy gradient equals central finite differences (weights held constant)", "[iql]") {
    fh::ops::CpuDevice ops;
    const int B = 9, A = 7;
    const auto logits = random_floats(B * A, 51, -2.f, 2.f), q1 = random_floats(B * A, 52),
               q2 = random_floats(B * A, 53), v = random_floats(B, 54);
    const auto actions = random_actions(B, A, 55);
    const float beta = 1.5f, max_weight = 5.0f;
    const AwrOut o = run_awr(ops, logits, q1, q2, v, actions, beta, max_weight);
    std::vector<double> w(B);
    for (int b = 0; b < B; ++b)
        w[b] = awr_weight_d(std::min<double>(q1[b * A + actions[b]], q2[b * A + actions[b]]) - v[b], beta, max_weight);
    // The op's weights are float: use them so that the comparison isolates the gradient.
    for (int b = 0; b < B; ++b) CHECK(o.weights[b] == Approx(w[b]).epsilon(1e-5));
    const std::vector<double> wf = to_double(o.weights);
    require_gradient(o.d_logits, central_differences(to_double(logits), [&](const std::vector<double>& x) {
                         return awr_mean_loss(x, wf, actions, A);
                     }));
}

TEST_CASE("IQL ops: an out-of-range action gives a NaN loss and zero gradients; argument checks", "[iql]") {
    fh::ops::CpuDevice ops;
    const int B = 3, A = 4;
    const auto q1 = random_floats(B * A, 61), q2 = random_floats(B * A, 62), v = random_floats(B, 63);
    const auto logits = random_floats(B * A, 64);
    const std::vector<int> actions{1, A, -1};
    const ValueOut vo = run_value(ops, v, q1, q2, actions, 0.7f);
    CHECK(std::isfinite(vo.loss[0]));
    CHECK(std::isnan(vo.loss[1]));
    CHECK(std::isnan(vo.loss[2]));
    CHECK(vo.d_v[1] == 0.0f);
    CHECK(vo.d_v[2] == 0.0f);
    const QOut qo = run_q(ops, q1, q2, actions, v, v, v);
    CHECK(std::isnan(qo.loss[1]));
    CHECK(std::isnan(qo.loss[2]));
    for (int j = 0; j < A; ++j) {
        CHECK(qo.d_q1[A + j] == 0.0f);
        CHECK(qo.d_q2[2 * A + j] == 0.0f);
    }
    const AwrOut ao = run_awr(ops, logits, q1, q2, v, actions, 1.0f, 10.0f);
    CHECK(std::isnan(ao.loss[1]));
    CHECK(ao.weights[2] == 0.0f);
    for (int j = 0; j < A; ++j) CHECK(ao.d_logits[A + j] == 0.0f);

    auto bq = ops.from_host<float>(q1), bv = ops.from_host<float>(v);
    auto ba = ops.from_host<int>(std::vector<int>{0, 1, 2});
    auto loss = ops.alloc<float>(B), dv = ops.alloc<float>(B), w = ops.alloc<float>(B);
    auto d1 = ops.alloc<float>(B * A), d2 = ops.alloc<float>(B * A);
    // The same target network for both twins (read-only inputs may share memory).
    CHECK_NOTHROW(fh::ops::run(
        ops, fh::ops::IqlValueLoss{loss.view(), dv.view(), bv.cview(), bq.cview(), bq.cview(), ba.cview(), 0.7f}));
    CHECK_NOTHROW(fh::ops::run(ops, fh::ops::IqlQLoss{loss.view(), d1.view(), d2.view(), bq.cview(), bq.cview(),
                                                      ba.cview(), bv.cview(), bv.cview(), bv.cview()}));
    // An output aliasing an input or another output is refused.
    CHECK_THROWS_AS(fh::ops::run(ops, fh::ops::IqlValueLoss{loss.view(), dv.view(), loss.cview(), bq.cview(),
                                                            bq.cview(), ba.cview(), 0.7f}),
                    std::invalid_argument);
    CHECK_THROWS_AS(fh::ops::run(ops, fh::ops::IqlQLoss{loss.view(), d1.view(), d1.view(), bq.cview(), bq.cview(),
                                                        ba.cview(), bv.cview(), bv.cview(), bv.cview()}),
                    std::invalid_argument);
    CHECK_THROWS_AS(fh::ops::run(ops, fh::ops::AwrPolicyLoss{loss.view(), w.view(), d1.view(), d1.cview(), bq.cview(),
                                                             bq.cview(), bv.cview(), ba.cview(), 1.0f, 10.0f}),
                    std::invalid_argument);
    // Scalars and sizes.
    for (float tau : {0.0f, 1.0f, -0.5f, std::numeric_limits<float>::quiet_NaN()})
        CHECK_THROWS_AS(fh::ops::run(ops, fh::ops::IqlValueLoss{loss.view(), dv.view(), bv.cview(), bq.cview(),
                                                                bq.cview(), ba.cview(), tau}),
                        std::invalid_argument);
    CHECK_THROWS_AS(fh::ops::run(ops, fh::ops::AwrPolicyLoss{loss.view(), w.view(), d1.view(), bq.cview(), bq.cview(),
                                                             bq.cview(), bv.cview(), ba.cview(), -1.0f, 10.0f}),
                    std::invalid_argument);
    CHECK_THROWS_AS(fh::ops::run(ops, fh::ops::AwrPolicyLoss{loss.view(), w.view(), d1.view(), bq.cview(), bq.cview(),
                                                             bq.cview(), bv.cview(), ba.cview(), 1.0f, 0.0f}),
                    std::invalid_argument);
    CHECK_THROWS_AS(fh::ops::run(ops, fh::ops::IqlQLoss{loss.view(), d1.view(), d2.view(), bq.cview(), bq.cview(),
                                                        ba.cview(), bv.cview(), bv.cview(), bq.cview()}),
                    std::invalid_argument);  // v_next (B, A) instead of (B)
    CHECK_THROWS_AS(
        fh::ops::run(ops, fh::ops::IqlValueLoss{loss.view(), dv.view(), bv.cview(), bq.cview().subview(0, B * A - 1),
                                                bq.cview().subview(0, B * A - 1), ba.cview(), 0.7f}),
        std::invalid_argument);  // (B, A) not a multiple of B
    auto states = ops.alloc<float>(B * 13);
    auto acts = ops.alloc<int>(B);
    const BehaviourParams ok{3, 3, 5, 13, 0.1f, 7};
    CHECK_NOTHROW(fh::ops::run(ops, fh::ops::BehaviourActions{acts.view(), states.cview(), ok, 0}));
    BehaviourParams bad = ok;
    bad.random_fraction = 1.5f;
    CHECK_THROWS_AS(fh::ops::run(ops, fh::ops::BehaviourActions{acts.view(), states.cview(), bad, 0}),
                    std::invalid_argument);
    bad = ok;
    bad.state_dim = 12;  // states no longer (n, state_dim)
    CHECK_THROWS_AS(fh::ops::run(ops, fh::ops::BehaviourActions{acts.view(), states.cview(), bad, 0}),
                    std::invalid_argument);
    bad = ok;
    bad.market_dim = 14;
    bad.state_dim = 13;
    CHECK_THROWS_AS(fh::ops::run(ops, fh::ops::BehaviourActions{acts.view(), states.cview(), bad, 0}),
                    std::invalid_argument);
}

TEST_CASE("behaviour policy: each trader type by hand, random_fraction 0 and 1", "[iql]") {
    fh::ops::CpuDevice ops;
    const std::uint64_t seed = 20240611, step = 77;
    auto random_word = [&](int e) {  // the documented random action: below(word 1, A)
        return fh::rng::draw(seed, fh::rng::Purpose::behaviour, static_cast<std::uint32_t>(e), step);
    };
    // 12 environments, 3 of each trader; market_dim 5 (features 0 and 4 set), 8 portfolio floats
    // that the traders must ignore.
    auto states_for = [](int market_dim) {
        const int D = market_dim + 8;
        std::vector<float> s(12 * D, 7.0f);
        //                    e:  0     1     2     3     4     5     6     7     8     9    10    11
        const float f0[12] = {0.9f, 0.3f, 0.3f, 0.5f, -0.9f, -0.2f, -0.2f, -0.5f, 0.0f, 0.0f, 0.0f, 0.5f};
        const float f4[12] = {0.1f, -0.8f, -0.8f, -0.1f, 0.1f, 0.8f, 0.8f, 0.4f, 0.1f, 0.8f, 0.8f, 0.0f};
        for (int e = 0; e < 12; ++e) {
            for (int c = 0; c < market_dim; ++c) s[e * D + c] = 0.25f;
            s[e * D + 0] = f0[e];
            if (market_dim >= 5) s[e * D + 4] = f4[e];
        }
        return s;
    };
    SECTION("L = 3, U = 3, random_fraction 0") {
        const BehaviourParams p{3, 3, 5, 13, 0.0f, seed};
        const auto a = run_behaviour(ops, states_for(5), p, step);
        // Long = level 2 -> action 6, short = level 0 -> 0, flat = level 1 -> 3 (urgency 0).
        CHECK(a[1] == 6);   // momentum, ret_1 = +0.3
        CHECK(a[5] == 0);   // momentum, ret_1 = -0.2
        CHECK(a[9] == 3);   // momentum, ret_1 = 0
        CHECK(a[2] == 0);   // reversion, ret_1 = +0.3
        CHECK(a[6] == 6);   // reversion, ret_1 = -0.2
        CHECK(a[10] == 3);  // reversion, ret_1 = 0
        CHECK(a[3] == 0);   // trend, ret_16 = -0.1 (ret_1 = +0.5 ignored)
        CHECK(a[7] == 6);   // trend, ret_16 = +0.4 (ret_1 = -0.5 ignored)
        CHECK(a[11] == 3);  // trend, ret_16 = 0
        for (int e : {0, 4, 8}) CHECK(a[e] == static_cast<int>(fh::rng::below(random_word(e).v[1], 9)));
    }
    SECTION("market_dim < 5: the trend trader falls back to feature 0") {
        const BehaviourParams p{3, 3, 3, 11, 0.0f, seed};
        const auto a = run_behaviour(ops, states_for(3), p, step);
        CHECK(a[3] == 6);   // ret_1 = +0.5
        CHECK(a[7] == 0);   // ret_1 = -0.5
        CHECK(a[11] == 6);  // ret_1 = +0.5
        CHECK(a[1] == 6);   // momentum unchanged
        CHECK(a[2] == 0);   // reversion unchanged
    }
    SECTION("L = 5, U = 2: the extreme levels and the middle one") {
        const BehaviourParams p{5, 2, 5, 13, 0.0f, seed};
        const auto a = run_behaviour(ops, states_for(5), p, step);
        CHECK(a[1] == 8);  // level 4 * 2
        CHECK(a[5] == 0);
        CHECK(a[9] == 4);  // level 2 * 2
        CHECK(a[6] == 8);
        CHECK(a[3] == 0);
        for (int e : {0, 4, 8}) CHECK(a[e] == static_cast<int>(fh::rng::below(random_word(e).v[1], 10)));
    }
    SECTION("random_fraction 1: every trader acts at random") {
        const BehaviourParams p{3, 3, 5, 13, 1.0f, seed};
        const auto a = run_behaviour(ops, states_for(5), p, step);
        for (int e = 0; e < 12; ++e) {
            INFO("env " << e);
            CHECK(a[e] == static_cast<int>(fh::rng::below(random_word(e).v[1], 9)));
        }
    }
    SECTION("random_fraction 0.25: the coin is word 0 of the draw, about a quarter of rule actions are random") {
        const int n = 4000, D = 13;
        const BehaviourParams p{3, 3, 5, D, 0.25f, seed};
        auto s = random_floats(n * D, 71);
        const auto a = run_behaviour(ops, s, p, step);
        int rule = 0, coin = 0;
        for (int e = 0; e < n; ++e) {
            const auto r = random_word(e);
            const int random = static_cast<int>(fh::rng::below(r.v[1], 9));
            if (e % 4 == 0) {
                REQUIRE(a[e] == random);
                continue;
            }
            ++rule;
            const float x = s[e * D + (e % 4 == 3 ? 4 : 0)];
            int sign = (x > 0) - (x < 0);
            if (e % 4 == 2) sign = -sign;
            const int want_rule = (sign > 0 ? 2 : sign < 0 ? 0 : 1) * 3;
            const bool flip = fh::rng::unit_float(r.v[0]) < 0.25f;
            coin += flip;
            REQUIRE(a[e] == (flip ? random : want_rule));
        }
        CHECK(coin > rule / 5);  // ~ 25 %
        CHECK(coin < rule * 3 / 10);
    }
    SECTION("a new step draws anew, the same step repeats") {
        const BehaviourParams p{3, 3, 5, 13, 0.0f, seed};
        const auto s = random_floats(400 * 13, 72);
        CHECK(run_behaviour(ops, s, p, 5) == run_behaviour(ops, s, p, 5));
        CHECK(run_behaviour(ops, s, p, 5) != run_behaviour(ops, s, p, 6));
    }
}

TEST_CASE("IQL error models: the CPU twins are within half of q_model's and awr_model's bounds of the double math",
          "[iql]") {
    // The [gpu] test's models cover two float sides; one side against the exact losses (the same
    // formulas in double) takes at most half.
    fh::ops::CpuDevice cpu;
    const int A = 9, B = 1000;
    const auto v = random_floats(B, 1), vn = random_floats(B, 2), q1 = random_floats(B * A, 3),
               q2 = random_floats(B * A, 4), logits = random_floats(B * A, 5, -8.f, 8.f), rewards = random_floats(B, 6);
    auto discounts = random_floats(B, 7, 0.f, 0.99f);
    const auto actions = random_actions(B, A, 8);
    const QOut q = run_q(cpu, q1, q2, actions, rewards, discounts, vn);
    std::vector<double> loss(B), d1(B * A, 0.0), d2(B * A, 0.0);
    for (int b = 0; b < B; ++b) {
        const int a = actions[b];
        const double y = rewards[b] + static_cast<double>(discounts[b]) * vn[b];
        const double e1 = q1[b * A + a] - y, e2 = q2[b * A + a] - y;
        loss[b] = e1 * e1 + e2 * e2;
        d1[b * A + a] = 2 * e1 / B;
        d2[b * A + a] = 2 * e2 / B;
    }
    const auto mq = fh::test::q_model(q1, q2, actions, rewards, discounts, vn, A);
    FH_REQUIRE_WITHIN(q.loss, loss, fh::test::times(mq.loss, 0.5));
    FH_REQUIRE_WITHIN(q.d_q1, d1, fh::test::times(mq.d_q1, 0.5));
    FH_REQUIRE_WITHIN(q.d_q2, d2, fh::test::times(mq.d_q2, 0.5));
    for (float beta : {0.5f, 3.0f}) {
        INFO("beta " << beta);
        const AwrOut w = run_awr(cpu, logits, q1, q2, v, actions, beta, 20.0f);
        std::vector<double> wl(B), ww(B), wd(B * A);
        for (int b = 0; b < B; ++b) {
            const int a = actions[b];
            const float adv = std::min(q1[b * A + a], q2[b * A + a]) - v[b];
            const double weight = std::min(std::exp(static_cast<double>(beta * adv)), 20.0);
            const auto s = fh::test::log_sum_exp_bound(logits.data() + b * A, A);
            ww[b] = weight;
            wl[b] = -weight * (logits[b * A + a] - s.lse);
            for (int j = 0; j < A; ++j)
                wd[b * A + j] = weight * (std::exp(logits[b * A + j] - s.lse) - (j == a ? 1.0 : 0.0)) / B;
        }
        const auto ma = fh::test::awr_model(logits, q1, q2, v, actions, beta, 20.0f, A);
        FH_REQUIRE_WITHIN(w.weights, ww, fh::test::times(ma.weights, 0.5));
        FH_REQUIRE_WITHIN(w.loss, wl, fh::test::times(ma.loss, 0.5));
        FH_REQUIRE_WITHIN(w.d_logits, wd, fh::test::times(ma.d_logits, 0.5));
    }
}

TEST_CASE("the IQL kernels equal their CPU twins", "[gpu][iql]") {
    fh::ops::CpuDevice cpu;
    auto& gpu = fh::test::gpu_ops();
    const int A = 9;
    for (int B : {1, 7, 129, 1000}) {
        INFO("B " << B);
        const auto v = random_floats(B, 100 + B), vn = random_floats(B, 101 + B);
        const auto q1 = random_floats(B * A, 102 + B), q2 = random_floats(B * A, 103 + B);
        const auto tq1 = random_floats(B * A, 104 + B), tq2 = random_floats(B * A, 105 + B);
        const auto logits = random_floats(B * A, 106 + B, -4.f, 4.f);
        const auto rewards = random_floats(B, 107 + B);
        auto discounts = random_floats(B, 108 + B, 0.f, 0.99f);
        discounts[0] = 0.0f;
        auto actions = random_actions(B, A, 109 + B);
        if (B >= 7) actions[3] = A;  // an invalid action: NaN loss, zero gradients on both
        for (float tau : {0.5f, 0.9f}) {
            const ValueOut c = run_value(cpu, v, tq1, tq2, actions, tau), g = run_value(gpu, v, tq1, tq2, actions, tau);
            // Exact: a subtraction and products, no sum for the device to fuse (iql::value_row);
            // the invalid row's loss is NaN on both sides.
            FH_REQUIRE_CLOSE(g.loss, c.loss, 0, 0, fh::test::Nan::both_match);
            FH_REQUIRE_CLOSE(g.d_v, c.d_v, 0, 0);
        }
        {
            const QOut c = run_q(cpu, q1, q2, actions, rewards, discounts, vn);
            const QOut g = run_q(gpu, q1, q2, actions, rewards, discounts, vn);
            const auto m = fh::test::q_model(q1, q2, actions, rewards, discounts, vn, A);
            FH_REQUIRE_WITHIN(g.loss, c.loss, m.loss, fh::test::Nan::both_match);
            FH_REQUIRE_WITHIN(g.d_q1, c.d_q1, m.d_q1);
            FH_REQUIRE_WITHIN(g.d_q2, c.d_q2, m.d_q2);
        }
        for (float beta : {0.5f, 3.0f}) {
            const AwrOut c = run_awr(cpu, logits, tq1, tq2, v, actions, beta, 20.0f);
            const AwrOut g = run_awr(gpu, logits, tq1, tq2, v, actions, beta, 20.0f);
            // Device expf/logf differ from glibc's in the last bits (fh::test::awr_model): weights reach 20,
            // and pi - 1 or log pi nearly cancel, so the bounds follow p and w, not the result.
            const auto m = fh::test::awr_model(logits, tq1, tq2, v, actions, beta, 20.0f, A);
            FH_REQUIRE_WITHIN(g.weights, c.weights, m.weights);
            FH_REQUIRE_WITHIN(g.loss, c.loss, m.loss, fh::test::Nan::both_match);
            FH_REQUIRE_WITHIN(g.d_logits, c.d_logits, m.d_logits);
        }
    }
    // The behaviour policy: bit for bit, odd sizes, both market layouts, several steps.
    for (const BehaviourParams& p : {BehaviourParams{3, 3, 42, 50, 0.3f, 99}, BehaviourParams{5, 2, 3, 11, 0.0f, 7},
                                     BehaviourParams{3, 1, 5, 13, 1.0f, 1}}) {
        for (int n : {1, 13, 1037}) {
            auto states = random_floats(static_cast<std::size_t>(n) * p.state_dim, 110 + n);
            for (int e = 0; e < n; e += 5) states[static_cast<std::size_t>(e) * p.state_dim] = 0.0f;  // flat signals
            for (std::uint64_t step : {0ull, 1ull, 123456789012ull}) {
                INFO("n " << n << " step " << step << " L " << p.position_levels);
                CHECK(run_behaviour(gpu, states, p, step) == run_behaviour(cpu, states, p, step));
            }
        }
    }
}
