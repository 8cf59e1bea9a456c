/// @file ops.hpp
/// @brief The statistics op family: per-column moments of a row subset of a float matrix in
///        double, in the fixed order of math/statistics.h (the training split's
///        normalisation statistics for large data, docs/data.md "Normalisation").
///
/// The op checks its arguments here, once, then runs its CPU twin (cpu_twin::, plain loops over
/// the shared math, src/ops/stats/cpu.cpp) or its CUDA twin (cuda_twin::, the kernels of
/// cuda/kernels/data_statistics.cu, launched by src/ops/stats/cuda.cpp); both give the same bits.
#pragma once

#include <fmt/format.h>

#include <cstdint>

#include "math/statistics.h"
#include "ops/device.hpp"

namespace fh::ops {

namespace cpu_twin {
void column_moments(View<double> mean, View<double> m2, View<double> scratch, View<const float> values,
                    View<const long long> rows, int D);
}  // namespace cpu_twin

namespace cuda_twin {
void column_moments(CudaDevice& device, View<double> mean, View<double> m2, View<double> scratch,
                    View<const float> values, View<const long long> rows, int D);
}  // namespace cuda_twin

/// Doubles of column_moments' scratch for n rows of D columns: the chunk partials.
inline std::size_t column_moments_scratch_size(std::size_t n, int D) {
    return static_cast<std::size_t>(statistics::chunk_count(static_cast<long long>(n))) * static_cast<std::size_t>(D);
}

/// Over the rows rows[0 .. n) of values (any rows, D) row-major: mean (D) = the column sums / n
/// and m2 (D) = the sums of squared deviations from that mean, both in double in the order of
/// math/statistics.h (equal on both backends, bit for bit). n >= 1; every rows[i] must
/// index a row of values (the caller builds them; not checked on the device). scratch holds
/// column_moments_scratch_size(n, D) doubles.
inline void column_moments(Device& device, View<double> mean, View<double> m2, View<double> scratch,
                           View<const float> values, View<const long long> rows, int D) {
    const char* op = "column_moments";
    detail::require(D >= 1, op, "D must be >= 1");
    detail::require(!rows.empty(), op, "no rows");
    detail::require(values.size() % static_cast<std::size_t>(D) == 0, op,
                    fmt::format("values ({}) is not a whole number of rows of {}", values.size(), D));
    detail::require_size(mean.size(), static_cast<std::size_t>(D), op, "mean");
    detail::require_size(m2.size(), static_cast<std::size_t>(D), op, "m2");
    detail::require_size(scratch.size(), column_moments_scratch_size(rows.size(), D), op, "scratch");
    detail::require_distinct(op,
                             {detail::range("mean", mean), detail::range("m2", m2), detail::range("scratch", scratch),
                              detail::range("values", values), detail::range("rows", rows)});
    if (CudaDevice* cuda = device.cuda()) return cuda_twin::column_moments(*cuda, mean, m2, scratch, values, rows, D);
    cpu_twin::column_moments(mean, m2, scratch, values, rows, D);
}

}  // namespace fh::ops
