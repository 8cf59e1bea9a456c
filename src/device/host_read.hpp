/// @file host_read.hpp
/// @brief A few device values read by the host without waiting for the whole device.
#pragma once

#include <cstring>
#include <memory>
#include <vector>

#include "device/device.hpp"

namespace fh::ops {

/// start() enqueues a copy of a few bytes after the ops issued so far; wait() waits for that
/// copy alone (on CUDA: an event after a copy to pinned host memory) and returns the bytes, so
/// the ops issued after start() keep the device busy while the host waits. Never inside a
/// captured sequence. On the CPU backend the bytes are copied at start().
class HostReadBytes {
public:
    HostReadBytes(Device& device, std::size_t bytes);
    ~HostReadBytes();
    HostReadBytes(HostReadBytes&&) noexcept;
    HostReadBytes& operator=(HostReadBytes&&) noexcept;
    void start(const void* src, std::size_t bytes);
    /// The bytes of the last start(); throws when none was started.
    const void* wait();

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

/// HostReadBytes of `count` values of T.
template <class T>
class HostRead {
public:
    HostRead(Device& device, std::size_t count) : bytes_(device, count * sizeof(T)), count_(count) {}
    void start(View<const T> src) {
        detail::require_same_size(src.size(), count_, "HostRead::start");
        bytes_.start(src.data(), count_ * sizeof(T));
    }
    std::vector<T> wait() {
        std::vector<T> out(count_);
        std::memcpy(out.data(), bytes_.wait(), count_ * sizeof(T));
        return out;
    }

private:
    HostReadBytes bytes_;
    std::size_t count_;
};

}  // namespace fh::ops
