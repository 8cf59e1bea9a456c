/// @file adam_state.cpp
#include "trainers/adam_state.hpp"

#include <vector>

#include "util/errors.hpp"
#include "abi/core_optim.h"
#include "abi/core_vector.h"

namespace fh::trainers {

AdamState::AdamState(ops::Device& device, const nn::ParamLayout& layout)
    : m_(nn::alloc_zeroed(device, layout)),
      v_(nn::alloc_zeroed(device, layout)),
      device_step_(device.from_host<long long>(std::vector<long long>{0})),
      step_ticket_(device.from_host<unsigned>(std::vector<unsigned>{0u})) {}

void AdamState::plan(MemoryPlan& plan, const std::string& prefix, std::uint64_t params) {
    plan.add<float>(prefix + "Adam moments", params, 2);
    plan.add<long long>(prefix + "Adam step", 1);
    plan.add<unsigned>(prefix + "Adam ticket", 1);
}

void AdamState::advance_device_step(ops::Device& device) {
    ops::run(device, ops::Increment{device_step_.view()});
}

void AdamState::update_at_device_step(ops::Device& device, ops::View<float> params, ops::View<const float> grads,
                                      ops::View<const float> grad_norm, ops::View<const int> gate,
                                      ops::AdamParams hyper, ops::SoftTarget target) {
    update_at(device, params, grads, grad_norm, gate, hyper, ops::counter_value(device_step_.cview()), {}, target);
}

void AdamState::update_at(ops::Device& device, ops::View<float> params, ops::View<const float> grads,
                          ops::View<const float> grad_norm, ops::View<const int> gate, ops::AdamParams hyper,
                          ops::CounterValue step, ops::View<const float> lr, ops::SoftTarget target) {
    ops::run(device, ops::AdamStep{params, m_.view(), v_.view(), grads, grad_norm, gate, step, hyper, lr, target});
}

void AdamState::restore_steps(ops::Device& device, long long steps) {
    if (steps < 0) throw UsageError("checkpoint: a negative optimizer step count");
    steps_ = steps;
    device.upload<long long>(device_step_.view(), std::vector<long long>{steps});
}

std::vector<StateTensor> AdamState::state_tensors(const std::string& prefix) {
    const auto n = static_cast<std::int64_t>(m_.size());
    return {state_tensor(prefix + "m", "F32", {n}, m_.view()), state_tensor(prefix + "v", "F32", {n}, v_.view())};
}

std::vector<StateTensor> online_params_tensors(ops::View<float> params, AdamState& adam,
                                               std::vector<StateTensor> more) {
    std::vector<StateTensor> t{
        state_tensor("params/online", "F32", {static_cast<std::int64_t>(params.size())}, params)};
    for (auto& a : adam.state_tensors("adam/")) t.push_back(std::move(a));
    for (auto& m : more) t.push_back(std::move(m));
    return t;
}

}  // namespace fh::trainers
