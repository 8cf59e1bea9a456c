/// @file nn_select.h
/// @brief Signature of cuda/kernels/nn_select.cu.
#pragma once

#include <cstdint>

#include "math/policy.h"

namespace fh::abi {

/// actions[e] = policy::epsilon_greedy(q + e * num_actions, ...) for e < n; q (n, num_actions).
using EpsilonGreedy = void(int* __restrict__ actions, const float* __restrict__ q, int num_actions, float epsilon,
                           std::uint64_t seed, std::uint64_t step, int n);

/// histogram[g num_actions + a] += number of e < n with actions[e] == a and e / rows_per_agent
/// == g (integer atomics: exact): one histogram per agent of rows_per_agent rows (= n: one).
using ActionHistogram = void(unsigned long long* __restrict__ histogram, const int* __restrict__ actions,
                             int num_actions, int n, int rows_per_agent);

}  // namespace fh::abi

#define FH_KERNELS_nn_select(FH_KERNEL)                        \
    FH_KERNEL(nn_select, epsilon_greedy_kernel, EpsilonGreedy) \
    FH_KERNEL(nn_select, action_histogram_kernel, ActionHistogram)
