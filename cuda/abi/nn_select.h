/// @file nn_select.h
/// @brief Signature of cuda/kernels/nn_select.cu.
#pragma once

#include <cstdint>

#include "math/policy.h"

namespace fh::abi {

/// actions[e] = policy::epsilon_greedy(q + e * num_actions, ...) for e < n; q (n, num_actions).
using EpsilonGreedy = void(int* __restrict__ actions, const float* __restrict__ q, int num_actions,
                           float epsilon, std::uint64_t seed, std::uint64_t step, int n);

/// histogram[a] += number of e < n with actions[e] == a (integer atomics: exact).
using ActionHistogram = void(unsigned long long* __restrict__ histogram, const int* __restrict__ actions,
                            int num_actions, int n);

}  // namespace fh::abi

#define FH_KERNELS_nn_select(FH_KERNEL) \
    FH_KERNEL(nn_select, epsilon_greedy_kernel, EpsilonGreedy) \
    FH_KERNEL(nn_select, action_histogram_kernel, ActionHistogram)
