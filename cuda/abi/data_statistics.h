/// @file data_statistics.h
/// @brief Signatures of cuda/kernels/data_statistics.cu: per-column moments of a row subset in
///        the fixed order of math/statistics.h (the normalisation statistics of large data).
#pragma once

#include "math/statistics.h"

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
