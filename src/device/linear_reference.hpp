/// @file reference.hpp
/// @brief The reference math of a linear layer with an activation, as plain loops over any
///        floating type: the CPU backend runs it with T = float (src/device/cpu_device.cpp) and
///        the gradient checks with T = double. Row-major; shapes beside every pointer. The
///        activation math itself is core::activate / core::activation_derivative
///        (cuda/abi/core_network.h), shared with the kernels.
#pragma once

#include <cstddef>

#include "math/core.h"

namespace fh::ops::ref {

using core::Activation;

/// Y = act(X W^T + b). Y (batch, out), X (batch, in), W (out, in), b (out) or null.
/// Each output sums its products in input order k = 0..in-1, then adds the bias.
template <class T>
void linear_forward(T* Y, const T* X, const T* W, const T* b, int batch, int in, int out, Activation act) {
    for (int r = 0; r < batch; ++r) {
        const T* x = X + static_cast<std::size_t>(r) * in;
        for (int o = 0; o < out; ++o) {
            const T* w = W + static_cast<std::size_t>(o) * in;
            T z = T(0);
            for (int k = 0; k < in; ++k) z += x[k] * w[k];
            if (b != nullptr) z += b[o];
            Y[static_cast<std::size_t>(r) * out + o] = core::activate(z, act);
        }
    }
}

/// The backward of linear_forward, in four parts (linear_backward runs them in this order; the
/// Device ops may run them apart, ops::BackwardPart).
/// dY (batch, out): dL/dY on entry, dL/dZ = dL/dY * act'(Z) on exit (in place).
/// Y (batch, out) activated output; X (batch, in); W (out, in).
/// dW (out, in) = dZ^T X and db (out) = sum_r dZ[r, :], added to when `accumulate`; db may be
/// null. dX (batch, in) = dZ W (always set), or skipped when null. Sums run over rows r (for dW,
/// db) or outputs o (for dX) in increasing order.
template <class T>
void activation_backward(T* dY, const T* Y, int batch, int out, Activation act) {
    const std::size_t n_out = static_cast<std::size_t>(batch) * out;
    for (std::size_t i = 0; i < n_out; ++i) dY[i] = dY[i] * core::activation_derivative(Y[i], act);
}

/// db from dZ (the pre-activation gradient, after activation_backward).
template <class T>
void bias_backward(T* db, const T* dZ, int batch, int out, bool accumulate) {
    for (int o = 0; o < out; ++o) {
        T s = T(0);
        for (int r = 0; r < batch; ++r) s += dZ[static_cast<std::size_t>(r) * out + o];
        db[o] = accumulate ? db[o] + s : s;
    }
}

/// dW from dZ.
template <class T>
void weight_backward(T* dW, const T* dZ, const T* X, int batch, int in, int out, bool accumulate) {
    for (int o = 0; o < out; ++o)
        for (int k = 0; k < in; ++k) {
            T s = T(0);
            for (int r = 0; r < batch; ++r)
                s += dZ[static_cast<std::size_t>(r) * out + o] * X[static_cast<std::size_t>(r) * in + k];
            T& w = dW[static_cast<std::size_t>(o) * in + k];
            w = accumulate ? w + s : s;
        }
}

/// dX = dZ W.
template <class T>
void input_backward(T* dX, const T* dZ, const T* W, int batch, int in, int out) {
    for (int r = 0; r < batch; ++r)
        for (int k = 0; k < in; ++k) {
            T s = T(0);
            for (int o = 0; o < out; ++o)
                s += dZ[static_cast<std::size_t>(r) * out + o] * W[static_cast<std::size_t>(o) * in + k];
            dX[static_cast<std::size_t>(r) * in + k] = s;
        }
}

template <class T>
void linear_backward(T* dX, T* dW, T* db, T* dY, const T* Y, const T* X, const T* W, int batch, int in, int out,
                     Activation act, bool accumulate) {
    activation_backward(dY, Y, batch, out, act);
    if (db != nullptr) bias_backward(db, dY, batch, out, accumulate);
    weight_backward(dW, dY, X, batch, in, out, accumulate);
    if (dX != nullptr) input_backward(dX, dY, W, batch, in, out);
}

}  // namespace fh::ops::ref
