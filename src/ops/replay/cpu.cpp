/// @file cpu.cpp
/// @brief CPU twins of the replay op family: the shared per-element math (math/replay.h) in plain loops.
#include "abi/replay_nstep.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace fh::ops {

void cpu(const NstepSample& a) {
    const auto& [states, next_states, actions, returns, discounts, r, params, batch, update_from, advance] = a;
    replay::SampleParams p = params;
    if (!update_from.empty()) p.update = static_cast<std::uint64_t>(update_from.data()[0]);
    if (!advance.counter.empty()) p.update = static_cast<std::uint64_t>(advance.counter.data()[0] + 1);
    const std::size_t D = static_cast<std::size_t>(r.state_dim);
    for (int b = 0; b < batch; ++b)
        replay::sample_nstep(b, r, p, states.data() + b * D, next_states.data() + b * D, actions.data()[b],
                             returns.data()[b], discounts.data()[b]);
    if (!advance.counter.empty()) advance.counter.data()[0] += 1;
}

void cpu(const NstepSampleAgents& a) {
    const auto& [states, next_states, actions, returns, discounts, agents, out_stride, advance, batch, state_dim_] = a;
    const std::size_t B = static_cast<std::size_t>(batch);
    for (std::size_t a = 0; a < agents.size(); ++a) {
        const abi::SampleAgent& agent = agents.data()[a];
        replay::SampleParams p = agent.params;
        p.update = static_cast<std::uint64_t>(advance.counter.data()[advance.counter.size() == 1 ? 0 : a] + 1);
        const std::size_t D = static_cast<std::size_t>(agent.ring.state_dim);
        float* s = states.data() + a * out_stride;
        float* s_next = next_states.data() + a * out_stride;
        for (std::size_t b = 0; b < B; ++b)
            replay::sample_nstep(static_cast<int>(b), agent.ring, p, s + b * D, s_next + b * D,
                                 actions.data()[a * B + b], returns.data()[a * B + b], discounts.data()[a * B + b]);
    }
    for (std::size_t c = 0; c < advance.counter.size(); ++c) advance.counter.data()[c] += 1;
}

}  // namespace fh::ops
