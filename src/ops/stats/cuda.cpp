/// @file cuda.cpp
/// @brief CUDA twin of the statistics op family: launchers of cuda/kernels/data_statistics.cu on
///        the device's stream (sizes and distinct buffers checked by src/ops/stats/ops.hpp).
#include "ops/stats/ops.hpp"
#include "ops/cuda_device.hpp"

namespace fh::ops::cuda_twin {

using cuda::LaunchDims;

void column_moments(CudaDevice& device, View<double> mean, View<double> m2, View<double> scratch,
                    View<const float> values, View<const long long> rows, int D) {
    const auto n = static_cast<long long>(rows.size());
    const long long chunks = statistics::chunk_count(n);
    const unsigned threads = static_cast<unsigned>(D < 256 ? (D + 31) / 32 * 32 : 256);
    const LaunchDims per_chunk{dim3(static_cast<unsigned>(chunks)), dim3(threads), 0};
    const LaunchDims per_column = LaunchDims::linear(static_cast<std::size_t>(D), 128);
    // The mean, then the squared deviations from it.
    device.kernels().column_chunk_sums_kernel(device.stream(), per_chunk, scratch.data(), values.data(), rows.data(), n,
                                              D, nullptr);
    device.kernels().column_totals_kernel(device.stream(), per_column, mean.data(), scratch.data(), chunks, D,
                                          static_cast<double>(n));
    device.kernels().column_chunk_sums_kernel(device.stream(), per_chunk, scratch.data(), values.data(), rows.data(), n,
                                              D, mean.data());
    device.kernels().column_totals_kernel(device.stream(), per_column, m2.data(), scratch.data(), chunks, D, 1.0);
}

}  // namespace fh::ops::cuda_twin
