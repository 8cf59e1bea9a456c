/// @file compare.hpp
/// @brief Seeded random inputs and the tolerance comparisons of the tests (docs/testing.md,
///        "Comparison helpers").
///
/// One rule for every comparison of two tensors, element by element:
///
///     |got - ref| <= atol + rtol * |ref|
///
/// with `atol` and `rtol` chosen per tensor by the test, from an error model stated beside the
/// call (docs/testing.md lists the models: bit-equal where the code paths are the same, a few
/// ulp per reduction level, a fraction of the parameters' movement in the test...). Both
/// parts matter: `rtol` alone checks nothing near zero and `atol` alone nothing of a large
/// value, so there is no `max(1, |ref|)` denominator (it made every tensor below 1, Adam's
/// second moments among them, an absolute check of nothing). atol = rtol = 0 asks for equal
/// values (+0 and -0 are equal; `same_bits` compares bytes).
///
/// Non-finite values are never within a tolerance:
///  - a NaN on either side is a difference, unless the call passes `Nan::both_match` and both
///    sides are NaN (a test that says the NaN must be there on both sides, e.g. a logged NaN loss);
///  - an infinity matches only the same infinity (+inf against +inf).
///
/// A failure prints the count of mismatches, the largest error, and the first mismatches.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <iterator>
#include <span>
#include <string>
#include <vector>

namespace fh::test {

/// n floats uniform in [lo, hi), never all zero, reproducible from the seed.
inline std::vector<float> random_floats(std::size_t n, std::uint64_t seed, float lo = -2.f, float hi = 2.f) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) x = dist(rng);
    return v;
}

/// Whether a NaN on both sides counts as a match (only when the test says the NaN must be there).
enum class Nan { differ, both_match };

/// One tensor's tolerance: |got - ref| <= atol + rtol * |ref|.
struct Tol {
    double atol = 0;
    double rtol = 0;
};

/// The result of comparing two tensors element by element.
struct Mismatches {
    std::size_t count = 0;      ///< elements outside the tolerance (non-finite ones included)
    std::size_t nonfinite = 0;  ///< of which: a NaN or infinity on one side not matched on the other
    double max_error = 0;       ///< the largest finite |got - ref| (mismatched or not)
    /// The largest |got - ref| / (atol + rtol * |ref|): <= 1 passes; +inf for a non-finite
    /// mismatch, or any difference under a zero tolerance.
    double worst = 0;
    std::string first;  ///< up to 5 "[i] got G ref R" lines
};

namespace detail {
inline std::string number(double x) {
    char b[40];
    std::snprintf(b, sizeof b, "%.9g", x);
    return b;
}
}  // namespace detail

/// Whether got matches ref under `tol` and the non-finite rules above; `ratio` gets
/// |got - ref| / (atol + rtol * |ref|) (+inf for a non-finite mismatch).
inline bool close_value(double g, double r, Tol tol, Nan nan, double* ratio = nullptr) {
    double q = 0;
    bool ok;
    if (std::isnan(g) || std::isnan(r)) {
        ok = nan == Nan::both_match && std::isnan(g) && std::isnan(r);
        q = ok ? 0 : std::numeric_limits<double>::infinity();
    } else if (std::isinf(g) || std::isinf(r)) {
        ok = g == r;
        q = ok ? 0 : std::numeric_limits<double>::infinity();
    } else {
        const double err = std::abs(g - r), bound = tol.atol + tol.rtol * std::abs(r);
        ok = err <= bound;
        q = err == 0 ? 0 : bound > 0 ? err / bound : std::numeric_limits<double>::infinity();
    }
    if (ratio) *ratio = q;
    return ok;
}

namespace detail {
/// compare_close with element i's tolerance tol_at(i).
template <class G, class R, class TolAt>
Mismatches compare_each(const G& got, const R& ref, TolAt tol_at, Nan nan) {
    Mismatches m;
    const std::size_t n = std::size(got);
    if (n != std::size(ref)) {
        m.count = 1;
        m.worst = std::numeric_limits<double>::infinity();
        m.first = "  sizes differ: got " + std::to_string(n) + " ref " + std::to_string(std::size(ref)) + "\n";
        return m;
    }
    const auto* gp = std::data(got);
    const auto* rp = std::data(ref);
    for (std::size_t i = 0; i < n; ++i) {
        const double g = static_cast<double>(gp[i]), r = static_cast<double>(rp[i]);
        double q = 0;
        const bool ok = close_value(g, r, tol_at(i), nan, &q);
        if (std::isfinite(g) && std::isfinite(r)) m.max_error = std::max(m.max_error, std::abs(g - r));
        m.worst = std::max(m.worst, q);
        if (!ok) {
            if (m.count < 5) m.first += "  [" + std::to_string(i) + "] got " + number(g) + " ref " + number(r) + "\n";
            ++m.count;
            if (!std::isfinite(g) || !std::isfinite(r)) ++m.nonfinite;
        }
    }
    return m;
}
}  // namespace detail

/// Compares got with ref element by element: any two contiguous ranges of numbers (vectors,
/// spans, arrays; float against double is fine). Sizes must match; a size mismatch counts as one
/// mismatch and is printed.
template <class G, class R>
Mismatches compare_close(const G& got, const R& ref, Tol tol, Nan nan = Nan::differ) {
    return detail::compare_each(
        got, ref, [tol](std::size_t) { return tol; }, nan);
}

/// "mismatches: N (M non-finite), max error E, worst W tolerances\n  [i] got .. ref ..".
inline std::string describe(const Mismatches& m) {
    return "mismatches: " + std::to_string(m.count) + " (" + std::to_string(m.nonfinite) + " non-finite), max error " +
           detail::number(m.max_error) + ", worst " + detail::number(m.worst) + " tolerances\n" + m.first;
}

/// The largest |x| of a tensor (0 for an empty one; +inf when it holds a non-finite value): the
/// scale of a norm-relative bound, atol = k * max_abs(ref), for values computed by sums whose
/// rounding error scales with the terms' magnitudes rather than with each result's own.
template <class T>
double max_abs(const std::vector<T>& v) {
    double s = 0;
    for (const T& x : v) {
        const double a = std::abs(static_cast<double>(x));
        if (!std::isfinite(a)) return std::numeric_limits<double>::infinity();
        s = std::max(s, a);
    }
    return s;
}

namespace detail {
/// sqrt(sum (a_i - b_i)^2) (b empty: sqrt(sum a_i^2)); +inf when a term is not finite.
template <class T>
double l2_distance(const std::vector<T>& a, const std::vector<T>& b) {
    double s = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        const double d = static_cast<double>(a[i]) - (b.empty() ? 0.0 : static_cast<double>(b[i]));
        if (!std::isfinite(d)) return std::numeric_limits<double>::infinity();
        s += d * d;
    }
    return std::sqrt(s);
}
}  // namespace detail

/// How far two runs of the same training part, as a fraction of how far the reference moved:
/// ||got - ref|| / ||ref - start|| (Euclidean norms over the tensor). The error model of a
/// trainer run twice with products that round differently: each Adam step moves a parameter by
/// about the learning rate whatever the gradient's rounding, except where a gradient is near
/// zero and its sign is rounding; so the runs' difference is judged against the movement, not
/// element by element. 0 when got == ref; +inf when anything is non-finite (a NaN on one side
/// is a difference), or when the reference did not move but got differs.
template <class T>
double movement_fraction(const std::vector<T>& got, const std::vector<T>& ref, const std::vector<T>& start) {
    REQUIRE(got.size() == ref.size());
    REQUIRE(start.size() == ref.size());
    const double diff = detail::l2_distance(got, ref), moved = detail::l2_distance(ref, start);
    if (!std::isfinite(diff) || !std::isfinite(moved)) return std::numeric_limits<double>::infinity();
    if (diff == 0) return 0;
    return moved > 0 ? diff / moved : std::numeric_limits<double>::infinity();
}

/// ||got - ref|| / ||ref|| (Euclidean norms): a tensor's relative difference as a whole, for
/// state such as Adam's moments whose small elements carry no precision of their own. Same
/// non-finite rules as movement_fraction.
template <class T>
double relative_l2(const std::vector<T>& got, const std::vector<T>& ref) {
    REQUIRE(got.size() == ref.size());
    return movement_fraction(got, ref, std::vector<T>(ref.size(), T{}));
}

/// float's unit roundoff (2^-24): the relative error of one rounded operation.
inline constexpr double kFloatU = 0x1p-24;

/// The error model of float sums computed in another order (a GPU kernel or cuBLAS against the
/// CPU twin, a batched product against one network's): `levels` nested reductions (a layer's
/// product, then the next layer's...) of up to `terms` terms each. Each level adds a rounding
/// error of about sqrt(terms) u of its terms' magnitude (rounding errors of a sum add like a
/// random walk); 4 sqrt(terms) u covers the tails. The terms' magnitude is taken as `scale`
/// (usually max_abs of the reference: the sums' error scales with the terms, not with each
/// result, so a result that cancels to near zero keeps the absolute bound).
inline Tol reordered_sums(int levels, double terms, double scale) {
    const double per_level = 4 * std::sqrt(terms) * kFloatU;
    return Tol{levels * per_level * scale, levels * per_level};
}

/// REQUIREs got == ref within |got - ref| <= atol + rtol * |ref| (atol = rtol = 0: equal
/// values); a NaN on either side fails. The optional fifth argument is fh::test::Nan::both_match.
#define FH_REQUIRE_CLOSE(got, ref, atol, rtol, ...)                                                            \
    do {                                                                                                       \
        const auto fh_m_ = ::fh::test::compare_close(                                                          \
            got, ref,                                                                                          \
            ::fh::test::Tol{static_cast<double>(atol), static_cast<double>(rtol)} __VA_OPT__(, ) __VA_ARGS__); \
        INFO(::fh::test::describe(fh_m_));                                                                     \
        REQUIRE(fh_m_.count == 0);                                                                             \
    } while (0)

/// CHECK form of FH_REQUIRE_CLOSE (the test goes on after a failure).
#define FH_CHECK_CLOSE(got, ref, atol, rtol, ...)                                                              \
    do {                                                                                                       \
        const auto fh_m_ = ::fh::test::compare_close(                                                          \
            got, ref,                                                                                          \
            ::fh::test::Tol{static_cast<double>(atol), static_cast<double>(rtol)} __VA_OPT__(, ) __VA_ARGS__); \
        INFO(::fh::test::describe(fh_m_));                                                                     \
        CHECK(fh_m_.count == 0);                                                                               \
    } while (0)

/// Equal sizes and the same bytes (NaNs included, with their payloads; -0 differs from +0).
template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
    return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

/// A tensor's bytes read as floats.
inline std::vector<float> as_floats(const std::vector<std::byte>& b) {
    std::vector<float> out(b.size() / sizeof(float));
    std::memcpy(out.data(), b.data(), out.size() * sizeof(float));
    return out;
}

}  // namespace fh::test
