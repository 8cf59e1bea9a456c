/// @file statistics.h
/// @brief Per-column moments of a row subset of a (rows, D) float matrix in double, in one fixed
///        summation order shared by the host (data::training_stats) and the device
///        (cuda/kernels/data_statistics.cu): the normalisation statistics of the training split
///        are bit for bit the same whichever computes them.
///
/// The order: the selected rows r_0 .. r_{n-1} are cut into chunks of kChunkRows; chunk c's
/// partial for column k sums x = values[r_i * D + k] (or (x - center_k)^2) for i = c * kChunkRows
/// .. min(n, (c + 1) * kChunkRows) - 1 in that order, from 0.0; the column's total sums the
/// partials c = 0, 1, ... in order, from 0.0. With at most kChunkRows rows this is the plain
/// sequential sum. No fused multiply-add (nvcc --fmad=false; g++ -ffp-contract=off).
#pragma once

#include "math/host_device.h"

namespace fh::statistics {

inline constexpr long long kChunkRows = 4096;

FH_HD long long chunk_count(long long n) {
    return (n + kChunkRows - 1) / kChunkRows;
}

/// Chunk c's partial for column k: the sum of x (center null) or of (x - center[k])^2.
FH_HD double chunk_partial(const float* values, const long long* rows, long long n, int D, int k, long long c,
                           const double* center) {
    const long long end = (c + 1) * kChunkRows < n ? (c + 1) * kChunkRows : n;
    double s = 0.0;
    for (long long i = c * kChunkRows; i < end; ++i) {
        const double x = values[rows[i] * D + k];
        if (center) {
            const double d = x - center[k];
            s += d * d;
        } else {
            s += x;
        }
    }
    return s;
}

/// Column k's total of the partials (chunks, D), in chunk order.
FH_HD double column_total(const double* partials, long long chunks, int D, int k) {
    double s = 0.0;
    for (long long c = 0; c < chunks; ++c) s += partials[c * D + k];
    return s;
}

/// The whole computation in one thread, for the host (data::training_stats and the CPU twin of
/// ops::column_moments): mean (D) = column sums / n, m2 (D) = sums of squared deviations from
/// that mean; scratch holds chunk_count(n) * D doubles.
inline void column_moments_serial(double* mean, double* m2, double* scratch, const float* values, const long long* rows,
                                  long long n, int D) {
    const long long chunks = chunk_count(n);
    for (int pass = 0; pass < 2; ++pass) {
        const double* center = pass == 0 ? nullptr : mean;
        for (long long c = 0; c < chunks; ++c)
            for (int k = 0; k < D; ++k) scratch[c * D + k] = chunk_partial(values, rows, n, D, k, c, center);
        double* out = pass == 0 ? mean : m2;
        for (int k = 0; k < D; ++k)
            out[k] = column_total(scratch, chunks, D, k) / (pass == 0 ? static_cast<double>(n) : 1.0);
    }
}

}  // namespace fh::statistics
