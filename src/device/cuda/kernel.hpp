/// @file kernel.hpp
/// @brief Library (a module loaded from an embedded fatbin) and Kernel<Signature>, the typed
///        launch handle: a call with the wrong number or types of arguments does not compile, and
///        every argument is converted to its declared parameter type before its address is taken.
#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

#include "device/cuda/check.hpp"

namespace fh::cuda {

/// Grid and block shape plus dynamic shared memory of one launch.
struct LaunchDims {
    dim3 grid{1, 1, 1};
    dim3 block{1, 1, 1};
    std::size_t smem_bytes = 0;

    /// A 1-D launch covering n elements with `threads` per block; the block count is capped
    /// (kernels use grid-stride loops, so a cap never drops elements).
    static LaunchDims linear(std::size_t n, unsigned threads = 256, unsigned max_blocks = 65535) {
        std::size_t blocks = (n + threads - 1) / threads;
        if (blocks == 0) blocks = 1;
        if (blocks > max_blocks) blocks = max_blocks;
        return LaunchDims{dim3(static_cast<unsigned>(blocks)), dim3(threads), 0};
    }
};

/// A module loaded from memory (cudaLibraryLoadData). Owns the cudaLibrary_t.
class Library {
public:
    Library(std::string name, std::span<const std::byte> image);
    ~Library();
    Library(const Library&) = delete;
    Library& operator=(const Library&) = delete;
    Library(Library&& o) noexcept : name_(std::move(o.name_)), lib_(std::exchange(o.lib_, nullptr)) {}
    Library& operator=(Library&&) = delete;

    const std::string& name() const noexcept { return name_; }
    cudaLibrary_t get() const noexcept { return lib_; }
    /// Resolves a kernel by symbol name; throws naming the module if it is missing.
    cudaKernel_t kernel(const char* symbol) const;
    unsigned kernel_count() const;

private:
    std::string name_;
    cudaLibrary_t lib_ = nullptr;
};

void launch_checked(const void* kernel, const char* name, const LaunchDims& d, void** args, cudaStream_t stream);

template <class Signature>
class Kernel;

/// The typed handle of a kernel whose parameter list is Params... (declared once in cuda/abi/).
template <class... Params>
class Kernel<void(Params...)> {
public:
    Kernel() = default;
    Kernel(cudaKernel_t k, const char* name) : k_(k), name_(name) {}

    bool resolved() const noexcept { return k_ != nullptr; }
    const char* name() const noexcept { return name_; }

    /// Launches on `stream`. type_identity_t stops deduction: arguments convert to Params.
    void operator()(cudaStream_t stream, const LaunchDims& dims, std::type_identity_t<Params>... args) const {
        if constexpr (sizeof...(Params) == 0) {
            launch_checked(reinterpret_cast<const void*>(k_), name_, dims, nullptr, stream);
        } else {
            std::array<void*, sizeof...(Params)> argv{const_cast<void*>(static_cast<const void*>(&args))...};
            launch_checked(reinterpret_cast<const void*>(k_), name_, dims, argv.data(), stream);
        }
    }

    /// Lets this kernel's launches on device `ordinal` use up to `bytes` of dynamic shared memory
    /// (beyond 48 KB a kernel has to opt in).
    void allow_dynamic_smem(int bytes, int ordinal) const {
        FH_CUDA_CHECK(cudaKernelSetAttributeForDevice(k_, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes, ordinal));
    }

private:
    cudaKernel_t k_ = nullptr;
    const char* name_ = "";
};

/// Size and alignment of every parameter of a signature, in order (the cubin ABI test compares
/// them with the parameter layout nvcc recorded).
struct ParamLayout {
    std::size_t size;
    std::size_t align;
};
template <class Signature>
struct SignatureLayout;
template <class... Params>
struct SignatureLayout<void(Params...)> {
    static constexpr std::array<ParamLayout, sizeof...(Params)> params{ParamLayout{sizeof(Params), alignof(Params)}...};
};

}  // namespace fh::cuda
