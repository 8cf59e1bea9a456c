/// @file replay_nstep.h
/// @brief Signature of cuda/kernels/replay_nstep.cu: uniform replay sampling with n-step returns.
#pragma once

#include "math/replay.h"
#include "abi/view.h"

namespace fh::abi {

/// ops::NstepSample's: one warp per row (blocks of a multiple of 32 threads); update_from, advance
/// and ticket null where absent. With advance, the last block to finish (counted on ticket (1),
/// zero before and after) leaves the update number in advance[0].
using NstepSample = void(float* __restrict__ states, float* __restrict__ next_states, int* __restrict__ actions,
                         float* __restrict__ returns, float* __restrict__ discounts, replay::ReplayView replay,
                         replay::SampleParams params, const long long* __restrict__ update_from,
                         long long* __restrict__ advance, unsigned* __restrict__ ticket, int batch);

/// One agent of a population's batch draw: its ring and its sampling (seed, sampleable range,
/// n, gamma; the update number comes from the shared counter).
struct SampleAgent {
    replay::ReplayView ring;
    replay::SampleParams params;
};
/// ops::NstepSampleAgents': agent a = blockIdx.y, one warp per row in x (blocks of a multiple of 32
/// threads, any grid); advance_stride 0: advance[0] is every agent's counter, 1: each agent's own;
/// the last of all blocks leaves each number in its counter (ticket as nstep_sample_kernel's).
using NstepSampleAgents = void(float* __restrict__ states, float* __restrict__ next_states, int* __restrict__ actions,
                               float* __restrict__ returns, float* __restrict__ discounts,
                               const SampleAgent* __restrict__ agents, long long out_stride,
                               long long* __restrict__ advance, int advance_stride, unsigned* __restrict__ ticket,
                               int batch);

}  // namespace fh::abi

namespace fh::ops {

/// A batch of n-step transitions from the replay ring: row b = replay::sample_nstep(b, r, p).
/// states, next_states (B, state_dim); actions, returns, discounts (B); outputs distinct from each
/// other and from the ring. update_from (1) or empty: the RNG's update number read from device
/// memory instead of p.update (a captured update's counter, ops::Increment). advance: the update
/// number is advance.counter[0] + 1, which the launch leaves in the counter (CounterAdvance; not
/// with update_from): a captured update's counter advanced without a launch of its own.
struct NstepSample {
    View<float> states;
    View<float> next_states;
    View<int> actions;
    View<float> returns;
    View<float> discounts;
    replay::ReplayView r;
    replay::SampleParams p;
    int batch;
    View<const long long> update_from{};
    CounterAdvance advance{};
};

/// nstep_sample for every agent of a population in one launch: agent a draws `batch` rows from
/// agents[a].ring with agents[a].params (its seed, sampleable range, n, gamma) at the update number
/// advance.counter[0] + 1 (advance.counter (1): every agent's update number, they update together)
/// or advance.counter[a] + 1 (advance.counter (agents): each agent's own, e.g. a slot that started
/// a new agent), which the op then leaves in the counter. Agent a's states go to states[a *
/// out_stride, + B D) and its next states to next_states[a * out_stride, + B D) (e.g. one [s; s']
/// block of 2 B D floats an agent: next_states = states shifted by B D, out_stride = 2 B D); its
/// actions, returns and discounts to [a B, (a + 1) B). Each agent's rows are nstep_sample's on its
/// ring, bit for bit. The rings and the descriptors (device memory) are the caller's; agents' rings
/// are not checked against the outputs beyond their descriptors' sizes here.
struct NstepSampleAgents {
    View<float> states;
    View<float> next_states;
    View<int> actions;
    View<float> returns;
    View<float> discounts;
    View<const abi::SampleAgent> agents;
    std::size_t out_stride;
    CounterAdvance advance;
    int batch;
    int state_dim;
};

}  // namespace fh::ops

#define FH_KERNELS_replay_nstep(FH_KERNEL)                    \
    FH_KERNEL(replay_nstep, nstep_sample_kernel, NstepSample) \
    FH_KERNEL(replay_nstep, nstep_sample_agents_kernel, NstepSampleAgents)

#ifndef __CUDACC__
#include "ops/op_begin.hpp"

inline void check(const NstepSample& a) {
    const auto& [states, next_states, actions, returns, discounts, r, p, batch, update_from, advance] = a;
    const char* op = "nstep_sample";
    if (!update_from.empty()) detail::require_size(update_from.size(), 1, op, "update_from");
    if (!advance.counter.empty()) {
        if (!update_from.empty())
            throw std::invalid_argument("ops::nstep_sample: an update number from update_from and from advance");
        detail::require_size(advance.counter.size(), 1, op, "advance counter");
        detail::require_size(advance.ticket.size(), 1, op, "advance ticket");
    }
    if (batch < 1 || r.capacity_steps < 1 || r.n_envs < 1 || r.state_dim < 1 || p.n_step < 1 || p.sampleable < 1 ||
        p.oldest_step < 0)
        throw std::invalid_argument("ops::nstep_sample: empty batch, ring or sampleable range");
    const std::size_t B = static_cast<std::size_t>(batch), D = static_cast<std::size_t>(r.state_dim);
    detail::require_sizes(B * D, op, {FH_SIZES(states, next_states)});
    detail::require_sizes(B, op, {FH_SIZES(actions, returns, discounts)});
    const std::size_t rows = static_cast<std::size_t>(r.capacity_steps) * static_cast<std::size_t>(r.n_envs);
    const View<const float> ring_states(r.states, rows * D), ring_next(r.next_states, rows * D);
    detail::require_distinct(
        op, {FH_RANGES(states, next_states, actions, returns, discounts), detail::range("ring states", ring_states),
             detail::range("ring next_states", ring_next), detail::range("advance counter", advance.counter),
             detail::range("advance ticket", advance.ticket)});
}
FH_LAUNCH(NstepSample) {
    const auto& [states, next_states, actions, returns, discounts, r, p, batch, update_from, advance] = a;
    gpu.kernels().nstep_sample_kernel(gpu.stream(), LaunchDims::linear(static_cast<std::size_t>(batch) * 32, 128),
                                      states.data(), next_states.data(), actions.data(), returns.data(),
                                      discounts.data(), r, p, update_from.empty() ? nullptr : update_from.data(),
                                      or_null(advance.counter), or_null(advance.ticket), batch);
}

inline void check(const NstepSampleAgents& a) {
    const auto& [states, next_states, actions, returns, discounts, agents, out_stride, advance, batch, state_dim] = a;
    const char* op = "nstep_sample_agents";
    if (agents.empty() || batch < 1 || state_dim < 1)
        throw std::invalid_argument("ops::nstep_sample_agents: no agents, or an empty batch or state");
    const std::size_t N = agents.size(), B = static_cast<std::size_t>(batch), D = static_cast<std::size_t>(state_dim);
    if (advance.counter.size() != 1)
        detail::require_size(advance.counter.size(), N, op, "advance counter (1 or agents)");
    detail::require_size(advance.ticket.size(), 1, op, "advance ticket");
    detail::require(out_stride >= B * D, op, "out_stride {} is below one agent's rows ({})", out_stride, B * D);
    const std::size_t span = (N - 1) * out_stride + B * D;
    detail::require_sizes(span, op, {FH_SIZES(states, next_states)});
    detail::require_sizes(N * B, op, {FH_SIZES(actions, returns, discounts)});
    detail::checked_int_size(N, op);
    detail::require_distinct(
        op, {FH_RANGES(actions, returns, discounts, agents), detail::range("advance counter", advance.counter),
             detail::range("advance ticket", advance.ticket)});
}
FH_LAUNCH(NstepSampleAgents) {
    const auto& [states, next_states, actions, returns, discounts, agents, out_stride, advance, batch, state_dim_] = a;
    LaunchDims dims = LaunchDims::linear(static_cast<std::size_t>(batch) * 32, 128);
    dims.grid.y = static_cast<unsigned>(agents.size());
    gpu.kernels().nstep_sample_agents_kernel(gpu.stream(), dims, states.data(), next_states.data(), actions.data(),
                                             returns.data(), discounts.data(), agents.data(),
                                             static_cast<long long>(out_stride), advance.counter.data(),
                                             advance.counter.size() == 1 ? 0 : 1, advance.ticket.data(), batch);
}

#include "ops/op_end.hpp"
#endif
