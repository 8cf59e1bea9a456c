/// @file cpu.cpp
/// @brief CPU twins of the nn op family (cuda/abi/nn_select.h, nn_guard.h, nn_attention.h): the
///        shared per-element math (math/policy.h, math/nn.h, math/attention.h) in plain loops.
#include "abi/nn_attention.h"
#include "abi/nn_guard.h"
#include "abi/nn_select.h"

namespace fh::ops {

void cpu(const EpsilonGreedy& a) {
    for (std::size_t e = 0; e < a.actions.size(); ++e)
        a.actions.data()[e] = policy::epsilon_greedy(a.q.data() + e * a.num_actions, a.num_actions, a.epsilon, a.seed,
                                                     static_cast<int>(e), a.step);
}

void cpu(const ActionHistogram& a) {
    const std::size_t rows = a.actions.size() / static_cast<std::size_t>(a.agents);
    for (std::size_t e = 0; e < a.actions.size(); ++e) {
        const int action = a.actions.data()[e];
        if (action >= 0 && action < a.num_actions)
            a.histogram.data()[e / rows * static_cast<std::size_t>(a.num_actions) + action] += 1;
    }
}

void cpu(const TrainingGuard& a) {
    a.gate.data()[0] = nn::guard_decide(a.state.data()[0], a.losses.data(), static_cast<int>(a.losses.size()),
                                        a.grad_norm.data()[0], a.update.value());
}

void cpu(const GroupAttentionForward& a) {
    const auto G = static_cast<std::size_t>(a.groups.count),
               D = static_cast<std::size_t>(a.groups.begin[a.groups.count]);
    for (std::size_t r = 0; r < static_cast<std::size_t>(a.rows); ++r)
        attention::forward_row(a.x_out.data() + r * D, a.alpha.data() + r * G,
                               a.x.data() + (r % static_cast<std::size_t>(a.x_rows)) * D, a.scores.data() + r * G,
                               a.groups);
}

void cpu(const GroupAttentionBackward& a) {
    const auto G = static_cast<std::size_t>(a.groups.count),
               D = static_cast<std::size_t>(a.groups.begin[a.groups.count]);
    for (std::size_t r = 0; r < static_cast<std::size_t>(a.rows); ++r)
        attention::backward_row(a.d_scores.data() + r * G, a.d_x_out.data() + r * D, a.x.data() + r * D,
                                a.alpha.data() + r * G, a.groups);
}

}  // namespace fh::ops
