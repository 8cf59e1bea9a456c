/// @file resources.hpp
/// @brief Move-only RAII owners of CUDA objects: device memory, streams, events, cuBLAS handles.
///        Copying device memory is explicit (copy_from), never implicit, to prevent accidents.
#pragma once

#include <cstddef>
#include <utility>

#include "device/cuda/check.hpp"

namespace fh::cuda {

/// Owns `count` elements of T in device memory (uninitialised).
template <class T>
class DeviceBuffer {
public:
    DeviceBuffer() = default;
    explicit DeviceBuffer(std::size_t count) : count_(count) {
        if (count_ > 0) FH_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&ptr_), bytes()));
    }
    ~DeviceBuffer() { reset(); }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    DeviceBuffer(DeviceBuffer&& o) noexcept
        : ptr_(std::exchange(o.ptr_, nullptr)), count_(std::exchange(o.count_, 0)) {}
    DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
        if (this != &o) {
            reset();
            ptr_ = std::exchange(o.ptr_, nullptr);
            count_ = std::exchange(o.count_, 0);
        }
        return *this;
    }

    T* data() const noexcept { return ptr_; }
    std::size_t size() const noexcept { return count_; }
    std::size_t bytes() const noexcept { return count_ * sizeof(T); }

    void reset() noexcept {
        if (ptr_) FH_CUDA_CHECK_NOTHROW(cudaFree(ptr_));
        ptr_ = nullptr;
        count_ = 0;
    }

private:
    T* ptr_ = nullptr;
    std::size_t count_ = 0;
};

/// A non-blocking stream (does not synchronise with the legacy default stream).
class Stream {
public:
    Stream() { FH_CUDA_CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
    ~Stream() {
        if (s_) FH_CUDA_CHECK_NOTHROW(cudaStreamDestroy(s_));
    }
    Stream(const Stream&) = delete;
    Stream& operator=(const Stream&) = delete;
    Stream(Stream&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
    Stream& operator=(Stream&&) = delete;

    cudaStream_t get() const noexcept { return s_; }
    void synchronize() const { FH_CUDA_CHECK(cudaStreamSynchronize(s_)); }

private:
    cudaStream_t s_ = nullptr;
};

class Event {
public:
    explicit Event(unsigned flags = cudaEventDefault) { FH_CUDA_CHECK(cudaEventCreateWithFlags(&e_, flags)); }
    ~Event() {
        if (e_) FH_CUDA_CHECK_NOTHROW(cudaEventDestroy(e_));
    }
    Event(const Event&) = delete;
    Event& operator=(const Event&) = delete;
    Event(Event&& o) noexcept : e_(std::exchange(o.e_, nullptr)) {}
    Event& operator=(Event&&) = delete;

    cudaEvent_t get() const noexcept { return e_; }
    void record(cudaStream_t s) { FH_CUDA_CHECK(cudaEventRecord(e_, s)); }
    void synchronize() const { FH_CUDA_CHECK(cudaEventSynchronize(e_)); }
    /// Milliseconds from `start` to this event (both recorded and complete).
    float elapsed_ms_since(const Event& start) const {
        float ms = 0.f;
        FH_CUDA_CHECK(cudaEventElapsedTime(&ms, start.e_, e_));
        return ms;
    }

private:
    cudaEvent_t e_ = nullptr;
};

/// A cuBLAS handle bound to one stream.
class CublasHandle {
public:
    explicit CublasHandle(cudaStream_t stream) {
        FH_CUBLAS_CHECK(cublasCreate(&h_));
        FH_CUBLAS_CHECK(cublasSetStream(h_, stream));
    }
    ~CublasHandle() {
        if (h_) cublasDestroy(h_);  // cannot usefully fail at teardown
    }
    CublasHandle(const CublasHandle&) = delete;
    CublasHandle& operator=(const CublasHandle&) = delete;
    CublasHandle(CublasHandle&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
    CublasHandle& operator=(CublasHandle&&) = delete;

    cublasHandle_t get() const noexcept { return h_; }

private:
    cublasHandle_t h_ = nullptr;
};

}  // namespace fh::cuda
