/// @file cpu.cpp
/// @brief CPU twins of the nn op family: the shared per-element math (math/nn.h, math/policy.h) in plain loops.
#include "ops/nn/ops.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace fh::ops::cpu_twin {

void epsilon_greedy(View<int> actions, View<const float> q, int num_actions, float epsilon, std::uint64_t seed,
                    std::uint64_t step) {
    for (std::size_t e = 0; e < actions.size(); ++e)
        actions.data()[e] =
            policy::epsilon_greedy(q.data() + e * num_actions, num_actions, epsilon, seed, static_cast<int>(e), step);
}

void action_histogram(View<unsigned long long> histogram, View<const int> actions, int num_actions) {
    for (std::size_t e = 0; e < actions.size(); ++e) {
        const int a = actions.data()[e];
        if (a >= 0 && a < num_actions) histogram.data()[a] += 1;
    }
}

void training_guard(View<int> gate, View<nn::GuardState> state, View<const float> losses, View<const float> grad_norm,
                    core::CounterValue update) {
    gate.data()[0] = nn::guard_decide(state.data()[0], losses.data(), static_cast<int>(losses.size()),
                                      grad_norm.data()[0], update.value());
}

}  // namespace fh::ops::cpu_twin
