/// @file replay_nstep.h
/// @brief Signature of cuda/kernels/replay_nstep.cu: uniform replay sampling with n-step returns.
#pragma once

#include "math/replay.h"
#include "abi/view.h"

namespace fh::abi {

/// Row b of the batch = replay::sample_nstep(b, replay, params): states, next_states (B, D),
/// actions, returns, discounts (B). Outputs distinct from each other and from the ring.
/// update_from (1) or null: the RNG's update number read from device memory instead of
/// params.update (a captured update). advance (1) or null: instead, the update number is
/// advance[0] + 1 and the launch leaves it in advance[0] (the last block to finish, counted on
/// ticket (1), zero before and after): a captured update's counter advanced without a launch of
/// its own. Launch one warp per row: blocks of a multiple of 32 threads.
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
/// nstep_sample_kernel for every agent of a population at once: agent a = blockIdx.y draws its
/// batch from agents[a].ring with agents[a].params at the update number advance[a * advance_stride]
/// + 1 (advance_stride 0: advance[0], every agent's; 1: each agent's own counter), into states + a *
/// out_stride, next_states + a * out_stride (B, D each) and actions, returns, discounts + a * B; the
/// last of all blocks leaves each number in its counter (ticket as nstep_sample_kernel's). Agent
/// a's rows are nstep_sample_kernel's on its ring. Launch one warp per row in x (blocks of a
/// multiple of 32 threads, any grid), gridDim.y = agents.
using NstepSampleAgents = void(float* __restrict__ states, float* __restrict__ next_states, int* __restrict__ actions,
                               float* __restrict__ returns, float* __restrict__ discounts,
                               const SampleAgent* __restrict__ agents, long long out_stride,
                               long long* __restrict__ advance, int advance_stride, unsigned* __restrict__ ticket,
                               int batch);

}  // namespace fh::abi

namespace fh::ops {

/// A batch of n-step transitions from the replay ring (replay::sample_nstep).
/// states, next_states (B, state_dim); actions, returns, discounts (B). update_from (1) or
/// empty: the RNG's update number read from device memory instead of p.update (a captured
/// update's counter, ops::Increment). advance: the update number is advance.counter[0] + 1,
/// which the launch leaves in the counter (CounterAdvance; not with update_from).
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
/// agents[a].ring with agents[a].params (its seed, sampleable range, n, gamma) at the update
/// number advance.counter[0] + 1 (advance.counter (1): every agent's update number, they update
/// together) or advance.counter[a] + 1 (advance.counter (agents): each agent's own, e.g. a slot
/// that started a new agent), which the op then leaves in the counter. Agent a's states go to
/// states[a * out_stride, + B D) and its next states to next_states[a * out_stride, + B D) (e.g. one [s; s'] block of 2
/// B D floats an agent: next_states = states shifted by B D, out_stride = 2 B D); its actions, returns and discounts to
/// [a B, (a + 1) B). Each agent's rows are nstep_sample's on its ring, bit for bit. The rings and the descriptors
/// (device memory) are the caller's; agents' rings are not checked against the outputs beyond their descriptors' sizes
/// here.
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
    if (!update_from.empty()) detail::require_size(update_from.size(), 1, "nstep_sample", "update_from");
    if (!advance.counter.empty()) {
        if (!update_from.empty())
            throw std::invalid_argument("ops::nstep_sample: an update number from update_from and from advance");
        detail::require_size(advance.counter.size(), 1, "nstep_sample", "advance counter");
        detail::require_size(advance.ticket.size(), 1, "nstep_sample", "advance ticket");
    }
    if (batch < 1 || r.capacity_steps < 1 || r.n_envs < 1 || r.state_dim < 1 || p.n_step < 1 || p.sampleable < 1 ||
        p.oldest_step < 0)
        throw std::invalid_argument("ops::nstep_sample: empty batch, ring or sampleable range");
    const std::size_t B = static_cast<std::size_t>(batch), D = static_cast<std::size_t>(r.state_dim);
    detail::require_size(states.size(), B * D, "nstep_sample", "states");
    detail::require_size(next_states.size(), B * D, "nstep_sample", "next_states");
    detail::require_size(actions.size(), B, "nstep_sample", "actions");
    detail::require_size(returns.size(), B, "nstep_sample", "returns");
    detail::require_size(discounts.size(), B, "nstep_sample", "discounts");
    const std::size_t rows = static_cast<std::size_t>(r.capacity_steps) * static_cast<std::size_t>(r.n_envs);
    const View<const float> ring_states(r.states, rows * D), ring_next(r.next_states, rows * D);
    detail::require_distinct(
        "nstep_sample",
        {detail::range("states", states), detail::range("next_states", next_states), detail::range("actions", actions),
         detail::range("returns", returns), detail::range("discounts", discounts),
         detail::range("ring states", ring_states), detail::range("ring next_states", ring_next),
         detail::range("advance counter", advance.counter), detail::range("advance ticket", advance.ticket)});
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
    if (out_stride < B * D)
        throw std::invalid_argument(
            fmt::format("ops::{}: out_stride {} is below one agent's rows ({})", op, out_stride, B * D));
    const std::size_t span = (N - 1) * out_stride + B * D;
    detail::require_size(states.size(), span, op, "states");
    detail::require_size(next_states.size(), span, op, "next_states");
    detail::require_size(actions.size(), N * B, op, "actions");
    detail::require_size(returns.size(), N * B, op, "returns");
    detail::require_size(discounts.size(), N * B, op, "discounts");
    detail::checked_int_size(N, op);
    detail::require_distinct(
        op, {detail::range("actions", actions), detail::range("returns", returns),
             detail::range("discounts", discounts), detail::range("agents", agents),
             detail::range("advance counter", advance.counter), detail::range("advance ticket", advance.ticket)});
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
