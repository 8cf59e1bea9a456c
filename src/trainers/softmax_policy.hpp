/// @file softmax_policy.hpp
/// @brief Evaluation of a softmax policy network (PPO's actor, IQL's policy): the most likely
///        action, i.e. the first maximal logit. That is exactly the epsilon_greedy op at epsilon 0
///        applied to the logits, so no separate backtest-forward kernel is needed (the network
///        forward is cuBLAS either way).
#pragma once

#include "nn/mlp.hpp"
#include "trainers/trainer.hpp"
#include "abi/nn_select.h"

namespace fh::trainers {

class SoftmaxGreedyPolicy final : public GreedyPolicy {
public:
    /// `policy` is a network over a layout of `weights_size` floats whose output is the logits.
    SoftmaxGreedyPolicy(nn::Mlp policy, std::size_t weights_size)
        : policy_(std::move(policy)), weights_size_(weights_size) {}
    std::size_t weights_size() const override { return weights_size_; }
    bool capture_safe() const noexcept override { return true; }  // a forward and the first maximal logit
    void act(ops::Device& ops, ops::View<const float> weights, ops::View<int> actions, ops::View<const float> states,
             int n) override {
        if (&ops != ws_owner_ || n > ws_.max_batch()) {  // evaluation batch sizes vary
            ws_ = policy_.make_workspace(ops, n);
            ws_owner_ = &ops;
        }
        const auto logits = policy_.forward(ops, weights, states, n, ws_);
        ops::run(ops, ops::EpsilonGreedy{actions, logits, policy_.out_dim(), 0.0f, 0, 0});
    }

private:
    nn::Mlp policy_;
    std::size_t weights_size_;
    nn::Mlp::Workspace ws_;
    ops::Device* ws_owner_ = nullptr;
};

}  // namespace fh::trainers
