/// @file q_network.hpp
/// @brief The DQN network: an MLP trunk, then the dueling C51 head (a value layer over the atoms
///        and an advantage layer over actions x atoms, combined and softmaxed per action by
///        ops::c51_head_forward). All weights live in one flat buffer (nn::ParamLayout), so the
///        target network, Adam, the gradient norm and checkpoints each see one buffer.
#pragma once

#include <vector>

#include "math/dqn.h"
#include "nn/mlp.hpp"
#include "nn/param_layout.hpp"
#include "ops/device.hpp"

namespace fh::trainers {

struct QNetworkConfig {
    int state_dim = 0;
    std::vector<int> hidden;  ///< trunk widths
    dqn::HeadParams head{};   ///< actions, atoms, dueling, support
};

class QNetwork {
public:
    /// Activations and gradients of one batch shape (up to max_batch rows).
    struct Workspace {
        nn::Mlp::Workspace trunk, value, adv;
        ops::Buffer<float> logits, probs, q;        ///< (B, A, Z), (B, A, Z), (B, A)
        ops::Buffer<float> d_value, d_adv;          ///< (B, Z), (B, A*Z)
        ops::Buffer<float> d_trunk, d_trunk_adv;    ///< (B, hidden_last)
        int max_batch = 0;
    };

    explicit QNetwork(const QNetworkConfig& config);

    const nn::ParamLayout& layout() const noexcept { return layout_; }
    const dqn::HeadParams& head() const noexcept { return config_.head; }
    int state_dim() const noexcept { return config_.state_dim; }
    Workspace make_workspace(ops::Device& ops, int max_batch) const;

    /// Q-values (batch, A) of states X (batch, state_dim) under `params`; logits and probs stay
    /// in ws for the loss and backward.
    ops::View<const float> forward(ops::Device& ops, ops::View<const float> params, ops::View<const float> X,
                                   int batch, Workspace& ws) const;
    /// Gradients of the loss whose gradient w.r.t. the logits is d_logits (batch, A, Z), for the
    /// last forward on ws; `grads` (layout.total()) is overwritten (its padding untouched).
    void backward(ops::Device& ops, ops::View<const float> params, ops::View<float> grads,
                  ops::View<const float> d_logits, int batch, Workspace& ws) const;

private:
    QNetworkConfig config_;
    nn::ParamLayout layout_;
    nn::Mlp trunk_, value_, adv_;
};

}  // namespace fh::trainers
