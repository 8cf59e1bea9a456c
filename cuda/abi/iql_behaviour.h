/// @file iql_behaviour.h
/// @brief The behaviour policy that generates the offline IQL data set (iql::behaviour_action in
///        math/iql.h) and its kernel in cuda/kernels/iql_behaviour.cu. CPU twin:
///        src/ops/iql/cpu.cpp.
#pragma once

#include <cstdint>

#include "abi/view.h"
#include "math/iql.h"

namespace fh::ops {

/// actions (n) from states (n, params.state_dim), one thread per environment: a mixture of
/// traders by environment index e % 4 (random, momentum, mean reversion, trend), Philox
/// (params.seed, behaviour, e, step). Exact, equal on both backends.
struct BehaviourActions {
    View<int> actions;
    View<const float> states;
    iql::BehaviourParams params;
    std::uint64_t step;
};

}  // namespace fh::ops

#define FH_KERNELS_iql_behaviour(FH_KERNEL) \
    FH_KERNEL(iql_behaviour, iql_behaviour_kernel, Op<fh::ops::BehaviourActions>)

#ifndef __CUDACC__
#include "ops/op_begin.hpp"

inline void check(const BehaviourActions& a) {
    const auto& [actions, states, p, step] = a;
    const char* op = "behaviour_actions";
    if (actions.empty()) throw std::invalid_argument("ops::behaviour_actions: no environments (actions is empty)");
    detail::checked_int_size(actions.size(), op);
    detail::require(p.position_levels >= 1 && p.urgency_levels >= 1 &&
                        static_cast<long long>(p.position_levels) * p.urgency_levels <= std::numeric_limits<int>::max(),
                    op, "need position_levels >= 1 and urgency_levels >= 1 (got {}, {})", p.position_levels,
                    p.urgency_levels);
    detail::require(p.market_dim >= 1 && p.state_dim >= p.market_dim, op,
                    "need 1 <= market_dim <= state_dim (got market_dim {}, state_dim {})", p.market_dim, p.state_dim);
    detail::require(p.random_fraction >= 0.0f && p.random_fraction <= 1.0f, op, "random_fraction {} is not in [0, 1]",
                    p.random_fraction);
    detail::require_size(states.size(), actions.size() * static_cast<std::size_t>(p.state_dim), op, "states");
    detail::require_distinct(op, {FH_RANGES(actions, states)});
}
FH_LAUNCH_KERNEL(BehaviourActions, iql_behaviour_kernel, LaunchDims::linear(a.actions.size(), 128));

#include "ops/op_end.hpp"
#endif
