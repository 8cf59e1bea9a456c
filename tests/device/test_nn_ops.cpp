/// @file test_nn_ops.cpp
/// @brief The network ops on the CPU backend: ops::AdamStep against a hand-computed two-step
///        case, clipping, the gate, ops::GlobalNorm against a direct sum, the linear layers'
///        backward parts, argument and aliasing checks.
///        (Linear layers: tests/nn/test_reference_grad.cpp; GPU vs CPU: test_nn_ops_gpu.cpp.)
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "device/cpu_device.hpp"
#include "support/adam_target.hpp"
#include "support/compare.hpp"
#include "abi/core_optim.h"

using fh::ops::Activation;
using fh::ops::AdamParams;
using fh::ops::CpuDevice;
using fh::ops::Device;
using fh::ops::View;
using fh::test::random_floats;

TEST_CASE("Adam with a soft target equals Adam, then scale and saxpy on the target, bit for bit", "[nn]") {
    CpuDevice ops;
    for (int gate : {0, 1}) {
        INFO("gate " << gate);
        const auto fused = fh::test::adam_with_target(ops, 1000, gate, true);
        const auto apart = fh::test::adam_with_target(ops, 1000, gate, false);
        CHECK(fused.params == apart.params);
        CHECK(fused.m == apart.m);
        CHECK(fused.v == apart.v);
        CHECK(fused.target == apart.target);
        CHECK(fused.target != random_floats(1000, 15));  // it moved, also when the gate skipped Adam
        CHECK((gate == 0) == (fused.params == random_floats(1000, 11)));
    }
    // The target must be the parameters' size and overlap nothing; tau in (0, 1].
    auto a = ops.alloc<float>(64);
    auto step = ops.from_host<long long>(std::vector<long long>{1});
    AdamParams hp;
    const auto v = a.view();
    const auto at = fh::ops::counter_value(step.cview());
    CHECK_NOTHROW(fh::ops::run(ops, fh::ops::AdamStep{v.subview(0, 8),
                                                      v.subview(8, 8),
                                                      v.subview(16, 8),
                                                      v.subview(24, 8),
                                                      {},
                                                      {},
                                                      at,
                                                      hp,
                                                      {},
                                                      fh::ops::SoftTarget::of(v.subview(32, 8), 0.1)}));
    CHECK_THROWS_WITH(fh::ops::run(ops, fh::ops::AdamStep{v.subview(0, 8),
                                                          v.subview(8, 8),
                                                          v.subview(16, 8),
                                                          v.subview(24, 8),
                                                          {},
                                                          {},
                                                          at,
                                                          hp,
                                                          {},
                                                          fh::ops::SoftTarget::of(v.subview(32, 7), 0.1)}),
                      Catch::Contains("target"));
    CHECK_THROWS(
        fh::ops::run(ops, fh::ops::AdamStep{v.subview(0, 8),
                                            v.subview(8, 8),
                                            v.subview(16, 8),
                                            v.subview(24, 8),
                                            {},
                                            {},
                                            at,
                                            hp,
                                            {},
                                            fh::ops::SoftTarget::of(v.subview(4, 8), 0.1)}));  // overlaps params
    CHECK_THROWS_WITH(fh::ops::run(ops, fh::ops::AdamStep{v.subview(0, 8),
                                                          v.subview(8, 8),
                                                          v.subview(16, 8),
                                                          v.subview(24, 8),
                                                          {},
                                                          {},
                                                          at,
                                                          hp,
                                                          {},
                                                          fh::ops::SoftTarget::of(v.subview(32, 8), 0.0)}),
                      Catch::Contains("tau"));
}

TEST_CASE("linear_backward's four parts issued one by one equal the whole backward (CPU, exact)", "[nn]") {
    using fh::ops::BackwardPart;
    CpuDevice ops;
    const int batch = 9, in = 5, out = 7;
    const auto X = random_floats(batch * in, 1), W = random_floats(out * in, 2), Y = random_floats(batch * out, 3);
    const auto dY0 = random_floats(batch * out, 4), dW0 = random_floats(out * in, 5), db0 = random_floats(out, 6);
    for (Activation act : {Activation::none, Activation::relu, Activation::tanh})
        for (bool accumulate : {false, true}) {
            INFO("act " << static_cast<int>(act) << " accumulate " << accumulate);
            std::vector<float> got[2][4];  // dY, dW, db, dX
            for (int split = 0; split < 2; ++split) {
                auto x = ops.from_host<float>(X), w = ops.from_host<float>(W), y = ops.from_host<float>(Y);
                auto dy = ops.from_host<float>(dY0), dw = ops.from_host<float>(dW0), db = ops.from_host<float>(db0);
                auto dx = ops.alloc<float>(batch * in);
                for (BackwardPart part : split ? std::vector<BackwardPart>{BackwardPart::activation, BackwardPart::bias,
                                                                           BackwardPart::weights, BackwardPart::input}
                                               : std::vector<BackwardPart>{BackwardPart::all})
                    ops.linear_backward(dx.view(), dw.view(), db.view(), dy.view(), y.cview(), x.cview(), w.cview(),
                                        batch, in, out, act, accumulate, part);
                got[split][0] = ops.to_host(dy.cview());
                got[split][1] = ops.to_host(dw.cview());
                got[split][2] = ops.to_host(db.cview());
                got[split][3] = ops.to_host(dx.cview());
            }
            for (int k = 0; k < 4; ++k) CHECK(got[1][k] == got[0][k]);
            CHECK(got[0][2] != db0);
        }
}

TEST_CASE("Adam: two steps by hand", "[nn]") {
    CpuDevice ops;
    auto p = ops.from_host<float>(std::vector<float>{1.f, -2.f});
    auto m = ops.from_host<float>(std::vector<float>{0.f, 0.f});
    auto v = ops.from_host<float>(std::vector<float>{0.f, 0.f});
    auto g = ops.from_host<float>(std::vector<float>{0.5f, -1.f});
    AdamParams hp;
    hp.lr = 0.1f;
    hp.step = 1;
    fh::ops::run(ops, fh::ops::AdamStep{p.view(), m.view(), v.view(), g.cview(), {}, {}, hp.step, hp});
    // Step 1: mhat = g, vhat = g^2, so p -= lr * sign(g) (up to eps).
    auto ph = ops.to_host(p.cview());
    CHECK(ph[0] == Approx(0.9).epsilon(1e-6));
    CHECK(ph[1] == Approx(-1.9).epsilon(1e-6));
    auto mh = ops.to_host(m.cview()), vh = ops.to_host(v.cview());
    CHECK(mh[0] == Approx(0.05).epsilon(1e-6));
    CHECK(mh[1] == Approx(-0.1).epsilon(1e-6));
    // 1 - beta2 is 1 - 0.999f = 0.00099998713 in float: 1.3e-5 relative off the decimal value.
    CHECK(vh[0] == Approx(0.00025).epsilon(5e-5));
    CHECK(vh[1] == Approx(0.001).epsilon(5e-5));

    ops.upload<float>(g.view(), std::vector<float>{-0.25f, 2.f});
    hp.step = 2;
    fh::ops::run(ops, fh::ops::AdamStep{p.view(), m.view(), v.view(), g.cview(), {}, {}, hp.step, hp});
    // Step 2: m = (0.02, 0.11), v = (0.00031225, 0.004999), bias corrections 0.19 and 0.001999:
    // p0 = 0.9 - 0.1 * (0.02 / 0.19) / sqrt(0.00031225 / 0.001999) = 0.8733663
    // p1 = -1.9 - 0.1 * (0.11 / 0.19) / sqrt(0.004999 / 0.001999) = -1.9366104
    ph = ops.to_host(p.cview());
    mh = ops.to_host(m.cview());
    vh = ops.to_host(v.cview());
    CHECK(ph[0] == Approx(0.8733663).epsilon(1e-6));
    CHECK(ph[1] == Approx(-1.9366104).epsilon(1e-6));
    CHECK(mh[0] == Approx(0.02).epsilon(1e-5));
    CHECK(mh[1] == Approx(0.11).epsilon(1e-6));
    CHECK(vh[0] == Approx(0.00031225).epsilon(5e-5));
    CHECK(vh[1] == Approx(0.004999).epsilon(5e-5));
}

TEST_CASE("Adam: decoupled weight decay", "[nn]") {
    CpuDevice ops;
    auto p = ops.from_host<float>(std::vector<float>{2.f});
    auto m = ops.from_host<float>(std::vector<float>{0.f});
    auto v = ops.from_host<float>(std::vector<float>{0.f});
    auto g = ops.from_host<float>(std::vector<float>{1.f});
    AdamParams hp;
    hp.lr = 0.01f;
    hp.weight_decay = 0.5f;
    fh::ops::run(ops, fh::ops::AdamStep{p.view(), m.view(), v.view(), g.cview(), {}, {}, hp.step, hp});
    // p = 2 - 0.01 * (1 + 0.5 * 2) = 1.98
    CHECK(ops.to_host(p.cview())[0] == Approx(1.98).epsilon(1e-6));
}

namespace {

struct AdamState {
    std::vector<float> p, m, v;
};

AdamState run_adam(CpuDevice& ops, const std::vector<float>& grads, float clip, float norm, int gate_value,
                   bool with_gate = true) {
    const std::size_t n = grads.size();
    auto p = ops.from_host<float>(random_floats(n, 1));
    auto m = ops.from_host<float>(random_floats(n, 2, -0.1f, 0.1f));
    auto v = ops.from_host<float>(random_floats(n, 3, 0.f, 0.1f));
    auto g = ops.from_host<float>(grads);
    auto nb = ops.from_host<float>(std::vector<float>{norm});
    auto gate = ops.from_host<int>(std::vector<int>{gate_value});
    AdamParams hp;
    hp.lr = 0.01f;
    hp.clip_norm = clip;
    hp.step = 3;
    fh::ops::run(ops, fh::ops::AdamStep{p.view(), m.view(), v.view(), g.cview(), nb.cview(),
                                        with_gate ? gate.cview() : View<const int>(), hp.step, hp});
    return {ops.to_host(p.cview()), ops.to_host(m.cview()), ops.to_host(v.cview())};
}

}  // namespace

TEST_CASE("Adam: global-norm clipping scales the gradient exactly", "[nn]") {
    CpuDevice ops;
    const auto grads = random_floats(37, 9, -3.f, 3.f);
    double sq = 0;
    for (float x : grads) sq += static_cast<double>(x) * x;
    const float norm = static_cast<float>(std::sqrt(sq));
    const float clip = 0.25f * norm;
    const float s = clip / (norm + 1e-6f);
    std::vector<float> scaled(grads.size());
    for (std::size_t i = 0; i < grads.size(); ++i) scaled[i] = grads[i] * s;

    const AdamState clipped = run_adam(ops, grads, clip, norm, 1);
    const AdamState manual = run_adam(ops, scaled, 0.f, 0.f, 1);
    CHECK(clipped.p == manual.p);
    CHECK(clipped.m == manual.m);
    CHECK(clipped.v == manual.v);

    // A norm below clip_norm leaves the gradient alone.
    const AdamState loose = run_adam(ops, grads, 2 * norm, norm, 1);
    const AdamState plain = run_adam(ops, grads, 0.f, 0.f, 1);
    CHECK(loose.p == plain.p);
    CHECK(loose.m == plain.m);
    CHECK(fh::core::clip_scale(norm, 0.f) == 1.f);
    CHECK(fh::core::clip_scale(std::nanf(""), 1.f) == 1.f);
}

TEST_CASE("Adam: gate = 0 leaves params and moments untouched", "[nn]") {
    CpuDevice ops;
    const auto grads = random_floats(19, 4);
    const AdamState before{random_floats(19, 1), random_floats(19, 2, -0.1f, 0.1f), random_floats(19, 3, 0.f, 0.1f)};
    const AdamState skipped = run_adam(ops, grads, 1.f, 5.f, 0);
    CHECK(skipped.p == before.p);
    CHECK(skipped.m == before.m);
    CHECK(skipped.v == before.v);
    const AdamState applied = run_adam(ops, grads, 1.f, 5.f, 1);
    CHECK(applied.p != before.p);
    const AdamState no_gate = run_adam(ops, grads, 1.f, 5.f, 0, false);
    CHECK(no_gate.p == applied.p);  // an empty gate always applies
    // Even NaN gradients are not read when the gate is closed.
    std::vector<float> bad(19, std::nanf(""));
    const AdamState nan_skipped = run_adam(ops, bad, 1.f, std::nanf(""), 0);
    CHECK(nan_skipped.p == before.p);
}

TEST_CASE("global_norm equals a direct sum", "[nn]") {
    CpuDevice ops;
    auto scratch = ops.alloc<float>(fh::ops::global_norm_scratch_size());
    auto out = ops.alloc<float>(1);
    for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{65}, std::size_t{4099},
                          (std::size_t{1} << 20) + 3}) {
        INFO("n = " << n);
        const auto x = random_floats(n, n + 5);
        auto xb = ops.from_host<float>(x);
        fh::ops::run(ops, fh::ops::GlobalNorm{out.view(), xb.cview(), scratch.view()});
        double sq = 0;
        for (float e : x) sq += static_cast<double>(e) * e;
        CHECK(ops.to_host(out.cview())[0] == Approx(std::sqrt(sq)).epsilon(1e-6).margin(1e-30));
    }
}

TEST_CASE("network ops check sizes and refuse aliased outputs", "[nn][aliasing]") {
    CpuDevice ops;
    auto buf = ops.from_host<float>(random_floats(256, 1));
    const auto a = buf.view();
    // linear_forward: Y (2,3), X (2,4), W (3,4), b (3)
    const auto Y = a.subview(0, 6), X = a.subview(8, 8), W = a.subview(16, 12), b = a.subview(32, 3);
    CHECK_NOTHROW(ops.linear_forward(Y, X, W, b, 2, 4, 3, Activation::relu));
    CHECK_NOTHROW(ops.linear_forward(Y, X, W, {}, 2, 4, 3, Activation::relu));
    CHECK_THROWS_WITH(ops.linear_forward(a.subview(4, 6), X, W, b, 2, 4, 3, Activation::relu),
                      Catch::Contains("Y overlaps X"));
    CHECK_THROWS_WITH(ops.linear_forward(Y, X, W, b, 2, 5, 3, Activation::relu), Catch::Contains("X (batch, in)"));
    CHECK_THROWS(ops.linear_forward(Y, X, W, b, 0, 4, 3, Activation::relu));
    CHECK_THROWS(ops.linear_forward(Y, X, W, b, 2, 4, 3, static_cast<Activation>(7)));
    // linear_backward: dX (2,4), dW (3,4), db (3), dY (2,3)
    const auto dX = a.subview(40, 8), dW = a.subview(48, 12), db = a.subview(64, 3), dY = a.subview(72, 6);
    CHECK_NOTHROW(ops.linear_backward(dX, dW, db, dY, Y, X, W, 2, 4, 3, Activation::tanh, false));
    CHECK_NOTHROW(ops.linear_backward({}, dW, {}, dY, Y, X, W, 2, 4, 3, Activation::tanh, true));
    CHECK_THROWS(ops.linear_backward(dX, W, db, dY, Y, X, W, 2, 4, 3, Activation::tanh, false));
    CHECK_THROWS(ops.linear_backward(dX, dW, db, a.subview(0, 6), Y, X, W, 2, 4, 3, Activation::tanh, false));
    CHECK_THROWS(ops.linear_backward(a.subview(44, 8), dW, db, dY, Y, X, W, 2, 4, 3, Activation::tanh, false));
    CHECK_THROWS_WITH(ops.linear_backward(dX, dW, db, dY, Y, X, W, 2, 4, 3, Activation::tanh, false,
                                          static_cast<fh::ops::BackwardPart>(0)),
                      Catch::Contains("parts"));
    // linear_backward_batched, two networks of (in 4, out 3) at stride 16 in params and grads
    // (W at 0, b at 12), batch 2: dY, Y (2, 2, 3), X shared (x_stride 0), dX (2, 2, 4).
    {
        auto other = ops.from_host<float>(random_floats(256, 2));
        const auto o = other.view();
        const auto P = o.subview(0, 32), G = o.subview(32, 32), dY2 = o.subview(64, 12), Y2 = o.subview(80, 12),
                   dX2 = o.subview(96, 16), X2 = o.subview(112, 16);
        CHECK_NOTHROW(ops.linear_backward_batched(dX2, G, dY2, Y2, X2.subview(0, 8), 0, P, 16, 0, 12, 2, 2, 4, 3,
                                                  Activation::relu, false));
        CHECK_NOTHROW(
            ops.linear_backward_batched({}, G, dY2, Y2, X2, 8, P, 16, 0, 12, 2, 2, 4, 3, Activation::relu, true));
        CHECK_THROWS_WITH(
            ops.linear_backward_batched(dX2, G, dY2, Y2, X2, 4, P, 16, 0, 12, 2, 2, 4, 3, Activation::relu, false),
            Catch::Contains("x_stride"));
        CHECK_THROWS_WITH(ops.linear_backward_batched(dX2, G.subview(0, 20), dY2, Y2, X2.subview(0, 8), 0, P, 16, 0, 12,
                                                      2, 2, 4, 3, Activation::relu, false),
                          Catch::Contains("grads must hold"));
        CHECK_THROWS_WITH(ops.linear_backward_batched(dX2, G, dY2, Y2, X2.subview(0, 8), 0, P, 8, 0, 12, 2, 2, 4, 3,
                                                      Activation::relu, false),
                          Catch::Contains("param_stride"));
        CHECK_THROWS_WITH(ops.linear_backward_batched(dX2, G, dY2.subview(0, 6), Y2, X2.subview(0, 8), 0, P, 16, 0, 12,
                                                      2, 2, 4, 3, Activation::relu, false),
                          Catch::Contains("dY (count, batch, out)"));
        CHECK_THROWS_WITH(ops.linear_backward_batched(dX2, P, dY2, Y2, X2.subview(0, 8), 0, P, 16, 0, 12, 2, 2, 4, 3,
                                                      Activation::relu, false),
                          Catch::Contains("overlaps"));
        CHECK_THROWS(ops.linear_backward_batched(dX2, G, dY2, Y2, X2.subview(0, 8), 0, P, 16, 0, 12, 0, 2, 4, 3,
                                                 Activation::relu, false));
    }
    // global_norm
    auto out = a.subview(100, 1), scratch = a.subview(0, 0);
    auto sbuf = ops.alloc<float>(fh::ops::global_norm_scratch_size());
    CHECK_THROWS_WITH(fh::ops::run(ops, fh::ops::GlobalNorm{out, X, scratch}),
                      Catch::Contains("global_norm_scratch_size"));
    CHECK_THROWS(fh::ops::run(ops, fh::ops::GlobalNorm{a.subview(8, 1), X, sbuf.view()}));
    CHECK_NOTHROW(fh::ops::run(ops, fh::ops::GlobalNorm{out, X, sbuf.view()}));
    // adam_step
    const auto p = a.subview(120, 10), m = a.subview(130, 10), v = a.subview(140, 10), g = a.subview(150, 10);
    AdamParams hp;
    CHECK_NOTHROW(fh::ops::run(ops, fh::ops::AdamStep{p, m, v, g, {}, {}, hp.step, hp}));
    CHECK_THROWS(fh::ops::run(ops, fh::ops::AdamStep{p, a.subview(125, 10), v, g, {}, {}, hp.step, hp}));
    CHECK_THROWS(fh::ops::run(ops, fh::ops::AdamStep{p, m, v, a.subview(145, 10), {}, {}, hp.step, hp}));
    hp.clip_norm = 1.f;
    CHECK_THROWS_WITH(fh::ops::run(ops, fh::ops::AdamStep{p, m, v, g, {}, {}, hp.step, hp}),
                      Catch::Contains("grad_norm"));
    CHECK_THROWS(
        fh::ops::run(ops, fh::ops::AdamStep{p, m, v, g, a.subview(121, 1), {}, hp.step, hp}));  // norm inside params
    hp.clip_norm = 0.f;
    hp.step = 0;
    CHECK_THROWS_WITH(fh::ops::run(ops, fh::ops::AdamStep{p, m, v, g, {}, {}, hp.step, hp}),
                      Catch::Contains("1-based"));
}
