/// @file error_model.hpp
/// @brief The error models of the [gpu] tests' tolerances (docs/testing.md, "GPU tolerances: the
///        error models"): each bound is computed from the test's inputs by one of these, never
///        picked by hand.
///
/// u = 2^-24 (kFloatU) is float's unit roundoff: one rounded operation is exact times (1 + d),
/// |d| <= u. Every bound here is of the difference of two float computations (the kernel and its
/// CPU twin), so it covers the rounding of both sides.
///
///  - exact: integer outputs, copies, and twins that share the scalar math of math/*.h
///    with FMA contraction off: equal values (Tol{}, or ==).
///  - elementwise, the same formula: `ulps(k)`, k u relative to the result (FMA contraction on
///    the device side; the device's expf, logf, tanhf within 2 ulp of the rounded result).
///  - a sum of K terms in another order (a kernel's tree or cuBLAS's blocks against the CPU's
///    loop): |got - ref| <= sum_ulps(K) u sum_i |t_i|, with sum_ulps(K) = 4 sqrt(K): each side's
///    rounding errors add like a random walk of K steps, each at most u times the terms'
///    magnitude, and 2 sqrt(K) per side covers the tails (Higham and Mary's probabilistic bound,
///    lambda = 2). sum_i |t_i| is computed per element from the inputs (abs_gemm: |A| |B|).
///  - a chain: each stage's bound is its own rounding plus its inputs' bounds carried through
///    the stage's derivative (for a product: |W| times the bound of X; tanh and ReLU are
///    1-Lipschitz; tanh' = 1 - y^2 moves by at most 2 |y| times the bound of y).
#pragma once

#include <algorithm>
#include <limits>
#include <string>
#include <cmath>
#include <cstddef>
#include <vector>

#include "device/linear_reference.hpp"
#include "support/compare.hpp"

namespace fh::test {

/// Per-element absolute bounds: |got_i - ref_i| <= bound_i.
using Bounds = std::vector<double>;

/// The elementwise model: k u relative to the result.
inline Tol ulps(double k) {
    return Tol{0, k * kFloatU};
}

/// The reordered-sum model's factor: |got - ref| <= sum_ulps(K) u sum |t_i| for a float sum of K
/// terms computed in two orders (4 sqrt(K): 2 sqrt(K) per side).
inline double sum_ulps(double terms) {
    return 4 * std::sqrt(std::max(terms, 1.0));
}

/// The reordered-sum bound of each element from the sum of its terms' magnitudes.
inline Bounds reordered_sum(const std::vector<double>& abs_terms, double terms) {
    Bounds b(abs_terms.size());
    const double k = sum_ulps(terms) * kFloatU;
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = k * abs_terms[i];
    return b;
}

/// The chain model, norm-relative, for a kernel whose internals the test does not recompute (a
/// fused loss: softmaxes, projections, per-row statistics): `levels` nested reductions of up to
/// `terms` terms (sum_ulps(terms) each, as reordered_sum) and `transcendentals` expf / logf /
/// tanhf on the path (2 ulp on each side: 8 u each). The terms' magnitude of an element is taken
/// as the largest |ref| of its block of `block` elements (one statistic's rows, one tensor:
/// block = ref.size()), since a sum that cancels to near zero keeps its terms' rounding error:
///     bound_i = k u (|ref_i| + max_abs(block of i)),  k = levels sum_ulps(terms) + 8 transcendentals.
template <class T>
Bounds block_bounds(const std::vector<T>& ref, std::size_t block, double k);

template <class T>
Bounds chain_bounds(const std::vector<T>& ref, std::size_t block, int levels, double terms, int transcendentals) {
    return block_bounds(ref, block, levels * sum_ulps(terms) + 8.0 * transcendentals);
}

/// bound_i = k u (|ref_i| + the largest |ref| of i's block of `block` elements): k ulps of each
/// element and of its block's scale (chain_bounds' form, for a model that gives k directly).
template <class T>
Bounds block_bounds(const std::vector<T>& ref, std::size_t block, double k) {
    REQUIRE(block > 0);
    Bounds b(ref.size());
    for (std::size_t from = 0; from < ref.size(); from += block) {
        const std::size_t to = std::min(ref.size(), from + block);
        double scale = 0;
        for (std::size_t i = from; i < to; ++i)
            if (std::isfinite(static_cast<double>(ref[i])))
                scale = std::max(scale, std::abs(static_cast<double>(ref[i])));
        for (std::size_t i = from; i < to; ++i) b[i] = k * kFloatU * (std::abs(static_cast<double>(ref[i])) + scale);
    }
    return b;
}

/// The mean of x's n floats on two sides (ops::Mean: the CPU sums in double, the kernel in
/// float in a tree): the float sum's reordered-sum bound, sum_ulps(n) u sum |x| / n, and the
/// division's and the final rounding's u of |mean| on each side.
template <class T>
double mean_bound(const std::vector<T>& x) {
    double abs_sum = 0, sum = 0;
    for (const T& v : x) {
        abs_sum += std::abs(static_cast<double>(v));
        sum += static_cast<double>(v);
    }
    const double n = static_cast<double>(x.size());
    return sum_ulps(n) * kFloatU * abs_sum / n + 4 * kFloatU * std::abs(sum / n);
}

/// A row's log-sum-exp (policy::log_sum_exp: its max m, then m + logf(sum of expf(l - m)) in
/// order): the exact value and the bound of the difference of two float evaluations, each
/// within, of the exact value: expf of the rounded l_j - m, within (4 + |l_j - m|) u of each term
/// (2 ulp and the argument's rounding), and n - 1 additions of positive terms ((n - 1) u of the
/// sum), which logf turns into as much absolute error; logf's own 2 ulp (4 u of |log sum|); the
/// final addition (u of |lse|). `bound` is twice that.
struct LogSumExp {
    double lse = 0, bound = 0;
};
inline LogSumExp log_sum_exp_bound(const float* l, int n) {
    double m = l[0];
    for (int j = 1; j < n; ++j) m = std::max(m, static_cast<double>(l[j]));
    double sum = 0, terms = 0;
    for (int j = 0; j < n; ++j) {
        const double e = std::exp(static_cast<double>(l[j]) - m);
        sum += e;
        terms += e * (4 + std::abs(static_cast<double>(l[j]) - m));
    }
    const double lse = m + std::log(sum);
    return {lse, 2 * kFloatU * (terms / sum + (n - 1) + 4 * std::abs(std::log(sum)) + std::abs(lse))};
}

/// softmax p_j = expf(l_j - lse) of a row on two sides: p_j's bound from lse's, the subtraction's
/// rounding (u of |l_j - lse| on each side) and expf's 2 ulp (4 u on each side).
inline double softmax_bound(const LogSumExp& s, float l_j) {
    const double x = static_cast<double>(l_j) - s.lse;
    return std::exp(x) * (s.bound + 2 * kFloatU * std::abs(x) + 8 * kFloatU);
}

/// |A| |B| in double: C (m, n) with C[i, j] = sum_k |A[i, k]| |B[k, j]|. A is (m, k) row-major, or
/// (k, m) with a_trans; B is (k, n), or (n, k) with b_trans. The terms' magnitude of a product
/// (abs_gemm(X, false, W, true, ...) for a layer's X W^T), and the carrying of an input's bound
/// through a product (abs_gemm(bound_of_X, false, W, true, ...)).
template <class TA, class TB>
std::vector<double> abs_gemm(const std::vector<TA>& A, bool a_trans, const std::vector<TB>& B, bool b_trans,
                             std::size_t m, std::size_t k, std::size_t n) {
    REQUIRE(A.size() == m * k);
    REQUIRE(B.size() == k * n);
    std::vector<double> C(m * n, 0.0);
    for (std::size_t i = 0; i < m; ++i)
        for (std::size_t l = 0; l < k; ++l) {
            const double a = std::abs(static_cast<double>(a_trans ? A[l * m + i] : A[i * k + l]));
            if (a == 0) continue;
            for (std::size_t j = 0; j < n; ++j)
                C[i * n + j] += a * std::abs(static_cast<double>(b_trans ? B[j * k + l] : B[l * n + j]));
        }
    return C;
}

/// a + b element by element (b empty: a).
inline Bounds plus(Bounds a, const Bounds& b) {
    if (b.empty()) return a;
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) a[i] += b[i];
    return a;
}

/// k b element by element.
inline Bounds times(Bounds b, double k) {
    for (double& x : b) x *= k;
    return b;
}

/// The magnitude of each element, |x_i|, in double.
template <class T>
std::vector<double> abs_of(const std::vector<T>& x) {
    std::vector<double> a(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) a[i] = std::abs(static_cast<double>(x[i]));
    return a;
}

/// The result of compare_within.
template <class G, class R>
Mismatches compare_within(const G& got, const R& ref, const Bounds& bound, Nan nan = Nan::differ) {
    if (std::size(bound) != std::size(ref)) {
        Mismatches m;
        m.count = 1;
        m.worst = std::numeric_limits<double>::infinity();
        m.first = "  bounds for " + std::to_string(std::size(bound)) + " elements, ref has " +
                  std::to_string(std::size(ref)) + "\n";
        return m;
    }
    return detail::compare_each(
        got, ref,
        [&](std::size_t i) {
            return Tol{bound[i], 0};
        },
        nan);
}

/// REQUIREs |got_i - ref_i| <= bound_i for every element (a NaN on either side fails, unless the
/// optional fourth argument is fh::test::Nan::both_match and both are NaN).
#define FH_REQUIRE_WITHIN(got, ref, bound, ...)                                                    \
    do {                                                                                           \
        const auto fh_m_ = ::fh::test::compare_within(got, ref, bound __VA_OPT__(, ) __VA_ARGS__); \
        INFO(::fh::test::describe(fh_m_));                                                         \
        REQUIRE(fh_m_.count == 0);                                                                 \
    } while (0)

/// CHECK form of FH_REQUIRE_WITHIN (the test goes on after a failure).
#define FH_CHECK_WITHIN(got, ref, bound, ...)                                                      \
    do {                                                                                           \
        const auto fh_m_ = ::fh::test::compare_within(got, ref, bound __VA_OPT__(, ) __VA_ARGS__); \
        INFO(::fh::test::describe(fh_m_));                                                         \
        CHECK(fh_m_.count == 0);                                                                   \
    } while (0)

/// The bound of a linear layer's forward Y = act(X W^T + b) (ops::ref::linear_forward): each
/// output sums `in` products and the bias; X's own bound (`x_bound`, empty where X is exact) is
/// carried through |W|; the activation is 1-Lipschitz, and tanh within 2 ulp on each side (8 u
/// of |y|). Y: the CPU's output (for tanh's share). X (batch, in), W (out, in), b (out) or empty.
inline Bounds linear_forward_bound(const std::vector<float>& X, const std::vector<float>& W,
                                   const std::vector<float>& b, const std::vector<float>& Y, int batch, int in, int out,
                                   core::Activation act, const Bounds& x_bound = {}) {
    const std::size_t nb = static_cast<std::size_t>(batch), ni = static_cast<std::size_t>(in),
                      no = static_cast<std::size_t>(out);
    REQUIRE(Y.size() == nb * no);
    std::vector<double> terms = abs_gemm(X, false, W, true, nb, ni, no);
    if (!b.empty())
        for (std::size_t i = 0; i < terms.size(); ++i) terms[i] += std::abs(static_cast<double>(b[i % no]));
    Bounds y = reordered_sum(terms, in + (b.empty() ? 0 : 1));
    if (!x_bound.empty()) y = plus(std::move(y), abs_gemm(x_bound, false, W, true, nb, ni, no));
    if (act == core::Activation::tanh)
        for (std::size_t i = 0; i < y.size(); ++i) y[i] += 8 * kFloatU * std::abs(static_cast<double>(Y[i]));
    return y;
}

/// The bounds of a linear layer's backward (ops::ref::linear_backward), and what the
/// accumulating form needs: dZ = dY act'(y), dX = dZ W (`out` terms), dW = dZ^T X and db =
/// sum_r dZ (`batch` terms), and the magnitudes of dW's and db's terms.
struct BackwardBounds {
    std::vector<double> dZ;  ///< dZ's values (the CPU's, in double)
    Bounds dZ_bound, dX, dW, db;
    std::vector<double> dW_terms, db_terms;  ///< sum_r |dZ X|, sum_r |dZ|
};

/// dY (batch, out) with its bound (empty: exact); Y (batch, out) the activated output with its
/// bound (empty: Y is an input, the same on both sides); X (batch, in) with its bound; W (out, in)
/// (empty: no dX). A ReLU whose sign flips between the sides is outside the model (none and
/// ReLU multiply dY by 1 or 0 exactly); tanh's 1 - y^2 moves by 2 |y| times y's bound, and
/// (1 - y y) dY rounds twice or three times on each side (6 u of |dY|).
inline BackwardBounds linear_backward_bounds(const std::vector<float>& X, const std::vector<float>& W,
                                             const std::vector<float>& dY, const std::vector<float>& Y, int batch,
                                             int in, int out, core::Activation act, const Bounds& x_bound = {},
                                             const Bounds& dy_bound = {}, const Bounds& y_bound = {}) {
    const std::size_t nb = static_cast<std::size_t>(batch), ni = static_cast<std::size_t>(in),
                      no = static_cast<std::size_t>(out);
    REQUIRE(Y.size() == nb * no);
    REQUIRE(dY.size() == nb * no);
    BackwardBounds r;
    r.dZ.resize(nb * no);
    r.dZ_bound.assign(nb * no, 0.0);
    for (std::size_t i = 0; i < r.dZ.size(); ++i) {
        const double dy = std::abs(static_cast<double>(dY[i])), y = static_cast<double>(Y[i]);
        const double slope = core::activation_derivative(y, act);
        r.dZ[i] = static_cast<double>(dY[i]) * slope;
        double d = dy_bound.empty() ? 0.0 : dy_bound[i] * std::abs(slope);
        if (act == core::Activation::tanh)
            d += 6 * kFloatU * dy + (y_bound.empty() ? 0.0 : dy * 2 * std::abs(y) * y_bound[i]);
        r.dZ_bound[i] = d;
    }
    if (!W.empty())
        r.dX = plus(reordered_sum(abs_gemm(r.dZ, false, W, false, nb, no, ni), out),
                    abs_gemm(r.dZ_bound, false, W, false, nb, no, ni));
    if (!X.empty()) {
        r.dW_terms = abs_gemm(r.dZ, true, X, false, no, nb, ni);
        r.dW = plus(reordered_sum(r.dW_terms, batch), abs_gemm(r.dZ_bound, true, X, false, no, nb, ni));
        if (!x_bound.empty()) r.dW = plus(std::move(r.dW), abs_gemm(r.dZ, true, x_bound, false, no, nb, ni));
    }
    const std::vector<double> ones(nb, 1.0);
    r.db_terms = abs_gemm(ones, false, r.dZ, false, 1, nb, no);
    r.db = plus(reordered_sum(r.db_terms, batch), abs_gemm(ones, false, r.dZ_bound, false, 1, nb, no));
    return r;
}

/// A gradient accumulated onto itself (a second, identical backward with accumulate): the first
/// result's bound twice, and the rounding of a sum of terms + 1 terms of twice the magnitude.
inline Bounds accumulated(const Bounds& set, const std::vector<double>& abs_terms, int terms) {
    Bounds r = reordered_sum(abs_terms, terms + 1);
    REQUIRE(r.size() == set.size());
    for (std::size_t i = 0; i < r.size(); ++i) r[i] = 2 * (r[i] + set[i]);
    return r;
}

/// One layer forward, backward (set) and backward again (accumulate), as the [gpu] tests run it.
struct LinearBounds {
    Bounds Y, dZ, dX, dW, db, dW_acc, db_acc;
};

inline LinearBounds linear_bounds(const std::vector<float>& X, const std::vector<float>& W, const std::vector<float>& b,
                                  const std::vector<float>& dY, const std::vector<float>& Y, int batch, int in, int out,
                                  core::Activation act) {
    LinearBounds r;
    r.Y = linear_forward_bound(X, W, b, Y, batch, in, out, act);
    auto back = linear_backward_bounds(X, W, dY, Y, batch, in, out, act, {}, {}, r.Y);
    r.dZ = std::move(back.dZ_bound);
    r.dX = std::move(back.dX);
    r.dW_acc = accumulated(back.dW, back.dW_terms, batch);
    r.db_acc = accumulated(back.db, back.db_terms, batch);
    r.dW = std::move(back.dW);
    r.db = std::move(back.db);
    return r;
}

// ---- gpu.precision = "tf32" and "bf16" (tests/device/test_precision_gpu.cpp) ----------------------
// The products' operands: in bf16 both sides round them to BF16 with the same core::round_to_bf16,
// so identical inputs give identical operands, and products of two BF16 values are exact in float;
// an operand that already differs between the sides (dZ after a tanh) may round to neighbouring
// BF16 values: |rb(a) - rb(b)| <= |a - b| + kBf16U (|a| + |b|) (bf16_operands). In tf32 only the
// GPU rounds, each operand within kTf32U (TF32 keeps 10 of float's 23 fraction bits; 2^-10 covers
// truncation as well as rounding to nearest, the hardware's choice not being documented), so each
// product within 2 kTf32U + kTf32U^2 of the CPU's. The GPU's sums run on tensor cores, which may
// align and truncate within their blocks: taken as up to 2 u per addition, added up without
// cancellation (2 K u of sum |t|: the worst case, not the random walk of sum_ulps), plus the CPU's
// own 2 sqrt(K) u (tensor_core_sum).

/// BF16's unit roundoff (8 significant bits).
inline constexpr double kBf16U = 0x1p-8;
/// TF32's operand rounding as bounded here (10 fraction bits, truncation or nearest).
inline constexpr double kTf32U = 0x1p-10;

/// The bound of a K-term float sum on tensor cores (GPU) against the CPU's loop, per element
/// from the terms' magnitudes: (2 K + 2 sqrt(K)) u sum |t|.
inline Bounds tensor_core_sum(const std::vector<double>& abs_terms, double terms) {
    const double k = (2 * std::max(terms, 1.0) + 2 * std::sqrt(std::max(terms, 1.0))) * kFloatU;
    Bounds b(abs_terms.size());
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = k * abs_terms[i];
    return b;
}

/// The bound of BF16-rounded operands whose unrounded values are known within `bound` on the two
/// sides (empty or 0: the same value, the same rounding): bound + kBf16U (2 |v| + bound).
inline Bounds bf16_operands(const std::vector<double>& v, const Bounds& bound) {
    Bounds r(v.size(), 0.0);
    if (bound.empty()) return r;
    for (std::size_t i = 0; i < v.size(); ++i)
        if (bound[i] > 0) r[i] = bound[i] + kBf16U * (2 * std::abs(v[i]) + bound[i]);
    return r;
}

/// One layer forward, backward (set) and backward again (accumulate), as the [gpu] tests run it,
/// in gpu.precision `bf16` (both sides round the operands) or tf32 (the GPU rounds, the CPU
/// computes FP32): linear_bounds' model with the products' terms taken from the operands as
/// rounded, the sums on tensor cores (tensor_core_sum), the operands' rounding as above; the
/// activation and bias parts stay FP32 on both sides (their bounds as in linear_backward_bounds).
inline LinearBounds linear_bounds_precision(const std::vector<float>& X, const std::vector<float>& W,
                                            const std::vector<float>& b, const std::vector<float>& dY,
                                            const std::vector<float>& Y, int batch, int in, int out,
                                            core::Activation act, bool bf16) {
    const std::size_t nb = static_cast<std::size_t>(batch), ni = static_cast<std::size_t>(in),
                      no = static_cast<std::size_t>(out);
    const auto operand = [&](const std::vector<float>& v) {
        std::vector<double> r(v.size());
        for (std::size_t i = 0; i < v.size(); ++i)
            r[i] = std::abs(static_cast<double>(bf16 ? core::round_to_bf16(v[i]) : v[i]));
        return r;
    };
    const double product_u = bf16 ? 0.0 : 2 * kTf32U + kTf32U * kTf32U;  // the GPU's own operand rounding
    const auto products = [&](Bounds sum, const std::vector<double>& abs_terms) {
        for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += product_u * abs_terms[i];
        return sum;
    };
    const std::vector<double> x = operand(X), w = operand(W);
    LinearBounds r;
    std::vector<double> terms = abs_gemm(x, false, w, true, nb, ni, no);
    std::vector<double> with_bias = terms;
    if (!b.empty())
        for (std::size_t i = 0; i < with_bias.size(); ++i) with_bias[i] += std::abs(static_cast<double>(b[i % no]));
    r.Y = products(tensor_core_sum(with_bias, in + (b.empty() ? 0 : 1)), terms);
    if (act == core::Activation::tanh)
        for (std::size_t i = 0; i < r.Y.size(); ++i) r.Y[i] += 8 * kFloatU * std::abs(static_cast<double>(Y[i]));
    // dZ in FP32 on both sides (linear_backward_bounds' activation part, Y's bound carried).
    auto fp32 = linear_backward_bounds({}, {}, dY, Y, batch, in, out, act, {}, {}, r.Y);
    r.dZ = fp32.dZ_bound;
    r.db = fp32.db;
    r.db_acc = accumulated(fp32.db, fp32.db_terms, batch);
    std::vector<double> dz(fp32.dZ.size());
    for (std::size_t i = 0; i < dz.size(); ++i)
        dz[i] = std::abs(bf16 ? static_cast<double>(core::round_to_bf16(static_cast<float>(fp32.dZ[i]))) : fp32.dZ[i]);
    const Bounds dz_bound = bf16 ? bf16_operands(fp32.dZ, fp32.dZ_bound) : fp32.dZ_bound;
    const std::vector<double> dx_terms = abs_gemm(dz, false, w, false, nb, no, ni);
    r.dX = plus(products(tensor_core_sum(dx_terms, out), dx_terms), abs_gemm(dz_bound, false, w, false, nb, no, ni));
    const std::vector<double> dw_terms = abs_gemm(dz, true, x, false, no, nb, ni);
    r.dW = plus(products(tensor_core_sum(dw_terms, batch), dw_terms), abs_gemm(dz_bound, true, x, false, no, nb, ni));
    // Accumulated: the product again, added to the first (beta = 1): twice the set bound and a sum
    // of one more term of twice the magnitude.
    r.dW_acc = products(tensor_core_sum(dw_terms, batch + 1), dw_terms);
    for (std::size_t i = 0; i < r.dW_acc.size(); ++i) r.dW_acc[i] = 2 * (r.dW_acc[i] + r.dW[i]);
    return r;
}

/// An Mlp (nn::Mlp: layers with in, out, act, weight.offset, bias.offset) forward and backward
/// as its [gpu] tests run it, from the parameters and X: the bounds of the output, of every
/// gradient (laid out as the parameters; 0 elsewhere), of the gradients accumulated by a second
/// identical pass, and of dX. dOut: `dout_given` (exact), or 2 out (the derivative of the sum of
/// squared outputs, from each side's own output) when empty.
struct MlpBounds {
    std::vector<float> out;  ///< the CPU's output (ops::ref in float: the CPU twin's arithmetic)
    Bounds out_bound, grads, grads_twice, dX;
};

template <class Layers>
MlpBounds mlp_bounds(const Layers& layers, const std::vector<float>& params, const std::vector<float>& X, int batch,
                     const std::vector<float>& dout_given = {}) {
    const std::size_t nb = static_cast<std::size_t>(batch);
    std::vector<std::vector<float>> acts;
    std::vector<Bounds> bounds;
    for (const auto& L : layers) {
        const std::vector<float>& x = acts.empty() ? X : acts.back();
        const std::vector<float> W(params.begin() + static_cast<std::ptrdiff_t>(L.weight.offset),
                                   params.begin() + static_cast<std::ptrdiff_t>(L.weight.offset + L.weight.size));
        const std::vector<float> b(params.begin() + static_cast<std::ptrdiff_t>(L.bias.offset),
                                   params.begin() + static_cast<std::ptrdiff_t>(L.bias.offset + L.bias.size));
        std::vector<float> y(nb * static_cast<std::size_t>(L.out));
        ops::ref::linear_forward<float>(y.data(), x.data(), W.data(), b.empty() ? nullptr : b.data(), batch, L.in,
                                        L.out, L.act);
        bounds.push_back(
            linear_forward_bound(x, W, b, y, batch, L.in, L.out, L.act, bounds.empty() ? Bounds{} : bounds.back()));
        acts.push_back(std::move(y));
    }
    MlpBounds r;
    r.out = acts.back();
    r.out_bound = bounds.back();
    std::vector<float> dY = dout_given;
    Bounds dy_bound;
    if (dY.empty()) {
        dY.resize(r.out.size());
        dy_bound.resize(r.out.size());
        for (std::size_t i = 0; i < dY.size(); ++i) {
            dY[i] = 2 * r.out[i];
            dy_bound[i] = 2 * r.out_bound[i];
        }
    }
    r.grads.assign(params.size(), 0.0);
    r.grads_twice.assign(params.size(), 0.0);
    for (std::size_t l = acts.size(); l-- > 0;) {
        const auto& L = layers[l];
        const std::vector<float>& x = l == 0 ? X : acts[l - 1];
        const Bounds& xb = l == 0 ? Bounds{} : bounds[l - 1];
        const std::vector<float> W(params.begin() + static_cast<std::ptrdiff_t>(L.weight.offset),
                                   params.begin() + static_cast<std::ptrdiff_t>(L.weight.offset + L.weight.size));
        const auto back = linear_backward_bounds(x, W, dY, acts[l], batch, L.in, L.out, L.act, xb, dy_bound, bounds[l]);
        const Bounds dw2 = accumulated(back.dW, back.dW_terms, batch), db2 = accumulated(back.db, back.db_terms, batch);
        for (std::size_t i = 0; i < back.dW.size(); ++i) {
            r.grads[L.weight.offset + i] = back.dW[i];
            r.grads_twice[L.weight.offset + i] = dw2[i];
        }
        for (std::size_t i = 0; i < back.db.size(); ++i) {
            r.grads[L.bias.offset + i] = back.db[i];
            r.grads_twice[L.bias.offset + i] = db2[i];
        }
        // The next layer down's dY: the CPU's dX (dZ W in float, ops::ref's order) and its bound.
        std::vector<float> dz(back.dZ.begin(), back.dZ.end()), dx(nb * static_cast<std::size_t>(L.in));
        ops::ref::input_backward<float>(dx.data(), dz.data(), W.data(), batch, L.in, L.out);
        dY = std::move(dx);
        dy_bound = back.dX;
    }
    r.dX = std::move(dy_bound);
    return r;
}

}  // namespace fh::test
