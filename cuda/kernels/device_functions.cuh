/// @file device_functions.cuh
/// @brief Device-only helpers shared by the kernel modules (index math, grid-stride loops).
///        Scalar math that the CPU twins also need lives in cuda/abi/ instead.
#pragma once

#include <type_traits>

namespace fh::device {

/// Global thread index and the grid's total thread count, as 64-bit values so that
/// grid-stride loops over large arrays cannot overflow.
__device__ __forceinline__ long long global_thread_index() {
    return static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ long long grid_thread_count() {
    return static_cast<long long>(gridDim.x) * blockDim.x;
}

}  // namespace fh::device

/// Ties a kernel definition to its declaration in cuda/abi/ (the host launches through that
/// declaration): a changed parameter list on either side fails to compile.
#define FH_CHECK_KERNEL_ABI(module, kernel, signature)                       \
    static_assert(std::is_same_v<decltype(kernel), ::fh::abi::signature>, \
                  #kernel " differs from its declaration fh::abi::" #signature);
