/// @file test_reference_grad.cpp
/// @brief The templated linear-layer reference (src/device/linear_reference.hpp) in double against central
///        finite differences on a tiny MLP (5 -> 7 -> 3, loss = sum of squared outputs), and the
///        float CPU ops against the same reference.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <cstdint>
#include <random>
#include <vector>

#include "device/linear_reference.hpp"
#include "device/cpu_device.hpp"

using fh::core::Activation;
namespace ref = fh::ops::ref;

namespace {

template <class T>
std::vector<T> random_vec(std::size_t n, std::uint64_t seed, double lo, double hi) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> d(lo, hi);
    std::vector<T> v(n);
    for (auto& x : v) x = static_cast<T>(d(rng));
    return v;
}

/// A two-layer MLP in double: X (B, 5) -> act1 -> (B, 7) -> act2 -> (B, 3).
struct TinyMlp {
    static constexpr int B = 4, IN = 5, H = 7, OUT = 3;
    Activation act1, act2;
    std::vector<double> X, W1, b1, W2, b2;

    TinyMlp(Activation a1, Activation a2, std::uint64_t seed)
        : act1(a1),
          act2(a2),
          X(random_vec<double>(B * IN, seed, -1, 1)),
          W1(random_vec<double>(H * IN, seed + 1, -0.8, 0.8)),
          b1(random_vec<double>(H, seed + 2, -0.3, 0.3)),
          W2(random_vec<double>(OUT * H, seed + 3, -0.8, 0.8)),
          b2(random_vec<double>(OUT, seed + 4, -0.3, 0.3)) {}

    /// Forward; returns L = sum of squared outputs; fills the activations.
    double loss(std::vector<double>* Y1 = nullptr, std::vector<double>* Y2 = nullptr) const {
        std::vector<double> y1(B * H), y2(B * OUT);
        ref::linear_forward(y1.data(), X.data(), W1.data(), b1.data(), B, IN, H, act1);
        ref::linear_forward(y2.data(), y1.data(), W2.data(), b2.data(), B, H, OUT, act2);
        double L = 0;
        for (double y : y2) L += y * y;
        if (Y1) *Y1 = y1;
        if (Y2) *Y2 = y2;
        return L;
    }

    struct Grads {
        std::vector<double> X, W1, b1, W2, b2;
    };
    Grads analytic() const {
        std::vector<double> y1, y2;
        loss(&y1, &y2);
        Grads g{std::vector<double>(B * IN), std::vector<double>(H * IN), std::vector<double>(H),
                std::vector<double>(OUT * H), std::vector<double>(OUT)};
        std::vector<double> dy2(y2.size()), dy1(y1.size());
        for (std::size_t i = 0; i < y2.size(); ++i) dy2[i] = 2 * y2[i];  // dL/dY2
        ref::linear_backward(dy1.data(), g.W2.data(), g.b2.data(), dy2.data(), y2.data(), y1.data(), W2.data(), B, H,
                             OUT, act2, false);
        ref::linear_backward(g.X.data(), g.W1.data(), g.b1.data(), dy1.data(), y1.data(), X.data(), W1.data(), B, IN, H,
                             act1, false);
        return g;
    }
};

/// Central differences of the loss with respect to every element of `param`.
void check_against_fd(TinyMlp& net, std::vector<double>& param, const std::vector<double>& grad, const char* name) {
    const double h = 1e-6;
    for (std::size_t i = 0; i < param.size(); ++i) {
        const double saved = param[i];
        param[i] = saved + h;
        const double up = net.loss();
        param[i] = saved - h;
        const double down = net.loss();
        param[i] = saved;
        const double numeric = (up - down) / (2 * h);
        INFO(name << "[" << i << "]: analytic " << grad[i] << " numeric " << numeric);
        // Error model of central differences in double: the truncation, h^2 / 6 times the third
        // derivative (~1e-12, inside the relative 1e-6), and each loss's rounding, up to 100 ulp
        // of |loss| (a sum of B x OUT squares), divided by 2h.
        const double rounding =
            100 * std::numeric_limits<double>::epsilon() * (std::abs(up) + std::abs(down)) / (2 * h);
        REQUIRE(std::abs(grad[i] - numeric) <= rounding + 1e-6 * std::abs(numeric));
    }
}

}  // namespace

TEST_CASE("linear reference gradients match central finite differences (double)", "[nn]") {
    const std::pair<Activation, Activation> cases[] = {{Activation::relu, Activation::none},
                                                       {Activation::tanh, Activation::none},
                                                       {Activation::relu, Activation::tanh},
                                                       {Activation::tanh, Activation::relu},
                                                       {Activation::none, Activation::none}};
    std::uint64_t seed = 100;
    for (auto [a1, a2] : cases) {
        INFO("activations " << static_cast<int>(a1) << ", " << static_cast<int>(a2));
        TinyMlp net(a1, a2, seed += 10);
        const auto g = net.analytic();
        check_against_fd(net, net.W1, g.W1, "W1");
        check_against_fd(net, net.b1, g.b1, "b1");
        check_against_fd(net, net.W2, g.W2, "W2");
        check_against_fd(net, net.b2, g.b2, "b2");
        check_against_fd(net, net.X, g.X, "X");
    }
}

TEST_CASE("linear reference: accumulate adds, null bias and null dX are skipped", "[nn]") {
    const int B = 3, IN = 4, OUT = 2;
    const auto X = random_vec<double>(B * IN, 1, -1, 1), W = random_vec<double>(OUT * IN, 2, -1, 1);
    const auto b = random_vec<double>(OUT, 3, -1, 1);
    std::vector<double> Y(B * OUT), Ynb(B * OUT);
    ref::linear_forward(Y.data(), X.data(), W.data(), b.data(), B, IN, OUT, Activation::none);
    ref::linear_forward(Ynb.data(), X.data(), W.data(), static_cast<const double*>(nullptr), B, IN, OUT,
                        Activation::none);
    for (int r = 0; r < B; ++r)
        for (int o = 0; o < OUT; ++o) {
            double z = 0;
            for (int k = 0; k < IN; ++k) z += X[r * IN + k] * W[o * IN + k];
            REQUIRE(Ynb[r * OUT + o] == Approx(z).margin(1e-15));
            REQUIRE(Y[r * OUT + o] == Approx(z + b[o]).margin(1e-15));
        }
    const auto dY0 = random_vec<double>(B * OUT, 4, -1, 1);
    std::vector<double> dW(OUT * IN), db(OUT), dW2(OUT * IN), db2(OUT), dX(B * IN);
    auto dY = dY0;
    ref::linear_backward(dX.data(), dW.data(), db.data(), dY.data(), Y.data(), X.data(), W.data(), B, IN, OUT,
                         Activation::none, false);
    dW2 = dW;
    db2 = db;
    dY = dY0;
    ref::linear_backward(static_cast<double*>(nullptr), dW2.data(), db2.data(), dY.data(), Y.data(), X.data(), W.data(),
                         B, IN, OUT, Activation::none, true);
    for (std::size_t i = 0; i < dW.size(); ++i) REQUIRE(dW2[i] == Approx(2 * dW[i]).margin(1e-15));
    for (std::size_t i = 0; i < db.size(); ++i) REQUIRE(db2[i] == Approx(2 * db[i]).margin(1e-15));
}

TEST_CASE("CPU linear ops are the float reference and close to double", "[nn]") {
    fh::ops::CpuDevice ops;
    for (Activation act : {Activation::none, Activation::relu, Activation::tanh}) {
        const int B = 9, IN = 13, OUT = 6;
        INFO("activation " << static_cast<int>(act));
        const auto Xd = random_vec<double>(B * IN, 7, -1, 1), Wd = random_vec<double>(OUT * IN, 8, -0.5, 0.5);
        const auto bd = random_vec<double>(OUT, 9, -0.5, 0.5), dYd = random_vec<double>(B * OUT, 10, -1, 1);
        const std::vector<float> Xf(Xd.begin(), Xd.end()), Wf(Wd.begin(), Wd.end()), bf(bd.begin(), bd.end()),
            dYf(dYd.begin(), dYd.end());

        auto X = ops.from_host<float>(Xf), W = ops.from_host<float>(Wf), b = ops.from_host<float>(bf);
        auto Y = ops.alloc<float>(B * OUT), dY = ops.from_host<float>(dYf);
        auto dX = ops.alloc<float>(B * IN), dW = ops.alloc<float>(OUT * IN), db = ops.alloc<float>(OUT);
        ops.linear_forward(Y.view(), X.cview(), W.cview(), b.cview(), B, IN, OUT, act);
        ops.linear_backward(dX.view(), dW.view(), db.view(), dY.view(), Y.cview(), X.cview(), W.cview(), B, IN, OUT,
                            act, false);

        // Bit-identical to the float reference.
        std::vector<float> Yr(B * OUT), dYr = dYf, dXr(B * IN), dWr(OUT * IN), dbr(OUT);
        ref::linear_forward(Yr.data(), Xf.data(), Wf.data(), bf.data(), B, IN, OUT, act);
        ref::linear_backward(dXr.data(), dWr.data(), dbr.data(), dYr.data(), Yr.data(), Xf.data(), Wf.data(), B, IN,
                             OUT, act, false);
        CHECK(ops.to_host(Y.cview()) == Yr);
        CHECK(ops.to_host(dY.cview()) == dYr);
        CHECK(ops.to_host(dX.cview()) == dXr);
        CHECK(ops.to_host(dW.cview()) == dWr);
        CHECK(ops.to_host(db.cview()) == dbr);

        // Close to double.
        std::vector<double> Yd(B * OUT), dYdd = dYd, dXd(B * IN), dWd(OUT * IN), dbd(OUT);
        ref::linear_forward(Yd.data(), Xd.data(), Wd.data(), bd.data(), B, IN, OUT, act);
        ref::linear_backward(dXd.data(), dWd.data(), dbd.data(), dYdd.data(), Yd.data(), Xd.data(), Wd.data(), B, IN,
                             OUT, act, false);
        auto close = [](const std::vector<float>& f, const std::vector<double>& d) {
            for (std::size_t i = 0; i < f.size(); ++i)
                if (std::abs(f[i] - d[i]) > 1e-5 + 1e-5 * std::abs(d[i])) return false;
            return true;
        };
        CHECK(close(Yr, Yd));
        CHECK(close(dXr, dXd));
        CHECK(close(dWr, dWd));
        CHECK(close(dbr, dbd));
    }
}
