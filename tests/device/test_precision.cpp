/// @file test_precision.cpp
/// @brief gpu.precision on the CPU backend: core::round_to_bf16 (the one BF16 rounding of both
///        backends) against an independent reference, and the CPU twin's bf16 linear layers,
///        which must equal FP32 products of operands rounded beforehand, bit for bit.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "math/core.h"
#include "device/cpu_device.hpp"
#include "support/compare.hpp"

using fh::core::round_to_bf16;
using fh::ops::Activation;
using fh::ops::BackwardPart;
using fh::ops::CpuDevice;
using fh::ops::Precision;
using fh::test::random_floats;

namespace {

float from_bits(std::uint32_t u) {
    float x;
    std::memcpy(&x, &u, sizeof x);
    return x;
}
std::uint32_t to_bits(float x) {
    std::uint32_t u;
    std::memcpy(&u, &x, sizeof u);
    return u;
}

/// The reference rounding, written from the definition: of the two BF16 values around x (its
/// upper 16 bits, and the next one away from zero), the nearer in exact (double) arithmetic,
/// the one with an even last bit on a tie. Finite x only.
float reference_bf16(float x) {
    const std::uint32_t u = to_bits(x);
    const std::uint32_t low = u & 0xffff0000u, high = low + 0x10000u;  // toward zero, away from zero
    const double dl = std::abs(static_cast<double>(x) - static_cast<double>(from_bits(low)));
    // high may be the encoding of Inf (beyond the largest BF16): its distance is that of 2^128.
    const double hv = (high & 0x7f800000u) == 0x7f800000u ? std::ldexp(1.0, 128) * (x < 0 ? -1 : 1)
                                                          : static_cast<double>(from_bits(high));
    const double dh = std::abs(static_cast<double>(x) - hv);
    if (dl < dh) return from_bits(low);
    if (dh < dl) return from_bits(high);
    return ((low >> 16) & 1u) == 0 ? from_bits(low) : from_bits(high);
}

std::vector<float> rounded(std::vector<float> v) {
    for (float& x : v) x = round_to_bf16(x);
    return v;
}

}  // namespace

TEST_CASE("round_to_bf16: nearest, ties to even, specials, subnormals and overflow", "[precision]") {
    // Exact BF16 values stay.
    for (float x : {0.f, -0.f, 1.f, -2.5f, 0x1.fep127f, 0x1p-126f, 0x1p-133f})
        CHECK(to_bits(round_to_bf16(x)) == to_bits(x));
    // Ties: 1 + 2^-8 lies halfway between 1 (even) and 1 + 2^-7 (odd): down; 1 + 3 2^-8 halfway
    // between 1 + 2^-7 (odd) and 1 + 2^-6 (even): up. Just above a tie: up.
    CHECK(round_to_bf16(1.f + 0x1p-8f) == 1.f);
    CHECK(round_to_bf16(1.f + 3 * 0x1p-8f) == 1.f + 0x1p-6f);
    CHECK(round_to_bf16(-(1.f + 3 * 0x1p-8f)) == -(1.f + 0x1p-6f));
    CHECK(round_to_bf16(1.f + 0x1p-8f + 0x1p-20f) == 1.f + 0x1p-7f);
    CHECK(round_to_bf16(1.f + 0x1p-8f - 0x1p-20f) == 1.f);
    // Infinities stay; NaNs stay NaNs (quiet ones and one whose payload lies in the dropped bits).
    CHECK(round_to_bf16(std::numeric_limits<float>::infinity()) == std::numeric_limits<float>::infinity());
    CHECK(round_to_bf16(-std::numeric_limits<float>::infinity()) == -std::numeric_limits<float>::infinity());
    CHECK(std::isnan(round_to_bf16(std::numeric_limits<float>::quiet_NaN())));
    CHECK(std::isnan(round_to_bf16(from_bits(0x7f800001u))));
    CHECK(std::isnan(round_to_bf16(from_bits(0xff800001u))));
    CHECK(std::signbit(round_to_bf16(from_bits(0xffc00000u))));
    // Overflow: at and beyond the largest BF16 plus half its last unit, +-Inf; just below, the largest.
    CHECK(round_to_bf16(std::numeric_limits<float>::max()) == std::numeric_limits<float>::infinity());
    CHECK(round_to_bf16(-std::numeric_limits<float>::max()) == -std::numeric_limits<float>::infinity());
    CHECK(round_to_bf16(from_bits(0x7f7f8000u)) == std::numeric_limits<float>::infinity());
    CHECK(round_to_bf16(from_bits(0x7f7f7fffu)) == 0x1.fep127f);
    // Subnormals round on BF16's subnormal grid (2^-133 apart), not to zero: the smallest float
    // subnormal to 0, 1.5 2^-133 (a tie, odd below) to 2^-132, 1.25 2^-133 to 2^-133.
    CHECK(to_bits(round_to_bf16(0x1p-149f)) == 0u);
    CHECK(round_to_bf16(1.5f * 0x1p-133f) == 0x1p-132f);
    CHECK(round_to_bf16(1.25f * 0x1p-133f) == 0x1p-133f);
    CHECK(round_to_bf16(0x1.ffp-127f) == 0x1p-126f);  // the largest subnormal region rounds up into the normals
    CHECK(fh::core::bf16_bits(1.f) == 0x3f80);
    CHECK(fh::core::bf16_value(0x3f80) == 1.f);
}

TEST_CASE("round_to_bf16 equals the reference rounding on every exponent", "[precision]") {
    // Every exponent (subnormals included), the 16 dropped bits around the tie and at random.
    std::uint64_t s = 0x9e3779b97f4a7c15ull;
    const auto next = [&] {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        return static_cast<std::uint32_t>(s);
    };
    long long checked = 0;
    for (std::uint32_t sign : {0u, 0x80000000u})
        for (std::uint32_t e = 0; e < 255; ++e)
            for (std::uint32_t low : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu})
                for (int k = 0; k < 40; ++k) {
                    const std::uint32_t u = sign | (e << 23) | (next() & 0x007f0000u) | low;
                    const float x = from_bits(u);
                    INFO("x bits " << std::hex << u);
                    REQUIRE(to_bits(round_to_bf16(x)) == to_bits(reference_bf16(x)));
                    ++checked;
                }
    CHECK(checked == 2 * 255 * 6 * 40);
}

TEST_CASE("bf16 linear layers on the CPU equal FP32 products of operands rounded first, bit for bit",
          "[precision][nn]") {
    // The CPU twin of gpu.precision = "bf16": X and W rounded for the forward; dZ (after the
    // activation's backward, which reads the unrounded values) and X for dW, dZ and W for dX; the
    // bias, db and dZ itself in FP32. The same ops on an fp32 device, given the rounded operands.
    const int batch = 11, in = 9, out = 6;
    const auto X = random_floats(batch * in, 21), W = random_floats(out * in, 22, -0.5f, 0.5f);
    const auto b = random_floats(out, 23), dY0 = random_floats(batch * out, 24);
    for (Activation act : {Activation::none, Activation::relu, Activation::tanh})
        for (bool accumulate : {false, true}) {
            INFO("act " << static_cast<int>(act) << " accumulate " << accumulate);
            CpuDevice bf, fp;
            bf.set_precision(Precision::bf16);
            REQUIRE(fp.precision() == Precision::fp32);
            const auto dW0 = random_floats(out * in, 25), db0 = random_floats(out, 26);
            // bf16 device: forward and the whole backward.
            auto x = bf.from_host<float>(X), w = bf.from_host<float>(W), bb = bf.from_host<float>(b);
            auto y = bf.alloc<float>(batch * out), dy = bf.from_host<float>(dY0), dx = bf.alloc<float>(batch * in);
            auto dw = bf.from_host<float>(dW0), db = bf.from_host<float>(db0);
            bf.linear_forward(y.view(), x.cview(), w.cview(), bb.cview(), batch, in, out, act);
            bf.linear_backward(dx.view(), dw.view(), db.view(), dy.view(), y.cview(), x.cview(), w.cview(), batch, in,
                               out, act, accumulate);
            // fp32 device: the forward on rounded X and W; the activation's and bias parts on the
            // unrounded dY and Y; dW and dX from the rounded dZ, X and W.
            auto rx = fp.from_host<float>(rounded(X)), rw = fp.from_host<float>(rounded(W)),
                 fb = fp.from_host<float>(b);
            auto fy = fp.alloc<float>(batch * out), fdy = fp.from_host<float>(dY0), fdx = fp.alloc<float>(batch * in);
            auto fdw = fp.from_host<float>(dW0), fdb = fp.from_host<float>(db0);
            fp.linear_forward(fy.view(), rx.cview(), rw.cview(), fb.cview(), batch, in, out, act);
            REQUIRE(fh::test::same_bits(bf.to_host(y.cview()), fp.to_host(fy.cview())));
            fp.linear_backward({}, fdw.view(), fdb.view(), fdy.view(), fy.cview(), rx.cview(), rw.cview(), batch, in,
                               out, act, accumulate, BackwardPart::activation | BackwardPart::bias);
            const auto dz = fp.to_host(fdy.cview());
            auto rdz = fp.from_host<float>(rounded(dz));
            fp.linear_backward(fdx.view(), fdw.view(), fdb.view(), rdz.view(), fy.cview(), rx.cview(), rw.cview(),
                               batch, in, out, act, accumulate, BackwardPart::weights | BackwardPart::input);
            CHECK(fh::test::same_bits(bf.to_host(dy.cview()), dz));  // dZ itself stays FP32
            CHECK(fh::test::same_bits(bf.to_host(dw.cview()), fp.to_host(fdw.cview())));
            CHECK(fh::test::same_bits(bf.to_host(db.cview()), fp.to_host(fdb.cview())));
            CHECK(fh::test::same_bits(bf.to_host(dx.cview()), fp.to_host(fdx.cview())));
            // And the rounding changed something (the test would not see a missing one otherwise).
            CpuDevice plain;
            auto px = plain.from_host<float>(X), pw = plain.from_host<float>(W), pb = plain.from_host<float>(b);
            auto py = plain.alloc<float>(batch * out);
            plain.linear_forward(py.view(), px.cview(), pw.cview(), pb.cview(), batch, in, out, act);
            CHECK_FALSE(fh::test::same_bits(bf.to_host(y.cview()), plain.to_host(py.cview())));
        }
}

TEST_CASE("bf16 on the CPU: batched layers and the head backward round as the single layers do", "[precision][nn]") {
    // linear_forward_batched and linear_backward_batched per network, and head_backward against
    // linear_backward on the head then the hidden layer's activation and bias parts (its documented
    // equal), all in bf16: the same bits; and the batched forward differs from fp32's.
    const int count = 3, batch = 7, in = 10, out = 2;
    const std::size_t stride = static_cast<std::size_t>(out) * in + out + 5;  // W, b, some other parameters
    const auto params = random_floats(stride * count, 31, -0.5f, 0.5f);
    const auto X = random_floats(static_cast<std::size_t>(count) * batch * in, 32);
    const auto dOut = random_floats(static_cast<std::size_t>(count) * batch * out, 33);
    const auto Z = random_floats(static_cast<std::size_t>(count) * batch * in, 34, 0.f, 0.9f);  // a tanh layer's output
    CpuDevice ops;
    ops.set_precision(Precision::bf16);
    auto p = ops.from_host<float>(params), x = ops.from_host<float>(X);
    auto y = ops.alloc<float>(static_cast<std::size_t>(count) * batch * out);
    ops.linear_forward_batched(y.view(), x.cview(), static_cast<std::size_t>(batch) * in, p.cview(), stride, 0,
                               static_cast<std::ptrdiff_t>(out) * in, count, batch, in, out, Activation::none);
    const auto batched = ops.to_host(y.cview());
    for (int k = 0; k < count; ++k) {
        const std::size_t ks = static_cast<std::size_t>(k);
        auto one = ops.alloc<float>(static_cast<std::size_t>(batch) * out);
        ops.linear_forward(one.view(), x.cview().subview(ks * batch * in, static_cast<std::size_t>(batch) * in),
                           p.cview().subview(ks * stride, static_cast<std::size_t>(out) * in),
                           p.cview().subview(ks * stride + static_cast<std::size_t>(out) * in, out), batch, in, out,
                           Activation::none);
        const auto got = ops.to_host(one.cview());
        CHECK(std::equal(got.begin(), got.end(), batched.begin() + static_cast<std::ptrdiff_t>(ks * batch * out)));
    }
    CpuDevice fp;
    auto fpp = fp.from_host<float>(params), fx = fp.from_host<float>(X);
    auto fy = fp.alloc<float>(y.size());
    fp.linear_forward_batched(fy.view(), fx.cview(), static_cast<std::size_t>(batch) * in, fpp.cview(), stride, 0,
                              static_cast<std::ptrdiff_t>(out) * in, count, batch, in, out, Activation::none);
    CHECK_FALSE(fh::test::same_bits(fp.to_host(fy.cview()), batched));

    // head_backward (the head's W at 0, its b after it; the hidden layer without a bias) against
    // linear_backward_batched on the head (every part, dX into dZ), then the hidden tanh's backward.
    const auto zero = std::vector<float>(params.size(), 0.f);
    auto g1 = ops.from_host<float>(zero), g2 = ops.from_host<float>(zero);
    auto dz1 = ops.alloc<float>(X.size()), dz2 = ops.alloc<float>(X.size());
    auto z = ops.from_host<float>(Z), d = ops.from_host<float>(dOut), d_copy = ops.from_host<float>(dOut);
    const auto head_b = static_cast<std::ptrdiff_t>(out) * in;
    ops.head_backward(dz1.view(), g1.view(), d.cview(), z.cview(), p.cview(), stride, 0, head_b, -1, count, batch, in,
                      out, Activation::tanh, false);
    ops.linear_backward_batched(dz2.view(), g2.view(), d_copy.view(), y.cview(), z.cview(),
                                static_cast<std::size_t>(batch) * in, p.cview(), stride, 0, head_b, count, batch, in,
                                out, Activation::none, false);
    auto want_dz = ops.to_host(dz2.cview());
    for (std::size_t i = 0; i < want_dz.size(); ++i)
        want_dz[i] = want_dz[i] * fh::core::activation_derivative(Z[i], Activation::tanh);
    CHECK(fh::test::same_bits(ops.to_host(dz1.cview()), want_dz));
    CHECK(fh::test::same_bits(ops.to_host(g1.cview()), ops.to_host(g2.cview())));
    // In fp32 the head's gradients differ (the rounding is there to see).
    auto fg = fp.from_host<float>(zero), fdz = fp.alloc<float>(X.size());
    auto fz = fp.from_host<float>(Z), fd = fp.from_host<float>(dOut);
    fp.head_backward(fdz.view(), fg.view(), fd.cview(), fz.cview(), fpp.cview(), stride, 0, head_b, -1, count, batch,
                     in, out, Activation::tanh, false);
    CHECK_FALSE(fh::test::same_bits(fp.to_host(fg.cview()), ops.to_host(g1.cview())));
}
