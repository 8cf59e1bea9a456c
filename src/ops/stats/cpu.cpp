/// @file cpu.cpp
/// @brief CPU twin of the statistics op (cuda/abi/data_statistics.h): the chunk partials and
///        totals of math/statistics.h in plain loops (the same order as the kernels).
#include "abi/data_statistics.h"

namespace fh::ops {

void cpu(const ColumnMoments& a) {
    statistics::column_moments_serial(a.mean.data(), a.m2.data(), a.scratch.data(), a.values.data(), a.rows.data(),
                                      static_cast<long long>(a.rows.size()), a.D);
}

}  // namespace fh::ops
