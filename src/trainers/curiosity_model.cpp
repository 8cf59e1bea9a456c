/// @file curiosity_model.cpp
/// @brief The curiosity forward model's step: forward, error, backward, Adam.
#include "trainers/curiosity_model.hpp"

#include "nn/init.hpp"
#include "ops/ppo/ops.hpp"

namespace fh::trainers {

CuriosityModel::CuriosityModel(ops::Device& ops, int state_dim, int num_actions, int hidden, int market_dim, int rows,
                               std::uint64_t run_seed)
    : layout_(),
      net_(layout_, "curiosity",
           nn::MlpConfig::stack(state_dim + num_actions, {hidden}, market_dim, ops::Activation::tanh)),
      rows_(rows) {
    params_ = nn::alloc_zeroed(ops, layout_);
    // A stream of its own: the model's weights never repeat the agent's.
    nn::init_params(ops, params_.view(), layout_, run_seed ^ 0x9E3779B97F4A7C15ull);
    grads_ = nn::alloc_zeroed(ops, layout_);
    adam_ = AdamState(ops, layout_);
    const auto n = static_cast<std::size_t>(rows);
    input_ = ops.alloc<float>(n * static_cast<std::size_t>(state_dim + num_actions));
    d_pred_ = ops.alloc<float>(n * static_cast<std::size_t>(market_dim));
    ws_ = net_.make_workspace(ops, rows);
}

std::uint64_t CuriosityModel::plan(MemoryPlan& plan, int state_dim, int num_actions, int hidden, int market_dim,
                                   int rows, std::uint64_t copies) {
    nn::ParamLayout layout;
    const nn::Mlp net(layout, "curiosity",
                      nn::MlpConfig::stack(state_dim + num_actions, {hidden}, market_dim, ops::Activation::tanh));
    const auto n = static_cast<std::uint64_t>(rows);
    plan.add<float>("curiosity parameters, gradients and Adam moments", layout.total(), 4 * copies);
    plan.add<long long>("curiosity Adam step", copies);
    plan.add<unsigned>("curiosity Adam ticket", copies);
    plan.add<float>("curiosity input", n * static_cast<std::uint64_t>(state_dim + num_actions), copies);
    plan.add<float>("curiosity prediction gradient", n * static_cast<std::uint64_t>(market_dim), copies);
    plan.add("curiosity workspace", net.workspace_size(rows), copies);
    return layout.total();
}

void CuriosityModel::train_step(ops::Device& ops, ops::View<float> error, ops::View<const float> next, int next_width,
                                float lr) {
    const auto pred = net_.forward(ops, params_.cview(), input_.cview(), rows_, ws_);
    fh::ops::run(ops, fh::ops::CuriosityError{error, d_pred_.view(), pred, next, next_width});
    net_.backward(ops, params_.cview(), grads_.view(), d_pred_.view(), {}, rows_, ws_, false);
    ops::AdamParams adam;
    adam.lr = lr;
    adam_.advance_device_step(ops);
    adam_.update_at_device_step(ops, params_.view(), grads_.cview(), {}, {}, adam);
}

std::vector<StateTensor> CuriosityModel::state_tensors(const std::string& prefix) {
    std::vector<StateTensor> t{
        state_tensor(prefix + "params", "F32", {static_cast<std::int64_t>(layout_.total())}, params_.view())};
    for (auto& a : adam_.state_tensors(prefix + "adam_")) t.push_back(std::move(a));
    return t;
}

}  // namespace fh::trainers
