/// @file dt_train.h
/// @brief The Decision Transformer's training windows, action loss and warm-up learning rate
///        (math in math/dt.h) and the signatures of their kernels in cuda/kernels/dt_train.cu.
///        CPU twins: src/ops/dt/cpu.cpp.
#pragma once

#include "abi/view.h"
#include "math/dt.h"

namespace fh::ops {

/// The dataset the windows come from (dt::Dataset): states (steps, state_dim), actions, rtg,
/// episode_start (steps).
struct DtDatasetViews {
    View<const float> states, rtg;
    View<const int> actions, episode_start;
    int state_dim = 0;
};

/// A batch of windows (dt::gather_window): states (batch * K, state_dim), rtg, actions (batch * K),
/// lengths (batch). Sequential batches must lie inside the dataset. Exact, equal on both backends.
struct DtGather {
    View<float> states, rtg;
    View<int> actions, lengths;
    DtDatasetViews dataset;
    dt::WindowParams params;
};

/// The action loss (dt::action_loss_window): loss, correct (batch) whose sums are the batch's mean
/// cross-entropy and accuracy; d_logits (batch * 3 K, A) its gradient, or empty. logits
/// (batch * 3 K, A), actions (batch * K), lengths (batch, each in [1, K]).
struct DtActionLoss {
    View<float> loss, correct, d_logits;
    View<const float> logits;
    View<const int> actions, lengths;
    int context, num_actions;
};

/// lr[0] = base * min(1, step / warmup) at the update number `step` (device memory in a captured
/// update).
struct DtLearningRate {
    View<float> lr;
    double base;
    long long warmup;
    core::CounterValue step;
};

}  // namespace fh::ops

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

#ifndef __CUDACC__
#include "ops/op_begin.hpp"

/// The dataset as the math reads it.
inline dt::Dataset dt_dataset(const DtDatasetViews& d) {
    return dt::Dataset{
        d.states.data(), d.actions.data(), d.rtg.data(), d.episode_start.data(), static_cast<long long>(d.rtg.size()),
        d.state_dim};
}

inline void check(const DtGather& a) {
    const auto& [states, rtg, actions, lengths, d, w] = a;
    const char* op = "dt_gather";
    detail::require(d.state_dim >= 1 && w.context >= 1, op, "need state_dim >= 1 and context >= 1");
    const std::size_t steps = d.rtg.size(), batch = lengths.size(), K = static_cast<std::size_t>(w.context);
    detail::require(steps >= 1 && batch >= 1, op, "empty dataset or batch");
    detail::require_size(d.states.size(), steps * static_cast<std::size_t>(d.state_dim), op, "dataset states");
    detail::require_size(d.actions.size(), steps, op, "dataset actions");
    detail::require_size(d.episode_start.size(), steps, op, "dataset episode_start");
    detail::require_size(states.size(), batch * K * static_cast<std::size_t>(d.state_dim), op, "states");
    detail::require_sizes(batch * K, op, {FH_SIZES(rtg, actions)});
    detail::checked_int_size(states.size(), op);
    if (!w.random)
        detail::require(w.first >= 0 && static_cast<std::size_t>(w.first) + batch <= steps, op,
                        "sequential windows [{}, {}) exceed the {} steps", w.first,
                        w.first + static_cast<long long>(batch), steps);
    detail::require_distinct(op, {FH_RANGES(states, rtg, actions, lengths), detail::range("dataset states", d.states),
                                  detail::range("dataset rtg", d.rtg), detail::range("dataset actions", d.actions),
                                  FH_RANGES_OF(d, episode_start)});
}
FH_LAUNCH(DtGather) {
    const auto batch = static_cast<int>(a.lengths.size());
    gpu.kernels().dt_gather_kernel(gpu.stream(), LaunchDims::linear(a.lengths.size(), 128), a.states.data(),
                                   a.rtg.data(), a.actions.data(), a.lengths.data(), dt_dataset(a.dataset), a.params,
                                   batch);
}

inline void check(const DtActionLoss& a) {
    const auto& [loss, correct, d_logits, logits, actions, lengths, context, num_actions] = a;
    const char* op = "dt_action_loss";
    const std::size_t batch = lengths.size();
    detail::require(batch >= 1 && context >= 1 && num_actions >= 1, op, "empty shape");
    const std::size_t rows = batch * static_cast<std::size_t>(context) * dt::kTokensPerStep;
    detail::require_sizes(batch, op, {FH_SIZES(loss, correct)});
    detail::require_size(logits.size(), rows * static_cast<std::size_t>(num_actions), op, "logits");
    if (!d_logits.empty()) detail::require_size(d_logits.size(), logits.size(), op, "d_logits");
    detail::require_size(actions.size(), batch * static_cast<std::size_t>(context), op, "actions");
    detail::checked_int_size(logits.size(), op);
    detail::require_distinct(op, {FH_RANGES(loss, correct, d_logits, logits, actions, lengths)});
}
FH_LAUNCH(DtActionLoss) {
    const auto batch = static_cast<int>(a.lengths.size());
    gpu.kernels().dt_action_loss_kernel(gpu.stream(), LaunchDims::linear(a.lengths.size(), 128), a.loss.data(),
                                        a.correct.data(), or_null(a.d_logits), a.logits.data(), a.actions.data(),
                                        a.lengths.data(), batch, a.context, a.num_actions);
}

inline void check(const DtLearningRate& a) {
    detail::require_size(a.lr.size(), 1, "dt_learning_rate", "lr");
    detail::require(a.base > 0 && a.warmup >= 0, "dt_learning_rate", "need base > 0 and warmup >= 0");
}
FH_LAUNCH(DtLearningRate) {
    gpu.kernels().dt_learning_rate_kernel(gpu.stream(), LaunchDims::linear(1, 32), a.lr.data(), a.base, a.warmup,
                                          a.step);
}

#include "ops/op_end.hpp"
#endif
