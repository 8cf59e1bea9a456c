/// @file dt/network.hpp
/// @brief The Decision Transformer's network (docs/dt.md): token embeddings of (return-to-go,
///        state, action) per timestep, `layers` pre-norm blocks (causal attention with ALiBi
///        biases, a GELU MLP of 4 x embedding), a final layer norm and an action head read at the
///        state tokens. Training runs windows of K timesteps (forward, backward); acting appends
///        one timestep per call and attends over a KV cache of the last K timesteps. Every shape
///        comes from DtShape.
#pragma once

#include <vector>

#include "config/profile.hpp"
#include "math/dt.h"
#include "nn/mlp.hpp"
#include "nn/param_layout.hpp"
#include "device/device.hpp"
#include "abi/dt_act.h"

namespace fh::trainers {

/// The network's dimensions: from the [dt] keys and the environment.
struct DtShape {
    int state_dim = 0, num_actions = 0;
    int context = 0;  ///< K: timesteps per window and in the cache
    int layers = 0, heads = 0, dim = 0;
    int hidden() const noexcept { return 4 * dim; }  ///< the MLP's width
    int tokens() const noexcept { return dt::kTokensPerStep * context; }
};
DtShape dt_shape(const config::Profile& profile, int state_dim);

/// One training batch's inputs (dt::gather_window): states (B K, state_dim), rtg, actions (B K).
struct DtBatch {
    ops::View<const float> states, rtg;
    ops::View<const int> actions;
};

class DtNetwork {
public:
    explicit DtNetwork(const DtShape& shape);
    const DtShape& shape() const noexcept { return shape_; }
    const nn::ParamLayout& layout() const noexcept { return layout_; }

    /// Activations of `batch` windows (R = batch x 3 K token rows), kept for the backward.
    struct Workspace {
        int batch = 0;
        ops::Buffer<float> states, s_proj, logits, lnf, lnf_stats;  ///< states: the state token's input
        struct Layer {
            ops::Buffer<float> ln1, ln1_stats, qkv, P, attn, proj, h, ln2, ln2_stats, fc1_z, fc1_a, fc2;
        };
        std::vector<Layer> layers;
        std::vector<ops::Buffer<float>> x;  ///< the residual stream entering each layer, then the last's output
        // The backward's scratch.
        ops::Buffer<float> d_res, d_tmp, d_qkv, d_scores, d_fc1_a, d_fc1_z, d_s_proj;
    };
    Workspace make_workspace(ops::Device& ops, int batch) const;
    /// What make_workspace(ops, batch) allocates.
    nn::WorkspaceSize workspace_size(int batch) const;
    /// Logits (B 3 K, num_actions) of every token row (the loss reads the state tokens' rows).
    ops::View<const float> forward(ops::Device& ops, ops::View<const float> params, const DtBatch& in,
                                   Workspace& ws) const;
    /// Every parameter's gradient (set) from d_logits (overwritten), after forward on the same batch.
    void backward(ops::Device& ops, ops::View<const float> params, ops::View<float> grads, ops::View<float> d_logits,
                  const DtBatch& in, Workspace& ws) const;

    /// Acting state of n environments: their histories, each layer's KV cache, one step's rows.
    struct ActWorkspace {
        int n = 0;
        ops::Buffer<dt::History> history;
        std::vector<ops::Buffer<float>> cache;  ///< per layer (n, dt::cache_slots(K), 2 dim)
        ops::Buffer<float> states, s_proj, x, ln, stats, qkv, attn, proj, fc1_z, fc1_a, fc2, logits;
    };
    /// Histories start empty.
    ActWorkspace make_act_workspace(ops::Device& ops, int n) const;
    /// What make_act_workspace(ops, n) allocates (its histories count as two floats each).
    nn::WorkspaceSize act_workspace_size(int n) const;
    /// One timestep for n = ws.n environments: actions (n) from states (n, state_dim), conditioned
    /// on target_token (1, device memory).
    void act(ops::Device& ops, ops::View<const float> params, ops::View<const float> target_token,
             ops::View<int> actions, ops::View<const float> states, ActWorkspace& ws) const;

private:
    /// A linear layer's weight and bias slices, or a layer norm's gain and bias.
    struct Affine {
        std::size_t w, b;
    };
    struct LayerSlices {
        Affine ln1, qkv, proj, ln2, fc1, fc2;
    };
    template <class T>
    ops::View<T> slice(ops::View<T> buffer, std::size_t index) const {
        return layout_.view(buffer, index);
    }
    /// y (rows, out) = x (rows, in) W^T + b of the linear layer `l` (no activation).
    void linear(ops::Device& ops, ops::View<const float> params, Affine l, ops::View<float> y, ops::View<const float> x,
                int rows, int in, int out) const;
    /// Its backward from dy (overwritten): dW and db set, dx (or none) written.
    void linear_backward(ops::Device& ops, ops::View<const float> params, ops::View<float> grads, Affine l,
                         ops::View<float> dx, ops::View<float> dy, ops::View<const float> y, ops::View<const float> x,
                         int rows, int in, int out) const;
    /// f(buffer, floats) for every buffer of a workspace (its vectors sized first): what
    /// make_workspace allocates and workspace_size counts, written once (the same for acting).
    template <class F>
    void each_buffer(Workspace& ws, F&& f) const;
    template <class F>
    void each_buffer(ActWorkspace& ws, F&& f) const;
    ops::DtEmbedViews embed_views(ops::View<const float> params) const;
    /// Layer s's MLP branch over `rows` rows: ln = its second LayerNorm of h (statistics in
    /// stats), z = fc1(ln), act = GELU(z), out = fc2(act). forward keeps each for the backward.
    void mlp_branch(ops::Device& ops, ops::View<const float> params, const LayerSlices& s, ops::View<const float> h,
                    ops::View<float> ln, ops::View<float> stats, ops::View<float> z, ops::View<float> act,
                    ops::View<float> out, int rows) const;
    dt::AttentionShape attention_shape(int batch) const;
    dt::ActParams act_params(ops::View<const float> target_token) const;
    int market_dim() const noexcept;

    DtShape shape_;
    nn::ParamLayout layout_;
    Affine state_, return_, lnf_, head_;
    std::size_t action_table_;
    std::vector<LayerSlices> layers_;
};

}  // namespace fh::trainers
