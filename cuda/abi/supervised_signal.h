/// @file supervised_signal.h
/// @brief Signature of cuda/kernels/supervised_signal.cu: the signal adapter (math in
///        math/supervised.h).
#pragma once

#include "math/supervised.h"

namespace fh::abi {

/// Per row (supervised::signal_action): actions (n) from predictions (n), states
/// (n, params.state_dim) and the calibration (supervised::kCalibrationFloats). actions distinct
/// from the inputs.
using SupervisedSignal = void(int* __restrict__ actions, const float* __restrict__ predictions,
                              const float* __restrict__ states, const float* __restrict__ calibration,
                              supervised::SignalParams params, int n);

}  // namespace fh::abi

#define FH_KERNELS_supervised_signal(FH_KERNEL) FH_KERNEL(supervised_signal, supervised_signal_kernel, SupervisedSignal)
