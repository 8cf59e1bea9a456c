/// @file dqn/network.cpp
#include "trainers/dqn/network.hpp"

#include <stdexcept>

#include "abi/dqn_step.h"
#include "abi/dqn_iqn.h"
#include "abi/nn_attention.h"

namespace fh::trainers {
namespace {

nn::MlpConfig network_config(const QNetworkConfig& c) {
    if (c.hidden.empty()) throw std::invalid_argument("QNetwork: the trunk needs at least one hidden layer");
    nn::MlpConfig m;
    m.sizes.push_back(c.state_dim);
    for (int h : c.hidden) m.sizes.push_back(h);
    m.hidden = ops::Activation::relu;  // every trunk layer, the last one included, feeds on through a ReLU
    if (c.iqn.quantiles > 0) {         // the IQN head: the trunk alone, phi(s) = its last ReLU layer
        m.output = ops::Activation::relu;
        return m;
    }
    m.sizes.push_back(dqn::output_width(c.head));  // every head of an ensemble in one layer
    m.output = ops::Activation::none;              // the head's outputs are logits' parts
    m.output_init_scale = 0.1f;                    // start near a uniform distribution over the atoms
    return m;
}

}  // namespace

QNetwork::QNetwork(const QNetworkConfig& c) : config_(c), layout_(), net_(layout_, "q", network_config(c)) {
    // DQN's update has one backward chain (beside the collection): dW and dX overlap.
    net_.set_overlap_backward(true);
    if (c.iqn.quantiles > 0) {
        // The IQN head (Dabney et al. 2018): psi(tau) = ReLU(W_e cos(pi i tau) + b_e) of the
        // trunk's width, then one linear layer on phi(s) * psi(tau) with the scalar head's
        // outputs, at a tenth of the usual init scale like the other heads.
        if (!c.head.scalar) throw std::invalid_argument("QNetwork: the IQN head's rows are the scalar head's");
        if (c.iqn.act_quantiles < 1 || c.iqn.n_cos < 1)
            throw std::invalid_argument("QNetwork: the IQN head needs act_quantiles and n_cos >= 1");
        const int H = c.hidden.back();
        nn::MlpConfig e;
        e.sizes = {c.iqn.n_cos, H};
        e.output = ops::Activation::relu;
        iqn_embed_.emplace(layout_, "iqn_embed", e);
        nn::MlpConfig h;
        h.sizes = {H, dqn::head_width(c.head)};
        h.output = ops::Activation::none;
        h.output_init_scale = 0.1f;
        iqn_head_.emplace(layout_, "iqn_head", h);
        iqn_embed_->set_overlap_backward(true);
        iqn_head_->set_overlap_backward(true);
    }
    if (!c.attention.empty()) {
        const int G = static_cast<int>(c.attention.size());
        if (G > attention::kMaxGroups)
            throw std::invalid_argument("QNetwork: more feature groups than attention::kMaxGroups");
        groups_.count = G;
        for (int k = 0; k < G; ++k) {
            groups_.begin[k] = c.attention[static_cast<std::size_t>(k)].begin;
            if (k > 0 &&
                c.attention[static_cast<std::size_t>(k)].begin != c.attention[static_cast<std::size_t>(k - 1)].end)
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

nn::WorkspaceSize QNetwork::workspace_size(int max_batch, int quantiles) const {
    const auto rows = static_cast<std::size_t>(max_batch);
    nn::WorkspaceSize size = net_.workspace_size(max_batch);
    if (iqn_head_) {
        const int K = config_.iqn.act_quantiles;
        const auto q_rows = rows * static_cast<std::size_t>(quantiles > 0 ? quantiles : 1);
        const auto H = static_cast<std::size_t>(config_.hidden.back());
        size += iqn_embed_->workspace_size(quantiles > 0 ? static_cast<int>(q_rows) : K) +
                iqn_head_->workspace_size(static_cast<int>(q_rows));
        size.add(q_rows * H, quantiles > 0 ? 3 : 1);  // x (and dx, d psi)
        if (quantiles > 0)
            size.add(rows * H);  // d phi
        else
            size.add(H).add(static_cast<std::size_t>(K) * static_cast<std::size_t>(config_.iqn.n_cos)).add(K);
    }
    if (attention_) {
        size += attention_->workspace_size(max_batch);
        size.add(rows * static_cast<std::size_t>(config_.state_dim), 2)
            .add(rows * static_cast<std::size_t>(groups_.count), 2);
    }
    return size;
}

QNetwork::Workspace QNetwork::make_workspace(ops::Device& ops, int max_batch, int quantiles) const {
    Workspace ws{net_.make_workspace(ops, max_batch), max_batch, {}, {}, {}, {}, {}, {}, 0, {}};
    if (iqn_head_) {
        // An update's samples have `quantiles` fractions each, embedded row by row; acting's K
        // midpoints are one K-row pass whose mean embedding every sample shares (one row each).
        const int K = config_.iqn.act_quantiles, q = quantiles > 0 ? quantiles : 1;
        const auto rows = static_cast<std::size_t>(max_batch) * static_cast<std::size_t>(q);
        const auto H = static_cast<std::size_t>(config_.hidden.back());
        auto& w = ws.iqn;
        w.max_quantiles = q;
        w.embed = iqn_embed_->make_workspace(ops, quantiles > 0 ? static_cast<int>(rows) : K);
        w.head = iqn_head_->make_workspace(ops, static_cast<int>(rows));
        w.x = ops.alloc<float>(rows * H);
        if (quantiles > 0) {
            w.dx = ops.alloc<float>(rows * H);
            w.d_psi = ops.alloc<float>(rows * H);
            w.d_phi = ops.alloc<float>(static_cast<std::size_t>(max_batch) * H);
        } else {
            const auto n_cos = static_cast<std::size_t>(config_.iqn.n_cos);
            w.mean = ops.alloc<float>(H);
            w.act_features = ops.alloc<float>(static_cast<std::size_t>(K) * n_cos);
            w.act_taus = ops.alloc<float>(static_cast<std::size_t>(K));
            ops::run(ops, ops::IqnTaus{w.act_features.view(), w.act_taus.view(), {}, {}, 1, K, config_.iqn.n_cos});
        }
    }
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
    ops::run(ops, ops::GroupAttentionForward{attended,
                                             ws.alpha.view().subview(0, R * static_cast<std::size_t>(groups_.count)), X,
                                             scores, groups_, rows, x_rows});
    ws.input = X;
    ws.rows = rows;
    return attended;
}

ops::View<const float> QNetwork::forward(ops::Device& ops, ops::View<const float> params, ops::View<const float> X,
                                         int batch, Workspace& ws) const {
    const auto out = trunk_forward(ops, params, 1, X, batch, ws);
    if (!iqn_head_) return out;
    // The IQN head acting on the mean over K midpoints of Z_tau: the head layer is linear in
    // phi * psi and so is the dueling combination, so the mean over the fractions of the head rows
    // is the head layer on phi(s) * mean_k psi(tau_k). One pass of K rows embeds the midpoints,
    // their mean is shared by every sample, and each sample is one row of the scalar head.
    auto& w = ws.iqn;
    const int K = config_.iqn.act_quantiles, H = config_.hidden.back();
    if (w.mean.size() == 0) throw std::logic_error("QNetwork::forward: an IQN workspace made for forward_quantiles");
    const auto psi = iqn_embed_->forward(ops, params, w.act_features.cview(), K, w.embed);
    ops::run(ops, ops::IqnMeanRows{w.mean.view(), psi, 1, K, H});
    const auto x = w.x.view().subview(0, static_cast<std::size_t>(batch) * static_cast<std::size_t>(H));
    ops::run(ops, ops::IqnHadamard{x, out, w.mean.cview(), 1, batch, 1, 1, H});
    w.quantiles = 0;  // nothing to differentiate
    return iqn_head_->forward(ops, params, x, batch, w.head);
}

ops::View<const float> QNetwork::forward_batched(ops::Device& ops, ops::View<const float> params, int count,
                                                 ops::View<const float> X, int batch, Workspace& ws) const {
    if (iqn_head_) throw std::logic_error("QNetwork::forward_batched: the IQN head runs through forward_quantiles");
    return trunk_forward(ops, params, count, X, batch, ws);
}

ops::View<const float> QNetwork::forward_agents(ops::Device& ops, ops::View<const float> params,
                                                std::size_t param_stride, ops::View<const float> X,
                                                std::size_t x_stride, int batch, int count, Workspace& ws) const {
    if (iqn_head_ || attention_)
        throw std::logic_error("QNetwork::forward_agents: a population's networks have no attention or IQN head");
    return net_.forward_batched(ops, params, param_stride, X, x_stride, batch, count, ws.mlp);
}

void QNetwork::backward_agents(ops::Device& ops, ops::View<const float> params, ops::View<float> grads,
                               ops::View<float> d_head, Workspace& ws) const {
    if (iqn_head_ || attention_)
        throw std::logic_error("QNetwork::backward_agents: a population's networks have no attention or IQN head");
    net_.backward_batched(ops, params, grads, d_head, {}, ws.mlp, false);
}

ops::View<const float> QNetwork::forward_quantiles(ops::Device& ops, ops::View<const float> params, int count,
                                                   ops::View<const float> X, int batch, ops::View<const float> features,
                                                   int quantiles, Workspace& ws) const {
    if (!iqn_head_) throw std::logic_error("QNetwork::forward_quantiles: not the IQN head");
    auto& w = ws.iqn;
    if (quantiles < 1 || quantiles > w.max_quantiles || w.dx.size() == 0)
        throw std::invalid_argument("QNetwork::forward_quantiles: the workspace was made for other fractions");
    const int H = config_.hidden.back(), rows = batch * quantiles;
    const auto Rs = static_cast<std::size_t>(rows), Hs = static_cast<std::size_t>(H);
    const auto phi = trunk_forward(ops, params, count, X, batch, ws);
    // Every network embeds the same fractions (x_stride 0) with its own weights.
    const auto psi = iqn_embed_->forward_batched(ops, params, layout_.total(), features, 0, rows, count, w.embed);
    const auto x = w.x.view().subview(0, static_cast<std::size_t>(count) * Rs * Hs);
    ops::run(ops, ops::IqnHadamard{x, phi, psi, count, batch, quantiles, rows, H});
    w.phi = phi;
    w.psi = psi;
    w.quantiles = quantiles;
    return iqn_head_->forward_batched(ops, params, layout_.total(), x, Rs * Hs, rows, count, w.head);
}

ops::View<const float> QNetwork::trunk_forward(ops::Device& ops, ops::View<const float> params, int count,
                                               ops::View<const float> X, int batch, Workspace& ws) const {
    if (count == 1) {
        if (!attention_) return net_.forward(ops, params, X, batch, ws.mlp);
        const auto scores = attention_->forward(ops, params, X, batch, ws.attention);
        return net_.forward(ops, params, attend(ops, scores, X, batch, batch, ws), batch, ws.mlp);
    }
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
    if (iqn_head_) {
        // The head layer to x = phi * psi, the product to psi and phi, the embedding; then the
        // trunk (below) from d phi.
        auto& w = ws.iqn;
        if (w.quantiles < 1) throw std::logic_error("QNetwork::backward: no forward_quantiles on this workspace");
        const auto N = static_cast<std::size_t>(w.quantiles), H = static_cast<std::size_t>(config_.hidden.back());
        const auto Bs = static_cast<std::size_t>(batch);
        const auto dx = w.dx.view().subview(0, Bs * N * H), d_psi = w.d_psi.view().subview(0, Bs * N * H);
        const auto d_phi = w.d_phi.view().subview(0, Bs * H);
        iqn_head_->backward(ops, params, grads, d_head, dx, batch * w.quantiles, w.head, false);
        ops::run(ops,
                 ops::IqnHadamardBackward{d_phi, d_psi, dx, w.phi, w.psi, batch, w.quantiles, config_.hidden.back()});
        iqn_embed_->backward(ops, params, grads, d_psi, {}, batch * w.quantiles, w.embed, false);
        d_head = d_phi;
    }
    if (!attention_) return net_.backward(ops, params, grads, d_head, {}, batch, ws.mlp, false);
    // Through the trunk to the attended states, then the attention's softmax to the scores and
    // the scores' layer (network 0: the first batch rows of the forward).
    const auto B = static_cast<std::size_t>(batch), D = static_cast<std::size_t>(config_.state_dim),
               G = static_cast<std::size_t>(groups_.count);
    const auto d_attended = ws.d_attended.view().subview(0, B * D);
    net_.backward(ops, params, grads, d_head, d_attended, batch, ws.mlp, false);
    const auto d_scores = ws.d_scores.view().subview(0, B * G);
    ops::run(ops, ops::GroupAttentionBackward{d_scores, d_attended, ws.input.subview(0, B * D),
                                              ws.alpha.cview().subview(0, B * G), groups_, batch});
    attention_->backward(ops, params, grads, d_scores, {}, batch, ws.attention, false);
}

ops::View<const float> QNetwork::attention_weights(const Workspace& ws) const {
    if (!attention_) return {};
    return ws.alpha.cview().subview(0, static_cast<std::size_t>(ws.rows) * static_cast<std::size_t>(groups_.count));
}

void QNetwork::q_values(ops::Device& ops, ops::View<const float> params, ops::View<const float> X, int batch,
                        Workspace& ws, ops::View<float> q, ops::View<int> actions) const {
    const auto head = forward(ops, params, X, batch, ws);
    ops::run(ops, ops::DqnAct{actions, q, {}, head, config_.head, {}, {}});
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
            if (h.scalar)
                dqn::scalar_q(hk, h, qk);
            else
                dqn::head_forward(hk, hk + (h.dueling ? Z : 0), logits.data(), probs.data(), qk, h);
        }
        for (int a = 0; a < A; ++a) mean[static_cast<std::size_t>(a)] = dqn::ensemble_q(q_heads.data(), K, A, a).mean;
        sum += dqn::ensemble_q(q_heads.data(), K, A, policy::argmax(mean.data(), A)).spread;
    }
    return sum / static_cast<double>(rows);
}

}  // namespace fh::trainers
