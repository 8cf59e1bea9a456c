/// @file dt/network.cpp
/// @brief The Decision Transformer's forward, backward and cached acting (docs/dt.md), as a
///        sequence of ops: the device core's linear layers and the dt op family.
#include "trainers/dt/network.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

#include "math/env.h"
#include "abi/core_vector.h"

namespace fh::trainers {
namespace {

using nn::InitSpec;
using ops::Activation;

InitSpec fan_in(int n, float gain = 1.0f) {
    return InitSpec{InitSpec::Kind::uniform_fan_in, n, gain};
}
InitSpec zeros() {
    return InitSpec{};
}

std::size_t sz(long long n) {
    return static_cast<std::size_t>(n);
}

}  // namespace

DtShape dt_shape(const config::Profile& p, int state_dim) {
    DtShape s;
    s.state_dim = state_dim;
    s.num_actions = static_cast<int>(p.num_actions());
    s.context = static_cast<int>(p.dt.context);
    s.layers = static_cast<int>(p.dt.layers);
    s.heads = static_cast<int>(p.dt.heads);
    s.dim = static_cast<int>(p.dt.embedding);
    return s;
}

DtNetwork::DtNetwork(const DtShape& s) : shape_(s) {
    if (s.dim < s.heads || s.dim % s.heads != 0 || s.context < 1 || s.layers < 1 ||
        s.state_dim <= env::kPortfolioFeatures || s.num_actions < 1)
        throw std::invalid_argument(
            "DtNetwork: embedding must be a multiple of heads, states must hold the portfolio "
            "features; every size >= 1");
    const std::size_t D = sz(s.dim), S = sz(s.state_dim), A = sz(s.num_actions), F = sz(s.hidden());
    const auto linear = [&](const std::string& name, std::size_t in, std::size_t out, InitSpec init) {
        return Affine{layout_.add(name + "/w", out * in, init), layout_.add(name + "/b", out, zeros())};
    };
    const auto norm = [&](const std::string& name) {  // its gain stored as (gain - 1): see math/dt.h
        return Affine{layout_.add(name + "/gain", D, zeros()), layout_.add(name + "/bias", D, zeros())};
    };
    // The embeddings: the return-to-go scalar and the action table start small (|w| <= 0.5 sqrt 3).
    state_ = linear("embed/state", S, D, fan_in(s.state_dim));
    return_ = linear("embed/return", 1, D, fan_in(1, 0.5f));
    action_table_ = layout_.add("embed/action", A * D, fan_in(1, 0.5f));
    // Each block's residual branches end in a layer scaled down by 1 / sqrt(2 layers) (GPT-2).
    const float residual_gain = 1.0f / std::sqrt(2.0f * static_cast<float>(s.layers));
    for (int l = 0; l < s.layers; ++l) {
        const std::string b = "block" + std::to_string(l) + "/";
        layers_.push_back(LayerSlices{norm(b + "ln1"), linear(b + "attn/qkv", D, 3 * D, fan_in(s.dim)),
                                      linear(b + "attn/proj", D, D, fan_in(s.dim, residual_gain)), norm(b + "ln2"),
                                      linear(b + "mlp/fc1", D, F, fan_in(s.dim, std::sqrt(2.0f))),
                                      linear(b + "mlp/fc2", F, D, fan_in(s.hidden(), residual_gain))});
    }
    lnf_ = norm("final_ln");
    // A small head starts the policy near uniform.
    head_ = linear("head", D, A, fan_in(s.dim, 0.01f));
}

ops::DtEmbedViews DtNetwork::embed_views(ops::View<const float> params) const {
    return ops::DtEmbedViews{slice(params, return_.w), slice(params, return_.b), slice(params, action_table_),
                             shape_.dim, shape_.num_actions};
}

dt::AttentionShape DtNetwork::attention_shape(int batch) const {
    return dt::AttentionShape{batch, shape_.tokens(), shape_.dim, shape_.heads, shape_.context};
}

template <class Visit>
void DtNetwork::each_buffer(Workspace& ws, Visit&& f) const {
    const std::size_t R = sz(ws.batch) * sz(shape_.tokens()), D = sz(shape_.dim), F = sz(shape_.hidden()),
                      steps = sz(ws.batch) * sz(shape_.context),
                      P = sz(ws.batch) * sz(shape_.heads) * sz(shape_.tokens()) * sz(shape_.tokens());
    ws.x.resize(sz(shape_.layers) + 1);
    ws.layers.resize(sz(shape_.layers));
    f(ws.states, steps * sz(shape_.state_dim));
    f(ws.logits, R * sz(shape_.num_actions));
    for (auto* b : {&ws.s_proj, &ws.d_s_proj}) f(*b, steps * D);
    for (auto* b : {&ws.lnf, &ws.d_res, &ws.d_tmp}) f(*b, R * D);
    for (auto& x : ws.x) f(x, R * D);
    f(ws.lnf_stats, 2 * R);
    f(ws.d_qkv, 3 * R * D);
    f(ws.d_scores, P);
    for (auto* b : {&ws.d_fc1_a, &ws.d_fc1_z}) f(*b, R * F);
    for (auto& a : ws.layers) {
        for (auto* b : {&a.ln1, &a.attn, &a.proj, &a.h, &a.ln2, &a.fc2}) f(*b, R * D);
        for (auto* b : {&a.ln1_stats, &a.ln2_stats}) f(*b, 2 * R);
        for (auto* b : {&a.fc1_z, &a.fc1_a}) f(*b, R * F);
        f(a.qkv, 3 * R * D);
        f(a.P, P);
    }
}

template <class Visit>
void DtNetwork::each_buffer(ActWorkspace& ws, Visit&& f) const {
    const std::size_t n = sz(ws.n), rows = n * dt::kTokensPerStep, D = sz(shape_.dim), F = sz(shape_.hidden());
    ws.cache.resize(sz(shape_.layers));
    for (auto& c : ws.cache) f(c, n * sz(dt::cache_slots(shape_.context)) * 2 * D);
    f(ws.states, n * sz(shape_.state_dim));
    f(ws.s_proj, n * D);
    for (auto* b : {&ws.x, &ws.ln, &ws.attn, &ws.proj, &ws.fc2}) f(*b, rows * D);
    f(ws.stats, 2 * rows);
    f(ws.qkv, 3 * rows * D);
    for (auto* b : {&ws.fc1_z, &ws.fc1_a}) f(*b, rows * F);
    f(ws.logits, rows * sz(shape_.num_actions));
}

nn::WorkspaceSize DtNetwork::workspace_size(int batch) const {
    Workspace ws;
    ws.batch = batch;
    nn::WorkspaceSize size;
    each_buffer(ws, [&](ops::Buffer<float>&, std::size_t floats) { size.add(floats); });
    return size;
}

nn::WorkspaceSize DtNetwork::act_workspace_size(int n) const {
    static_assert(sizeof(dt::History) == 2 * sizeof(float));
    ActWorkspace ws;
    ws.n = n;
    nn::WorkspaceSize size;
    size.add(2 * sz(n));  // the histories
    each_buffer(ws, [&](ops::Buffer<float>&, std::size_t floats) { size.add(floats); });
    return size;
}

DtNetwork::Workspace DtNetwork::make_workspace(ops::Device& ops, int batch) const {
    if (batch < 1) throw std::invalid_argument("DtNetwork::make_workspace: batch must be >= 1");
    Workspace ws;
    ws.batch = batch;
    each_buffer(ws, [&](ops::Buffer<float>& b, std::size_t floats) { b = ops.alloc<float>(floats); });
    return ws;
}

void DtNetwork::linear(ops::Device& ops, ops::View<const float> params, Affine l, ops::View<float> y,
                       ops::View<const float> x, int rows, int in, int out) const {
    ops.linear_forward(y, x, slice(params, l.w), slice(params, l.b), rows, in, out, Activation::none);
}

void DtNetwork::linear_backward(ops::Device& ops, ops::View<const float> params, ops::View<float> grads, Affine l,
                                ops::View<float> dx, ops::View<float> dy, ops::View<const float> y,
                                ops::View<const float> x, int rows, int in, int out) const {
    ops.linear_backward(dx, slice(grads, l.w), slice(grads, l.b), dy, y, x, slice(params, l.w), rows, in, out,
                        Activation::none, false);
}

void DtNetwork::mlp_branch(ops::Device& ops, ops::View<const float> params, const LayerSlices& s,
                           ops::View<const float> h, ops::View<float> ln, ops::View<float> stats, ops::View<float> z,
                           ops::View<float> act, ops::View<float> out, int rows) const {
    const int D = shape_.dim, F = shape_.hidden();
    ops::run(ops, ops::DtLayerNorm{ln, stats, h, slice(params, s.ln2.w), slice(params, s.ln2.b), D});
    linear(ops, params, s.fc1, z, ln, rows, D, F);
    ops::run(ops, ops::DtGelu{act, z});
    linear(ops, params, s.fc2, out, act, rows, F, D);
}

ops::View<const float> DtNetwork::forward(ops::Device& ops, ops::View<const float> params, const DtBatch& in,
                                          Workspace& ws) const {
    const int B = ws.batch, D = shape_.dim, A = shape_.num_actions;
    const int R = B * shape_.tokens(), steps = B * shape_.context;
    ops::run(ops, ops::DtStateInput{ws.states.view(), in.states, shape_.state_dim, market_dim()});
    linear(ops, params, state_, ws.s_proj.view(), ws.states.cview(), steps, shape_.state_dim, D);
    ops::run(ops, ops::DtEmbed{ws.x[0].view(), in.rtg, ws.s_proj.cview(), in.actions, embed_views(params)});
    for (int l = 0; l < shape_.layers; ++l) {
        const LayerSlices& s = layers_[static_cast<std::size_t>(l)];
        auto& a = ws.layers[static_cast<std::size_t>(l)];
        const auto x = ws.x[static_cast<std::size_t>(l)].cview();
        // Attention branch: h = x + proj(attention(qkv(ln1(x)))).
        ops::run(ops, ops::DtLayerNorm{a.ln1.view(), a.ln1_stats.view(), x, slice(params, s.ln1.w),
                                       slice(params, s.ln1.b), D});
        linear(ops, params, s.qkv, a.qkv.view(), a.ln1.cview(), R, D, 3 * D);
        ops::run(ops, ops::DtAttention{a.attn.view(), a.P.view(), a.qkv.cview(), attention_shape(B)});
        linear(ops, params, s.proj, a.proj.view(), a.attn.cview(), R, D, D);
        ops::run(ops, ops::Copy{a.h.view(), x});
        ops::run(ops, ops::Saxpy{a.h.view(), 1.0f, a.proj.cview()});
        // MLP branch: x' = h + fc2(gelu(fc1(ln2(h)))).
        mlp_branch(ops, params, s, a.h.cview(), a.ln2.view(), a.ln2_stats.view(), a.fc1_z.view(), a.fc1_a.view(),
                   a.fc2.view(), R);
        const auto next = ws.x[static_cast<std::size_t>(l) + 1].view();
        ops::run(ops, ops::Copy{next, a.h.cview()});
        ops::run(ops, ops::Saxpy{next, 1.0f, a.fc2.cview()});
    }
    ops::run(ops, ops::DtLayerNorm{ws.lnf.view(), ws.lnf_stats.view(), ws.x.back().cview(), slice(params, lnf_.w),
                                   slice(params, lnf_.b), D});
    linear(ops, params, head_, ws.logits.view(), ws.lnf.cview(), R, D, A);
    return ws.logits.cview();
}

void DtNetwork::backward(ops::Device& ops, ops::View<const float> params, ops::View<float> grads,
                         ops::View<float> d_logits, const DtBatch& in, Workspace& ws) const {
    const int B = ws.batch, D = shape_.dim, F = shape_.hidden(), A = shape_.num_actions;
    const int R = B * shape_.tokens(), steps = B * shape_.context;
    // d_res: the gradient of the residual stream, from the top down.
    linear_backward(ops, params, grads, head_, ws.d_tmp.view(), d_logits, ws.logits.cview(), ws.lnf.cview(), R, D, A);
    ops::run(ops,
             ops::DtLayerNormBackward{ws.d_res.view(), slice(grads, lnf_.w), slice(grads, lnf_.b), ws.d_tmp.cview(),
                                      ws.x.back().cview(), ws.lnf_stats.cview(), slice(params, lnf_.w), D, false});
    for (int l = shape_.layers - 1; l >= 0; --l) {
        const LayerSlices& s = layers_[static_cast<std::size_t>(l)];
        auto& a = ws.layers[static_cast<std::size_t>(l)];
        // MLP branch (d_res = dL/dx'; a linear layer without activation leaves its dY as is).
        linear_backward(ops, params, grads, s.fc2, ws.d_fc1_a.view(), ws.d_res.view(), a.fc2.cview(), a.fc1_a.cview(),
                        R, F, D);
        ops::run(ops, ops::DtGeluBackward{ws.d_fc1_z.view(), ws.d_fc1_a.cview(), a.fc1_z.cview()});
        linear_backward(ops, params, grads, s.fc1, ws.d_tmp.view(), ws.d_fc1_z.view(), a.fc1_z.cview(), a.ln2.cview(),
                        R, D, F);
        ops::run(ops, ops::DtLayerNormBackward{ws.d_res.view(), slice(grads, s.ln2.w), slice(grads, s.ln2.b),
                                               ws.d_tmp.cview(), a.h.cview(), a.ln2_stats.cview(),
                                               slice(params, s.ln2.w), D, true});
        // Attention branch (d_res = dL/dh).
        linear_backward(ops, params, grads, s.proj, ws.d_tmp.view(), ws.d_res.view(), a.proj.cview(), a.attn.cview(), R,
                        D, D);
        ops::run(ops, ops::DtAttentionBackward{ws.d_qkv.view(), ws.d_scores.view(), ws.d_tmp.cview(), a.qkv.cview(),
                                               a.P.cview(), attention_shape(B)});
        linear_backward(ops, params, grads, s.qkv, ws.d_tmp.view(), ws.d_qkv.view(), a.qkv.cview(), a.ln1.cview(), R, D,
                        3 * D);
        ops::run(ops, ops::DtLayerNormBackward{ws.d_res.view(), slice(grads, s.ln1.w), slice(grads, s.ln1.b),
                                               ws.d_tmp.cview(), ws.x[static_cast<std::size_t>(l)].cview(),
                                               a.ln1_stats.cview(), slice(params, s.ln1.w), D, true});
    }
    ops::run(ops, ops::DtEmbedBackward{slice(grads, return_.w), slice(grads, return_.b), slice(grads, action_table_),
                                       ws.d_s_proj.view(), ws.d_res.cview(), in.rtg, in.actions, D, A});
    linear_backward(ops, params, grads, state_, {}, ws.d_s_proj.view(), ws.s_proj.cview(), ws.states.cview(), steps,
                    shape_.state_dim, D);
}

dt::ActParams DtNetwork::act_params(ops::View<const float> target_token) const {
    return dt::ActParams{shape_.state_dim, market_dim(),       shape_.dim,         shape_.heads,
                         shape_.context,   shape_.num_actions, target_token.data()};
}

int DtNetwork::market_dim() const noexcept {
    return shape_.state_dim - env::kPortfolioFeatures;
}

DtNetwork::ActWorkspace DtNetwork::make_act_workspace(ops::Device& ops, int n) const {
    if (n < 1) throw std::invalid_argument("DtNetwork::make_act_workspace: n must be >= 1");
    ActWorkspace ws;
    ws.n = n;
    ws.history = ops.from_host<dt::History>(std::vector<dt::History>(sz(n), dt::History{0, 0}));
    each_buffer(ws, [&](ops::Buffer<float>& b, std::size_t floats) { b = ops.alloc<float>(floats); });
    for (auto& c : ws.cache) ops::run(ops, ops::Fill{c.view(), 0.0f});
    return ws;
}

void DtNetwork::act(ops::Device& ops, ops::View<const float> params, ops::View<const float> target_token,
                    ops::View<int> actions, ops::View<const float> states, ActWorkspace& ws) const {
    const int n = ws.n, rows = n * dt::kTokensPerStep, D = shape_.dim;
    if (target_token.size() != 1) throw std::invalid_argument("DtNetwork::act: one target token");
    const auto ap = act_params(target_token);
    ops::run(ops, ops::DtStateInput{ws.states.view(), states, shape_.state_dim, market_dim()});
    linear(ops, params, state_, ws.s_proj.view(), ws.states.cview(), n, shape_.state_dim, D);
    ops::run(ops, ops::DtActTokens{ws.x.view(), ws.history.view(), states, ws.s_proj.cview(), embed_views(params), ap});
    for (int l = 0; l < shape_.layers; ++l) {
        const LayerSlices& s = layers_[static_cast<std::size_t>(l)];
        ops::run(ops, ops::DtLayerNorm{ws.ln.view(), ws.stats.view(), ws.x.cview(), slice(params, s.ln1.w),
                                       slice(params, s.ln1.b), D});
        linear(ops, params, s.qkv, ws.qkv.view(), ws.ln.cview(), rows, D, 3 * D);
        ops::run(ops, ops::DtCacheAttention{ws.attn.view(), ws.cache[static_cast<std::size_t>(l)].view(),
                                            ws.qkv.cview(), ws.history.cview(), ap});
        linear(ops, params, s.proj, ws.proj.view(), ws.attn.cview(), rows, D, D);
        ops::run(ops, ops::Saxpy{ws.x.view(), 1.0f, ws.proj.cview()});
        mlp_branch(ops, params, s, ws.x.cview(), ws.ln.view(), ws.stats.view(), ws.fc1_z.view(), ws.fc1_a.view(),
                   ws.fc2.view(), rows);
        ops::run(ops, ops::Saxpy{ws.x.view(), 1.0f, ws.fc2.cview()});
    }
    ops::run(ops, ops::DtLayerNorm{ws.ln.view(), ws.stats.view(), ws.x.cview(), slice(params, lnf_.w),
                                   slice(params, lnf_.b), D});
    linear(ops, params, head_, ws.logits.view(), ws.ln.cview(), rows, D, shape_.num_actions);
    ops::run(ops, ops::DtActSelect{actions, ws.history.view(), ws.logits.cview(), shape_.num_actions});
}

}  // namespace fh::trainers
