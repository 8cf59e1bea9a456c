/// @file q_network.cpp
#include "trainers/q_network.hpp"
#include "ops/dqn/ops.hpp"

#include <stdexcept>

namespace fh::trainers {
namespace {

nn::MlpConfig trunk_config(const QNetworkConfig& c) {
    if (c.hidden.empty()) throw std::invalid_argument("QNetwork: the trunk needs at least one hidden layer");
    nn::MlpConfig m;
    m.sizes.push_back(c.state_dim);
    for (int h : c.hidden) m.sizes.push_back(h);
    m.hidden = ops::Activation::relu;
    m.output = ops::Activation::relu;  // the trunk's last layer feeds the heads through a ReLU
    return m;
}

nn::MlpConfig head_config(int in, int out) {
    nn::MlpConfig m;
    m.sizes = {in, out};
    m.output = ops::Activation::none;
    m.output_init_scale = 0.1f;  // start near a uniform distribution over the atoms
    return m;
}

}  // namespace

QNetwork::QNetwork(const QNetworkConfig& c)
    : config_(c),
      layout_(),
      trunk_(layout_, "trunk", trunk_config(c)),
      value_(layout_, "value", head_config(c.hidden.back(), c.head.num_atoms)),
      adv_(layout_, "advantage", head_config(c.hidden.back(), c.head.num_actions * c.head.num_atoms)) {}

QNetwork::Workspace QNetwork::make_workspace(ops::Device& ops, int max_batch) const {
    const std::size_t B = static_cast<std::size_t>(max_batch);
    const std::size_t A = static_cast<std::size_t>(config_.head.num_actions);
    const std::size_t Z = static_cast<std::size_t>(config_.head.num_atoms);
    const std::size_t H = static_cast<std::size_t>(config_.hidden.back());
    Workspace ws;
    ws.max_batch = max_batch;
    ws.trunk = trunk_.make_workspace(ops, max_batch);
    ws.value = value_.make_workspace(ops, max_batch);
    ws.adv = adv_.make_workspace(ops, max_batch);
    ws.logits = ops.alloc<float>(B * A * Z);
    ws.probs = ops.alloc<float>(B * A * Z);
    ws.q = ops.alloc<float>(B * A);
    ws.d_value = ops.alloc<float>(B * Z);
    ws.d_adv = ops.alloc<float>(B * A * Z);
    ws.d_trunk = ops.alloc<float>(B * H);
    ws.d_trunk_adv = ops.alloc<float>(B * H);
    return ws;
}

ops::View<const float> QNetwork::forward(ops::Device& ops, ops::View<const float> params, ops::View<const float> X,
                                         int batch, Workspace& ws) const {
    if (batch < 1 || batch > ws.max_batch) throw std::invalid_argument("QNetwork::forward: batch outside the workspace");
    const std::size_t B = static_cast<std::size_t>(batch);
    const std::size_t A = static_cast<std::size_t>(config_.head.num_actions);
    const std::size_t Z = static_cast<std::size_t>(config_.head.num_atoms);
    const auto features = trunk_.forward(ops, params, X, batch, ws.trunk);
    const auto adv = adv_.forward(ops, params, features, batch, ws.adv);
    ops::View<const float> value;
    if (config_.head.dueling) value = value_.forward(ops, params, features, batch, ws.value);
    fh::ops::c51_head_forward(ops, ws.logits.view().subview(0, B * A * Z), ws.probs.view().subview(0, B * A * Z),
                         ws.q.view().subview(0, B * A), value, adv, config_.head, batch);
    return ws.q.cview().subview(0, B * A);
}

void QNetwork::backward(ops::Device& ops, ops::View<const float> params, ops::View<float> grads,
                        ops::View<const float> d_logits, int batch, Workspace& ws) const {
    const std::size_t B = static_cast<std::size_t>(batch);
    const std::size_t A = static_cast<std::size_t>(config_.head.num_actions);
    const std::size_t Z = static_cast<std::size_t>(config_.head.num_atoms);
    const std::size_t H = static_cast<std::size_t>(config_.hidden.back());
    const bool dueling = config_.head.dueling != 0;
    auto d_value = dueling ? ws.d_value.view().subview(0, B * Z) : ops::View<float>{};
    auto d_adv = ws.d_adv.view().subview(0, B * A * Z);
    fh::ops::c51_head_backward(ops, d_value, d_adv, d_logits, config_.head, batch);
    // Both heads read the trunk's output: their input gradients add up (two distinct buffers).
    auto d_trunk = ws.d_trunk.view().subview(0, B * H);
    auto d_trunk_adv = ws.d_trunk_adv.view().subview(0, B * H);
    adv_.backward(ops, params, grads, d_adv, d_trunk_adv, batch, ws.adv, false);
    if (dueling) {
        value_.backward(ops, params, grads, d_value, d_trunk, batch, ws.value, false);
        ops.saxpy(d_trunk, 1.0f, d_trunk_adv);
    } else {
        ops.copy(d_trunk, d_trunk_adv);
    }
    trunk_.backward(ops, params, grads, d_trunk, {}, batch, ws.trunk, false);
}

}  // namespace fh::trainers
