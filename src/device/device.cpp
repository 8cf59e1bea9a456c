/// @file device.cpp
/// @brief The linear layers' argument checks, run once for both backends before their
///        implementations; gpu.precision's names; counter_value.
#include "device/device.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace fh::ops {

namespace {

void require_positive(int v, const char* what, const char* op) {
    if (v < 1) throw std::invalid_argument(fmt::format("ops::{}: {} must be >= 1, got {}", op, what, v));
}

void require_activation(Activation a, const char* op) {
    const int v = static_cast<int>(a);
    if (v < 0 || v > 2) throw std::invalid_argument(fmt::format("ops::{}: unknown activation {}", op, v));
}

std::size_t mul(int a, int b) {
    return static_cast<std::size_t>(a) * static_cast<std::size_t>(b);
}

/// A layer's sizes (each >= 1) and activation, as every linear op checks them.
void require_layer(int batch, int in, int out, Activation act, const char* op) {
    require_positive(batch, "batch", op);
    require_positive(in, "in", op);
    require_positive(out, "out", op);
    require_activation(act, op);
}

/// The backward ops' part set: at least one part, no unknown bit.
void require_parts(BackwardPart parts, const char* op) {
    const unsigned p = static_cast<unsigned>(parts);
    detail::require(p >= 1 && p <= static_cast<unsigned>(BackwardPart::all), op, "parts must name at least one part");
}

/// Where a batched layer's slices of one network end (its W, and b unless b_offset < 0).
std::size_t layer_end(std::size_t w_offset, std::ptrdiff_t b_offset, int in, int out) {
    std::size_t end = w_offset + mul(out, in);
    if (b_offset >= 0) end = std::max(end, static_cast<std::size_t>(b_offset) + static_cast<std::size_t>(out));
    return end;
}

}  // namespace

void Device::linear_forward(View<float> Y, View<const float> X, View<const float> W, View<const float> b, int batch,
                            int in, int out, Activation act) {
    const char* op = "linear_forward";
    require_layer(batch, in, out, act, op);
    detail::require_size(Y.size(), mul(batch, out), op, "Y (batch, out)");
    detail::require_size(X.size(), mul(batch, in), op, "X (batch, in)");
    detail::require_size(W.size(), mul(out, in), op, "W (out, in)");
    if (!b.empty()) detail::require_size(b.size(), static_cast<std::size_t>(out), op, "b (out)");
    detail::require_int_sizes(op, Y.size(), X.size(), W.size());
    detail::require_distinct(
        op, {detail::range("Y", Y), detail::range("X", X), detail::range("W", W), detail::range("b", b)});
    linear_forward_impl(Y, X, W, b, batch, in, out, act);
}

bool Device::mlp_infer(View<float> Y, View<const float> X, View<const float> params, abi::MlpInferLayers layers,
                       int batch) {
    const char* op = "mlp_infer";
    require_positive(batch, "batch", op);
    detail::require(layers.count >= 1 && layers.count <= abi::kMlpInferMaxLayers, op,
                    "layers.count must be in [1, kMlpInferMaxLayers]");
    layers.max_weights = 0;
    layers.max_width = 0;
    for (int l = 0; l < layers.count; ++l) {
        const int in = layers.in[l], out = layers.out[l];
        require_positive(in, "in", op);
        require_positive(out, "out", op);
        require_activation(layers.act[l], op);
        detail::require(l == 0 || in == layers.out[l - 1], op, "each layer's in must be the previous layer's out");
        detail::require(
            layers.weight[l] >= 0 && static_cast<std::size_t>(layers.weight[l]) + mul(out, in) <= params.size(), op,
            "a layer's weights lie outside params");
        detail::require(layers.bias[l] < 0 ||
                            static_cast<std::size_t>(layers.bias[l]) + static_cast<std::size_t>(out) <= params.size(),
                        op, "a layer's bias lies outside params");
        detail::checked_int_size(mul(out, in), op);
        layers.max_weights = std::max(layers.max_weights, in * out);
        layers.max_width = std::max({layers.max_width, in, out});
    }
    detail::require_size(X.size(), mul(batch, layers.in[0]), op, "X (batch, in)");
    detail::require_size(Y.size(), mul(batch, layers.out[layers.count - 1]), op, "Y (batch, out)");
    detail::require_distinct(op, {detail::range("Y", Y), detail::range("X", X), detail::range("params", params)});
    return mlp_infer_impl(Y, X, params, layers, batch);
}

void Device::linear_forward_batched(View<float> Y, View<const float> X, std::size_t x_stride, View<const float> params,
                                    std::size_t param_stride, std::size_t w_offset, std::ptrdiff_t b_offset, int count,
                                    int batch, int in, int out, Activation act) {
    const char* op = "linear_forward_batched";
    require_positive(count, "count", op);
    require_layer(batch, in, out, act, op);
    const std::size_t n = static_cast<std::size_t>(count);
    detail::require_size(Y.size(), n * mul(batch, out), op, "Y (count, batch, out)");
    detail::require(x_stride == 0 || x_stride >= mul(batch, in), op, "x_stride must be 0 or at least batch * in");
    detail::require_size(X.size(), (n - 1) * x_stride + mul(batch, in), op, "X ((count - 1) * x_stride + batch * in)");
    // The last network's W and b must lie inside params (the blocks may be a whole layout's
    // networks, or twins inside a larger layout: params then ends where the last twin's slices do).
    const std::size_t end = layer_end(w_offset, b_offset, in, out);
    detail::require(param_stride >= 1 || n == 1, op, "param_stride must be >= 1 for several networks");
    detail::require(params.size() >= (n - 1) * param_stride + end, op,
                    "params must hold every network's W and b ((count - 1) * param_stride + the layer's end)");
    detail::require_int_sizes(op, Y.size(), X.size(), params.size());
    detail::require_distinct(op, {detail::range("Y", Y), detail::range("X", X), detail::range("params", params)});
    linear_forward_batched_impl(Y, X, x_stride, params, param_stride, w_offset, b_offset, count, batch, in, out, act);
}

void Device::linear_backward(View<float> dX, View<float> dW, View<float> db, View<float> dY, View<const float> Y,
                             View<const float> X, View<const float> W, int batch, int in, int out, Activation act,
                             bool accumulate, BackwardPart parts) {
    const char* op = "linear_backward";
    require_parts(parts, op);
    require_layer(batch, in, out, act, op);
    if (!dX.empty()) detail::require_size(dX.size(), mul(batch, in), op, "dX (batch, in)");
    detail::require_size(dW.size(), mul(out, in), op, "dW (out, in)");
    if (!db.empty()) detail::require_size(db.size(), static_cast<std::size_t>(out), op, "db (out)");
    detail::require_size(dY.size(), mul(batch, out), op, "dY (batch, out)");
    detail::require_size(Y.size(), mul(batch, out), op, "Y (batch, out)");
    detail::require_size(X.size(), mul(batch, in), op, "X (batch, in)");
    detail::require_size(W.size(), mul(out, in), op, "W (out, in)");
    detail::require_int_sizes(op, dY.size(), X.size(), W.size());
    // Every written buffer (dX, dW, db, dY) is distinct from every other operand.
    detail::require_distinct(
        op, {detail::range("dX", dX), detail::range("dW", dW), detail::range("db", db), detail::range("dY", dY),
             detail::range("Y", Y), detail::range("X", X), detail::range("W", W)});
    linear_backward_impl(dX, dW, db, dY, Y, X, W, batch, in, out, act, accumulate, parts);
}

void Device::linear_backward_batched(View<float> dX, View<float> grads, View<float> dY, View<const float> Y,
                                     View<const float> X, std::size_t x_stride, View<const float> params,
                                     std::size_t param_stride, std::size_t w_offset, std::ptrdiff_t b_offset, int count,
                                     int batch, int in, int out, Activation act, bool accumulate, BackwardPart parts) {
    const char* op = "linear_backward_batched";
    require_parts(parts, op);
    require_positive(count, "count", op);
    require_layer(batch, in, out, act, op);
    const std::size_t n = static_cast<std::size_t>(count);
    if (!dX.empty()) detail::require_size(dX.size(), n * mul(batch, in), op, "dX (count, batch, in)");
    detail::require_size(dY.size(), n * mul(batch, out), op, "dY (count, batch, out)");
    detail::require_size(Y.size(), n * mul(batch, out), op, "Y (count, batch, out)");
    detail::require(x_stride == 0 || x_stride >= mul(batch, in), op, "x_stride must be 0 or at least batch * in");
    detail::require_size(X.size(), (n - 1) * x_stride + mul(batch, in), op, "X ((count - 1) * x_stride + batch * in)");
    // As linear_forward_batched: the last network's W and b lie inside params, its dW and db
    // inside grads (the same layout); the networks' gradients do not overlap (each is written).
    const std::size_t end = layer_end(w_offset, b_offset, in, out);
    detail::require(param_stride >= end || n == 1, op, "param_stride must cover a network's W and b");
    detail::require(params.size() >= (n - 1) * param_stride + end, op,
                    "params must hold every network's W and b ((count - 1) * param_stride + the layer's end)");
    detail::require(grads.size() >= (n - 1) * param_stride + end, op,
                    "grads must hold every network's dW and db ((count - 1) * param_stride + the layer's end)");
    detail::require_int_sizes(op, dY.size(), X.size(), params.size(), grads.size());
    // Every written buffer (dX, grads, dY) is distinct from every other operand.
    detail::require_distinct(op, {detail::range("dX", dX), detail::range("grads", grads), detail::range("dY", dY),
                                  detail::range("Y", Y), detail::range("X", X), detail::range("params", params)});
    linear_backward_batched_impl(dX, grads, dY, Y, X, x_stride, params, param_stride, w_offset, b_offset, count, batch,
                                 in, out, act, accumulate, parts);
}

void Device::head_backward(View<float> dZ, View<float> grads, View<const float> dOut, View<const float> X,
                           View<const float> params, std::size_t param_stride, std::size_t head_w_offset,
                           std::ptrdiff_t head_b_offset, std::ptrdiff_t hidden_b_offset, int count, int batch, int in,
                           int out, Activation act, bool accumulate) {
    const char* op = "head_backward";
    require_positive(count, "count", op);
    require_layer(batch, in, out, act, op);
    detail::require(out <= abi::kHeadBackwardMaxOut, op, "out must be at most abi::kHeadBackwardMaxOut");
    const std::size_t n = static_cast<std::size_t>(count);
    detail::require_size(dZ.size(), n * mul(batch, in), op, "dZ (count, batch, in)");
    detail::require_size(X.size(), n * mul(batch, in), op, "X (count, batch, in)");
    detail::require_size(dOut.size(), n * mul(batch, out), op, "dOut (count, batch, out)");
    // A network's slices: the head's W and b, the hidden layer's b.
    std::size_t end = layer_end(head_w_offset, head_b_offset, in, out);
    if (hidden_b_offset >= 0)
        end = std::max(end, static_cast<std::size_t>(hidden_b_offset) + static_cast<std::size_t>(in));
    detail::require(param_stride >= end || n == 1, op, "param_stride must cover a network's head and hidden bias");
    detail::require(params.size() >= (n - 1) * param_stride + end, op,
                    "params must hold every network's head ((count - 1) * param_stride + its end)");
    detail::require(grads.size() >= (n - 1) * param_stride + end, op,
                    "grads must hold every network's gradients ((count - 1) * param_stride + their end)");
    detail::require_int_sizes(op, dZ.size(), params.size(), grads.size());
    detail::require_distinct(op, {detail::range("dZ", dZ), detail::range("grads", grads), detail::range("dOut", dOut),
                                  detail::range("X", X), detail::range("params", params)});
    head_backward_impl(dZ, grads, dOut, X, params, param_stride, head_w_offset, head_b_offset, hidden_b_offset, count,
                       batch, in, out, act, accumulate);
}

void Device::linear_backward_each(View<float> dX, View<float> grads, View<float> dY, View<const float> Y,
                                  View<const float> X, std::size_t x_stride, View<const float> params,
                                  std::size_t param_stride, std::size_t w_offset, std::ptrdiff_t b_offset, int count,
                                  int batch, int in, int out, Activation act, bool accumulate, BackwardPart parts) {
    const std::size_t ys = mul(batch, out), xs = mul(batch, in), ws = mul(out, in);
    for (std::size_t k = 0; k < static_cast<std::size_t>(count); ++k) {
        const std::size_t p0 = k * param_stride;
        linear_backward_impl(
            dX.empty() ? View<float>() : dX.subview(k * xs, xs), grads.subview(p0 + w_offset, ws),
            b_offset < 0 ? View<float>()
                         : grads.subview(p0 + static_cast<std::size_t>(b_offset), static_cast<std::size_t>(out)),
            dY.subview(k * ys, ys), Y.subview(k * ys, ys), X.subview(k * x_stride, xs),
            params.subview(p0 + w_offset, ws), batch, in, out, act, accumulate, parts);
    }
}

std::string_view precision_name(Precision p) noexcept {
    switch (p) {
        case Precision::tf32:
            return "tf32";
        case Precision::bf16:
            return "bf16";
        default:
            return "fp32";
    }
}

std::optional<Precision> parse_precision(std::string_view name) noexcept {
    for (const Precision p : {Precision::fp32, Precision::tf32, Precision::bf16})
        if (name == precision_name(p)) return p;
    return std::nullopt;
}

std::string precision_effect(Precision p, Backend b) {
    const bool cpu = b == Backend::cpu;
    switch (p) {
        case Precision::tf32:
            return cpu ? "tf32: on the CPU backend the products compute in FP32 (TF32 is the GPU's tensor-core "
                         "rounding); on a GPU (sm_80 and later) faster matrix products, about 1e-3 relative error each"
                       : "tf32: the linear layers' products on TF32 tensor cores with FP32 sums: expected faster "
                         "than fp32 (measured 1.1 to 2x: docs/performance.md, Precision), about 1e-3 relative error "
                         "per product";
        case Precision::bf16:
            return cpu ? "bf16: on the CPU backend the products' operands rounded to BF16 as on the GPU (slower than "
                         "fp32 here: the rounding is extra work); on a GPU (sm_80 and later) also slower than fp32 "
                         "today (each product rounds its operands in an extra launch), about 4e-3 relative error "
                         "per product"
                       : "bf16: the linear layers' products with BF16 operands and FP32 sums, FP32 master weights: "
                         "measured 1.5 to 2.7x slower than fp32 today, each product rounding its operands in an extra "
                         "launch (docs/performance.md, Precision), about 4e-3 relative error per product";
        default:
            return "fp32: full FP32 products (the reference speed and results)";
    }
}

CounterValue counter_value(View<const long long> counter, long long scale, long long offset) {
    detail::require_size(counter.size(), 1, "counter_value", "counter");
    return CounterValue(counter.data(), scale, offset);
}

}  // namespace fh::ops
