/// @file check.cpp
/// @brief Error reporting for FH_CUDA_CHECK and friends.
#include "device/cuda/check.hpp"

#include <fmt/format.h>

#include <atomic>

#include "util/log.hpp"

namespace fh::cuda {
namespace {
std::atomic<bool> g_sync_debug{false};

std::string hint_for(cudaError_t status) {
    switch (status) {
        case cudaErrorMemoryAllocation:
            return " (the GPU is out of memory: lower experience.gpu_n_episodes, "
                   "replay_buffer.buffer_size or the batch size, or run `foxhunt-train check` "
                   "for the memory estimate)";
        case cudaErrorNoKernelImageForDevice:
        case cudaErrorUnsupportedPtxVersion:
            return " (no machine code for this GPU's architecture is embedded: rebuild with "
                   "-Dgpu_archs=<its compute capability, e.g. 89>)";
        case cudaErrorInsufficientDriver:
            return " (the NVIDIA driver is older than CUDA 13 needs: install driver 580 or newer)";
        default:
            return "";
    }
}
}  // namespace

void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line) {
    throw CudaError(
        fmt::format("CUDA error {} ({}) in {} at {}:{}: {}{}", cudaGetErrorName(status), static_cast<int>(status), call,
                    file, line, cudaGetErrorString(status), hint_for(status)),
        static_cast<int>(status));
}

void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line) {
    throw CudaError(fmt::format("cuBLAS error {} ({}) in {} at {}:{}", cublasGetStatusName(status),
                                static_cast<int>(status), call, file, line),
                    static_cast<int>(status));
}

void report_cuda_error(cudaError_t status, const char* call, const char* file, int line) noexcept {
    // During process teardown the runtime may already be gone; that is not worth a message.
    if (status == cudaErrorCudartUnloading) return;
    try {
        log::error("CUDA error {} in {} at {}:{} (ignored in a destructor): {}", cudaGetErrorName(status), call, file,
                   line, cudaGetErrorString(status));
    } catch (...) {
    }
}

void set_sync_debug(bool on) noexcept {
    g_sync_debug = on;
}
bool sync_debug() noexcept {
    return g_sync_debug;
}

}  // namespace fh::cuda
