/// @file dt_train.h
/// @brief Signatures of cuda/kernels/dt_train.cu: the Decision Transformer's training windows,
///        action loss and warm-up learning rate (math in math/dt.h).
#pragma once

#include "math/dt.h"

namespace fh::abi {

/// Per window b: dt::gather_window; states (batch * K, state_dim), rtg, actions (batch * K),
/// lengths (batch).
using DtGather = void(float* __restrict__ states, float* __restrict__ rtg, int* __restrict__ actions,
                      int* __restrict__ lengths, dt::Dataset dataset, dt::WindowParams params, int batch);
/// Per window b: dt::action_loss_window; loss, correct (batch), d_logits (batch * 3 K, A) or null.
using DtActionLoss = void(float* __restrict__ loss, float* __restrict__ correct, float* __restrict__ d_logits,
                          const float* __restrict__ logits, const int* __restrict__ actions,
                          const int* __restrict__ lengths, int batch, int context, int num_actions);
/// One thread: lr[0] = dt::warmup_learning_rate(base, warmup, step).
using DtLearningRate = void(float* __restrict__ lr, double base, long long warmup, core::CounterValue step);

}  // namespace fh::abi

#define FH_KERNELS_dt_train(FH_KERNEL)                       \
    FH_KERNEL(dt_train, dt_gather_kernel, DtGather)          \
    FH_KERNEL(dt_train, dt_action_loss_kernel, DtActionLoss) \
    FH_KERNEL(dt_train, dt_learning_rate_kernel, DtLearningRate)
