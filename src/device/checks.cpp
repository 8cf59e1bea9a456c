/// @file checks.cpp
#include "device/checks.hpp"

#include <fmt/format.h>

#include <limits>

namespace fh::ops::detail {

void require_distinct(const char* op, std::initializer_list<Range> ranges) {
    for (auto a = ranges.begin(); a != ranges.end(); ++a)
        for (auto b = a + 1; b != ranges.end(); ++b)
            if ((a->written || b->written) && a->bytes && b->bytes && a->begin < b->begin + b->bytes &&
                b->begin < a->begin + a->bytes)
                throw std::invalid_argument(
                    fmt::format("ops::{}: {} overlaps {}; the operands must be distinct buffers (the kernels' pointers "
                                "are __restrict__ and cuBLAS forbids an output aliasing an input)",
                                op, a->written ? a->name : b->name, a->written ? b->name : a->name));
}

void require_size(std::size_t got, std::size_t want, const char* op, const char* what) {
    if (got != want)
        throw std::invalid_argument(fmt::format("ops::{}: {} has {} elements, expected {}", op, what, got, want));
}

void require_sizes(std::size_t want, const char* op, std::initializer_list<Sized> sizes) {
    for (const Sized& s : sizes) require_size(s.size, want, op, s.name);
}

void require_same_size(std::size_t a, std::size_t b, const char* op) {
    if (a != b) throw std::invalid_argument(fmt::format("ops::{}: size mismatch ({} vs {} elements)", op, a, b));
}

int checked_int_size(std::size_t n, const char* op) {
    if (n > static_cast<std::size_t>(std::numeric_limits<int>::max()))
        throw std::invalid_argument(fmt::format("ops::{}: {} elements exceed the kernels' int index range", op, n));
    return static_cast<int>(n);
}

void require(bool ok, const char* op, const std::string& what) {
    if (!ok) throw std::invalid_argument(fmt::format("ops::{}: {}", op, what));
}

void require_positive(long long v, const char* op, const char* what) {
    if (v < 1) throw std::invalid_argument(fmt::format("ops::{}: {} must be >= 1 (got {})", op, what, v));
}

std::size_t columns(std::size_t size, std::size_t rows, const char* op, const char* what) {
    if (rows == 0 || size == 0 || size % rows != 0)
        throw std::invalid_argument(
            fmt::format("ops::{}: {} has {} elements, not a non-zero multiple of {} rows", op, what, size, rows));
    return size / rows;
}

std::size_t per_agent(std::size_t n, int agents, const char* op, const char* what) {
    if (agents < 1 || n == 0 || n % static_cast<std::size_t>(agents) != 0)
        throw std::invalid_argument(fmt::format("ops::{}: {} {} do not split into {} agents", op, n, what, agents));
    return n / static_cast<std::size_t>(agents);
}

}  // namespace fh::ops::detail
