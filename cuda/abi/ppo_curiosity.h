/// @file ppo_curiosity.h
/// @brief Signatures of cuda/kernels/ppo_curiosity.cu: the elementwise parts of the
///        curiosity forward model (the MLP itself is nn::Mlp on the network ops).
#pragma once

#include "math/ppo.h"
#include "abi/view.h"

namespace fh::ops {

/// The curiosity forward model's input (n, D + A) = [states row (D) | one-hot(action) (A)],
/// n = actions.size(), D = states.size() / n.
struct CuriosityInput {
    View<float> input;
    View<const float> states;
    View<const int> actions;
    int num_actions;
};

/// The forward model's error: pred (n, P), P = pred.size() / n <= state_dim, predicts the
/// first P columns of next_states (n, state_dim); n = error.size(). error[e] = 0.5 * mean_j
/// (pred - target)^2 (the intrinsic reward before its coefficient); d_pred (n, P) =
/// (pred - target) / (n * P), the gradient of mean_e error[e].
struct CuriosityError {
    View<float> error;
    View<float> d_pred;
    View<const float> pred;
    View<const float> next_states;
    int state_dim;
};

}  // namespace fh::ops

namespace fh::abi {

/// ops::CuriosityInput's (ppo::curiosity_input_row), a thread per row.
using CuriosityInput = void(float* __restrict__ input, const float* __restrict__ states,
                            const int* __restrict__ actions, int D, int num_actions, int n);
/// ops::CuriosityError's (ppo::curiosity_error_row), a thread per row.
using CuriosityError = void(float* __restrict__ error, float* __restrict__ d_pred, const float* __restrict__ pred,
                            const float* __restrict__ next_states, int P, int state_dim, int n);

}  // namespace fh::abi

#define FH_KERNELS_ppo_curiosity(FH_KERNEL)                          \
    FH_KERNEL(ppo_curiosity, curiosity_input_kernel, CuriosityInput) \
    FH_KERNEL(ppo_curiosity, curiosity_error_kernel, CuriosityError)

#ifndef __CUDACC__
#include "ops/op_begin.hpp"

inline void check(const CuriosityInput& a) {
    const auto& [input, states, actions, num_actions] = a;
    const char* op = "curiosity_input";
    detail::require_positive(static_cast<long long>(actions.size()), op, "the number of rows");
    detail::require_positive(num_actions, op, "num_actions");
    const std::size_t n = actions.size();
    const std::size_t D = detail::columns(states.size(), n, op, "states");
    detail::require_size(input.size(), n * (D + static_cast<std::size_t>(num_actions)), op, "input");
    detail::checked_int_size(input.size(), op);
    detail::require_distinct(op, {FH_RANGES(input, states, actions)});
}
FH_LAUNCH(CuriosityInput) {
    const auto& [input, states, actions, num_actions] = a;
    const std::size_t n = actions.size();
    gpu.kernels().curiosity_input_kernel(gpu.stream(), LaunchDims::linear(n, 128), input.data(), states.data(),
                                         actions.data(), static_cast<int>(states.size() / n), num_actions,
                                         static_cast<int>(n));
}

inline void check(const CuriosityError& a) {
    const auto& [error, d_pred, pred, next_states, state_dim] = a;
    const char* op = "curiosity_error";
    detail::require_positive(static_cast<long long>(error.size()), op, "the number of rows");
    detail::require_positive(state_dim, op, "state_dim");
    const std::size_t n = error.size();
    const std::size_t P = detail::columns(pred.size(), n, op, "pred");
    detail::require(P <= static_cast<std::size_t>(state_dim), op,
                    "the prediction has {} columns, more than the state's {}", P, state_dim);
    detail::require_size(d_pred.size(), pred.size(), op, "d_pred");
    detail::require_size(next_states.size(), n * static_cast<std::size_t>(state_dim), op, "next_states");
    detail::checked_int_size(next_states.size(), op);
    detail::require_distinct(op, {FH_RANGES(error, d_pred, pred, next_states)});
}
FH_LAUNCH(CuriosityError) {
    const auto& [error, d_pred, pred, next_states, state_dim] = a;
    const std::size_t n = error.size();
    gpu.kernels().curiosity_error_kernel(gpu.stream(), LaunchDims::linear(n, 128), error.data(), d_pred.data(),
                                         pred.data(), next_states.data(), static_cast<int>(pred.size() / n), state_dim,
                                         static_cast<int>(n));
}

#include "ops/op_end.hpp"
#endif
