/// @file checks.hpp
/// @brief The size check and the aliasing rule of every op, written once (SPEC section 2): a buffer an op writes
///        (through a __restrict__ pointer, or as a cuBLAS output) may overlap no other operand;
///        read-only inputs may share memory. Internal to src/ops/.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <initializer_list>
#include <stdexcept>

#include "ops/ops.hpp"

namespace fh::ops::detail {

struct Range {
    const char* name;
    std::uintptr_t begin;
    std::size_t bytes;
    bool written;  ///< an output of the call
};
/// An output (written through a __restrict__ pointer): it may overlap nothing.
template <class T> Range range(const char* name, View<T> v) {
    return Range{name, reinterpret_cast<std::uintptr_t>(v.data()), v.size() * sizeof(T), true};
}
/// A read-only input: it may share memory with other read-only inputs (restrict only forbids
/// overlap where one of the pointers writes).
template <class T> Range range(const char* name, View<const T> v) {
    return Range{name, reinterpret_cast<std::uintptr_t>(v.data()), v.size() * sizeof(T), false};
}

/// Throws when an output shares a byte with any other non-empty range.
inline void require_distinct(const char* op, std::initializer_list<Range> ranges) {
    for (auto a = ranges.begin(); a != ranges.end(); ++a)
        for (auto b = a + 1; b != ranges.end(); ++b)
            if ((a->written || b->written) && a->bytes && b->bytes && a->begin < b->begin + b->bytes &&
                b->begin < a->begin + a->bytes)
                throw std::invalid_argument(fmt::format(
                    "ops::{}: {} overlaps {}; the operands must be distinct buffers (the kernels' pointers "
                    "are __restrict__ and cuBLAS forbids an output aliasing an input)",
                    op, a->written ? a->name : b->name, a->written ? b->name : a->name));
}

/// Throws unless a buffer has exactly the elements the op needs.
inline void require_size(std::size_t got, std::size_t want, const char* op, const char* what) {
    if (got != want)
        throw std::invalid_argument(fmt::format("ops::{}: {} has {} elements, expected {}", op, what, got, want));
}

}  // namespace fh::ops::detail
