/// @file cuda_ops.cpp
/// @brief Launchers for cuda/kernels/core_vector.cu.
#include "ops/cuda/cuda_ops.hpp"

#include <fmt/format.h>

namespace fh::ops {

using cuda::LaunchDims;

CudaOps::CudaOps(int ordinal)
    : device_(cuda::select_device(ordinal)), stream_(), registry_(), cublas_(stream_.get()) {}

std::string CudaOps::description() const {
    return fmt::format("cuda:{} {} (sm_{}, {} SMs, {:.1f} GiB)", device_.ordinal, device_.name,
                       device_.arch(), device_.sm_count,
                       static_cast<double>(device_.total_memory) / (1024.0 * 1024.0 * 1024.0));
}

std::optional<Ops::MemoryInfo> CudaOps::memory() const {
    std::size_t free_b = 0, total_b = 0;
    FH_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    return MemoryInfo{device_.name, free_b, total_b};
}

void* CudaOps::allocate_bytes(std::size_t bytes) {
    void* p = nullptr;
    FH_CUDA_CHECK(cudaMalloc(&p, bytes == 0 ? 1 : bytes));
    return p;
}
void CudaOps::release_bytes(void* p) noexcept { FH_CUDA_CHECK_NOTHROW(cudaFree(p)); }
void CudaOps::upload_bytes(void* dst, const void* src, std::size_t bytes) {
    if (bytes == 0) return;
    // Pageable source: the copy is staged, so it completes before this call returns.
    FH_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_.get()));
    stream_.synchronize();
}
void CudaOps::download_bytes(void* dst, const void* src, std::size_t bytes) {
    if (bytes == 0) return;
    FH_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_.get()));
    stream_.synchronize();
}

void CudaOps::fill_impl(View<float> y, float value) {
    kernels().fill_f32_kernel(stream(), LaunchDims::linear(y.size()), y.data(), value,
                                  static_cast<int>(y.size()));
}

void CudaOps::copy_impl(View<float> dst, View<const float> src) {
    // Distinct buffers: Ops::copy refused overlap before calling here.
    kernels().copy_f32_kernel(stream(), LaunchDims::linear(dst.size()), dst.data(), src.data(),
                                  static_cast<int>(dst.size()));
}

void CudaOps::saxpy_impl(View<float> y, float a, View<const float> x) {
    // Distinct buffers: Ops::saxpy refused overlap before calling here.
    kernels().saxpy_f32_kernel(stream(), LaunchDims::linear(y.size()), y.data(), x.data(), a,
                                   static_cast<int>(y.size()));
}

void CudaOps::scale_impl(View<float> y, float alpha) {
    kernels().scale_f32_kernel(stream(), LaunchDims::linear(y.size()), y.data(), alpha,
                                   static_cast<int>(y.size()));
}

}  // namespace fh::ops
