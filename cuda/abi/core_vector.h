/// @file core_vector.h
/// @brief The elementwise vector ops every trainer uses (fill, copy, a group of copies, saxpy,
///        scale, segment means, a device counter and the periodic copy it drives), their kernels in
///        cuda/kernels/core_vector.cu (per-element math in math/core.h). CPU twins:
///        src/ops/core/cpu.cpp.
#pragma once

#include "abi/view.h"
#include "math/core.h"

namespace fh::ops {

/// y[i] = value.
struct Fill {
    View<float> y;
    float value;
};
/// dst[i] = src[i]; dst and src must not overlap.
struct Copy {
    View<float> dst;
    View<const float> src;
};
/// y[i] += a * x[i] (core::saxpy_element, one fused multiply-add); x and y the same size and
/// distinct. To scale a buffer in place use Scale, never saxpy(y, alpha - 1, y) (undefined under
/// __restrict__: an aliased saxpy can produce NaNs).
struct Saxpy {
    View<float> y;
    float a;
    View<const float> x;
};
/// y[i] *= alpha, in place.
struct Scale {
    View<float> y;
    float alpha;
};
/// out[s] = mean of segment s of x, x split into out.size() equal segments of n >= 1 (one output:
/// the mean of x), each summed in a fixed order (CUDA: a block of kMeanThreads per segment, each
/// thread a fixed stride, then a fixed tree; the CPU sums in order, in double: equal within
/// rounding). Distinct buffers.
struct Mean {
    View<float> out;
    View<const float> x;
};
inline constexpr int kMeanThreads = 256;
/// counter[i] += 1 for every i: update numbers kept in device memory, which the ops of a captured
/// sequence read (AdamStep's `step`, CopyEvery) instead of taking them from the host. counter (N
/// >= 1: one per agent of a population, all advanced by one launch).
struct Increment {
    View<long long> counter;
};
/// A periodic copy (a target network's) decided on the device: dst and src are N equal slices (one
/// per agent) and slice a is copied when counter[a] % period == 0 (period >= 1), each agent at its
/// own update number. dst and src distinct, the same size, a multiple of counter's N >= 1.
struct CopyEvery {
    View<float> dst;
    View<const float> src;
    View<const long long> counter;
    long long period;
};

}  // namespace fh::ops

namespace fh::abi {
/// copy_group_kernel's operands (ops::CopyGroup): copy c (grid.y = the copies given) moves rows[c]
/// rows of bytes[c] bytes, row r from src[c] + r src_pitch[c] to dst[c] + r dst_pitch[c] (one
/// row: a plain copy), in 4-byte words where the pointers, the size and the pitches allow, else
/// byte by byte; grid.x blocks stride over the longest copy.
constexpr int kCopyGroupMax = 8;
struct CopyGroupArgs {
    void* dst[kCopyGroupMax];
    const void* src[kCopyGroupMax];
    long long bytes[kCopyGroupMax];
    long long rows[kCopyGroupMax];
    long long dst_pitch[kCopyGroupMax];
    long long src_pitch[kCopyGroupMax];
};
}  // namespace fh::abi

#define FH_KERNELS_core_vector(FH_KERNEL)                                 \
    FH_KERNEL(core_vector, fill_f32_kernel, Op<fh::ops::Fill>)            \
    FH_KERNEL(core_vector, copy_f32_kernel, Op<fh::ops::Copy>)            \
    FH_KERNEL(core_vector, copy_group_kernel, Op<fh::abi::CopyGroupArgs>) \
    FH_KERNEL(core_vector, saxpy_f32_kernel, Op<fh::ops::Saxpy>)          \
    FH_KERNEL(core_vector, scale_f32_kernel, Op<fh::ops::Scale>)          \
    FH_KERNEL(core_vector, mean_f32_kernel, Op<fh::ops::Mean>)            \
    FH_KERNEL(core_vector, increment_i64_kernel, Op<fh::ops::Increment>)  \
    FH_KERNEL(core_vector, copy_every_f32_kernel, Op<fh::ops::CopyEvery>)

#ifndef __CUDACC__
#include <type_traits>
#include <vector>

#include "ops/op_begin.hpp"

/// One copy of a CopyGroup: dst = src, element for element, for any trivially copyable element
/// type (the sizes must match: checked); or, made by strided(), `rows` rows of `width` elements,
/// row r from src + r src_pitch to dst + r dst_pitch (e.g. a step's (agents, n) values into row t
/// of every agent's (T, n) rollout).
struct CopyPair {
    template <class T>
    requires std::is_trivially_copyable_v<T> &&
        (!std::is_const_v<T>)CopyPair(View<T> dst, std::type_identity_t<View<const T>> src)
        : dst(reinterpret_cast<std::byte*>(dst.data()), dst.size() * sizeof(T)),
          src(reinterpret_cast<const std::byte*>(src.data()), src.size() * sizeof(T)),
          elements(dst.size()),
          src_elements(src.size()),
          width(dst.size() * sizeof(T)) {}
    template <class T>
    requires std::is_trivially_copyable_v<T> &&(!std::is_const_v<T>)static CopyPair
        strided(View<T> dst, std::size_t dst_pitch, std::type_identity_t<View<const T>> src, std::size_t src_pitch,
                std::size_t width, std::size_t rows) {
        CopyPair c(dst, src);
        c.rows = rows;
        c.width = width * sizeof(T);
        c.dst_pitch = dst_pitch * sizeof(T);
        c.src_pitch = src_pitch * sizeof(T);
        return c;
    }
    View<std::byte> dst;
    View<const std::byte> src;
    std::size_t elements, src_elements;
    std::size_t rows = 1, width = 0, dst_pitch = 0, src_pitch = 0;  ///< bytes; one row: width = dst's bytes
};
/// Several copies in one launch on CUDA (a rollout step's stores): each pair's dst = src, or its
/// strided rows; at most abi::kCopyGroupMax pairs. No dst may overlap any src or another dst
/// (checked); empty pairs are skipped.
struct CopyGroup {
    std::vector<CopyPair> copies;
};

inline bool check(const Fill& a) {
    detail::checked_int_size(a.y.size(), "fill");
    return !a.y.empty();
}
FH_LAUNCH_KERNEL(Fill, fill_f32_kernel, LaunchDims::linear(a.y.size()));

inline bool check(const Copy& a) {
    detail::require_same_size(a.dst.size(), a.src.size(), "copy");
    detail::checked_int_size(a.dst.size(), "copy");
    if (overlaps(a.dst, a.src))
        throw std::invalid_argument(
            "ops::copy: dst and src overlap; the copy kernel's pointers are __restrict__ and must refer to distinct "
            "buffers");
    return !a.dst.empty();
}
FH_LAUNCH_KERNEL(Copy, copy_f32_kernel, LaunchDims::linear(a.dst.size()));

inline void check(const CopyGroup& a) {
    const auto& copies = a.copies;
    if (copies.size() > static_cast<std::size_t>(abi::kCopyGroupMax))
        throw std::invalid_argument(
            fmt::format("ops::copy_group: {} copies, at most {} in one group", copies.size(), abi::kCopyGroupMax));
    for (std::size_t i = 0; i < copies.size(); ++i) {
        const CopyPair& c = copies[i];
        if (c.rows == 1 && c.elements != c.src_elements)
            throw std::invalid_argument(
                fmt::format("ops::copy_group: copy {} has {} elements to {} from", i, c.elements, c.src_elements));
        if (c.rows != 1 && (c.rows == 0 || c.dst_pitch < c.width || c.src_pitch < c.width ||
                            (c.rows - 1) * c.dst_pitch + c.width > c.dst.size() ||
                            (c.rows - 1) * c.src_pitch + c.width > c.src.size()))
            throw std::invalid_argument(fmt::format(
                "ops::copy_group: copy {}'s {} rows of {} bytes exceed its buffers or pitches", i, c.rows, c.width));
        for (std::size_t j = 0; j < copies.size(); ++j) {
            if (overlaps(c.dst, copies[j].src))
                throw std::invalid_argument(fmt::format("ops::copy_group: copy {}'s dst overlaps copy {}'s src", i, j));
            if (j != i && overlaps(c.dst, copies[j].dst))
                throw std::invalid_argument(
                    fmt::format("ops::copy_group: copies {} and {} write the same bytes", i, j));
        }
    }
}
FH_LAUNCH(CopyGroup) {
    // One launch, a grid row (grid.y) per non-empty copy.
    abi::CopyGroupArgs args{};
    unsigned count = 0;
    std::size_t longest = 0;
    for (const CopyPair& c : a.copies) {
        if (c.dst.empty()) continue;
        args.dst[count] = c.dst.data();
        args.src[count] = c.src.data();
        args.bytes[count] = static_cast<long long>(c.width);
        args.rows[count] = static_cast<long long>(c.rows);
        args.dst_pitch[count] = static_cast<long long>(c.dst_pitch);
        args.src_pitch[count] = static_cast<long long>(c.src_pitch);
        longest = std::max(longest, c.width * c.rows);
        ++count;
    }
    if (count == 0) return;
    LaunchDims dims = LaunchDims::linear((longest + 3) / 4);
    dims.grid.y = count;
    gpu.kernels().copy_group_kernel(gpu.stream(), dims, args);
}

inline bool check(const Saxpy& a) {
    detail::require_same_size(a.y.size(), a.x.size(), "saxpy");
    detail::checked_int_size(a.y.size(), "saxpy");
    if (overlaps(a.y, a.x))
        throw std::invalid_argument(
            "ops::saxpy: y and x overlap. The saxpy kernel's pointers are __restrict__, so an aliased call is "
            "undefined behaviour (an aliased saxpy can produce NaNs). To scale a buffer in place use ops::Scale "
            "(scale_f32_kernel).");
    return !a.y.empty();
}
FH_LAUNCH_KERNEL(Saxpy, saxpy_f32_kernel, LaunchDims::linear(a.y.size()));

inline bool check(const Scale& a) {
    detail::checked_int_size(a.y.size(), "scale");
    return !a.y.empty();
}
FH_LAUNCH_KERNEL(Scale, scale_f32_kernel, LaunchDims::linear(a.y.size()));

inline void check(const Mean& a) {
    if (a.out.empty() || a.x.empty()) throw std::invalid_argument("ops::mean: empty input or output");
    if (a.x.size() % a.out.size() != 0)
        throw std::invalid_argument(
            fmt::format("ops::mean: {} inputs do not split into {} equal segments", a.x.size(), a.out.size()));
    detail::checked_int_size(a.x.size(), "mean");
    detail::checked_int_size(a.out.size(), "mean");
    detail::require_distinct("mean", {FH_RANGES_OF(a, out, x)});
}
FH_LAUNCH_KERNEL(Mean, mean_f32_kernel, LaunchDims{dim3(static_cast<unsigned>(a.out.size())), dim3(kMeanThreads), 0});

inline void check(const Increment& a) {
    detail::require(!a.counter.empty(), "increment", "counter is empty");
    detail::checked_int_size(a.counter.size(), "increment");
}
FH_LAUNCH_KERNEL(Increment, increment_i64_kernel, LaunchDims::linear(a.counter.size(), 32));

inline bool check(const CopyEvery& a) {
    const char* op = "copy_every";
    detail::require_same_size(a.dst.size(), a.src.size(), op);
    detail::require(!a.counter.empty() && a.dst.size() % a.counter.size() == 0, op,
                    "dst's size is not a multiple of the counters' (one slice per agent)");
    detail::checked_int_size(a.dst.size(), op);
    detail::require(a.period >= 1, op, "period must be >= 1, got {}", a.period);
    if (overlaps(a.dst, a.src)) throw std::invalid_argument("ops::copy_every: dst and src overlap");
    if (overlaps(a.dst, a.counter)) throw std::invalid_argument("ops::copy_every: dst overlaps the counter");
    return !a.dst.empty();
}
FH_LAUNCH(CopyEvery) {
    // One row of blocks per agent (grid.y), each skipped as a whole when its agent does not copy.
    LaunchDims dims = LaunchDims::linear(a.dst.size() / a.counter.size());
    dims.grid.y = static_cast<unsigned>(a.counter.size());
    gpu.kernels().copy_every_f32_kernel(gpu.stream(), dims, a);
}

#include "ops/op_end.hpp"
#endif
