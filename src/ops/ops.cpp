/// @file ops.cpp
/// @brief The checks shared by both backends, and the ops composed from others.
#include "ops/ops.hpp"

#include <fmt/format.h>

#include <limits>

namespace fh::ops {

void Ops::require_same_size(std::size_t a, std::size_t b, const char* op) {
    if (a != b)
        throw std::invalid_argument(fmt::format("ops::{}: size mismatch ({} vs {} elements)", op, a, b));
}

int Ops::checked_int_size(std::size_t n, const char* op) {
    if (n > static_cast<std::size_t>(std::numeric_limits<int>::max()))
        throw std::invalid_argument(
            fmt::format("ops::{}: {} elements exceed the kernels' int index range", op, n));
    return static_cast<int>(n);
}

void Ops::fill(View<float> y, float value) {
    checked_int_size(y.size(), "fill");
    if (!y.empty()) fill_impl(y, value);
}

void Ops::copy(View<float> dst, View<const float> src) {
    require_same_size(dst.size(), src.size(), "copy");
    checked_int_size(dst.size(), "copy");
    if (overlaps(dst, View<const float>(src)))
        throw std::invalid_argument("ops::copy: dst and src overlap; the copy kernel's pointers are "
                                    "__restrict__ and must refer to distinct buffers");
    if (!dst.empty()) copy_impl(dst, src);
}

void Ops::saxpy(View<float> y, float a, View<const float> x) {
    require_same_size(y.size(), x.size(), "saxpy");
    checked_int_size(y.size(), "saxpy");
    if (overlaps(y, x))
        throw std::invalid_argument(
            "ops::saxpy: y and x overlap. The saxpy kernel's pointers are __restrict__, so an "
            "aliased call is undefined behaviour (it produced NaNs in the earlier system). To scale "
            "a buffer in place use ops::scale (dqn_scale_f32_kernel).");
    if (!y.empty()) saxpy_impl(y, a, x);
}

void Ops::scale(View<float> y, float alpha) {
    checked_int_size(y.size(), "scale");
    if (!y.empty()) scale_impl(y, alpha);
}

void blend_c51_mse_gradient(Ops& ops, View<float> c51_grad, View<const float> mse_grad,
                            float alpha) {
    if (!(alpha >= 0.f && alpha <= 1.f))
        throw std::invalid_argument(fmt::format("blend: alpha {} is outside [0, 1]", alpha));
    ops.scale(c51_grad, alpha);                // c51 *= alpha (single pointer, in place)
    ops.saxpy(c51_grad, 1.f - alpha, mse_grad);  // c51 += (1 - alpha) * mse (distinct buffers)
}

}  // namespace fh::ops
