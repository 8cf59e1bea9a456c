/// @file cpu_device.cpp
/// @brief The CPU reference backend's memory and linear layers: plain loops written from the math
///        (math/core.h, src/device/linear_reference.hpp), the oracle the CUDA backend is tested against.
#include "device/cpu_device.hpp"

#include <cmath>
#include <cstring>
#include <new>

#include "device/linear_reference.hpp"

namespace fh::ops {

namespace {
constexpr std::align_val_t kAlignment{64};
}  // namespace

void* CpuDevice::allocate_bytes(std::size_t bytes) {
    return ::operator new(bytes == 0 ? 1 : bytes, kAlignment);
}

void CpuDevice::release_bytes(void* p) noexcept {
    ::operator delete(p, kAlignment);
}

void CpuDevice::upload_bytes(void* dst, const void* src, std::size_t bytes) {
    if (bytes) std::memcpy(dst, src, bytes);
}

void CpuDevice::download_bytes(void* dst, const void* src, std::size_t bytes) {
    if (bytes) std::memcpy(dst, src, bytes);
}

void CpuDevice::copy_bytes(void* dst, const void* src, std::size_t bytes) {
    std::memcpy(dst, src, bytes);
}

// gpu.precision = "bf16": every product's operands rounded to BF16 first (the CUDA backend rounds
// the same tensors with the same core::round_to_bf16), the sums in FP32 as in fp32; the bias, the
// activation and its derivative, and the bias gradient read the unrounded values.
const float* CpuDevice::operand(const float* x, std::size_t n, std::vector<float>& copy) const {
    if (precision() != Precision::bf16) return x;
    copy.resize(n);
    for (std::size_t i = 0; i < n; ++i) copy[i] = core::round_to_bf16(x[i]);
    return copy.data();
}

namespace {
std::size_t elements(int rows, int cols) {
    return static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
}
}  // namespace

void CpuDevice::linear_forward_impl(View<float> Y, View<const float> X, View<const float> W, View<const float> b,
                                    int batch, int in, int out, Activation act) {
    ops::ref::linear_forward<float>(Y.data(), operand(X.data(), elements(batch, in), a_),
                                    operand(W.data(), elements(out, in), b_), b.empty() ? nullptr : b.data(), batch, in,
                                    out, act);
}

void CpuDevice::linear_forward_batched_impl(View<float> Y, View<const float> X, std::size_t x_stride,
                                            View<const float> params, std::size_t param_stride, std::size_t w_offset,
                                            std::ptrdiff_t b_offset, int count, int batch, int in, int out,
                                            Activation act) {
    const std::size_t ys = static_cast<std::size_t>(batch) * static_cast<std::size_t>(out);
    for (std::size_t k = 0; k < static_cast<std::size_t>(count); ++k) {
        const float* p = params.data() + k * param_stride;
        ops::ref::linear_forward<float>(Y.data() + k * ys, operand(X.data() + k * x_stride, elements(batch, in), a_),
                                        operand(p + w_offset, elements(out, in), b_),
                                        b_offset < 0 ? nullptr : p + b_offset, batch, in, out, act);
    }
}

void CpuDevice::linear_backward_impl(View<float> dX, View<float> dW, View<float> db, View<float> dY,
                                     View<const float> Y, View<const float> X, View<const float> W, int batch, int in,
                                     int out, Activation act, bool accumulate, BackwardPart parts) {
    if (has_part(parts, BackwardPart::activation))
        ops::ref::activation_backward<float>(dY.data(), Y.data(), batch, out, act);
    if (has_part(parts, BackwardPart::bias) && !db.empty())
        ops::ref::bias_backward<float>(db.data(), dY.data(), batch, out, accumulate);
    const bool weights = has_part(parts, BackwardPart::weights);
    const bool input = has_part(parts, BackwardPart::input) && !dX.empty();
    if (!weights && !input) return;
    const float* dZ = operand(dY.data(), elements(batch, out), c_);
    if (weights)
        ops::ref::weight_backward<float>(dW.data(), dZ, operand(X.data(), elements(batch, in), a_), batch, in, out,
                                         accumulate);
    if (input) ops::ref::input_backward<float>(dX.data(), dZ, operand(W.data(), elements(out, in), b_), batch, in, out);
}

// The head's linear_backward (no activation: its dZ is dOut, as act'(y) = 1 would leave it), then
// the hidden layer's activation and bias parts, per network: the same calls, the same bits.
void CpuDevice::head_backward_impl(View<float> dZ, View<float> grads, View<const float> dOut, View<const float> X,
                                   View<const float> params, std::size_t param_stride, std::size_t head_w_offset,
                                   std::ptrdiff_t head_b_offset, std::ptrdiff_t hidden_b_offset, int count, int batch,
                                   int in, int out, Activation act, bool accumulate) {
    const std::size_t rows = static_cast<std::size_t>(batch), xs = rows * static_cast<std::size_t>(in);
    const std::size_t ds = rows * static_cast<std::size_t>(out);
    for (std::size_t k = 0; k < static_cast<std::size_t>(count); ++k) {
        const float* d = dOut.data() + k * ds;
        const float* x = X.data() + k * xs;
        float* z = dZ.data() + k * xs;
        float* g = grads.data() + k * param_stride;
        const float* p = params.data() + k * param_stride;
        if (head_b_offset >= 0) ops::ref::bias_backward<float>(g + head_b_offset, d, batch, out, accumulate);
        const float* d_operand = operand(d, elements(batch, out), c_);
        ops::ref::weight_backward<float>(g + head_w_offset, d_operand, operand(x, elements(batch, in), a_), batch, in,
                                         out, accumulate);
        ops::ref::input_backward<float>(z, d_operand, operand(p + head_w_offset, elements(out, in), b_), batch, in,
                                        out);
        ops::ref::activation_backward<float>(z, x, batch, in, act);
        if (hidden_b_offset >= 0) ops::ref::bias_backward<float>(g + hidden_b_offset, z, batch, in, accumulate);
    }
}

// One linear_backward per network, on its blocks (the same bits as those calls).
void CpuDevice::linear_backward_batched_impl(View<float> dX, View<float> grads, View<float> dY, View<const float> Y,
                                             View<const float> X, std::size_t x_stride, View<const float> params,
                                             std::size_t param_stride, std::size_t w_offset, std::ptrdiff_t b_offset,
                                             int count, int batch, int in, int out, Activation act, bool accumulate,
                                             BackwardPart parts) {
    linear_backward_each(dX, grads, dY, Y, X, x_stride, params, param_stride, w_offset, b_offset, count, batch, in, out,
                         act, accumulate, parts);
}

}  // namespace fh::ops
