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
    // The embeddings: the return-to-go scalar and the action table start small (|w| <= 0.5 sqrt 3).
    state_w_ = layout_.add("embed/state/w", D * S, fan_in(s.state_dim));
    state_b_ = layout_.add("embed/state/b", D, zeros());
    return_w_ = layout_.add("embed/return/w", D, fan_in(1, 0.5f));
    return_b_ = layout_.add("embed/return/b", D, zeros());
    action_table_ = layout_.add("embed/action", A * D, fan_in(1, 0.5f));
    // Each block's residual branches end in a layer scaled down by 1 / sqrt(2 layers) (GPT-2).
    const float residual_gain = 1.0f / std::sqrt(2.0f * static_cast<float>(s.layers));
    for (int l = 0; l < s.layers; ++l) {
        const std::string b = "block" + std::to_string(l) + "/";
        LayerSlices ls{};
        ls.ln1_gain = layout_.add(b + "ln1/gain", D, zeros());  // stored as (gain - 1): see math/dt.h
        ls.ln1_bias = layout_.add(b + "ln1/bias", D, zeros());
        ls.qkv_w = layout_.add(b + "attn/qkv/w", 3 * D * D, fan_in(s.dim));
        ls.qkv_b = layout_.add(b + "attn/qkv/b", 3 * D, zeros());
        ls.proj_w = layout_.add(b + "attn/proj/w", D * D, fan_in(s.dim, residual_gain));
        ls.proj_b = layout_.add(b + "attn/proj/b", D, zeros());
        ls.ln2_gain = layout_.add(b + "ln2/gain", D, zeros());
        ls.ln2_bias = layout_.add(b + "ln2/bias", D, zeros());
        ls.fc1_w = layout_.add(b + "mlp/fc1/w", F * D, fan_in(s.dim, std::sqrt(2.0f)));
        ls.fc1_b = layout_.add(b + "mlp/fc1/b", F, zeros());
        ls.fc2_w = layout_.add(b + "mlp/fc2/w", D * F, fan_in(s.hidden(), residual_gain));
        ls.fc2_b = layout_.add(b + "mlp/fc2/b", D, zeros());
        layers_.push_back(ls);
    }
    lnf_gain_ = layout_.add("final_ln/gain", D, zeros());
    lnf_bias_ = layout_.add("final_ln/bias", D, zeros());
    // A small head starts the policy near uniform.
    head_w_ = layout_.add("head/w", A * D, fan_in(s.dim, 0.01f));
    head_b_ = layout_.add("head/b", A, zeros());
}

ops::DtEmbedViews DtNetwork::embed_views(ops::View<const float> params) const {
    return ops::DtEmbedViews{slice(params, return_w_), slice(params, return_b_), slice(params, action_table_),
                             shape_.dim, shape_.num_actions};
}

dt::AttentionShape DtNetwork::attention_shape(int batch) const {
    return dt::AttentionShape{batch, shape_.tokens(), shape_.dim, shape_.heads, shape_.context};
}

nn::WorkspaceSize DtNetwork::workspace_size(int batch) const {
    const std::size_t R = sz(batch) * sz(shape_.tokens()), D = sz(shape_.dim), F = sz(shape_.hidden()),
                      L = sz(shape_.layers), steps = sz(batch) * sz(shape_.context),
                      P = sz(batch) * sz(shape_.heads) * sz(shape_.tokens()) * sz(shape_.tokens());
    nn::WorkspaceSize size;
    size.add(steps * sz(shape_.state_dim)).add(steps * D, 2).add(R * sz(shape_.num_actions)).add(2 * R, 1 + 2 * L);
    size.add(P, L + 1).add(R * F, 2 * L + 2).add(R * D, 7 * L + 4).add(3 * R * D, L + 1);
    return size;
}

nn::WorkspaceSize DtNetwork::act_workspace_size(int n) const {
    static_assert(sizeof(dt::History) == 2 * sizeof(float));
    const std::size_t rows = sz(n) * dt::kTokensPerStep, D = sz(shape_.dim), F = sz(shape_.hidden());
    nn::WorkspaceSize size;
    size.add(2 * sz(n)).add(sz(n) * sz(dt::cache_slots(shape_.context)) * 2 * D, sz(shape_.layers));
    size.add(sz(n) * sz(shape_.state_dim)).add(sz(n) * D).add(rows * D, 5).add(2 * rows).add(3 * rows * D);
    return size.add(rows * F, 2).add(rows * sz(shape_.num_actions));
}

DtNetwork::Workspace DtNetwork::make_workspace(ops::Device& ops, int batch) const {
    if (batch < 1) throw std::invalid_argument("DtNetwork::make_workspace: batch must be >= 1");
    const std::size_t R = sz(batch) * sz(shape_.tokens()), D = sz(shape_.dim), F = sz(shape_.hidden());
    const std::size_t steps = sz(batch) * sz(shape_.context);
    const std::size_t P = sz(batch) * sz(shape_.heads) * sz(shape_.tokens()) * sz(shape_.tokens());
    Workspace ws;
    ws.batch = batch;
    ws.states = ops.alloc<float>(steps * sz(shape_.state_dim));
    ws.s_proj = ops.alloc<float>(steps * D);
    ws.logits = ops.alloc<float>(R * sz(shape_.num_actions));
    ws.lnf = ops.alloc<float>(R * D);
    ws.lnf_stats = ops.alloc<float>(2 * R);
    for (int l = 0; l <= shape_.layers; ++l) ws.x.push_back(ops.alloc<float>(R * D));
    for (int l = 0; l < shape_.layers; ++l) {
        Workspace::Layer a;
        a.ln1 = ops.alloc<float>(R * D);
        a.ln1_stats = ops.alloc<float>(2 * R);
        a.qkv = ops.alloc<float>(3 * R * D);
        a.P = ops.alloc<float>(P);
        a.attn = ops.alloc<float>(R * D);
        a.proj = ops.alloc<float>(R * D);
        a.h = ops.alloc<float>(R * D);
        a.ln2 = ops.alloc<float>(R * D);
        a.ln2_stats = ops.alloc<float>(2 * R);
        a.fc1_z = ops.alloc<float>(R * F);
        a.fc1_a = ops.alloc<float>(R * F);
        a.fc2 = ops.alloc<float>(R * D);
        ws.layers.push_back(std::move(a));
    }
    ws.d_res = ops.alloc<float>(R * D);
    ws.d_tmp = ops.alloc<float>(R * D);
    ws.d_qkv = ops.alloc<float>(3 * R * D);
    ws.d_scores = ops.alloc<float>(P);
    ws.d_fc1_a = ops.alloc<float>(R * F);
    ws.d_fc1_z = ops.alloc<float>(R * F);
    ws.d_s_proj = ops.alloc<float>(steps * D);
    return ws;
}

void DtNetwork::mlp_branch(ops::Device& ops, ops::View<const float> params, const LayerSlices& s,
                           ops::View<const float> h, ops::View<float> ln, ops::View<float> stats, ops::View<float> z,
                           ops::View<float> act, ops::View<float> out, int rows) const {
    const int D = shape_.dim, F = shape_.hidden();
    ops::run(ops, ops::DtLayerNorm{ln, stats, h, slice(params, s.ln2_gain), slice(params, s.ln2_bias), D});
    ops.linear_forward(z, ln, slice(params, s.fc1_w), slice(params, s.fc1_b), rows, D, F, Activation::none);
    ops::run(ops, ops::DtGelu{act, z});
    ops.linear_forward(out, act, slice(params, s.fc2_w), slice(params, s.fc2_b), rows, F, D, Activation::none);
}

ops::View<const float> DtNetwork::forward(ops::Device& ops, ops::View<const float> params, const DtBatch& in,
                                          Workspace& ws) const {
    const int B = ws.batch, D = shape_.dim, A = shape_.num_actions;
    const int R = B * shape_.tokens(), steps = B * shape_.context;
    ops::run(ops, ops::DtStateInput{ws.states.view(), in.states, shape_.state_dim, market_dim()});
    ops.linear_forward(ws.s_proj.view(), ws.states.cview(), slice(params, state_w_), slice(params, state_b_), steps,
                       shape_.state_dim, D, Activation::none);
    ops::run(ops, ops::DtEmbed{ws.x[0].view(), in.rtg, ws.s_proj.cview(), in.actions, embed_views(params)});
    for (int l = 0; l < shape_.layers; ++l) {
        const LayerSlices& s = layers_[static_cast<std::size_t>(l)];
        auto& a = ws.layers[static_cast<std::size_t>(l)];
        const auto x = ws.x[static_cast<std::size_t>(l)].cview();
        // Attention branch: h = x + proj(attention(qkv(ln1(x)))).
        ops::run(ops, ops::DtLayerNorm{a.ln1.view(), a.ln1_stats.view(), x, slice(params, s.ln1_gain),
                                       slice(params, s.ln1_bias), D});
        ops.linear_forward(a.qkv.view(), a.ln1.cview(), slice(params, s.qkv_w), slice(params, s.qkv_b), R, D, 3 * D,
                           Activation::none);
        ops::run(ops, ops::DtAttention{a.attn.view(), a.P.view(), a.qkv.cview(), attention_shape(B)});
        ops.linear_forward(a.proj.view(), a.attn.cview(), slice(params, s.proj_w), slice(params, s.proj_b), R, D, D,
                           Activation::none);
        ops::run(ops, ops::Copy{a.h.view(), x});
        ops::run(ops, ops::Saxpy{a.h.view(), 1.0f, a.proj.cview()});
        // MLP branch: x' = h + fc2(gelu(fc1(ln2(h)))).
        mlp_branch(ops, params, s, a.h.cview(), a.ln2.view(), a.ln2_stats.view(), a.fc1_z.view(), a.fc1_a.view(),
                   a.fc2.view(), R);
        const auto next = ws.x[static_cast<std::size_t>(l) + 1].view();
        ops::run(ops, ops::Copy{next, a.h.cview()});
        ops::run(ops, ops::Saxpy{next, 1.0f, a.fc2.cview()});
    }
    ops::run(ops, ops::DtLayerNorm{ws.lnf.view(), ws.lnf_stats.view(), ws.x.back().cview(), slice(params, lnf_gain_),
                                   slice(params, lnf_bias_), D});
    ops.linear_forward(ws.logits.view(), ws.lnf.cview(), slice(params, head_w_), slice(params, head_b_), R, D, A,
                       Activation::none);
    return ws.logits.cview();
}

void DtNetwork::backward(ops::Device& ops, ops::View<const float> params, ops::View<float> grads,
                         ops::View<float> d_logits, const DtBatch& in, Workspace& ws) const {
    const int B = ws.batch, D = shape_.dim, F = shape_.hidden(), A = shape_.num_actions;
    const int R = B * shape_.tokens(), steps = B * shape_.context;
    // d_res: the gradient of the residual stream, from the top down.
    ops.linear_backward(ws.d_tmp.view(), slice(grads, head_w_), slice(grads, head_b_), d_logits, ws.logits.cview(),
                        ws.lnf.cview(), slice(params, head_w_), R, D, A, Activation::none, false);
    ops::run(ops, ops::DtLayerNormBackward{ws.d_res.view(), slice(grads, lnf_gain_), slice(grads, lnf_bias_),
                                           ws.d_tmp.cview(), ws.x.back().cview(), ws.lnf_stats.cview(),
                                           slice(params, lnf_gain_), D, false});
    for (int l = shape_.layers - 1; l >= 0; --l) {
        const LayerSlices& s = layers_[static_cast<std::size_t>(l)];
        auto& a = ws.layers[static_cast<std::size_t>(l)];
        // MLP branch (d_res = dL/dx'; a linear layer without activation leaves its dY as is).
        ops.linear_backward(ws.d_fc1_a.view(), slice(grads, s.fc2_w), slice(grads, s.fc2_b), ws.d_res.view(),
                            a.fc2.cview(), a.fc1_a.cview(), slice(params, s.fc2_w), R, F, D, Activation::none, false);
        ops::run(ops, ops::DtGeluBackward{ws.d_fc1_z.view(), ws.d_fc1_a.cview(), a.fc1_z.cview()});
        ops.linear_backward(ws.d_tmp.view(), slice(grads, s.fc1_w), slice(grads, s.fc1_b), ws.d_fc1_z.view(),
                            a.fc1_z.cview(), a.ln2.cview(), slice(params, s.fc1_w), R, D, F, Activation::none, false);
        ops::run(ops, ops::DtLayerNormBackward{ws.d_res.view(), slice(grads, s.ln2_gain), slice(grads, s.ln2_bias),
                                               ws.d_tmp.cview(), a.h.cview(), a.ln2_stats.cview(),
                                               slice(params, s.ln2_gain), D, true});
        // Attention branch (d_res = dL/dh).
        ops.linear_backward(ws.d_tmp.view(), slice(grads, s.proj_w), slice(grads, s.proj_b), ws.d_res.view(),
                            a.proj.cview(), a.attn.cview(), slice(params, s.proj_w), R, D, D, Activation::none, false);
        ops::run(ops, ops::DtAttentionBackward{ws.d_qkv.view(), ws.d_scores.view(), ws.d_tmp.cview(), a.qkv.cview(),
                                               a.P.cview(), attention_shape(B)});
        ops.linear_backward(ws.d_tmp.view(), slice(grads, s.qkv_w), slice(grads, s.qkv_b), ws.d_qkv.view(),
                            a.qkv.cview(), a.ln1.cview(), slice(params, s.qkv_w), R, D, 3 * D, Activation::none, false);
        ops::run(ops, ops::DtLayerNormBackward{ws.d_res.view(), slice(grads, s.ln1_gain), slice(grads, s.ln1_bias),
                                               ws.d_tmp.cview(), ws.x[static_cast<std::size_t>(l)].cview(),
                                               a.ln1_stats.cview(), slice(params, s.ln1_gain), D, true});
    }
    ops::run(ops, ops::DtEmbedBackward{slice(grads, return_w_), slice(grads, return_b_), slice(grads, action_table_),
                                       ws.d_s_proj.view(), ws.d_res.cview(), in.rtg, in.actions, D, A});
    ops.linear_backward({}, slice(grads, state_w_), slice(grads, state_b_), ws.d_s_proj.view(), ws.s_proj.cview(),
                        ws.states.cview(), slice(params, state_w_), steps, shape_.state_dim, D, Activation::none,
                        false);
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
    const std::size_t rows = sz(n) * dt::kTokensPerStep, D = sz(shape_.dim), F = sz(shape_.hidden());
    ActWorkspace ws;
    ws.n = n;
    ws.history = ops.from_host<dt::History>(std::vector<dt::History>(sz(n), dt::History{0, 0}));
    for (int l = 0; l < shape_.layers; ++l) {
        ws.cache.push_back(ops.alloc<float>(sz(n) * sz(dt::cache_slots(shape_.context)) * 2 * D));
        ops::run(ops, ops::Fill{ws.cache.back().view(), 0.0f});
    }
    ws.states = ops.alloc<float>(sz(n) * sz(shape_.state_dim));
    ws.s_proj = ops.alloc<float>(sz(n) * D);
    ws.x = ops.alloc<float>(rows * D);
    ws.ln = ops.alloc<float>(rows * D);
    ws.stats = ops.alloc<float>(2 * rows);
    ws.qkv = ops.alloc<float>(3 * rows * D);
    ws.attn = ops.alloc<float>(rows * D);
    ws.proj = ops.alloc<float>(rows * D);
    ws.fc1_z = ops.alloc<float>(rows * F);
    ws.fc1_a = ops.alloc<float>(rows * F);
    ws.fc2 = ops.alloc<float>(rows * D);
    ws.logits = ops.alloc<float>(rows * sz(shape_.num_actions));
    return ws;
}

void DtNetwork::act(ops::Device& ops, ops::View<const float> params, ops::View<const float> target_token,
                    ops::View<int> actions, ops::View<const float> states, ActWorkspace& ws) const {
    const int n = ws.n, rows = n * dt::kTokensPerStep, D = shape_.dim;
    if (target_token.size() != 1) throw std::invalid_argument("DtNetwork::act: one target token");
    const auto ap = act_params(target_token);
    ops::run(ops, ops::DtStateInput{ws.states.view(), states, shape_.state_dim, market_dim()});
    ops.linear_forward(ws.s_proj.view(), ws.states.cview(), slice(params, state_w_), slice(params, state_b_), n,
                       shape_.state_dim, D, Activation::none);
    ops::run(ops, ops::DtActTokens{ws.x.view(), ws.history.view(), states, ws.s_proj.cview(), embed_views(params), ap});
    for (int l = 0; l < shape_.layers; ++l) {
        const LayerSlices& s = layers_[static_cast<std::size_t>(l)];
        ops::run(ops, ops::DtLayerNorm{ws.ln.view(), ws.stats.view(), ws.x.cview(), slice(params, s.ln1_gain),
                                       slice(params, s.ln1_bias), D});
        ops.linear_forward(ws.qkv.view(), ws.ln.cview(), slice(params, s.qkv_w), slice(params, s.qkv_b), rows, D, 3 * D,
                           Activation::none);
        ops::run(ops, ops::DtCacheAttention{ws.attn.view(), ws.cache[static_cast<std::size_t>(l)].view(),
                                            ws.qkv.cview(), ws.history.cview(), ap});
        ops.linear_forward(ws.proj.view(), ws.attn.cview(), slice(params, s.proj_w), slice(params, s.proj_b), rows, D,
                           D, Activation::none);
        ops::run(ops, ops::Saxpy{ws.x.view(), 1.0f, ws.proj.cview()});
        mlp_branch(ops, params, s, ws.x.cview(), ws.ln.view(), ws.stats.view(), ws.fc1_z.view(), ws.fc1_a.view(),
                   ws.fc2.view(), rows);
        ops::run(ops, ops::Saxpy{ws.x.view(), 1.0f, ws.fc2.cview()});
    }
    ops::run(ops, ops::DtLayerNorm{ws.ln.view(), ws.stats.view(), ws.x.cview(), slice(params, lnf_gain_),
                                   slice(params, lnf_bias_), D});
    ops.linear_forward(ws.logits.view(), ws.ln.cview(), slice(params, head_w_), slice(params, head_b_), rows, D,
                       shape_.num_actions, Activation::none);
    ops::run(ops, ops::DtActSelect{actions, ws.history.view(), ws.logits.cview(), shape_.num_actions});
}

}  // namespace fh::trainers
