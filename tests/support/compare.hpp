/// @file compare.hpp
/// @brief Seeded random inputs and tolerance comparisons for CPU-vs-GPU tests: a value passes
///        when |got - ref| <= atol + rtol * |ref|; failures print the first mismatches and the
///        largest error.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace fh::test {

/// n floats uniform in [lo, hi), never all zero, reproducible from the seed.
inline std::vector<float> random_floats(std::size_t n, std::uint64_t seed, float lo = -2.f,
                                        float hi = 2.f) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) x = dist(rng);
    return v;
}

struct Mismatches {
    std::size_t count = 0;
    double max_error = 0;
    std::string first;  ///< up to 5 "i: got vs ref" lines
};

template <class T>
Mismatches compare_close(std::span<const T> got, std::span<const T> ref, double atol, double rtol) {
    Mismatches m;
    REQUIRE(got.size() == ref.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
        const double g = static_cast<double>(got[i]), r = static_cast<double>(ref[i]);
        const double err = std::abs(g - r);
        const bool ok = (std::isnan(g) && std::isnan(r)) || err <= atol + rtol * std::abs(r);
        if (err > m.max_error || std::isnan(err)) m.max_error = err;
        if (!ok) {
            if (m.count < 5)
                m.first += "  [" + std::to_string(i) + "] got " + std::to_string(g) + " ref " +
                           std::to_string(r) + "\n";
            ++m.count;
        }
    }
    return m;
}

/// REQUIREs got == ref within tolerance (atol = rtol = 0: bit-for-bit equality of values).
#define FH_REQUIRE_CLOSE(got, ref, atol, rtol)                                               \
    do {                                                                                     \
        const auto fh_m_ = ::fh::test::compare_close<                                      \
            typename std::decay_t<decltype(ref)>::value_type>(got, ref, atol, rtol);        \
        INFO("mismatches: " << fh_m_.count << ", max error " << fh_m_.max_error << "\n"       \
                            << fh_m_.first);                                                 \
        REQUIRE(fh_m_.count == 0);                                                           \
    } while (0)

/// Equal sizes and the same bytes (NaNs included).
template <class T> bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
    return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

/// A tensor's bytes read as floats.
inline std::vector<float> as_floats(const std::vector<std::byte>& b) {
    std::vector<float> out(b.size() / sizeof(float));
    std::memcpy(out.data(), b.data(), out.size() * sizeof(float));
    return out;
}

/// The largest |a - b| relative to max(1, |a|) over two equal-sized vectors.
inline double max_relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
    REQUIRE(a.size() == b.size());
    double worst = 0;
    for (std::size_t k = 0; k < a.size(); ++k)
        worst = std::max(worst, std::fabs(static_cast<double>(a[k]) - b[k]) / std::max(1.0, std::fabs(1.0 * a[k])));
    return worst;
}

}  // namespace fh::test
