/// @file checks.hpp
/// @brief The argument checks every op runs before it touches memory, written once: sizes, the
///        kernels' int index range, and the aliasing rule (a buffer an op writes, through a
///        __restrict__ pointer or as a cuBLAS output, may overlap no other operand; read-only
///        inputs may share memory). Each failure throws std::invalid_argument naming the op and
///        the operand (a programming error: the profile checks keep users from reaching it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>

#include "abi/view.h"

namespace fh::ops::detail {

struct Range {
    const char* name;
    std::uintptr_t begin;
    std::size_t bytes;
    bool written;  ///< an output of the call
};
/// An output (written through a __restrict__ pointer): it may overlap nothing.
template <class T>
Range range(const char* name, View<T> v) {
    return Range{name, reinterpret_cast<std::uintptr_t>(v.data()), v.size() * sizeof(T), true};
}
/// A read-only input: it may share memory with other read-only inputs (restrict only forbids
/// overlap where one of the pointers writes).
template <class T>
Range range(const char* name, View<const T> v) {
    return Range{name, reinterpret_cast<std::uintptr_t>(v.data()), v.size() * sizeof(T), false};
}

/// Throws when an output shares a byte with any other non-empty range.
void require_distinct(const char* op, std::initializer_list<Range> ranges);
/// Throws unless a buffer has exactly the elements the op needs.
void require_size(std::size_t got, std::size_t want, const char* op, const char* what);
/// Throws unless two sizes agree (memory transfers).
void require_same_size(std::size_t a, std::size_t b, const char* op);
/// Kernels index with int: refuses sizes they cannot address.
int checked_int_size(std::size_t n, const char* op);
/// checked_int_size of each size, in order.
template <class... N>
void require_int_sizes(const char* op, N... n) {
    (checked_int_size(n, op), ...);
}
/// Throws `ops::<op>: <what>` unless `ok`.
void require(bool ok, const char* op, const std::string& what);
/// Throws unless v >= 1.
void require_positive(long long v, const char* op, const char* what);
/// The columns of a (rows, cols) buffer: its size must be a non-zero multiple of rows.
std::size_t columns(std::size_t size, std::size_t rows, const char* op, const char* what);
/// Each agent's share of n elements (`what`, e.g. "gradients"): agents >= 1 and n a non-zero
/// multiple of it, else `ops::<op>: <n> <what> do not split into <agents> agents`.
std::size_t per_agent(std::size_t n, int agents, const char* op, const char* what);

}  // namespace fh::ops::detail
