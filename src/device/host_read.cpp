/// @file host_read.cpp
/// @brief HostReadBytes: a pinned host buffer and an event on CUDA, a plain copy on the CPU.
#include "device/host_read.hpp"

#include <optional>
#include <stdexcept>
#include <string>

#include "device/cuda/resources.hpp"
#include "device/cuda_device.hpp"

namespace fh::ops {

struct HostReadBytes::Impl {
    CudaDevice* cuda = nullptr;
    std::size_t bytes = 0;
    void* pinned = nullptr;             // CUDA: the copy's destination
    std::vector<unsigned char> host;    // CPU: the copy itself
    std::optional<cuda::Event> copied;  // CUDA: recorded after the copy
    bool started = false;
    ~Impl() {
        if (pinned) FH_CUDA_CHECK_NOTHROW(cudaFreeHost(pinned));
    }
};

HostReadBytes::HostReadBytes(Device& device, std::size_t bytes) : impl_(std::make_unique<Impl>()) {
    impl_->cuda = device.cuda();
    impl_->bytes = bytes;
    if (impl_->cuda) {
        if (bytes > 0) FH_CUDA_CHECK(cudaMallocHost(&impl_->pinned, bytes));
        impl_->copied.emplace(cudaEventDisableTiming);
    } else {
        impl_->host.resize(bytes);
    }
}

HostReadBytes::~HostReadBytes() = default;
HostReadBytes::HostReadBytes(HostReadBytes&&) noexcept = default;
HostReadBytes& HostReadBytes::operator=(HostReadBytes&&) noexcept = default;

void HostReadBytes::start(const void* src, std::size_t bytes) {
    if (bytes != impl_->bytes)
        throw std::invalid_argument("HostReadBytes::start: a read of " + std::to_string(bytes) + " bytes into " +
                                    std::to_string(impl_->bytes));
    if (CudaDevice* cuda = impl_->cuda) {
        cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
        FH_CUDA_CHECK(cudaStreamIsCapturing(cuda->stream(), &capture));
        if (capture != cudaStreamCaptureStatusNone)
            throw std::logic_error("HostReadBytes::start inside a captured sequence");
        if (bytes > 0)
            FH_CUDA_CHECK(cudaMemcpyAsync(impl_->pinned, src, bytes, cudaMemcpyDeviceToHost, cuda->stream()));
        impl_->copied->record(cuda->stream());
    } else if (bytes > 0) {
        std::memcpy(impl_->host.data(), src, bytes);
    }
    impl_->started = true;
}

const void* HostReadBytes::wait() {
    if (!impl_->started) throw std::logic_error("HostReadBytes::wait without a start");
    if (!impl_->cuda) return impl_->host.data();
    impl_->copied->synchronize();
    return impl_->pinned;
}

}  // namespace fh::ops
