/// @file data_statistics.h
/// @brief The statistics op: per-column moments of a row subset of a float matrix in double, in
///        the fixed order of math/statistics.h (the training split's normalisation statistics for
///        large data, docs/data.md "Normalisation"), and the signatures of
///        cuda/kernels/data_statistics.cu. CPU twin: src/ops/stats/cpu.cpp.
#pragma once

#include "abi/view.h"
#include "math/statistics.h"

namespace fh::ops {

/// Over the rows rows[0 .. n) of values (any rows, D) row-major: mean (D) = the column sums / n
/// and m2 (D) = the sums of squared deviations from that mean, both in double in the order of
/// math/statistics.h (equal on both backends, bit for bit). n >= 1; every rows[i] must index a
/// row of values (the caller builds them; not checked on the device). scratch holds
/// column_moments_scratch_size(n, D) doubles.
struct ColumnMoments {
    View<double> mean, m2, scratch;
    View<const float> values;
    View<const long long> rows;
    int D;
};

/// Doubles of ColumnMoments' scratch for n rows of D columns: the chunk partials.
inline std::size_t column_moments_scratch_size(std::size_t n, int D) {
    return static_cast<std::size_t>(statistics::chunk_count(static_cast<long long>(n))) * static_cast<std::size_t>(D);
}

}  // namespace fh::ops

namespace fh::abi {

/// partials (chunks, D): statistics::chunk_partial of every (chunk = blockIdx.x, column k),
/// k = threadIdx.x, threadIdx.x + blockDim.x, ...; center (D) or null (plain sums). values
/// (any rows, D), rows (n) indices into it. Buffers distinct.
using ColumnChunkSums = void(double* __restrict__ partials, const float* __restrict__ values,
                             const long long* __restrict__ rows, long long n, int D, const double* __restrict__ center);
/// out[k] = statistics::column_total(partials, chunks, D, k) / divisor, one thread per column.
using ColumnTotals = void(double* __restrict__ out, const double* __restrict__ partials, long long chunks, int D,
                          double divisor);

}  // namespace fh::abi

#define FH_KERNELS_data_statistics(FH_KERNEL)                             \
    FH_KERNEL(data_statistics, column_chunk_sums_kernel, ColumnChunkSums) \
    FH_KERNEL(data_statistics, column_totals_kernel, ColumnTotals)

#ifndef __CUDACC__
#include "ops/op_begin.hpp"

inline void check(const ColumnMoments& a) {
    const char* op = "column_moments";
    detail::require(a.D >= 1, op, "D must be >= 1");
    detail::require(!a.rows.empty(), op, "no rows");
    detail::require(a.values.size() % static_cast<std::size_t>(a.D) == 0, op,
                    "values ({}) is not a whole number of rows of {}", a.values.size(), a.D);
    detail::require_sizes(static_cast<std::size_t>(a.D), op, {FH_SIZES_OF(a, mean, m2)});
    detail::require_size(a.scratch.size(), column_moments_scratch_size(a.rows.size(), a.D), op, "scratch");
    detail::require_distinct(op, {FH_RANGES_OF(a, mean, m2, scratch, values, rows)});
}
/// The chunk sums (a block per chunk, threads over the columns), then the totals (a thread per
/// column): the mean, then the squared deviations from it.
FH_LAUNCH(ColumnMoments) {
    const auto n = static_cast<long long>(a.rows.size());
    const long long chunks = statistics::chunk_count(n);
    const LaunchDims per_chunk{dim3(static_cast<unsigned>(chunks)), dim3(a.D < 256 ? (a.D + 31) / 32 * 32 : 256), 0};
    const LaunchDims per_column = LaunchDims::linear(static_cast<std::size_t>(a.D), 128);
    const auto& k = gpu.kernels();
    k.column_chunk_sums_kernel(gpu.stream(), per_chunk, a.scratch.data(), a.values.data(), a.rows.data(), n, a.D,
                               nullptr);
    k.column_totals_kernel(gpu.stream(), per_column, a.mean.data(), a.scratch.data(), chunks, a.D,
                           static_cast<double>(n));
    k.column_chunk_sums_kernel(gpu.stream(), per_chunk, a.scratch.data(), a.values.data(), a.rows.data(), n, a.D,
                               a.mean.data());
    k.column_totals_kernel(gpu.stream(), per_column, a.m2.data(), a.scratch.data(), chunks, a.D, 1.0);
}

#include "ops/op_end.hpp"
#endif
