/// @file test_error_model.cpp
/// @brief The error models of support/error_model.hpp on the CPU: the reordered-sum bound holds
///        for float sums in other orders and is within a few times of what they differ by; the
///        magnitudes |A| |B|; per-element comparisons; a linear layer's bounds cover the float
///        layer against the double one (one side's share of the bound) and catch a small bug.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "math/policy.h"
#include "device/linear_reference.hpp"
#include "support/error_model.hpp"

using fh::test::Bounds;
using fh::test::kFloatU;

namespace {

float sum_forward(const std::vector<float>& x) {
    float s = 0.f;
    for (float v : x) s += v;
    return s;
}

float sum_reverse(const std::vector<float>& x) {
    float s = 0.f;
    for (std::size_t i = x.size(); i-- > 0;) s += x[i];
    return s;
}

/// A kernel's order: 256 strided partial sums, then a pairwise tree over the partials.
float sum_strided_tree(const std::vector<float>& x) {
    std::vector<float> part(256, 0.f);
    for (std::size_t i = 0; i < x.size(); ++i) part[i % 256] += x[i];
    for (std::size_t w = 128; w > 0; w /= 2)
        for (std::size_t i = 0; i < w; ++i) part[i] += part[i + w];
    return part[0];
}

}  // namespace

TEST_CASE("reordered_sum: float sums in other orders stay within 4 sqrt(K) u sum|x|, and near it for same-sign terms",
          "[support][compare]") {
    double worst_same_sign = 0;  // the largest difference over the bound, terms of one sign
    for (std::size_t K : {std::size_t{1}, std::size_t{7}, std::size_t{129}, std::size_t{4099}, std::size_t{1} << 16})
        for (bool same_sign : {false, true})
            for (std::uint64_t seed : {1u, 2u, 3u}) {
                INFO("K " << K << " same sign " << same_sign << " seed " << seed);
                const auto x = fh::test::random_floats(K, seed * 1000 + K, same_sign ? 0.f : -1.f, 1.f);
                double abs_sum = 0;
                for (float v : x) abs_sum += std::abs(static_cast<double>(v));
                const double bound = fh::test::reordered_sum({abs_sum}, static_cast<double>(K))[0];
                CHECK(bound == Approx(4 * std::sqrt(static_cast<double>(K)) * kFloatU * abs_sum));
                const float a = sum_forward(x), b = sum_reverse(x), c = sum_strided_tree(x);
                for (float other : {b, c}) {
                    const double d = std::abs(static_cast<double>(a) - other);
                    CHECK(d <= bound);
                    if (same_sign) worst_same_sign = std::max(worst_same_sign, d / bound);
                }
            }
    // Tight: same-sign sums of 65,536 terms come within 10x of the bound (not 1000x).
    INFO("worst difference over bound, same-sign terms: " << worst_same_sign);
    CHECK(worst_same_sign > 0.1);
}

TEST_CASE("abs_gemm: |A| |B| with either operand transposed", "[support][compare]") {
    // A (2, 3), B (3, 2).
    const std::vector<float> A{1, -2, 3, -4, 5, -6}, B{-1, 2, 3, -4, 5, 6};
    const std::vector<double> want{1 * 1 + 2 * 3 + 3 * 5, 1 * 2 + 2 * 4 + 3 * 6, 4 * 1 + 5 * 3 + 6 * 5,
                                   4 * 2 + 5 * 4 + 6 * 6};
    CHECK(fh::test::abs_gemm(A, false, B, false, 2, 3, 2) == want);
    const std::vector<float> At{1, -4, -2, 5, 3, -6}, Bt{-1, 3, 5, 2, -4, 6};  // A^T (3, 2), B^T (2, 3)
    CHECK(fh::test::abs_gemm(At, true, B, false, 2, 3, 2) == want);
    CHECK(fh::test::abs_gemm(A, false, Bt, true, 2, 3, 2) == want);
    CHECK(fh::test::abs_gemm(At, true, Bt, true, 2, 3, 2) == want);
    CHECK(fh::test::plus({1, 2}, {0.5, 0.25}) == std::vector<double>{1.5, 2.25});
    CHECK(fh::test::abs_of(std::vector<float>{-1.5f, 2.f}) == std::vector<double>{1.5, 2});
    CHECK(fh::test::ulps(3).rtol == 3 * kFloatU);
    // mean_bound: 4 sqrt(n) u sum|x| / n + 4 u |mean|.
    CHECK(fh::test::mean_bound(std::vector<float>{1, -3, 2, 4}) == Approx(4 * 2 * kFloatU * 10 / 4 + 4 * kFloatU * 1));
    // chain_bounds: k u (|ref_i| + the largest |ref| of i's block), k = levels 4 sqrt(terms) + 8 per transcendental.
    const auto cb = fh::test::chain_bounds(std::vector<float>{1, -4, 0.5f, 0}, 2, 2, 4, 1);
    const double k = (2 * 4 * 2 + 8) * kFloatU;
    CHECK(cb == std::vector<double>{k * 5, k * 8, k * 1, k * 0.5});
    CHECK(fh::test::ulps(3).atol == 0);
}

TEST_CASE("compare_within: one bound per element, NaN and sizes as compare_close", "[support][compare]") {
    const std::vector<float> ref{1.f, 100.f, 0.f}, got{1.1f, 100.5f, 0.f};
    CHECK(fh::test::compare_within(got, ref, Bounds{0.2, 1, 0}).count == 0);
    const auto m = fh::test::compare_within(got, ref, Bounds{0.05, 1, 0});
    CHECK(m.count == 1);
    CHECK(m.first.find("[0] got 1.10000002 ref 1") != std::string::npos);
    CHECK(fh::test::compare_within(got, ref, Bounds{0.2, 0.4, 0}).count == 1);
    CHECK(fh::test::compare_within(got, ref, Bounds{0.2, 1}).count == 1);  // a bound per element, or a mismatch
    const std::vector<float> nan{1.f, 100.f, std::numeric_limits<float>::quiet_NaN()};
    CHECK(fh::test::compare_within(nan, ref, Bounds{1e9, 1e9, 1e9}).nonfinite == 1);
    CHECK(fh::test::compare_within(nan, nan, Bounds{0, 0, 0}).count == 1);
    CHECK(fh::test::compare_within(nan, nan, Bounds{0, 0, 0}, fh::test::Nan::both_match).count == 0);
}

namespace {

struct Layer {
    std::vector<float> Y, dZ, dX, dW, db, dW_acc, db_acc;
};

/// ops::ref's layer in T, forward, backward (set), backward again (accumulate), as the [gpu]
/// tests run it; `bug`: one weight off by 1e-3 in the forward.
template <class T>
Layer run_layer(const std::vector<float>& X, const std::vector<float>& W, const std::vector<float>& b,
                const std::vector<float>& dY0, int batch, int in, int out, fh::core::Activation act, bool bug = false) {
    const auto to = [](const std::vector<float>& v) { return std::vector<T>(v.begin(), v.end()); };
    const auto back = [](const std::vector<T>& v) { return std::vector<float>(v.begin(), v.end()); };
    std::vector<T> x = to(X), w = to(W), bias = to(b), y(static_cast<std::size_t>(batch) * out);
    std::vector<T> dx(x.size()), dw(w.size()), db(bias.size());
    std::vector<T> wf = w;
    if (bug) wf[w.size() / 2] += T(1e-3);
    fh::ops::ref::linear_forward<T>(y.data(), x.data(), wf.data(), bias.data(), batch, in, out, act);
    Layer r;
    r.Y = back(y);
    std::vector<T> dy = to(dY0);
    fh::ops::ref::linear_backward<T>(dx.data(), dw.data(), db.data(), dy.data(), y.data(), x.data(), w.data(), batch,
                                     in, out, act, false);
    r.dZ = back(dy);
    r.dX = back(dx);
    r.dW = back(dw);
    r.db = back(db);
    dy = to(dY0);
    fh::ops::ref::linear_backward<T>(nullptr, dw.data(), db.data(), dy.data(), y.data(), x.data(), w.data(), batch, in,
                                     out, act, true);
    r.dW_acc = back(dw);
    r.db_acc = back(db);
    return r;
}

Bounds half(const Bounds& b) {
    return fh::test::times(b, 0.5);
}

}  // namespace

TEST_CASE("linear_bounds: the float layer is within half the bound of the double one; a 1e-3 weight bug is not",
          "[support][compare]") {
    using fh::core::Activation;
    for (int batch : {1, 7, 300})
        for (int in : {1, 42, 129})
            for (int out : {1, 45})
                for (Activation act : {Activation::none, Activation::relu, Activation::tanh}) {
                    INFO("batch " << batch << " in " << in << " out " << out << " act " << static_cast<int>(act));
                    const std::uint64_t seed = 7u * batch + 3u * in + out;
                    const float ws = 1.f / std::sqrt(static_cast<float>(in));
                    const std::size_t nb = static_cast<std::size_t>(batch);
                    const auto X = fh::test::random_floats(nb * in, seed, -1.f, 1.f);
                    const auto W = fh::test::random_floats(static_cast<std::size_t>(out) * in, seed + 1, -ws, ws);
                    const auto b = fh::test::random_floats(out, seed + 2, -0.5f, 0.5f);
                    const auto dY = fh::test::random_floats(nb * out, seed + 3, -1.f, 1.f);
                    const Layer f = run_layer<float>(X, W, b, dY, batch, in, out, act);
                    const Layer d = run_layer<double>(X, W, b, dY, batch, in, out, act);
                    const auto m = fh::test::linear_bounds(X, W, b, dY, f.Y, batch, in, out, act);
                    // One side (float against exact) takes at most half of the two sides' bound.
                    FH_REQUIRE_WITHIN(f.Y, d.Y, half(m.Y));
                    FH_REQUIRE_WITHIN(f.dZ, d.dZ, half(m.dZ));
                    FH_REQUIRE_WITHIN(f.dX, d.dX, half(m.dX));
                    FH_REQUIRE_WITHIN(f.dW, d.dW, half(m.dW));
                    FH_REQUIRE_WITHIN(f.db, d.db, half(m.db));
                    FH_REQUIRE_WITHIN(f.dW_acc, d.dW_acc, half(m.dW_acc));
                    FH_REQUIRE_WITHIN(f.db_acc, d.db_acc, half(m.db_acc));
                    // A weight off by 1e-3 moves every output of its row in the forward (where a
                    // ReLU does not zero them).
                    const Layer bad = run_layer<float>(X, W, b, dY, batch, in, out, act, true);
                    if (act != Activation::relu) CHECK(fh::test::compare_within(bad.Y, f.Y, m.Y).count > 0);
                }
}

TEST_CASE("log_sum_exp_bound and softmax_bound: policy::log_sum_exp in float is within half of them",
          "[support][compare]") {
    // One side (glibc's expf and logf, the float sum in order) against the exact value.
    for (int n : {1, 2, 9, 45})
        for (std::uint64_t seed = 1; seed <= 200; ++seed) {
            INFO("n " << n << " seed " << seed);
            const auto l = fh::test::random_floats(static_cast<std::size_t>(n), seed, -8.f, 8.f);
            const auto s = fh::test::log_sum_exp_bound(l.data(), n);
            const float lse = fh::policy::log_sum_exp(l.data(), n);
            CHECK(std::abs(lse - s.lse) <= s.bound / 2);
            for (int j = 0; j < n; ++j) {
                const float p = std::exp(l[static_cast<std::size_t>(j)] - lse);
                CHECK(std::abs(p - std::exp(l[static_cast<std::size_t>(j)] - s.lse)) <=
                      fh::test::softmax_bound(s, l[static_cast<std::size_t>(j)]) / 2);
            }
        }
}
