/// @file kernel.cpp
#include "device/cuda/kernel.hpp"

#include <fmt/format.h>

#include "device/cuda/kernel_timing.hpp"

namespace fh::cuda {

Library::Library(std::string name, std::span<const std::byte> image) : name_(std::move(name)) {
    FH_CUDA_CHECK(cudaLibraryLoadData(&lib_, image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
}

Library::~Library() {
    if (lib_) FH_CUDA_CHECK_NOTHROW(cudaLibraryUnload(lib_));
}

cudaKernel_t Library::kernel(const char* symbol) const {
    cudaKernel_t k = nullptr;
    const cudaError_t status = cudaLibraryGetKernel(&k, lib_, symbol);
    if (status != cudaSuccess) {
        (void)cudaGetLastError();  // clear the sticky-free error state of the runtime
        throw CudaError(fmt::format("kernel {} is missing from the embedded module {} ({}): the "
                                    "build and cuda/abi/ disagree; rebuild foxhunt-train",
                                    symbol, name_, cudaGetErrorString(status)),
                        static_cast<int>(status));
    }
    return k;
}

unsigned Library::kernel_count() const {
    unsigned n = 0;
    FH_CUDA_CHECK(cudaLibraryGetKernelCount(&n, lib_));
    return n;
}

void launch_checked(const void* kernel, const char* name, const LaunchDims& d, void** args, cudaStream_t stream) {
    if (kernel == nullptr) throw CudaError(fmt::format("kernel {} launched before it was resolved", name), 0);
    if (op_names_wanted() && op_filtered(name, stream)) return;  // bench --ablate
    const TimedRegion timed(kernel_timing() ? name : "", stream);
    const cudaError_t status = cudaLaunchKernel(kernel, d.grid, d.block, args, d.smem_bytes, stream);
    if (status != cudaSuccess) throw_cuda_error(status, name, __FILE__, __LINE__);
    if (sync_debug()) {
        const cudaError_t s = cudaStreamSynchronize(stream);
        if (s != cudaSuccess) throw_cuda_error(s, name, __FILE__, __LINE__);
    }
}

}  // namespace fh::cuda
