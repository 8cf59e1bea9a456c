/// @file nn_select.h
/// @brief Exploration for DQN collection and the action histogram every trainer logs, their
///        kernels in cuda/kernels/nn_select.cu (math/policy.h). CPU twins: src/ops/nn/cpu.cpp.
#pragma once

#include <cstdint>

#include "abi/view.h"
#include "math/policy.h"

namespace fh::ops {

/// actions[e] = policy::epsilon_greedy(q row e, ...) for e < n: with probability epsilon a uniform
/// action, else the first argmax; coins from Philox(seed, exploration, e, step). actions (n), q
/// (n, num_actions), distinct. One thread per row; equal on both backends given equal q.
struct EpsilonGreedy {
    View<int> actions;
    View<const float> q;
    int num_actions;
    float epsilon;
    std::uint64_t seed, step;
};

/// histogram (num_actions) += counts of actions (n) (integer atomics on CUDA: exact). Several
/// agents' actions (agents > 1): rows split evenly, agent g's counts into histogram (agents,
/// num_actions) row g. Actions outside [0, num_actions) are not counted.
struct ActionHistogram {
    View<unsigned long long> histogram;
    View<const int> actions;
    int num_actions;
    int agents = 1;
};

}  // namespace fh::ops

#define FH_KERNELS_nn_select(FH_KERNEL)                                     \
    FH_KERNEL(nn_select, epsilon_greedy_kernel, Op<fh::ops::EpsilonGreedy>) \
    FH_KERNEL(nn_select, action_histogram_kernel, Op<fh::ops::ActionHistogram>)

#ifndef __CUDACC__
#include "ops/op_begin.hpp"

inline void check(const EpsilonGreedy& a) {
    if (a.num_actions < 1 || a.actions.empty()) throw std::invalid_argument("ops::epsilon_greedy: empty");
    detail::require_size(a.q.size(), a.actions.size() * static_cast<std::size_t>(a.num_actions), "epsilon_greedy", "q");
    detail::checked_int_size(a.q.size(), "epsilon_greedy");
    detail::require_distinct("epsilon_greedy", {FH_RANGES_OF(a, actions, q)});
}
FH_LAUNCH_KERNEL(EpsilonGreedy, epsilon_greedy_kernel, LaunchDims::linear(a.actions.size(), 128));

inline bool check(const ActionHistogram& a) {
    if (a.agents < 1 || a.actions.size() % static_cast<std::size_t>(a.agents) != 0)
        throw std::invalid_argument(
            fmt::format("ops::action_histogram: {} actions do not split into {} agents", a.actions.size(), a.agents));
    detail::require_size(a.histogram.size(),
                         static_cast<std::size_t>(a.num_actions) * static_cast<std::size_t>(a.agents),
                         "action_histogram", "histogram");
    detail::checked_int_size(a.actions.size(), "action_histogram");
    detail::require_distinct("action_histogram", {FH_RANGES_OF(a, histogram, actions)});
    return !a.actions.empty();
}
FH_LAUNCH_KERNEL(ActionHistogram, action_histogram_kernel, LaunchDims::linear(a.actions.size(), 256));

#include "ops/op_end.hpp"
#endif
