/// @file core.h
/// @brief Scalar math of the core numeric ops (cuda/kernels/core_vector.cu, core_network.cu),
///        shared with the CPU twins (src/device/cpu_device.cpp) and the templated reference
///        (src/device/linear_reference.hpp): the saxpy element, activations, the gradient clip factor and
///        the Adam element. The activation math is templated so the gradient checks run it in
///        double.
#pragma once

#include "math/host_device.h"

#if defined(__CUDACC__)
#include <cuda/std/cmath>
#define FH_NN_MATH_NS cuda::std
#else
#include <cmath>
#define FH_NN_MATH_NS std
#endif

namespace fh::core {

/// The saxpy element, shared by the kernel and the CPU twin so both round identically
/// (an explicit fma: nvcc would contract a*x+y into one anyway, g++ on x86-64 would not).
FH_HD float saxpy_element(float y, float a, float x) {
    return __builtin_fmaf(a, x, y);
}

/// Elementwise activation of a linear layer. Values are part of the kernel ABI.
enum class Activation : int { none = 0, relu = 1, tanh = 2 };

/// act(z).
template <class T>
FH_HD T activate(T z, Activation a) {
    switch (a) {
        case Activation::relu:
            return z > T(0) ? z : T(0);
        case Activation::tanh:
            return FH_NN_MATH_NS::tanh(z);
        default:
            return z;
    }
}

/// act'(z) written through the activated output y = act(z) (what backward keeps):
/// relu: 1 if y > 0 else 0 (the derivative at z = 0 is taken as 0); tanh: 1 - y^2; none: 1.
template <class T>
FH_HD T activation_derivative(T y, Activation a) {
    switch (a) {
        case Activation::relu:
            return y > T(0) ? T(1) : T(0);
        case Activation::tanh:
            return T(1) - y * y;
        default:
            return T(1);
    }
}

/// A step, epoch or update number that a kernel takes from its launch or from device memory:
/// counter == nullptr: the value `offset` (given by the host); else counter[0] * scale + offset.
/// What lets a captured sequence (replayed unchanged, run after run) use numbers that change:
/// e.g. PPO's collection step rollouts * T + t with rollouts counted on the device.
struct CounterValue {
    const long long* counter = nullptr;
    long long scale = 1;
    long long offset = 0;
    CounterValue() = default;
    /// A value from the host (implicit, so a plain number is a CounterValue).
    FH_HD CounterValue(long long value) : offset(value) {}
    FH_HD CounterValue(const long long* c, long long s, long long o) : counter(c), scale(s), offset(o) {}
    FH_HD long long value() const { return counter != nullptr ? *counter * scale + offset : offset; }
    /// Agent a's number in a population's op (the *_agents ops): counter[a * agent_stride] *
    /// scale + offset; agent_stride 0 (the default): one counter for every agent.
    long long agent_stride = 0;
    FH_HD CounterValue agent(long long a) const {
        CounterValue v = *this;
        if (counter != nullptr) v.counter += a * agent_stride;
        return v;
    }
};

/// a * b, a + b and a - b each rounded on its own: on the device never contracted into a fused
/// multiply-add (nvcc would choose per kernel which products to fuse, so two kernels running the
/// same source could round differently), on the host plain (the project builds with
/// -ffp-contract=off). What makes the Adam element equal on both backends bit for bit.
template <class T>
FH_HD T mul_rn(T a, T b) {
#if defined(__CUDA_ARCH__)
    if constexpr (sizeof(T) == sizeof(double))
        return __dmul_rn(a, b);
    else
        return __fmul_rn(a, b);
#else
    return a * b;
#endif
}
template <class T>
FH_HD T add_rn(T a, T b) {
#if defined(__CUDA_ARCH__)
    if constexpr (sizeof(T) == sizeof(double))
        return __dadd_rn(a, b);
    else
        return __fadd_rn(a, b);
#else
    return a + b;
#endif
}
template <class T>
FH_HD T sub_rn(T a, T b) {
#if defined(__CUDA_ARCH__)
    if constexpr (sizeof(T) == sizeof(double))
        return __dsub_rn(a, b);
    else
        return __fsub_rn(a, b);
#else
    return a - b;
#endif
}

/// The bits of a float (an integer view of its IEEE 754 binary32 encoding).
FH_HD unsigned float_bits(float x) {
#if defined(__CUDA_ARCH__)
    return __float_as_uint(x);
#else
    unsigned u;
    __builtin_memcpy(&u, &x, sizeof u);
    return u;
#endif
}
/// The float of these bits.
FH_HD float bits_float(unsigned u) {
#if defined(__CUDA_ARCH__)
    return __uint_as_float(u);
#else
    float x;
    __builtin_memcpy(&x, &u, sizeof x);
    return x;
#endif
}

/// x rounded to BF16 (bfloat16: float's sign and 8 exponent bits, 7 of its 23 fraction bits; unit
/// roundoff 2^-8), to nearest with ties to even, as the BF16 encoding: float's upper 16 bits.
/// Subnormals round on BF16's subnormal grid (no flush to zero); a value at or beyond the largest
/// BF16 (0x1.fep127) plus half its last unit rounds to +-Inf; +-Inf stay; a NaN stays a NaN (made
/// quiet, sign and top payload bits kept). The one definition of the rounding of gpu.precision =
/// "bf16": the conversion kernel (network_round_bf16_kernel) and the CPU backend both use it.
FH_HD unsigned short bf16_bits(float x) {
    const unsigned u = float_bits(x);
    if ((u & 0x7f800000u) == 0x7f800000u)  // Inf or NaN: no rounding (a NaN keeps a fraction bit set)
        return static_cast<unsigned short>((u >> 16) | ((u & 0x007fffffu) != 0 ? 0x0040u : 0u));
    const unsigned lsb = (u >> 16) & 1u;  // ties go to the even one of the two neighbours
    return static_cast<unsigned short>((u + 0x7fffu + lsb) >> 16);
}
/// The float a BF16 encoding stands for (exact: every BF16 value is a float).
FH_HD float bf16_value(unsigned short b) {
    return bits_float(static_cast<unsigned>(b) << 16);
}
/// x rounded to BF16, as a float (bf16_value(bf16_bits(x))): what a product's operand becomes in
/// gpu.precision = "bf16". Products of two such values are exact in float (8 + 8 significant bits).
FH_HD float round_to_bf16(float x) {
    return bf16_value(bf16_bits(x));
}

/// Adam's hyper-parameters for one update (Kingma & Ba 2015; decoupled weight decay as in
/// AdamW, Loshchilov & Hutter 2019).
struct AdamParams {
    float lr = 1e-3f;          ///< learning rate
    float beta1 = 0.9f;        ///< first-moment decay
    float beta2 = 0.999f;      ///< second-moment decay
    float eps = 1e-8f;         ///< added to sqrt(vhat)
    float clip_norm = 0.f;     ///< > 0: scale gradients by min(1, clip_norm / (norm + 1e-6))
    float weight_decay = 0.f;  ///< decoupled: p -= lr * weight_decay * p (0: plain Adam)
    int step = 1;              ///< 1-based number of this update (bias correction)
};

/// What one Adam launch needs, with the bias corrections 1 - beta^step (at_step, in double by
/// repeated squaring), so both backends use the same floats.
struct AdamConstants {
    float lr, beta1, beta2, eps, clip_norm, weight_decay;
    float bias_correction1;  ///< 1 - beta1^step
    float bias_correction2;  ///< 1 - beta2^step
};

/// The per-launch constants of p without the bias corrections (at_step adds those).
FH_HD AdamConstants constants_of(const AdamParams& p) {
    AdamConstants c{};
    c.lr = p.lr;
    c.beta1 = p.beta1;
    c.beta2 = p.beta2;
    c.eps = p.eps;
    c.clip_norm = p.clip_norm;
    c.weight_decay = p.weight_decay;
    return c;
}

/// base^e for e >= 0 by repeated squaring in double: the same multiplications on every backend
/// (pow itself may differ in its last bit between the host's and the device's libraries).
FH_HD double power(double base, long long e) {
    double result = 1.0;
    while (e > 0) {
        if (e & 1) result = mul_rn(result, base);
        base = mul_rn(base, base);
        e >>= 1;
    }
    return result;
}

/// c with the bias corrections of update number `step` (1-based): 1 - beta^step in double by
/// power(), so an update number read from the device's memory (a captured update, which takes
/// no per-update value from the host) gives the same floats on both backends.
FH_HD AdamConstants at_step(AdamConstants c, long long step) {
    c.bias_correction1 = static_cast<float>(sub_rn(1.0, power(static_cast<double>(c.beta1), step)));
    c.bias_correction2 = static_cast<float>(sub_rn(1.0, power(static_cast<double>(c.beta2), step)));
    return c;
}

/// The factor that clips a gradient of global norm `norm` to `clip_norm`: min(1, clip_norm /
/// (norm + 1e-6)) when clip_norm > 0, else 1. A NaN norm gives 1 (the training guard skips that
/// update through the gate).
FH_HD float clip_scale(float norm, float clip_norm) {
    if (!(clip_norm > 0.f)) return 1.f;
    const float s = clip_norm / (norm + 1e-6f);
    return s < 1.f ? s : 1.f;
}

/// One parameter's Adam update, in place (p, m, v), for the raw gradient g and the clip factor.
/// Every product and sum rounded on its own (mul_rn, add_rn): the same floats from every kernel
/// and the CPU twin (division and sqrt are IEEE-rounded on both).
FH_HD void adam_element(float& p, float& m, float& v, float g_raw, float scale, const AdamConstants& c) {
    const float g = mul_rn(g_raw, scale);
    m = add_rn(mul_rn(c.beta1, m), mul_rn(1.f - c.beta1, g));
    v = add_rn(mul_rn(c.beta2, v), mul_rn(1.f - c.beta2, mul_rn(g, g)));
    const float mhat = m / c.bias_correction1;
    const float vhat = v / c.bias_correction2;
    p = sub_rn(p, mul_rn(c.lr, add_rn(mhat / add_rn(FH_NN_MATH_NS::sqrt(vhat), c.eps), mul_rn(c.weight_decay, p))));
}

}  // namespace fh::core
