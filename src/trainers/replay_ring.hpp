/// @file replay_ring.hpp
/// @brief ReplayRing: transitions in a device's memory, `capacity_steps` collection steps of
///        `n_envs` transitions each (step k in slot k % capacity_steps, rows slot * n_envs + env),
///        sampled as n-step batches (ops::nstep_sample, math/replay.h). DQN's replay memory
///        and IQL's offline dataset are each one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/replay_dump.hpp"
#include "math/replay.h"
#include "abi/replay_nstep.h"
#include "device/device.hpp"
#include "abi/dqn_step.h"
#include "trainers/state_tensor.hpp"

namespace fh::trainers {

class ReplayRing {
public:
    ReplayRing() = default;
    ReplayRing(ops::Device& device, int n_envs, int capacity_steps, int state_dim);
    /// A ring holding a replay dump's transitions (validated by io::read_replay_dump).
    ReplayRing(ops::Device& device, const io::ReplayDump& dump);

    int n_envs() const noexcept { return n_envs_; }
    int capacity_steps() const noexcept { return capacity_steps_; }
    int state_dim() const noexcept { return state_dim_; }
    /// Collection steps pushed so far (the ring keeps the last capacity_steps of them).
    long long pushed_steps() const noexcept { return pushed_; }
    /// Transitions held now: min(pushed, capacity) * n_envs.
    long long transitions() const noexcept;

    /// The rows one collection step writes: slot `pushed_steps() % capacity` (the next push).
    struct Slot {
        ops::View<float> states, next_states, rewards;
        ops::View<int> actions;
        ops::View<std::uint8_t> done;
    };
    Slot next_slot();
    /// Marks the slot returned by next_slot() as written.
    void commit_slot() noexcept { ++pushed_; }

    /// Steps that can start an n-step transition (n - 1 successors held).
    long long sampleable_steps(int n_step) const noexcept;
    /// The ring and its uniform sampling of n-step transitions (the draw Philox(seed,
    /// replay_sample, row, update)), as one agent of a population's one draw over many rings
    /// (ops::nstep_sample_agents).
    abi::SampleAgent sample_agent(std::uint64_t seed, int n_step, float gamma) const;

    /// The ring as a replay dump (docs/replay-dump.md).
    io::ReplayDump dump(ops::Device& device, int num_actions) const;

private:
    replay::ReplayView view() const;
    int n_envs_ = 0, capacity_steps_ = 0, state_dim_ = 0;
    long long pushed_ = 0;
    ops::Buffer<float> states_, next_states_, rewards_;
    ops::Buffer<int> actions_;
    ops::Buffer<std::uint8_t> done_;
};

}  // namespace fh::trainers
