/// @file cpu.cpp
/// @brief CPU twin of the statistics op family: the chunk partials and totals of
///        math/statistics.h in plain loops (the same order as the kernels).
#include "ops/stats/ops.hpp"

namespace fh::ops::cpu_twin {

void column_moments(View<double> mean, View<double> m2, View<double> scratch, View<const float> values,
                    View<const long long> rows, int D) {
    statistics::column_moments_serial(mean.data(), m2.data(), scratch.data(), values.data(), rows.data(),
                                      static_cast<long long>(rows.size()), D);
}

}  // namespace fh::ops::cpu_twin
