/// @file ops.hpp
/// @brief The replay op family: n-step batches from a replay ring (DQN's replay, IQL's dataset); the
///        math: math/replay.h.
///
/// Each op checks its arguments here, once, then runs its CPU twin (cpu_twin::, plain loops over
/// the shared math, src/ops/replay/cpu.cpp) or its CUDA twin (cuda_twin::, the kernels of
/// cuda/kernels/replay_nstep.cu, launched by src/ops/replay/cuda.cpp).
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <stdexcept>

#include "abi/replay_nstep.h"
#include "math/replay.h"
#include "ops/device.hpp"

namespace fh::ops {

namespace cpu_twin {
void nstep_sample(View<float> states, View<float> next_states, View<int> actions, View<float> returns,
                  View<float> discounts, const replay::ReplayView& r, const replay::SampleParams& p,
                  View<const long long> update_from, const CounterAdvance& advance, int batch);
void nstep_sample_agents(View<float> states, View<float> next_states, View<int> actions, View<float> returns,
                         View<float> discounts, View<const abi::SampleAgent> agents, std::size_t out_stride,
                         const CounterAdvance& advance, int batch);
}  // namespace cpu_twin

namespace cuda_twin {
void nstep_sample(CudaDevice& device, View<float> states, View<float> next_states, View<int> actions,
                  View<float> returns, View<float> discounts, const replay::ReplayView& r,
                  const replay::SampleParams& p, View<const long long> update_from, const CounterAdvance& advance,
                  int batch);
void nstep_sample_agents(CudaDevice& device, View<float> states, View<float> next_states, View<int> actions,
                         View<float> returns, View<float> discounts, View<const abi::SampleAgent> agents,
                         std::size_t out_stride, const CounterAdvance& advance, int batch);
}  // namespace cuda_twin

/// A batch of n-step transitions from the replay ring (replay::sample_nstep).
/// states, next_states (B, state_dim); actions, returns, discounts (B). update_from (1) or
/// empty: the RNG's update number read from device memory instead of p.update (a captured
/// update's counter, Device::increment). advance: the update number is advance.counter[0] + 1,
/// which the launch leaves in the counter (CounterAdvance; not with update_from).
inline void nstep_sample(Device& device, View<float> states, View<float> next_states, View<int> actions,
                         View<float> returns, View<float> discounts, const replay::ReplayView& r,
                         const replay::SampleParams& p, int batch, View<const long long> update_from = {},
                         const CounterAdvance& advance = {}) {
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
    if (CudaDevice* cuda = device.cuda())
        return cuda_twin::nstep_sample(*cuda, states, next_states, actions, returns, discounts, r, p, update_from,
                                       advance, batch);
    cpu_twin::nstep_sample(states, next_states, actions, returns, discounts, r, p, update_from, advance, batch);
}

/// nstep_sample for every agent of a population in one launch: agent a draws `batch` rows from
/// agents[a].ring with agents[a].params (its seed, sampleable range, n, gamma) at the update
/// number advance.counter[0] + 1, which the op then leaves in the counter (every agent's update
/// number: they update together). Agent a's states go to states[a * out_stride, + B D) and its
/// next states to next_states[a * out_stride, + B D) (e.g. one [s; s'] block of 2 B D floats an
/// agent: next_states = states shifted by B D, out_stride = 2 B D); its actions, returns and
/// discounts to [a B, (a + 1) B). Each agent's rows are nstep_sample's on its ring, bit for bit.
/// The rings and the descriptors (device memory) are the caller's; agents' rings are not checked
/// against the outputs beyond their descriptors' sizes here.
inline void nstep_sample_agents(Device& device, View<float> states, View<float> next_states, View<int> actions,
                                View<float> returns, View<float> discounts, View<const abi::SampleAgent> agents,
                                std::size_t out_stride, const CounterAdvance& advance, int batch, int state_dim) {
    const char* op = "nstep_sample_agents";
    if (agents.empty() || batch < 1 || state_dim < 1)
        throw std::invalid_argument("ops::nstep_sample_agents: no agents, or an empty batch or state");
    detail::require_size(advance.counter.size(), 1, op, "advance counter");
    detail::require_size(advance.ticket.size(), 1, op, "advance ticket");
    const std::size_t N = agents.size(), B = static_cast<std::size_t>(batch), D = static_cast<std::size_t>(state_dim);
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
    if (CudaDevice* cuda = device.cuda())
        return cuda_twin::nstep_sample_agents(*cuda, states, next_states, actions, returns, discounts, agents,
                                              out_stride, advance, batch);
    cpu_twin::nstep_sample_agents(states, next_states, actions, returns, discounts, agents, out_stride, advance, batch);
}

}  // namespace fh::ops
