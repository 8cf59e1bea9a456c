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

void action_histogram(View<unsigned long long> histogram, View<const int> actions, int num_actions, int agents) {
    const std::size_t rows = actions.size() / static_cast<std::size_t>(agents);
    for (std::size_t e = 0; e < actions.size(); ++e) {
        const int a = actions.data()[e];
        if (a >= 0 && a < num_actions) histogram.data()[e / rows * static_cast<std::size_t>(num_actions) + a] += 1;
    }
}

void training_guard(View<int> gate, View<nn::GuardState> state, View<const float> losses, View<const float> grad_norm,
                    core::CounterValue update) {
    gate.data()[0] = nn::guard_decide(state.data()[0], losses.data(), static_cast<int>(losses.size()),
                                      grad_norm.data()[0], update.value());
}

void group_attention_forward(View<float> x_out, View<float> alpha, View<const float> x, View<const float> scores,
                             const attention::Groups& groups, int D, int rows, int x_rows) {
    const auto G = static_cast<std::size_t>(groups.count), Ds = static_cast<std::size_t>(D);
    for (std::size_t r = 0; r < static_cast<std::size_t>(rows); ++r)
        attention::forward_row(x_out.data() + r * Ds, alpha.data() + r * G,
                               x.data() + (r % static_cast<std::size_t>(x_rows)) * Ds, scores.data() + r * G, groups);
}

void group_attention_backward(View<float> d_scores, View<const float> d_x_out, View<const float> x,
                              View<const float> alpha, const attention::Groups& groups, int D, int rows) {
    const auto G = static_cast<std::size_t>(groups.count), Ds = static_cast<std::size_t>(D);
    for (std::size_t r = 0; r < static_cast<std::size_t>(rows); ++r)
        attention::backward_row(d_scores.data() + r * G, d_x_out.data() + r * Ds, x.data() + r * Ds,
                                alpha.data() + r * G, groups);
}

}  // namespace fh::ops::cpu_twin
