/// @file iql_behaviour.h
/// @brief Signature of cuda/kernels/iql_behaviour.cu: the behaviour policy that generates the
///        offline IQL data set (iql::behaviour_action in math/iql.h).
#pragma once

#include <cstdint>

#include "math/iql.h"

namespace fh::abi {

/// actions[e] = iql::behaviour_action(states + e * state_dim, e, step, params) for e < n;
/// states (n, params.state_dim). actions and states distinct.
using IqlBehaviour = void(int* __restrict__ actions, const float* __restrict__ states, iql::BehaviourParams params,
                          std::uint64_t step, int n);

}  // namespace fh::abi

#define FH_KERNELS_iql_behaviour(FH_KERNEL) FH_KERNEL(iql_behaviour, iql_behaviour_kernel, IqlBehaviour)
