/// @file ops.hpp
/// @brief The op family every network trainer shares: greedy / epsilon-greedy action selection, the
///        action histogram and the training guard (the math: cuda/math/policy.h, cuda/math/nn.h).
///
/// Each op checks its arguments here, once, then runs its CPU twin (cpu_twin::, plain loops over
/// the shared math, src/ops/nn/cpu.cpp) or its CUDA twin (cuda_twin::, the kernels of
/// cuda/kernels/nn_select.cu, nn_guard.cu, launched by src/ops/nn/cuda.cpp).
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <stdexcept>

#include "math/nn.h"
#include "math/policy.h"
#include "ops/device.hpp"

namespace fh::ops {

namespace cpu_twin {
void epsilon_greedy(View<int> actions, View<const float> q, int num_actions, float epsilon, std::uint64_t seed,
                    std::uint64_t step);
void action_histogram(View<unsigned long long> histogram, View<const int> actions, int num_actions);
void training_guard(View<int> gate, View<nn::GuardState> state, View<const float> losses, View<const float> grad_norm,
                    core::CounterValue update);
}  // namespace cpu_twin

namespace cuda_twin {
void epsilon_greedy(CudaDevice& device, View<int> actions, View<const float> q, int num_actions, float epsilon,
                    std::uint64_t seed, std::uint64_t step);
void action_histogram(CudaDevice& device, View<unsigned long long> histogram, View<const int> actions, int num_actions);
void training_guard(CudaDevice& device, View<int> gate, View<nn::GuardState> state, View<const float> losses,
                    View<const float> grad_norm, core::CounterValue update);
}  // namespace cuda_twin

/// actions (n) epsilon-greedy from q (n, num_actions).
inline void epsilon_greedy(Device& device, View<int> actions, View<const float> q, int num_actions, float epsilon,
                           std::uint64_t seed, std::uint64_t step) {
    if (num_actions < 1 || actions.empty()) throw std::invalid_argument("ops::epsilon_greedy: empty");
    detail::require_size(q.size(), actions.size() * static_cast<std::size_t>(num_actions), "epsilon_greedy", "q");
    detail::checked_int_size(q.size(), "epsilon_greedy");
    detail::require_distinct("epsilon_greedy", {detail::range("actions", actions), detail::range("q", q)});
    if (CudaDevice* cuda = device.cuda())
        return cuda_twin::epsilon_greedy(*cuda, actions, q, num_actions, epsilon, seed, step);
    cpu_twin::epsilon_greedy(actions, q, num_actions, epsilon, seed, step);
}

/// histogram (num_actions) += counts of actions (n).
inline void action_histogram(Device& device, View<unsigned long long> histogram, View<const int> actions,
                             int num_actions) {
    detail::require_size(histogram.size(), static_cast<std::size_t>(num_actions), "action_histogram", "histogram");
    detail::checked_int_size(actions.size(), "action_histogram");
    detail::require_distinct("action_histogram",
                             {detail::range("histogram", histogram), detail::range("actions", actions)});
    if (!actions.empty()) {
        if (CudaDevice* cuda = device.cuda())
            return cuda_twin::action_histogram(*cuda, histogram, actions, num_actions);
        cpu_twin::action_histogram(histogram, actions, num_actions);
    }
}

/// gate (1) = 1 when every loss (n_losses) and the gradient norm (1) are finite; updates the
/// guard counters (1). `update` is the update number, from the host or from device memory
/// (counter_value: a captured update's counter).
inline void training_guard(Device& device, View<int> gate, View<nn::GuardState> state, View<const float> losses,
                           View<const float> grad_norm, CounterValue update) {
    detail::require_size(gate.size(), 1, "training_guard", "gate");
    detail::require_size(state.size(), 1, "training_guard", "state");
    detail::require_size(grad_norm.size(), 1, "training_guard", "grad_norm");
    if (losses.empty()) throw std::invalid_argument("ops::training_guard: no losses");
    detail::require_distinct(
        "training_guard", {detail::range("gate", gate), detail::range("state", state), detail::range("losses", losses),
                           detail::range("grad_norm", grad_norm)});
    if (CudaDevice* cuda = device.cuda())
        return cuda_twin::training_guard(*cuda, gate, state, losses, grad_norm, update);
    cpu_twin::training_guard(gate, state, losses, grad_norm, update);
}

}  // namespace fh::ops
