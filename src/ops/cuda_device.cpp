/// @file cuda_device.cpp
/// @brief The CUDA backend's memory and core ops: the core_vector and core_network kernels and
///        cuBLAS SGEMMs, all on the device's stream.
///        Device:: (src/ops/device.cpp) checked sizes and that outputs are distinct from every
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

#include "ops/cuda_device.hpp"

#include <fmt/format.h>

namespace fh::ops {

using cuda::LaunchDims;

CudaDevice::CudaDevice(int ordinal)
    : device_(cuda::select_device(ordinal)), stream_(), registry_(), cublas_(stream_.get()) {}

std::string CudaDevice::description() const {
    return fmt::format("cuda:{} {} (sm_{}, {} SMs, {:.1f} GiB)", device_.ordinal, device_.name, device_.arch(),
                       device_.sm_count, static_cast<double>(device_.total_memory) / (1024.0 * 1024.0 * 1024.0));
}

std::optional<Device::MemoryInfo> CudaDevice::memory() const {
    std::size_t free_b = 0, total_b = 0;
    FH_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    return MemoryInfo{device_.name, free_b, total_b};
}

void CudaDevice::set_tf32(bool on) {
    FH_CUBLAS_CHECK(cublasSetMathMode(cublas(), on ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    tf32_ = on;
}

void* CudaDevice::allocate_bytes(std::size_t bytes) {
    void* p = nullptr;
    FH_CUDA_CHECK(cudaMalloc(&p, bytes == 0 ? 1 : bytes));
    return p;
}

void CudaDevice::release_bytes(void* p) noexcept {
    FH_CUDA_CHECK_NOTHROW(cudaFree(p));
}

void CudaDevice::upload_bytes(void* dst, const void* src, std::size_t bytes) {
    if (bytes == 0) return;
    // Pageable source: the copy is staged, so it completes before this call returns.
    FH_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_.get()));
    stream_.synchronize();
}

void CudaDevice::download_bytes(void* dst, const void* src, std::size_t bytes) {
    if (bytes == 0) return;
    FH_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_.get()));
    stream_.synchronize();
}

void CudaDevice::copy_bytes(void* dst, const void* src, std::size_t bytes) {
    FH_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream()));
}

void CudaDevice::fill_impl(View<float> y, float value) {
    kernels().fill_f32_kernel(stream(), LaunchDims::linear(y.size()), y.data(), value, static_cast<int>(y.size()));
}

void CudaDevice::copy_impl(View<float> dst, View<const float> src) {
    // Distinct buffers: Device::copy refused overlap before calling here.
    kernels().copy_f32_kernel(stream(), LaunchDims::linear(dst.size()), dst.data(), src.data(),
                              static_cast<int>(dst.size()));
}

void CudaDevice::saxpy_impl(View<float> y, float a, View<const float> x) {
    // Distinct buffers: Device::saxpy refused overlap before calling here.
    kernels().saxpy_f32_kernel(stream(), LaunchDims::linear(y.size()), y.data(), x.data(), a,
                               static_cast<int>(y.size()));
}

void CudaDevice::scale_impl(View<float> y, float alpha) {
    kernels().scale_f32_kernel(stream(), LaunchDims::linear(y.size()), y.data(), alpha, static_cast<int>(y.size()));
}

void CudaDevice::mean_impl(View<float> out, View<const float> x) {
    kernels().mean_f32_kernel(stream(), LaunchDims{dim3(1), dim3(abi::kMeanThreads), 0}, out.data(), x.data(),
                              static_cast<int>(x.size()));
}

void CudaDevice::linear_forward_impl(View<float> Y, View<const float> X, View<const float> W, View<const float> b,
                                     int batch, int in, int out, Activation act) {
    const float one = 1.f, zero = 0.f;
    FH_CUBLAS_CHECK(cublasSgemm(cublas(), CUBLAS_OP_T, CUBLAS_OP_N, out, batch, in, &one, W.data(), in, X.data(), in,
                                &zero, Y.data(), out));
    if (b.empty() && act == Activation::none) return;
    // Y and b are distinct (checked by Device::linear_forward).
    kernels().network_bias_act_forward_kernel(stream(), LaunchDims::linear(Y.size()), Y.data(),
                                              b.empty() ? nullptr : b.data(), act, batch, out);
}

void CudaDevice::linear_backward_impl(View<float> dX, View<float> dW, View<float> db, View<float> dY,
                                      View<const float> Y, View<const float> X, View<const float> W, int batch, int in,
                                      int out, Activation act, bool accumulate) {
    const float one = 1.f, zero = 0.f;
    // dZ = dY * act'(Y), in place on dY (dY and Y distinct).
    if (act != Activation::none)
        kernels().network_act_backward_kernel(stream(), LaunchDims::linear(dY.size()), dY.data(), Y.data(), act,
                                              static_cast<int>(dY.size()));
    const float* dZ = dY.data();
    FH_CUBLAS_CHECK(cublasSgemm(cublas(), CUBLAS_OP_N, CUBLAS_OP_T, in, out, batch, &one, X.data(), in, dZ, out,
                                accumulate ? &one : &zero, dW.data(), in));
    if (!db.empty())
        kernels().network_bias_grad_kernel(stream(), LaunchDims::linear(db.size(), 128), db.data(), dZ,
                                           accumulate ? 1 : 0, batch, out);
    if (!dX.empty())
        FH_CUBLAS_CHECK(cublasSgemm(cublas(), CUBLAS_OP_N, CUBLAS_OP_N, in, batch, out, &one, W.data(), in, dZ, out,
                                    &zero, dX.data(), in));
}

void CudaDevice::global_norm_impl(View<float> out, View<const float> x, View<float> scratch) {
    // A fixed grid (abi::kNormBlocks x kNormThreads, whatever the device): a fixed summation
    // order, so the norm is the same on every run. out, x and scratch are distinct.
    const LaunchDims partial_dims{dim3(abi::kNormBlocks), dim3(abi::kNormThreads), 0};
    const LaunchDims finish_dims{dim3(1), dim3(abi::kNormThreads), 0};
    kernels().network_norm_partials_kernel(stream(), partial_dims, scratch.data(), x.data(),
                                           static_cast<int>(x.size()));
    kernels().network_norm_finish_kernel(stream(), finish_dims, out.data(), scratch.data(), abi::kNormBlocks);
}

void CudaDevice::adam_step_impl(View<float> params, View<float> m, View<float> v, View<const float> grads,
                                View<const float> grad_norm, View<const int> gate, const core::AdamConstants& c) {
    // params, m, v, grads and grad_norm are distinct; gate overlaps none of the written buffers.
    kernels().network_adam_kernel(stream(), LaunchDims::linear(params.size()), params.data(), m.data(), v.data(),
                                  grads.data(), grad_norm.empty() ? nullptr : grad_norm.data(),
                                  gate.empty() ? nullptr : gate.data(), c, static_cast<int>(params.size()));
}

}  // namespace fh::ops
