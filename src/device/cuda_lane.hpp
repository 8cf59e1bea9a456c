/// @file cuda_lane.hpp
/// @brief CudaDevice's lanes (a stream, its cuBLAS handle, workspace and scratch) and the sizes of
///        their scratch: what the CUDA runtime (cuda_device.cpp) allocates and the linear layers
///        (cuda_linear.cpp) use. Internal to src/device/cuda_*.cpp.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "device/cuda_device.hpp"

namespace fh::ops {

namespace cuda_lane {

inline constexpr std::size_t kWorkspaceBytes = 32u << 20;
/// The bias gradient's row slices: at least kBiasSliceRows rows each, and about kBiasGradBlocks
/// blocks in all (one wave of 1024-thread blocks on a large GPU; a constant, so that the slicing
/// and the sums' order do not depend on the device); partial sums per slice and a ticket per
/// group of 32 columns (zero between launches).
inline constexpr int kBiasSliceRows = 256;
inline constexpr int kBiasGradBlocks = 256;
inline constexpr int kMaxBiasSlices = 128;
inline constexpr std::size_t kBiasPartialFloats = std::size_t{1} << 20;
inline constexpr std::size_t kBiasTickets = kBiasPartialFloats / 2 / 32;  // enough for every out with 2+ slices

/// The row slices of the bias-gradient passes for (batch, out): enough blocks to fill the GPU,
/// from the shape alone, so their sums' order (the bits) is the same on every run.
inline int bias_slices(int batch, int out) {
    const int column_groups = (out + 31) / 32;
    const int slices = std::clamp(
        std::min(batch / kBiasSliceRows, (kBiasGradBlocks + column_groups - 1) / column_groups), 1, kMaxBiasSlices);
    return std::max(1, std::min<int>(slices, static_cast<int>(kBiasPartialFloats / static_cast<std::size_t>(out))));
}

}  // namespace cuda_lane

/// A lane: a stream and its cuBLAS handle and scratch (allocated up front: nothing may allocate
/// while a sequence is captured).
struct CudaDevice::Lane {
    cuda::Stream stream;
    cuda::CublasHandle cublas{stream.get()};
    cuda::Event done{cudaEventDisableTiming};
    void* workspace = nullptr;
    float* bias_partials = nullptr;
    unsigned* bias_tickets = nullptr;
    unsigned short* bf16 = nullptr;  ///< two regions of kBf16RegionElements (bf16 only: apply_precision)
    bool busy = false;
    Lane() {
        FH_CUDA_CHECK(cudaMalloc(&workspace, cuda_lane::kWorkspaceBytes));
        FH_CUDA_CHECK(
            cudaMalloc(reinterpret_cast<void**>(&bias_partials), cuda_lane::kBiasPartialFloats * sizeof(float)));
        FH_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&bias_tickets), cuda_lane::kBiasTickets * sizeof(unsigned)));
        FH_CUDA_CHECK(cudaMemsetAsync(bias_tickets, 0, cuda_lane::kBiasTickets * sizeof(unsigned), stream.get()));
        FH_CUBLAS_CHECK(cublasSetWorkspace(cublas.get(), workspace, cuda_lane::kWorkspaceBytes));
    }
    ~Lane() {
        if (bf16) FH_CUDA_CHECK_NOTHROW(cudaFree(bf16));
        if (bias_tickets) FH_CUDA_CHECK_NOTHROW(cudaFree(bias_tickets));
        if (bias_partials) FH_CUDA_CHECK_NOTHROW(cudaFree(bias_partials));
        if (workspace) FH_CUDA_CHECK_NOTHROW(cudaFree(workspace));
    }
    Lane(const Lane&) = delete;
    Lane& operator=(const Lane&) = delete;
};

}  // namespace fh::ops
