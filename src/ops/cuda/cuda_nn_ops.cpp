/// @file cuda_nn_ops.cpp
/// @brief Launchers of the network ops: cuBLAS SGEMMs for the matrix products and
///        cuda/kernels/core_network.cu for bias, activations, the bias gradient, the norm and Adam.
///        Ops:: (src/ops/nn_ops.cpp) checked sizes and that outputs are distinct from every
///        other operand before these run.
///
/// Row-major through column-major cuBLAS: a row-major (r, c) matrix is the column-major (c, r)
/// matrix, its transpose, with leading dimension c. So with Z = X W^T:
///   forward  Z^T (out, B)  = W (out, in) . X^T (in, B)
///            = Sgemm(T, N, m=out, n=B, k=in, A=W lda=in, B=X ldb=in, C=Y ldc=out)
///   dW       dW^T (in, out) = X^T (in, B) . dZ (B, out)
///            = Sgemm(N, T, m=in, n=out, k=B, A=X lda=in, B=dZ ldb=out, C=dW ldc=in)
///   dX       dX^T (in, B)  = W^T (in, out) . dZ^T (out, B)
///            = Sgemm(N, N, m=in, n=B, k=out, A=W lda=in, B=dZ ldb=out, C=dX ldc=in)
/// (tests/ops/test_nn_ops.cpp compares each with the CPU reference.)
#include "ops/cuda/cuda_ops.hpp"

namespace fh::ops {

using cuda::LaunchDims;

void CudaOps::set_tf32(bool on) {
    FH_CUBLAS_CHECK(cublasSetMathMode(cublas(), on ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    tf32_ = on;
}

void CudaOps::linear_forward_impl(View<float> Y, View<const float> X, View<const float> W,
                                  View<const float> b, int batch, int in, int out,
                                  Activation act) {
    const float one = 1.f, zero = 0.f;
    FH_CUBLAS_CHECK(cublasSgemm(cublas(), CUBLAS_OP_T, CUBLAS_OP_N, out, batch, in, &one, W.data(),
                                in, X.data(), in, &zero, Y.data(), out));
    if (b.empty() && act == Activation::none) return;
    // Y and b are distinct (checked by Ops::linear_forward).
    kernels().network_bias_act_forward_kernel(stream(), LaunchDims::linear(Y.size()), Y.data(),
                                              b.empty() ? nullptr : b.data(), act, batch, out);
}

void CudaOps::linear_backward_impl(View<float> dX, View<float> dW, View<float> db, View<float> dY,
                                   View<const float> Y, View<const float> X, View<const float> W,
                                   int batch, int in, int out, Activation act, bool accumulate) {
    const float one = 1.f, zero = 0.f;
    // dZ = dY * act'(Y), in place on dY (dY and Y distinct).
    if (act != Activation::none)
        kernels().network_act_backward_kernel(stream(), LaunchDims::linear(dY.size()), dY.data(),
                                              Y.data(), act, static_cast<int>(dY.size()));
    const float* dZ = dY.data();
    FH_CUBLAS_CHECK(cublasSgemm(cublas(), CUBLAS_OP_N, CUBLAS_OP_T, in, out, batch, &one, X.data(),
                                in, dZ, out, accumulate ? &one : &zero, dW.data(), in));
    if (!db.empty())
        kernels().network_bias_grad_kernel(stream(), LaunchDims::linear(db.size(), 128), db.data(),
                                           dZ, accumulate ? 1 : 0, batch, out);
    if (!dX.empty())
        FH_CUBLAS_CHECK(cublasSgemm(cublas(), CUBLAS_OP_N, CUBLAS_OP_N, in, batch, out, &one,
                                    W.data(), in, dZ, out, &zero, dX.data(), in));
}

void CudaOps::global_norm_impl(View<float> out, View<const float> x, View<float> scratch) {
    // A fixed grid (abi::kNormBlocks x kNormThreads, whatever the device): a fixed summation
    // order, so the norm is the same on every run. out, x and scratch are distinct.
    const LaunchDims partial_dims{dim3(abi::kNormBlocks), dim3(abi::kNormThreads), 0};
    const LaunchDims finish_dims{dim3(1), dim3(abi::kNormThreads), 0};
    kernels().network_norm_partials_kernel(stream(), partial_dims, scratch.data(), x.data(),
                                           static_cast<int>(x.size()));
    kernels().network_norm_finish_kernel(stream(), finish_dims, out.data(), scratch.data(),
                                         abi::kNormBlocks);
}

void CudaOps::adam_step_impl(View<float> params, View<float> m, View<float> v,
                             View<const float> grads, View<const float> grad_norm,
                             View<const int> gate, const core::AdamConstants& c) {
    // params, m, v, grads and grad_norm are distinct; gate overlaps none of the written buffers.
    kernels().network_adam_kernel(stream(), LaunchDims::linear(params.size()), params.data(),
                                  m.data(), v.data(), grads.data(),
                                  grad_norm.empty() ? nullptr : grad_norm.data(),
                                  gate.empty() ? nullptr : gate.data(), c,
                                  static_cast<int>(params.size()));
}

}  // namespace fh::ops
