/// @file supervised_forecast.h
/// @brief Signatures of cuda/kernels/supervised_forecast.cu: the supervised forecaster's batch
///        gather and its loss (math in math/supervised.h).
#pragma once

#include "math/supervised.h"

namespace fh::abi {

/// Per batch row (supervised::gather_row): x (batch, source.cols) = the sample's features,
/// y (batch) = its label (y may be null: no labels). x and y distinct from the source.
using SupervisedGather = void(float* __restrict__ x, float* __restrict__ y, supervised::RowSource source,
                              supervised::GatherParams params, int batch);

/// Per row (supervised::loss_row): loss (batch), d_pred (batch, or null) = the gradient of the
/// batch-mean loss. Outputs distinct from each other and the inputs.
using SupervisedLoss = void(float* __restrict__ loss, float* __restrict__ d_pred, const float* __restrict__ pred,
                            const float* __restrict__ labels, int target, int batch);

}  // namespace fh::abi

#define FH_KERNELS_supervised_forecast(FH_KERNEL)                              \
    FH_KERNEL(supervised_forecast, supervised_gather_kernel, SupervisedGather) \
    FH_KERNEL(supervised_forecast, supervised_loss_kernel, SupervisedLoss)
