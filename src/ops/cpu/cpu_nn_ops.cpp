/// @file cpu_nn_ops.cpp
/// @brief CPU twins of the network ops: the linear layer is the templated reference
///        (src/nn/reference.hpp) with T = float; Adam is core::adam_element in a loop; the norm is
///        a sequential sum in double.
#include <cmath>

#include "nn/reference.hpp"
#include "ops/cpu/cpu_ops.hpp"

namespace fh::ops {

void CpuOps::linear_forward_impl(View<float> Y, View<const float> X, View<const float> W,
                                 View<const float> b, int batch, int in, int out, Activation act) {
    nn::ref::linear_forward<float>(Y.data(), X.data(), W.data(), b.empty() ? nullptr : b.data(),
                                   batch, in, out, act);
}

void CpuOps::linear_backward_impl(View<float> dX, View<float> dW, View<float> db, View<float> dY,
                                  View<const float> Y, View<const float> X, View<const float> W,
                                  int batch, int in, int out, Activation act, bool accumulate) {
    nn::ref::linear_backward<float>(dX.empty() ? nullptr : dX.data(), dW.data(),
                                    db.empty() ? nullptr : db.data(), dY.data(), Y.data(),
                                    X.data(), W.data(), batch, in, out, act, accumulate);
}

void CpuOps::global_norm_impl(View<float> out, View<const float> x, View<float> /*scratch*/) {
    double s = 0.0;
    for (std::size_t i = 0; i < x.size(); ++i) {
        const double xi = x.data()[i];
        s += xi * xi;
    }
    out.data()[0] = static_cast<float>(std::sqrt(s));
}

void CpuOps::adam_step_impl(View<float> params, View<float> m, View<float> v,
                            View<const float> grads, View<const float> grad_norm,
                            View<const int> gate, const core::AdamConstants& c) {
    if (!gate.empty() && gate.data()[0] == 0) return;  // the guard skipped this update
    const float scale = c.clip_norm > 0.f ? core::clip_scale(grad_norm.data()[0], c.clip_norm) : 1.f;
    for (std::size_t i = 0; i < params.size(); ++i)
        core::adam_element(params.data()[i], m.data()[i], v.data()[i], grads.data()[i], scale, c);
}

}  // namespace fh::ops
