/// @file adam_state.hpp
/// @brief AdamState: one Adam optimizer over a flat parameter buffer (nn::ParamLayout): its two
///        moments in the device's memory, its step count (on the host, and mirrored in device
///        memory for captured updates), one update (ops::AdamStep, gated by the training
///        guard) and its checkpoint tensors. Every trainer's optimizer is one.
#pragma once

#include <string>
#include <vector>

#include "nn/param_layout.hpp"
#include "device/device.hpp"
#include "trainers/memory_plan.hpp"
#include "trainers/state_tensor.hpp"
#include "abi/core_optim.h"

namespace fh::trainers {

class AdamState {
public:
    AdamState() = default;
    /// Zeroed moments shaped like `layout` (its padding stays zero), step 0.
    AdamState(ops::Device& device, const nn::ParamLayout& layout);
    /// Declares what the constructor allocates for `params` floats, its names prefixed by `prefix`.
    static void plan(MemoryPlan& plan, const std::string& prefix, std::uint64_t params);

    /// One update of `params` with `grads` (both layout-shaped) at the step in device memory, so
    /// that it can be captured (ops::OpSequence): per update the host calls count_step() outside
    /// the sequence, and the sequence issues advance_device_step() first, then
    /// update_at_device_step() (bias corrections 1 - beta^step). device_step() is the same number
    /// for the update's other ops (sampling, the guard). grad_norm (1) is read when
    /// hyper.clip_norm > 0; gate (1) or empty: the training guard's skip (nothing is written, but
    /// the step still counts, as the update number does). target: a soft target network moved in
    /// the same pass (ops::SoftTarget), or none.
    void advance_device_step(ops::Device& device);
    /// advance_device_step() inside the op that first reads the step (ops::CounterAdvance: IQL's
    /// sampling, at the step + 1, leaving that in the counter): one launch fewer on the update's path.
    ops::CounterAdvance device_step_advance() noexcept { return {device_step_.view(), step_ticket_.view()}; }
    void update_at_device_step(ops::Device& device, ops::View<float> params, ops::View<const float> grads,
                               ops::View<const float> grad_norm, ops::View<const int> gate, ops::AdamParams hyper,
                               ops::SoftTarget target = {});
    ops::View<const long long> device_step() const noexcept { return device_step_.cview(); }
    /// One update at a step number the caller derives from its own device counters (PPO: the
    /// rollout count), with the learning rate from device memory when lr is given.
    void update_at(ops::Device& device, ops::View<float> params, ops::View<const float> grads,
                   ops::View<const float> grad_norm, ops::View<const int> gate, ops::AdamParams hyper,
                   ops::CounterValue step, ops::View<const float> lr = {}, ops::SoftTarget target = {});

    /// The moments, for a trainer that runs Adam inside its own fused kernel (DQN); it then
    /// counts each update with count_step().
    ops::View<float> m() noexcept { return m_.view(); }
    ops::View<float> v() noexcept { return v_.view(); }
    void count_step() noexcept { ++steps_; }
    void count_steps(long long n) noexcept { steps_ += n; }

    /// Updates taken so far (the next update's step is steps() + 1).
    long long steps() const noexcept { return steps_; }
    /// Continues from a checkpoint's count (after the moments were restored); the device's copy
    /// follows.
    void restore_steps(ops::Device& device, long long steps);

    /// The moments as checkpoint tensors `<prefix>m` and `<prefix>v` (e.g. "adam/m").
    std::vector<StateTensor> state_tensors(const std::string& prefix);

private:
    ops::Buffer<float> m_, v_;
    ops::Buffer<long long> device_step_;  ///< steps_, for the ops of a captured update
    ops::Buffer<unsigned> step_ticket_;   ///< device_step_advance()'s ticket (zero between launches)
    long long steps_ = 0;
};

/// The checkpoint tensors of a trainer with one flat parameter buffer and one optimizer:
/// params/online (`params`), the optimizer's adam/m and adam/v, then `more` (e.g. its monitor's).
std::vector<StateTensor> online_params_tensors(ops::View<float> params, AdamState& adam, std::vector<StateTensor> more);

}  // namespace fh::trainers
