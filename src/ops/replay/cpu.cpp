/// @file cpu.cpp
/// @brief CPU twins of the replay op family: the shared per-element math (math/replay.h) in plain loops.
#include "ops/replay/ops.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace fh::ops::cpu_twin {

void nstep_sample(View<float> states, View<float> next_states, View<int> actions, View<float> returns,
                  View<float> discounts, const replay::ReplayView& r, const replay::SampleParams& params,
                  View<const long long> update_from, const CounterAdvance& advance, int batch) {
    replay::SampleParams p = params;
    if (!update_from.empty()) p.update = static_cast<std::uint64_t>(update_from.data()[0]);
    if (!advance.counter.empty()) p.update = static_cast<std::uint64_t>(advance.counter.data()[0] + 1);
    const std::size_t D = static_cast<std::size_t>(r.state_dim);
    for (int b = 0; b < batch; ++b)
        replay::sample_nstep(b, r, p, states.data() + b * D, next_states.data() + b * D, actions.data()[b],
                             returns.data()[b], discounts.data()[b]);
    if (!advance.counter.empty()) advance.counter.data()[0] += 1;
}

}  // namespace fh::ops::cpu_twin
