/// @file supervised_signal.h
/// @brief The signal adapter (math in math/supervised.h) and its kernel in
///        cuda/kernels/supervised_signal.cu. CPU twin: src/ops/supervised/cpu.cpp.
#pragma once

#include "abi/view.h"
#include "math/supervised.h"

namespace fh::ops {

/// One thread per row (supervised::signal_action): actions (n) from predictions (n), states
/// (n, params.state_dim) and calibration (supervised::kCalibrationFloats).
struct SupervisedSignal {
    View<int> actions;
    View<const float> predictions, states, calibration;
    supervised::SignalParams params;
};

}  // namespace fh::ops

#define FH_KERNELS_supervised_signal(FH_KERNEL) \
    FH_KERNEL(supervised_signal, supervised_signal_kernel, Op<fh::ops::SupervisedSignal>)

#ifndef __CUDACC__
#include "ops/op_begin.hpp"

inline void check(const SupervisedSignal& a) {
    const auto& [actions, predictions, states, calibration, p] = a;
    const char* op = "supervised_signal";
    detail::require(!actions.empty(), op, "no rows (actions is empty)");
    detail::checked_int_size(actions.size(), op);
    detail::require(p.position_levels >= 3 && p.position_levels % 2 == 1, op, "position_levels {} must be odd and >= 3",
                    p.position_levels);
    detail::require(p.urgency_levels >= 1 && p.urgency >= 0 && p.urgency < p.urgency_levels, op,
                    "urgency {} must be in [0, urgency_levels = {})", p.urgency, p.urgency_levels);
    detail::require(p.max_contracts >= 1, op, "max_contracts must be >= 1");
    detail::require(p.market_dim >= 1 && p.state_dim > p.market_dim, op,
                    "need 1 <= market_dim < state_dim (got {}, {})", p.market_dim, p.state_dim);
    detail::require(p.vol_feature >= 0 && p.vol_feature < p.market_dim, op, "vol_feature {} is not a market column",
                    p.vol_feature);
    detail::require(p.target == supervised::kReturn || p.target == supervised::kDirection, op, "unknown target");
    detail::require(p.sizing == supervised::kFixed || p.sizing == supervised::kMagnitude, op, "unknown sizing");
    detail::require(p.full_score > 0.0f && p.volatility_floor > 0.0f && p.exit_threshold <= p.entry_threshold &&
                        p.exit_threshold >= 0.0f,
                    op, "need full_score > 0, volatility_floor > 0 and 0 <= exit_threshold <= entry_threshold");
    const std::size_t n = actions.size(), D = static_cast<std::size_t>(p.state_dim);
    detail::checked_int_size(n * D, op);
    detail::require_size(predictions.size(), n, op, "predictions");
    detail::require_size(states.size(), n * D, op, "states");
    detail::require_size(calibration.size(), supervised::kCalibrationFloats, op, "calibration");
    detail::require_distinct(op, {FH_RANGES(actions, predictions, states, calibration)});
}
FH_LAUNCH_KERNEL(SupervisedSignal, supervised_signal_kernel, LaunchDims::linear(a.actions.size(), 128));

#include "ops/op_end.hpp"
#endif
