/// @file view.h
/// @brief View<T>: `count` elements of T in a device's memory (host memory for the CPU backend,
///        device memory for CUDA), and the overlap test the ops' aliasing checks use. An op's
///        argument struct holds Views and is what its kernel receives: in device code a View
///        converts to its pointer (null when empty), so a kernel reads `a.x[i]`.
#pragma once

#include "math/host_device.h"

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <type_traits>

namespace fh::ops {

/// Deliberately has no operator[] on the host: only a backend's own code dereferences data().
template <class T>
class View {
public:
    View() = default;
    FH_HD View(T* data, std::size_t count) : data_(data), count_(count) {}
    template <class U>
    requires std::is_same_v<const U, T> FH_HD View(View<U> v) : data_(v.data()), count_(v.size()) {}

    FH_HD T* data() const noexcept { return data_; }
    FH_HD std::size_t size() const noexcept { return count_; }
    FH_HD bool empty() const noexcept { return count_ == 0; }
#if defined(__CUDACC__)
    /// Kernels: the pointer, or null for an empty view (an absent optional operand).
    __device__ __forceinline__ operator T*() const noexcept {
        return count_ ? data_ : nullptr;
    }
#endif
    View subview(std::size_t offset, std::size_t count) const {
        if (offset > count_ || count > count_ - offset)
            throw std::out_of_range("ops::View::subview: range outside the view");
        return View(data_ + offset, count);
    }

private:
    T* data_ = nullptr;
    std::size_t count_ = 0;
};

/// True when the byte ranges of a and b share at least one byte.
template <class A, class B>
bool overlaps(View<A> a, View<B> b) {
    if (a.empty() || b.empty()) return false;
    const auto a0 = reinterpret_cast<std::uintptr_t>(a.data());
    const auto b0 = reinterpret_cast<std::uintptr_t>(b.data());
    return a0 < b0 + b.size() * sizeof(B) && b0 < a0 + a.size() * sizeof(A);
}

/// The raw pointer of a view, or nullptr when it is empty (optional kernel arguments).
template <class T>
T* or_null(View<T> v) noexcept {
    return v.empty() ? nullptr : v.data();
}

/// A device counter that the op reading it advances in its own launch (a captured sequence's
/// first op, instead of an ops::Increment launch before it): the op uses counter[0] + 1 and
/// leaves that in counter[0]. ticket (1): a zeroed scratch of the CUDA twin (its last block to
/// finish advances), zero again after. Empty counter: none. (nstep_sample takes one.)
struct CounterAdvance {
    View<long long> counter;
    View<unsigned> ticket;
};

}  // namespace fh::ops

namespace fh::abi {
/// The signature of a kernel that receives an op's argument struct (its kernel list's entry).
template <class Args>
using Op = void(Args);
}  // namespace fh::abi
