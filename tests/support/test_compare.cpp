/// @file test_compare.cpp
/// @brief The comparison helpers of support/compare.hpp: the tolerance rule, NaN and infinity
///        handling, sizes, the report of the first mismatches.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <span>
#include <vector>

#include "support/compare.hpp"

using fh::test::compare_close;
using fh::test::Nan;
using fh::test::Tol;

namespace {
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
}  // namespace

TEST_CASE("compare_close: a NaN on either side is a difference unless both must be NaN", "[support][compare]") {
    const std::vector<float> a{0.1f, 0.2f}, b{0.1f, kNan}, both{0.1f, kNan};
    for (const Tol tol : {Tol{0, 0}, Tol{1e-3, 1e-3}, Tol{1e9, 1e9}}) {
        INFO("atol " << tol.atol << " rtol " << tol.rtol);
        const auto m = compare_close(b, a, tol);
        CHECK(m.count == 1);
        CHECK(m.nonfinite == 1);
        CHECK(m.worst == std::numeric_limits<double>::infinity());
        CHECK(m.first.find("[1] got nan ref 0.200000003") != std::string::npos);
        CHECK(compare_close(a, b, tol).count == 1);                      // NaN in the reference
        CHECK(compare_close(both, b, tol).count == 1);                   // NaN on both sides: still a difference
        CHECK(compare_close(both, b, tol, Nan::both_match).count == 0);  // unless the test says so
        CHECK(compare_close(b, a, tol, Nan::both_match).count == 1);     // but only on both sides
    }
}

TEST_CASE("compare_close: an infinity matches only the same infinity", "[support][compare]") {
    const std::vector<float> pos{1.f, kInf}, neg{1.f, -kInf}, big{1.f, 3e38f};
    CHECK(compare_close(pos, pos, Tol{0, 0}).count == 0);
    CHECK(compare_close(pos, neg, Tol{1e9, 1e9}).count == 1);
    CHECK(compare_close(big, pos, Tol{1e9, 1e9}).count == 1);
    CHECK(compare_close(pos, big, Tol{1e9, 1e9}).nonfinite == 1);
    CHECK(compare_close(std::vector<float>{kInf}, std::vector<float>{kNan}, Tol{0, 0}, Nan::both_match).count == 1);
}

TEST_CASE("compare_close: |got - ref| <= atol + rtol * |ref|, both parts, no max(1, |ref|) denominator",
          "[support][compare]") {
    // Adam's second moments are ~1e-8: a relative error of 50% must show under a relative bound.
    const std::vector<float> v{1e-8f, 2e-8f}, off{1.5e-8f, 2e-8f};
    CHECK(compare_close(off, v, Tol{0, 1e-3}).count == 1);
    CHECK(compare_close(off, v, Tol{0, 0.6}).count == 0);
    CHECK(compare_close(off, v, Tol{1e-8, 0}).count == 0);  // an absolute bound as loose as the values passes it
    // The bound is atol + rtol * |ref| (the reference's magnitude, not got's), inclusive.
    const std::vector<double> ref{100.0, -100.0, 0.0};
    CHECK(compare_close(std::vector<double>{101.0, -101.0, 0.5}, ref, Tol{0.5, 0.005}).count == 0);
    const auto m = compare_close(std::vector<double>{101.1, -101.0, 0.6}, ref, Tol{0.5, 0.005});
    CHECK(m.count == 2);
    CHECK(m.max_error == Approx(1.1));
    CHECK(m.worst == Approx(1.2));  // element 2: 0.6 / 0.5 (element 0: 1.1 / (0.5 + 0.5))
    CHECK(m.first.find("[0] got 101.1 ref 100") != std::string::npos);
    CHECK(m.first.find("[2] got 0.6 ref 0") != std::string::npos);
    // Zero tolerance: equal values only (+0 and -0 are equal values; same_bits tells them apart).
    CHECK(compare_close(std::vector<float>{0.f, 1.f}, std::vector<float>{-0.f, 1.f}, Tol{}).count == 0);
    CHECK(!fh::test::same_bits(std::vector<float>{0.f}, std::vector<float>{-0.f}));
    CHECK(compare_close(std::vector<float>{1.f}, std::vector<float>{std::nextafter(1.f, 2.f)}, Tol{}).worst ==
          std::numeric_limits<double>::infinity());
}

TEST_CASE("compare_close: sizes, spans, and the first five mismatches", "[support][compare]") {
    CHECK(compare_close(std::vector<float>{1.f}, std::vector<float>{1.f, 2.f}, Tol{1, 1}).count == 1);
    std::vector<float> ref(100, 1.f), got(100, 2.f);
    const auto m = compare_close(std::span<const float>(got), std::span<const float>(ref), Tol{0.1, 0});
    CHECK(m.count == 100);
    CHECK(m.first.find("[4]") != std::string::npos);
    CHECK(m.first.find("[5]") == std::string::npos);
    CHECK(fh::test::describe(m).find("mismatches: 100 (0 non-finite), max error 1") == 0);
    CHECK(fh::test::max_abs(std::vector<float>{-3.f, 2.f}) == 3.0);
    CHECK(std::isinf(fh::test::max_abs(std::vector<float>{1.f, kInf})));
}
