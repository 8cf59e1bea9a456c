/// @file ops.hpp
/// @brief The supervised op family: the forecaster's batch gather and loss, and the signal
///        adapter that turns forecasts into the environment's actions (the math:
///        math/supervised.h; docs/supervised.md).
///
/// Each op checks its arguments here, once, then runs its CPU twin (cpu_twin::, plain loops over
/// the shared math, src/ops/supervised/cpu.cpp) or its CUDA twin (cuda_twin::, the kernels of
/// cuda/kernels/supervised_*.cu, launched by src/ops/supervised/cuda.cpp).
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <limits>
#include <stdexcept>

#include "math/supervised.h"
#include "device/device.hpp"

namespace fh::ops {

namespace cpu_twin {
void supervised_gather(View<float> x, View<float> y, const supervised::RowSource& source,
                       const supervised::GatherParams& params, int batch);
void supervised_loss(View<float> loss, View<float> d_pred, View<const float> pred, View<const float> labels, int target,
                     int batch);
void supervised_signal(View<int> actions, View<const float> predictions, View<const float> states,
                       View<const float> calibration, const supervised::SignalParams& params, int n);
}  // namespace cpu_twin

namespace cuda_twin {
void supervised_gather(CudaDevice& device, View<float> x, View<float> y, const supervised::RowSource& source,
                       const supervised::GatherParams& params, int batch);
void supervised_loss(CudaDevice& device, View<float> loss, View<float> d_pred, View<const float> pred,
                     View<const float> labels, int target, int batch);
void supervised_signal(CudaDevice& device, View<int> actions, View<const float> predictions, View<const float> states,
                       View<const float> calibration, const supervised::SignalParams& params, int n);
}  // namespace cuda_twin

/// Where supervised_gather reads: sample i is row index[i] (index empty: row i) of `rows`
/// (n_rows, stride), its first `cols` floats; its label labels[i] (labels may be empty when no
/// labels are gathered). n_samples = index.size() (or n_rows).
struct GatherSource {
    View<const float> rows;
    int stride = 0, cols = 0;
    View<const int> index;
    View<const float> labels;
};

/// A batch of x.size() / cols rows: x (batch, cols) = the samples' features, y (batch) = their
/// labels (y empty: none). Samples uniform over [0, n_samples) with Philox(seed,
/// supervised_sample, row, update) when params.random, else first, first + 1, ... (all within
/// [0, n_samples)). The index values are the caller's (rows of `rows`, checked where they are
/// built). Exact, equal on both backends.
inline void supervised_gather(Device& device, View<float> x, View<float> y, const GatherSource& s,
                              const supervised::GatherParams& params) {
    const char* op = "supervised_gather";
    detail::require(s.stride >= 1 && s.cols >= 1 && s.cols <= s.stride, op,
                    fmt::format("need 1 <= cols <= stride (got cols {}, stride {})", s.cols, s.stride));
    detail::require(!x.empty() && x.size() % static_cast<std::size_t>(s.cols) == 0, op,
                    fmt::format("x has {} floats, not a positive multiple of cols = {}", x.size(), s.cols));
    detail::require(!s.rows.empty() && s.rows.size() % static_cast<std::size_t>(s.stride) == 0, op,
                    fmt::format("rows has {} floats, not a positive multiple of stride = {}", s.rows.size(), s.stride));
    const std::size_t batch = x.size() / static_cast<std::size_t>(s.cols);
    const int B = detail::checked_int_size(batch, op);
    (void)detail::checked_int_size(x.size(), op);
    const std::size_t n_rows = s.rows.size() / static_cast<std::size_t>(s.stride);
    const std::size_t n_samples = s.index.empty() ? n_rows : s.index.size();
    if (!y.empty()) {
        detail::require_size(y.size(), batch, op, "y");
        detail::require_size(s.labels.size(), n_samples, op, "labels");
    } else if (!s.labels.empty()) {
        detail::require_size(s.labels.size(), n_samples, op, "labels");
    }
    if (!params.random)
        detail::require(params.first >= 0 && static_cast<std::size_t>(params.first) + batch <= n_samples, op,
                        fmt::format("sequential samples [{}, {}) exceed the {} samples", params.first,
                                    params.first + static_cast<long long>(batch), n_samples));
    detail::require_distinct(op, {detail::range("x", x), detail::range("y", y), detail::range("rows", s.rows),
                                  detail::range("index", s.index), detail::range("labels", s.labels)});
    const supervised::RowSource src{s.rows.data(),
                                    s.index.empty() ? nullptr : s.index.data(),
                                    s.labels.empty() ? nullptr : s.labels.data(),
                                    static_cast<long long>(n_samples),
                                    s.stride,
                                    s.cols};
    if (CudaDevice* cuda = device.cuda()) return cuda_twin::supervised_gather(*cuda, x, y, src, params, B);
    cpu_twin::supervised_gather(x, y, src, params, B);
}

/// The forecaster's loss per row (supervised::loss_row): loss (B) and, unless d_pred is empty,
/// d_pred (B) = the gradient of the batch-mean loss. pred, labels (B); target a supervised::Target.
inline void supervised_loss(Device& device, View<float> loss, View<float> d_pred, View<const float> pred,
                            View<const float> labels, int target) {
    const char* op = "supervised_loss";
    detail::require(!pred.empty(), op, "empty batch (pred is empty)");
    detail::require(target == supervised::kReturn || target == supervised::kDirection, op,
                    fmt::format("unknown target {}", target));
    const int B = detail::checked_int_size(pred.size(), op);
    detail::require_size(loss.size(), pred.size(), op, "loss");
    if (!d_pred.empty()) detail::require_size(d_pred.size(), pred.size(), op, "d_pred");
    detail::require_size(labels.size(), pred.size(), op, "labels");
    detail::require_distinct(op, {detail::range("loss", loss), detail::range("d_pred", d_pred),
                                  detail::range("pred", pred), detail::range("labels", labels)});
    if (CudaDevice* cuda = device.cuda())
        return cuda_twin::supervised_loss(*cuda, loss, d_pred, pred, labels, target, B);
    cpu_twin::supervised_loss(loss, d_pred, pred, labels, target, B);
}

/// The signal adapter (supervised::signal_action): actions (n) from predictions (n), states
/// (n, params.state_dim) and calibration (supervised::kCalibrationFloats).
inline void supervised_signal(Device& device, View<int> actions, View<const float> predictions,
                              View<const float> states, View<const float> calibration,
                              const supervised::SignalParams& p) {
    const char* op = "supervised_signal";
    detail::require(!actions.empty(), op, "no rows (actions is empty)");
    const int n = detail::checked_int_size(actions.size(), op);
    detail::require(p.position_levels >= 3 && p.position_levels % 2 == 1, op,
                    fmt::format("position_levels {} must be odd and >= 3", p.position_levels));
    detail::require(p.urgency_levels >= 1 && p.urgency >= 0 && p.urgency < p.urgency_levels, op,
                    fmt::format("urgency {} must be in [0, urgency_levels = {})", p.urgency, p.urgency_levels));
    detail::require(p.max_contracts >= 1, op, "max_contracts must be >= 1");
    detail::require(p.market_dim >= 1 && p.state_dim > p.market_dim, op,
                    fmt::format("need 1 <= market_dim < state_dim (got {}, {})", p.market_dim, p.state_dim));
    detail::require(p.vol_feature >= 0 && p.vol_feature < p.market_dim, op,
                    fmt::format("vol_feature {} is not a market column", p.vol_feature));
    detail::require(p.target == supervised::kReturn || p.target == supervised::kDirection, op, "unknown target");
    detail::require(p.sizing == supervised::kFixed || p.sizing == supervised::kMagnitude, op, "unknown sizing");
    detail::require(p.full_score > 0.0f && p.volatility_floor > 0.0f && p.exit_threshold <= p.entry_threshold &&
                        p.exit_threshold >= 0.0f,
                    op, "need full_score > 0, volatility_floor > 0 and 0 <= exit_threshold <= entry_threshold");
    (void)detail::checked_int_size(actions.size() * static_cast<std::size_t>(p.state_dim), op);
    detail::require_size(predictions.size(), actions.size(), op, "predictions");
    detail::require_size(states.size(), actions.size() * static_cast<std::size_t>(p.state_dim), op, "states");
    detail::require_size(calibration.size(), supervised::kCalibrationFloats, op, "calibration");
    detail::require_distinct(op, {detail::range("actions", actions), detail::range("predictions", predictions),
                                  detail::range("states", states), detail::range("calibration", calibration)});
    if (CudaDevice* cuda = device.cuda())
        return cuda_twin::supervised_signal(*cuda, actions, predictions, states, calibration, p, n);
    cpu_twin::supervised_signal(actions, predictions, states, calibration, p, n);
}

}  // namespace fh::ops
