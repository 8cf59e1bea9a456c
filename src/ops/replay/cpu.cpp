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

void nstep_sample_agents(View<float> states, View<float> next_states, View<int> actions, View<float> returns,
                         View<float> discounts, View<const abi::SampleAgent> agents, std::size_t out_stride,
                         const CounterAdvance& advance, int batch) {
    const std::size_t B = static_cast<std::size_t>(batch);
    for (std::size_t a = 0; a < agents.size(); ++a) {
        const abi::SampleAgent& agent = agents.data()[a];
        replay::SampleParams p = agent.params;
        p.update = static_cast<std::uint64_t>(advance.counter.data()[0] + 1);
        const std::size_t D = static_cast<std::size_t>(agent.ring.state_dim);
        float* s = states.data() + a * out_stride;
        float* s_next = next_states.data() + a * out_stride;
        for (std::size_t b = 0; b < B; ++b)
            replay::sample_nstep(static_cast<int>(b), agent.ring, p, s + b * D, s_next + b * D,
                                 actions.data()[a * B + b], returns.data()[a * B + b], discounts.data()[a * B + b]);
    }
    advance.counter.data()[0] += 1;
}

}  // namespace fh::ops::cpu_twin
