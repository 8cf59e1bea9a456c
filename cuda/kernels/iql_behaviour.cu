/* iql_behaviour.cu — the behaviour policy that collects the offline IQL data set: a fixed
 * mixture of simple traders chosen by environment index (docs/iql.md).
 *
 * Math:        iql::behaviour_action in math/iql.h: e % 4 == 0 uniform random; 1 momentum
 *              (sign of feature 0, ret_1); 2 mean reversion (the opposite); 3 trend (sign of
 *              feature 4, ret_16, or feature 0 when market_dim < 5). Rule traders act at random
 *              with probability random_fraction, else at urgency 0. One Philox draw
 *              (seed, behaviour, e, step) per environment. CPU twin in
 *              src/ops/iql/cpu.cpp.
 * Layout:      states (n, state_dim) row-major (market features first); actions (n).
 * Launch:      one thread per environment, any 1-D grid (grid-stride loop).
 * Determinism: exact and equal to the CPU twin bit for bit: integer arithmetic, exact float
 *              comparisons (unit_float is exact) and no rounding anywhere.
 * Aliasing:    actions and states are distinct (checked by ops::BehaviourActions's check).
 * Signatures:  cuda/abi/iql_behaviour.h.
 */
#include "abi/iql_behaviour.h"
#include "device_functions.cuh"

using fh::device::global_thread_index;
using fh::device::grid_thread_count;

extern "C" __global__ void iql_behaviour_kernel(fh::ops::BehaviourActions a) {
    const auto D = static_cast<long long>(a.params.state_dim);
    for (long long e = global_thread_index(); e < static_cast<long long>(a.actions.size()); e += grid_thread_count())
        a.actions[e] = fh::iql::behaviour_action(a.states + e * D, static_cast<int>(e), a.step, a.params);
}

FH_KERNELS_iql_behaviour(FH_CHECK_KERNEL_ABI)
