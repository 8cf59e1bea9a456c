/// @file epsilon_greedy_abi.h
/// @brief Signature of cuda/epsilon_greedy_kernel.cu.
#pragma once

#include <cstdint>

#include "abi/dqn_math.h"

namespace fh::abi {

/// actions[e] = dqn::epsilon_greedy(q + e * num_actions, ...) for e < n; q (n, num_actions).
using EpsilonGreedy = void(int* __restrict__ actions, const float* __restrict__ q, int num_actions,
                           float epsilon, std::uint64_t seed, std::uint64_t step, int n);

}  // namespace fh::abi

#define FH_EPSILON_GREEDY_KERNELS(FH_KERNEL) \
    FH_KERNEL(epsilon_greedy_kernel, epsilon_greedy_kernel, EpsilonGreedy)
