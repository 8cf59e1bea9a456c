/// @file cuda.cpp
/// @brief CUDA twins of the supervised op family: launchers of cuda/kernels/supervised_*.cu on the
///        device's stream. The op (src/ops/supervised/ops.hpp) checked sizes and that the buffers
///        of each launch are distinct before these run.
#include "ops/supervised/ops.hpp"
#include "device/cuda_device.hpp"

namespace fh::ops::cuda_twin {

using cuda::LaunchDims;

void supervised_gather(CudaDevice& device, View<float> x, View<float> y, const supervised::RowSource& source,
                       const supervised::GatherParams& params, int batch) {
    device.kernels().supervised_gather_kernel(device.stream(), LaunchDims::linear(static_cast<std::size_t>(batch), 128),
                                              x.data(), y.empty() ? nullptr : y.data(), source, params, batch);
}

void supervised_loss(CudaDevice& device, View<float> loss, View<float> d_pred, View<const float> pred,
                     View<const float> labels, int target, int batch) {
    device.kernels().supervised_loss_kernel(device.stream(), LaunchDims::linear(static_cast<std::size_t>(batch), 128),
                                            loss.data(), d_pred.empty() ? nullptr : d_pred.data(), pred.data(),
                                            labels.data(), target, batch);
}

void supervised_signal(CudaDevice& device, View<int> actions, View<const float> predictions, View<const float> states,
                       View<const float> calibration, const supervised::SignalParams& params, int n) {
    device.kernels().supervised_signal_kernel(device.stream(), LaunchDims::linear(static_cast<std::size_t>(n), 128),
                                              actions.data(), predictions.data(), states.data(), calibration.data(),
                                              params, n);
}

}  // namespace fh::ops::cuda_twin
