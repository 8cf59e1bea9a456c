/// @file check.hpp
/// @brief One way to check CUDA and cuBLAS calls: FH_CUDA_CHECK throws fh::CudaError carrying the
///        call's text, file:line and CUDA's message; the _NOTHROW variant is for destructors.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <string>

#include "util/errors.hpp"

namespace fh::cuda {

/// A failed CUDA runtime or cuBLAS call. Exit code 4 (device error).
class CudaError : public DeviceError {
public:
    CudaError(const std::string& message, int status) : DeviceError(message), status_(status) {}
    int status() const noexcept { return status_; }

private:
    int status_;
};

[[noreturn]] void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line);
/// Logs a failure (for destructors, which must not throw); quiet during driver shutdown.
void report_cuda_error(cudaError_t status, const char* call, const char* file, int line) noexcept;

/// When true, every launch through fh::cuda::Kernel synchronizes and checks, pinning an
/// asynchronous fault to its launch (--cuda-sync-debug).
void set_sync_debug(bool on) noexcept;
bool sync_debug() noexcept;

}  // namespace fh::cuda

#define FH_CUDA_CHECK(call)                                                                                 \
    do {                                                                                                    \
        const cudaError_t fh_status_ = (call);                                                              \
        if (fh_status_ != cudaSuccess) ::fh::cuda::throw_cuda_error(fh_status_, #call, __FILE__, __LINE__); \
    } while (0)

#define FH_CUDA_CHECK_NOTHROW(call)                                                                          \
    do {                                                                                                     \
        const cudaError_t fh_status_ = (call);                                                               \
        if (fh_status_ != cudaSuccess) ::fh::cuda::report_cuda_error(fh_status_, #call, __FILE__, __LINE__); \
    } while (0)

#define FH_CUBLAS_CHECK(call)                                                      \
    do {                                                                           \
        const cublasStatus_t fh_status_ = (call);                                  \
        if (fh_status_ != CUBLAS_STATUS_SUCCESS)                                   \
            ::fh::cuda::throw_cublas_error(fh_status_, #call, __FILE__, __LINE__); \
    } while (0)
