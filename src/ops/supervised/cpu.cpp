/// @file cpu.cpp
/// @brief CPU twins of the supervised op family (cuda/abi/supervised_*.h): the shared per-row
///        math (math/supervised.h) in plain loops.
#include "abi/supervised_forecast.h"
#include "abi/supervised_signal.h"

namespace fh::ops {

void cpu(const SupervisedGather& a) {
    const supervised::RowSource source = row_source(a.source);
    const auto batch = static_cast<long long>(a.x.size() / static_cast<std::size_t>(source.cols));
    float* y = a.y.empty() ? nullptr : a.y.data();
    for (long long b = 0; b < batch; ++b) supervised::gather_row(b, a.x.data(), y, source, a.params);
}

void cpu(const SupervisedLoss& a) {
    const auto batch = static_cast<long long>(a.pred.size());
    const float scale = 1.0f / static_cast<float>(batch);
    float* d = a.d_pred.empty() ? nullptr : a.d_pred.data();
    for (long long b = 0; b < batch; ++b)
        supervised::loss_row(b, a.loss.data(), d, a.pred.data(), a.labels.data(), a.target, scale);
}

void cpu(const SupervisedSignal& a) {
    const std::size_t D = static_cast<std::size_t>(a.params.state_dim);
    for (std::size_t i = 0; i < a.actions.size(); ++i)
        a.actions.data()[i] =
            supervised::signal_action(a.predictions.data()[i], a.states.data() + i * D, a.calibration.data(), a.params);
}

}  // namespace fh::ops
