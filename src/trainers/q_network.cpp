/// @file q_network.cpp
#include "trainers/q_network.hpp"

#include <stdexcept>

#include "ops/dqn/ops.hpp"

namespace fh::trainers {
namespace {

nn::MlpConfig network_config(const QNetworkConfig& c) {
    if (c.hidden.empty()) throw std::invalid_argument("QNetwork: the trunk needs at least one hidden layer");
    nn::MlpConfig m;
    m.sizes.push_back(c.state_dim);
    for (int h : c.hidden) m.sizes.push_back(h);
    m.sizes.push_back(dqn::head_width(c.head));
    m.hidden = ops::Activation::relu;  // every trunk layer, the last one included, feeds on through a ReLU
    m.output = ops::Activation::none;  // the head's outputs are logits' parts
    m.output_init_scale = 0.1f;        // start near a uniform distribution over the atoms
    return m;
}

}  // namespace

QNetwork::QNetwork(const QNetworkConfig& c) : config_(c), layout_(), net_(layout_, "q", network_config(c)) {
    // DQN's update has one backward chain (beside the collection): dW and dX overlap.
    net_.set_overlap_backward(true);
}

QNetwork::Workspace QNetwork::make_workspace(ops::Device& ops, int max_batch) const {
    return Workspace{net_.make_workspace(ops, max_batch), max_batch};
}

ops::View<const float> QNetwork::forward(ops::Device& ops, ops::View<const float> params, ops::View<const float> X,
                                         int batch, Workspace& ws) const {
    return net_.forward(ops, params, X, batch, ws.mlp);
}

ops::View<const float> QNetwork::forward_batched(ops::Device& ops, ops::View<const float> params, int count,
                                                 ops::View<const float> X, int batch, Workspace& ws) const {
    return net_.forward_batched(ops, params, layout_.total(), X, 0, batch, count, ws.mlp);
}

void QNetwork::backward(ops::Device& ops, ops::View<const float> params, ops::View<float> grads,
                        ops::View<float> d_head, int batch, Workspace& ws) const {
    net_.backward(ops, params, grads, d_head, {}, batch, ws.mlp, false);
}

void QNetwork::q_values(ops::Device& ops, ops::View<const float> params, ops::View<const float> X, int batch,
                        Workspace& ws, ops::View<float> q, ops::View<int> actions) const {
    const auto head = forward(ops, params, X, batch, ws);
    ops::dqn_act(ops, actions, q, {}, head, config_.head, {}, {});
}

}  // namespace fh::trainers
