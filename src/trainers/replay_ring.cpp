/// @file replay_ring.cpp
#include "trainers/replay_ring.hpp"

#include <algorithm>
#include <vector>

#include "abi/replay_nstep.h"
#include "abi/core_vector.h"

namespace fh::trainers {

ReplayRing::ReplayRing(ops::Device& device, int n_envs, int capacity_steps, int state_dim)
    : n_envs_(n_envs), capacity_steps_(capacity_steps), state_dim_(state_dim) {
    const std::size_t rows = static_cast<std::size_t>(capacity_steps) * static_cast<std::size_t>(n_envs);
    const std::size_t D = static_cast<std::size_t>(state_dim);
    states_ = device.alloc<float>(rows * D);
    next_states_ = device.alloc<float>(rows * D);
    rewards_ = device.alloc<float>(rows);
    actions_ = device.alloc<int>(rows);
    done_ = device.alloc<std::uint8_t>(rows);
    // Rows not yet pushed are zeros, not whatever the memory held: a checkpoint taken before the
    // ring is full has the same bytes in every process (a population's agent and its single run).
    ops::run(device, ops::Fill{states_.view(), 0.0f});
    ops::run(device, ops::Fill{next_states_.view(), 0.0f});
    ops::run(device, ops::Fill{rewards_.view(), 0.0f});
    device.upload<int>(actions_.view(), std::vector<int>(rows, 0));
    device.upload<std::uint8_t>(done_.view(), std::vector<std::uint8_t>(rows, 0));
}

ReplayRing::ReplayRing(ops::Device& device, const io::ReplayDump& d)
    : n_envs_(d.n_envs), capacity_steps_(d.capacity_steps), state_dim_(d.state_dim), pushed_(d.pushed_steps) {
    states_ = device.from_host<float>(d.states);
    next_states_ = device.from_host<float>(d.next_states);
    rewards_ = device.from_host<float>(d.rewards);
    actions_ = device.from_host<int>(d.actions);
    done_ = device.from_host<std::uint8_t>(d.done);
}

long long ReplayRing::transitions() const noexcept {
    return std::min<long long>(pushed_, capacity_steps_) * n_envs_;
}

ReplayRing::Slot ReplayRing::next_slot() {
    const std::size_t n = static_cast<std::size_t>(n_envs_), D = static_cast<std::size_t>(state_dim_);
    const std::size_t row = static_cast<std::size_t>(pushed_ % capacity_steps_) * n;
    return Slot{states_.view().subview(row * D, n * D), next_states_.view().subview(row * D, n * D),
                rewards_.view().subview(row, n), actions_.view().subview(row, n), done_.view().subview(row, n)};
}

long long ReplayRing::sampleable_steps(int n_step) const noexcept {
    const long long oldest = std::max<long long>(0, pushed_ - capacity_steps_);
    return std::max<long long>(0, pushed_ - (n_step - 1) - oldest);
}

replay::ReplayView ReplayRing::view() const {
    return replay::ReplayView{states_.cview().data(),
                              next_states_.cview().data(),
                              actions_.cview().data(),
                              rewards_.cview().data(),
                              done_.cview().data(),
                              capacity_steps_,
                              n_envs_,
                              state_dim_};
}

abi::SampleAgent ReplayRing::sample_agent(std::uint64_t seed, int n_step, float gamma) const {
    const long long oldest = std::max<long long>(0, pushed_ - capacity_steps_);
    return abi::SampleAgent{view(), replay::SampleParams{seed, 0, oldest, sampleable_steps(n_step), n_step, gamma}};
}

io::ReplayDump ReplayRing::dump(ops::Device& device, int num_actions) const {
    io::ReplayDump d;
    d.state_dim = state_dim_;
    d.n_envs = n_envs_;
    d.capacity_steps = capacity_steps_;
    d.num_actions = num_actions;
    d.pushed_steps = pushed_;
    d.states = device.to_host(states_.cview());
    d.next_states = device.to_host(next_states_.cview());
    d.rewards = device.to_host(rewards_.cview());
    d.actions = device.to_host(actions_.cview());
    d.done = device.to_host(done_.cview());
    return d;
}

}  // namespace fh::trainers
