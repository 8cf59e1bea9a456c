/// @file test_dqn_gradient.cpp
/// @brief Gradient check of the whole DQN loss in double precision: trunk (ReLU MLP), dueling
///        value/advantage layers, C51 head, C51 cross-entropy blended with the MSE loss on the
///        expected Q, plus the CQL term on the expected Q. The analytic gradient (the same per-sample functions the
///        backends run, math/dqn.h and src/device/linear_reference.hpp, instantiated with double) must match central
///        finite differences.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <utility>
#include <vector>

#include "math/dqn.h"
#include "device/linear_reference.hpp"

using fh::core::Activation;
using fh::dqn::HeadParams;

namespace {

// A tiny network: state 4 -> hidden 6 (ReLU) -> value (Z) and advantage (A*Z).
constexpr int D = 4, H = 6, A = 3, Z = 7, B = 5;
const HeadParams kHead{A, Z, 1, -3.f, 3.f};

struct Params {  // offsets into one flat parameter vector
    static constexpr int w1 = 0, b1 = w1 + H * D, wv = b1 + H, bv = wv + Z * H, wa = bv + Z, ba = wa + A * Z * H,
                         total = ba + A * Z;
};

struct Batch {
    std::vector<double> s, probs_next, q_next_select, q_next_target, returns, discounts;
    std::vector<int> actions;
};

/// The loss alpha * mean(C51) + (1 - alpha) * mean(MSE) + cql * mean(CQL); writes dL/dparams when grad.
double loss_and_grad(const std::vector<double>& p, const Batch& x, double alpha, double cql,
                     std::vector<double>* grad) {
    using fh::ops::ref::linear_backward;
    using fh::ops::ref::linear_forward;
    std::vector<double> h(B * H), v(B * Z), adv(B * A * Z), logits(B * A * Z), probs(B * A * Z), q(B * A);
    linear_forward(h.data(), x.s.data(), &p[Params::w1], &p[Params::b1], B, D, H, Activation::relu);
    linear_forward(v.data(), h.data(), &p[Params::wv], &p[Params::bv], B, H, Z, Activation::none);
    linear_forward(adv.data(), h.data(), &p[Params::wa], &p[Params::ba], B, H, A * Z, Activation::none);
    for (int b = 0; b < B; ++b)
        fh::dqn::head_forward<double>(&v[b * Z], &adv[b * A * Z], &logits[b * A * Z], &probs[b * A * Z], &q[b * A],
                                      kHead);
    std::vector<double> d_c51(B * A * Z), d_mse(B * A * Z), d_cql(B * A * Z), td(B);
    double c51 = 0, mse = 0, cql_sum = 0;
    for (int b = 0; b < B; ++b) {
        c51 += fh::dqn::c51_sample_loss<double>(b, logits.data(), probs.data(), x.q_next_select.data(),
                                                x.probs_next.data(), x.actions.data(), x.returns.data(),
                                                x.discounts.data(), d_c51.data(), 1.0 / B, kHead);
        mse += fh::dqn::mse_sample_loss<double>(b, probs.data(), q.data(), x.q_next_select.data(),
                                                x.q_next_target.data(), x.actions.data(), x.returns.data(),
                                                x.discounts.data(), d_mse.data(), td.data(), 1.0 / B, kHead);
        cql_sum +=
            fh::dqn::cql_sample_loss<double>(b, probs.data(), q.data(), x.actions.data(), d_cql.data(), 1.0 / B, kHead);
    }
    const double loss = alpha * c51 / B + (1 - alpha) * mse / B + cql * cql_sum / B;
    if (grad) {
        grad->assign(Params::total, 0.0);
        std::vector<double> d_logits(B * A * Z), dv(B * Z), da(B * A * Z), dh_v(B * H), dh_a(B * H);
        for (int i = 0; i < B * A * Z; ++i) d_logits[i] = alpha * d_c51[i] + (1 - alpha) * d_mse[i] + cql * d_cql[i];
        for (int b = 0; b < B; ++b)
            fh::dqn::head_backward<double>(&d_logits[b * A * Z], &dv[b * Z], &da[b * A * Z], kHead);
        auto& g = *grad;
        linear_backward(dh_v.data(), &g[Params::wv], &g[Params::bv], dv.data(), v.data(), h.data(), &p[Params::wv], B,
                        H, Z, Activation::none, false);
        linear_backward(dh_a.data(), &g[Params::wa], &g[Params::ba], da.data(), adv.data(), h.data(), &p[Params::wa], B,
                        H, A * Z, Activation::none, false);
        for (int i = 0; i < B * H; ++i) dh_v[i] += dh_a[i];
        linear_backward<double>(nullptr, &g[Params::w1], &g[Params::b1], dh_v.data(), h.data(), x.s.data(),
                                &p[Params::w1], B, D, H, Activation::relu, false);
    }
    return loss;
}

}  // namespace

TEST_CASE("DQN loss (C51, MSE, CQL) gradient matches central finite differences (double)",
          "[trainers][dqn][gradcheck]") {
    std::mt19937_64 rng(2024);
    std::normal_distribution<double> n01(0.0, 1.0);
    std::uniform_real_distribution<double> u01(0.0, 1.0);
    std::vector<double> p(Params::total);
    for (auto& w : p) w = 0.5 * n01(rng);
    Batch x;
    for (int i = 0; i < B * D; ++i) x.s.push_back(n01(rng));
    for (int b = 0; b < B; ++b) {  // valid next-state distributions and Q values
        for (int a = 0; a < A; ++a) {
            double sum = 0;
            std::vector<double> row(Z);
            for (auto& r : row) sum += r = u01(rng) + 0.05;
            for (auto r : row) x.probs_next.push_back(r / sum);
            x.q_next_select.push_back(n01(rng));
            x.q_next_target.push_back(n01(rng));
        }
        x.actions.push_back(b % A);
        x.returns.push_back(2.0 * n01(rng));  // some beyond the support after discounting
        x.discounts.push_back(b == 0 ? 0.0 : 0.9);
    }
    for (auto [alpha, cql] : {std::pair{0.0, 0.0}, {0.3, 0.0}, {1.0, 0.0}, {0.3, 0.5}, {1.0, 2.0}}) {
        INFO("alpha " << alpha << " cql " << cql);
        std::vector<double> grad;
        loss_and_grad(p, x, alpha, cql, &grad);
        double max_rel = 0;
        for (int i = 0; i < Params::total; ++i) {
            const double eps = 1e-6;
            auto plus = p, minus = p;
            plus[i] += eps;
            minus[i] -= eps;
            const double numeric =
                (loss_and_grad(plus, x, alpha, cql, nullptr) - loss_and_grad(minus, x, alpha, cql, nullptr)) /
                (2 * eps);
            const double err = std::abs(numeric - grad[i]);
            // Below 1e-4 the central difference's rounding dominates: ~1e-9 absolute (the loss's
            // ulps, ~1e-15, over 2 eps).
            max_rel = std::max(max_rel, err / std::max(1e-4, std::abs(numeric) + std::abs(grad[i])));
            INFO("parameter " << i << " analytic " << grad[i] << " numeric " << numeric);
            REQUIRE(err <= 1e-7 + 1e-5 * std::abs(numeric));
        }
        CHECK(max_rel < 1e-5);
    }
}
