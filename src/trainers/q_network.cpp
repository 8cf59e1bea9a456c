/// @file q_network.cpp
#include "trainers/q_network.hpp"

#include <stdexcept>

#include "ops/dqn/ops.hpp"
#include "ops/nn/ops.hpp"

namespace fh::trainers {
namespace {

nn::MlpConfig network_config(const QNetworkConfig& c) {
    if (c.hidden.empty()) throw std::invalid_argument("QNetwork: the trunk needs at least one hidden layer");
    nn::MlpConfig m;
    m.sizes.push_back(c.state_dim);
    for (int h : c.hidden) m.sizes.push_back(h);
    m.sizes.push_back(dqn::output_width(c.head));  // every head of an ensemble in one layer
    m.hidden = ops::Activation::relu;  // every trunk layer, the last one included, feeds on through a ReLU
    m.output = ops::Activation::none;  // the head's outputs are logits' parts
    m.output_init_scale = 0.1f;        // start near a uniform distribution over the atoms
    return m;
}

}  // namespace

QNetwork::QNetwork(const QNetworkConfig& c) : config_(c), layout_(), net_(layout_, "q", network_config(c)) {
    // DQN's update has one backward chain (beside the collection): dW and dX overlap.
    net_.set_overlap_backward(true);
    if (!c.attention.empty()) {
        const int G = static_cast<int>(c.attention.size());
        if (G > attention::kMaxGroups)
            throw std::invalid_argument("QNetwork: more feature groups than attention::kMaxGroups");
        groups_.count = G;
        for (int k = 0; k < G; ++k) {
            groups_.begin[k] = c.attention[static_cast<std::size_t>(k)].begin;
            if (k > 0 && c.attention[static_cast<std::size_t>(k)].begin != c.attention[static_cast<std::size_t>(k - 1)].end)
                throw std::invalid_argument("QNetwork: the attention groups must be contiguous");
        }
        groups_.begin[G] = c.attention.back().end;
        if (groups_.begin[0] != 0 || groups_.begin[G] != c.state_dim)
            throw std::invalid_argument("QNetwork: the attention groups must cover the state's columns");
        // Registered after the trunk and head (their weights are those of the same seed without
        // attention). A small last layer: the scores start near 0, the weights near 1/G, and the
        // attended state near the state itself.
        nn::MlpConfig a;
        a.sizes = {c.state_dim, G};
        a.output = ops::Activation::none;
        a.output_init_scale = 0.1f;
        attention_.emplace(layout_, "attention", a);
    }
}

QNetwork::Workspace QNetwork::make_workspace(ops::Device& ops, int max_batch) const {
    Workspace ws{net_.make_workspace(ops, max_batch), max_batch, {}, {}, {}, {}, {}, {}, 0};
    if (attention_) {
        const auto rows = static_cast<std::size_t>(max_batch), D = static_cast<std::size_t>(config_.state_dim);
        const auto G = static_cast<std::size_t>(groups_.count);
        ws.attention = attention_->make_workspace(ops, max_batch);
        ws.attended = ops.alloc<float>(rows * D);
        ws.alpha = ops.alloc<float>(rows * G);
        ws.d_attended = ops.alloc<float>(rows * D);
        ws.d_scores = ops.alloc<float>(rows * G);
    }
    return ws;
}

ops::View<const float> QNetwork::attend(ops::Device& ops, ops::View<const float> scores, ops::View<const float> X,
                                        int rows, int x_rows, Workspace& ws) const {
    const auto R = static_cast<std::size_t>(rows);
    const auto attended = ws.attended.view().subview(0, R * static_cast<std::size_t>(config_.state_dim));
    ops::group_attention_forward(ops, attended, ws.alpha.view().subview(0, R * static_cast<std::size_t>(groups_.count)),
                                 X, scores, groups_, rows, x_rows);
    ws.input = X;
    ws.rows = rows;
    return attended;
}

ops::View<const float> QNetwork::forward(ops::Device& ops, ops::View<const float> params, ops::View<const float> X,
                                         int batch, Workspace& ws) const {
    if (!attention_) return net_.forward(ops, params, X, batch, ws.mlp);
    const auto scores = attention_->forward(ops, params, X, batch, ws.attention);
    return net_.forward(ops, params, attend(ops, scores, X, batch, batch, ws), batch, ws.mlp);
}

ops::View<const float> QNetwork::forward_batched(ops::Device& ops, ops::View<const float> params, int count,
                                                 ops::View<const float> X, int batch, Workspace& ws) const {
    if (!attention_) return net_.forward_batched(ops, params, layout_.total(), X, 0, batch, count, ws.mlp);
    // Every network's scores on the one X, then each network's attended states (count * batch
    // rows) into its own trunk.
    const auto scores = attention_->forward_batched(ops, params, layout_.total(), X, 0, batch, count, ws.attention);
    const auto attended = attend(ops, scores, X, count * batch, batch, ws);
    return net_.forward_batched(ops, params, layout_.total(), attended,
                                static_cast<std::size_t>(batch) * static_cast<std::size_t>(config_.state_dim), batch,
                                count, ws.mlp);
}

void QNetwork::backward(ops::Device& ops, ops::View<const float> params, ops::View<float> grads,
                        ops::View<float> d_head, int batch, Workspace& ws) const {
    if (!attention_) return net_.backward(ops, params, grads, d_head, {}, batch, ws.mlp, false);
    // Through the trunk to the attended states, then the attention's softmax to the scores and
    // the scores' layer (network 0: the first batch rows of the forward).
    const auto B = static_cast<std::size_t>(batch), D = static_cast<std::size_t>(config_.state_dim),
               G = static_cast<std::size_t>(groups_.count);
    const auto d_attended = ws.d_attended.view().subview(0, B * D);
    net_.backward(ops, params, grads, d_head, d_attended, batch, ws.mlp, false);
    const auto d_scores = ws.d_scores.view().subview(0, B * G);
    ops::group_attention_backward(ops, d_scores, d_attended, ws.input.subview(0, B * D),
                                  ws.alpha.cview().subview(0, B * G), groups_, batch);
    attention_->backward(ops, params, grads, d_scores, {}, batch, ws.attention, false);
}

ops::View<const float> QNetwork::attention_weights(const Workspace& ws) const {
    if (!attention_) return {};
    return ws.alpha.cview().subview(0, static_cast<std::size_t>(ws.rows) * static_cast<std::size_t>(groups_.count));
}

void QNetwork::q_values(ops::Device& ops, ops::View<const float> params, ops::View<const float> X, int batch,
                        Workspace& ws, ops::View<float> q, ops::View<int> actions) const {
    const auto head = forward(ops, params, X, batch, ws);
    ops::dqn_act(ops, actions, q, {}, head, config_.head, {}, {});
}

double ensemble_spread(const std::vector<float>& outputs, const dqn::HeadParams& h) {
    const int K = h.ensemble, A = h.num_actions, W = dqn::head_width(h), Z = dqn::head_atoms(h);
    const std::size_t OW = static_cast<std::size_t>(dqn::output_width(h)), rows = outputs.size() / OW;
    if (K < 2 || rows == 0) return 0.0;
    const auto As = static_cast<std::size_t>(A);
    std::vector<float> q_heads(static_cast<std::size_t>(K) * As), mean(As), logits(As * static_cast<std::size_t>(Z)),
        probs(logits.size());
    double sum = 0.0;
    for (std::size_t r = 0; r < rows; ++r) {
        for (int k = 0; k < K; ++k) {
            const float* hk = outputs.data() + r * OW + static_cast<std::size_t>(k) * static_cast<std::size_t>(W);
            float* qk = q_heads.data() + static_cast<std::size_t>(k) * As;
            if (h.scalar) dqn::scalar_q(hk, h, qk);
            else dqn::head_forward(hk, hk + (h.dueling ? Z : 0), logits.data(), probs.data(), qk, h);
        }
        for (int a = 0; a < A; ++a) mean[static_cast<std::size_t>(a)] = dqn::ensemble_q(q_heads.data(), K, A, a).mean;
        sum += dqn::ensemble_q(q_heads.data(), K, A, policy::argmax(mean.data(), A)).spread;
    }
    return sum / static_cast<double>(rows);
}

}  // namespace fh::trainers
