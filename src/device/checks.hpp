/// @file checks.hpp
/// @brief The argument checks every op runs before it touches memory, written once: sizes, the
///        kernels' int index range, and the aliasing rule (a buffer an op writes, through a
///        __restrict__ pointer or as a cuBLAS output, may overlap no other operand; read-only
///        inputs may share memory). Each failure throws std::invalid_argument naming the op and
///        the operand (a programming error: the profile checks keep users from reaching it).
#pragma once

#include <fmt/core.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <utility>

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

/// A buffer the op only reads, though its View is writable (e.g. a ring that sampling reads).
template <class T>
Range read_range(const char* name, View<T> v) {
    return range(name, View<const T>(v));
}

/// The ranges of a require_distinct list, each named as written: FH_RANGES(x, y) is
/// `detail::range("x", x), detail::range("y", y)`; FH_RANGES_OF(a, x, y) names a's members
/// (`detail::range("x", a.x), ...`). Up to 20 names.
#define FH_RANGES(...) FH_FOR_EACH_(FH_RANGE_, , __VA_ARGS__)
#define FH_RANGES_OF(object, ...) FH_FOR_EACH_(FH_RANGE_, object., __VA_ARGS__)
#define FH_RANGE_(prefix, x) ::fh::ops::detail::range(#x, prefix x)
/// The sizes of a require_sizes list, named the same way: FH_SIZES(x, y) is
/// `detail::Sized{x.size(), "x"}, ...`; FH_SIZES_OF(a, x, y) `detail::Sized{a.x.size(), "x"}, ...`.
#define FH_SIZES(...) FH_FOR_EACH_(FH_SIZE_, , __VA_ARGS__)
#define FH_SIZES_OF(object, ...) FH_FOR_EACH_(FH_SIZE_, object., __VA_ARGS__)
#define FH_SIZE_(prefix, x)    \
    ::fh::ops::detail::Sized { \
        (prefix x).size(), #x  \
    }
// step(fixed, x) for each x of __VA_ARGS__, comma-separated: each step leaves the next one to the
// following rescan, and FH_FOR_EACH_RESCAN_ rescans 16 times and more (a longer list fails to
// compile).
#define FH_FOR_EACH_(step, fixed, ...) __VA_OPT__(FH_FOR_EACH_RESCAN_(FH_FOR_EACH_STEP_(step, fixed, __VA_ARGS__)))
#define FH_FOR_EACH_STEP_(step, fixed, x, ...) \
    step(fixed, x) __VA_OPT__(, FH_FOR_EACH_NEXT_ FH_FOR_EACH_PARENS_(step, fixed, __VA_ARGS__))
#define FH_FOR_EACH_NEXT_() FH_FOR_EACH_STEP_
#define FH_FOR_EACH_PARENS_ ()
#define FH_FOR_EACH_RESCAN_(...) \
    FH_FOR_EACH_RESCAN4_(FH_FOR_EACH_RESCAN4_(FH_FOR_EACH_RESCAN4_(FH_FOR_EACH_RESCAN4_(__VA_ARGS__))))
#define FH_FOR_EACH_RESCAN4_(...) \
    FH_FOR_EACH_RESCAN1_(FH_FOR_EACH_RESCAN1_(FH_FOR_EACH_RESCAN1_(FH_FOR_EACH_RESCAN1_(__VA_ARGS__))))
#define FH_FOR_EACH_RESCAN1_(...) __VA_ARGS__

/// Throws when an output shares a byte with any other non-empty range.
void require_distinct(const char* op, std::initializer_list<Range> ranges);
/// Throws unless a buffer has exactly the elements the op needs.
void require_size(std::size_t got, std::size_t want, const char* op, const char* what);
/// A buffer's size and name (FH_SIZES).
struct Sized {
    std::size_t size;
    const char* name;
};
/// require_size of each buffer, in order.
void require_sizes(std::size_t want, const char* op, std::initializer_list<Sized> sizes);
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
/// require with `what` formatted from `args`, only when it fails.
template <class... A>
void require(bool ok, const char* op, fmt::format_string<A...> what, A&&... args) {
    if (!ok) require(false, op, fmt::format(what, std::forward<A>(args)...));
}
/// Throws unless v >= 1.
void require_positive(long long v, const char* op, const char* what);
/// The columns of a (rows, cols) buffer: its size must be a non-zero multiple of rows.
std::size_t columns(std::size_t size, std::size_t rows, const char* op, const char* what);
/// Each agent's share of n elements (`what`, e.g. "gradients"): agents >= 1 and n a non-zero
/// multiple of it, else `ops::<op>: <n> <what> do not split into <agents> agents`.
std::size_t per_agent(std::size_t n, int agents, const char* op, const char* what);

}  // namespace fh::ops::detail
