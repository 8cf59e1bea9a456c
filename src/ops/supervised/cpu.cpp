/// @file cpu.cpp
/// @brief CPU twins of the supervised op family: the shared per-row math (math/supervised.h) in
///        plain loops.
#include "ops/supervised/ops.hpp"

namespace fh::ops::cpu_twin {

void supervised_gather(View<float> x, View<float> y, const supervised::RowSource& source,
                       const supervised::GatherParams& params, int batch) {
    float* yp = y.empty() ? nullptr : y.data();
    for (long long b = 0; b < batch; ++b) supervised::gather_row(b, x.data(), yp, source, params);
}

void supervised_loss(View<float> loss, View<float> d_pred, View<const float> pred, View<const float> labels, int target,
                     int batch) {
    const float scale = 1.0f / static_cast<float>(batch);
    float* d = d_pred.empty() ? nullptr : d_pred.data();
    for (long long b = 0; b < batch; ++b)
        supervised::loss_row(b, loss.data(), d, pred.data(), labels.data(), target, scale);
}

void supervised_signal(View<int> actions, View<const float> predictions, View<const float> states,
                       View<const float> calibration, const supervised::SignalParams& params, int n) {
    const std::size_t D = static_cast<std::size_t>(params.state_dim);
    for (int i = 0; i < n; ++i)
        actions.data()[i] = supervised::signal_action(
            predictions.data()[i], states.data() + static_cast<std::size_t>(i) * D, calibration.data(), params);
}

}  // namespace fh::ops::cpu_twin
