/// @file dqn/network.hpp
/// @brief The DQN network: an MLP trunk (ReLU) and the dueling C51 head as ONE linear layer whose
///        outputs are, per sample, [value (Z) | advantages (A, Z)] (the advantages alone without
///        dueling): dqn::head_width floats; an ensemble's K heads are K such rows side by side in
///        the same layer (dqn::output_width). The head's softmax, Q and loss run in the fused
///        kernels of the DQN ops (cuda/abi/dqn_step.h) straight from these outputs. All
///        weights live in one flat buffer (nn::ParamLayout), so the target network, Adam, the
///        gradient norm and checkpoints each see one buffer.
#pragma once

#include <optional>
#include <vector>

#include "data/features.hpp"
#include "math/attention.h"
#include "math/dqn.h"
#include "math/iqn.h"
#include "nn/mlp.hpp"
#include "nn/param_layout.hpp"
#include "device/device.hpp"

namespace fh::trainers {

struct QNetworkConfig {
    int state_dim = 0;
    std::vector<int> hidden;  ///< trunk widths
    dqn::HeadParams head{};   ///< actions, atoms, dueling, support
    /// dqn.attention: the groups of the state's columns feature attention weighs (contiguous,
    /// covering [0, state_dim)); empty: no attention.
    std::vector<data::FeatureGroup> attention;
    /// dqn.head = "iqn" (quantiles > 0): the trunk's last hidden layer phi(s) times the fraction
    /// embedding psi(tau) = ReLU(W_e cos(pi i tau) + b_e) feeds the head layer, one row per
    /// (sample, fraction); `head` is then the scalar head's (scalar = 1) of those rows.
    iqn::Params iqn{};
};

/// The layout of the DQN parameters this version writes: the trunk layers, then one head layer
/// of dqn::output_width outputs. (Layout 1, before, had separate value and advantage layers.)
inline constexpr const char* kQNetworkLayout = "dqn/2";
/// The IQN head's layout (dqn.head = "iqn"): the trunk's layers, the fraction embedding's layer
/// ("iqn_embed"), the head layer ("iqn_head", the scalar head's width), then attention's.
inline constexpr const char* kIqnNetworkLayout = "dqn-iqn/1";

class QNetwork {
public:
    /// Activations and gradients for up to max_batch rows.
    struct Workspace {
        nn::Mlp::Workspace mlp;
        int max_batch = 0;
        // With attention: the scores' layer, the attended states and weights (max_batch rows,
        // every network of a batched forward), the gradient reaching the attended states and
        // the scores' (network 0), and the forward's input.
        nn::Mlp::Workspace attention;
        ops::Buffer<float> attended, alpha, d_attended, d_scores;
        ops::View<const float> input;
        int rows = 0;  ///< rows of the last forward (all networks)
        /// dqn.head = "iqn": the embedding's and the head layer's activations, the Hadamard
        /// product x and its gradient, the gradients of psi and phi, acting's mean embedding (H)
        /// and its fixed fractions' features (computed once); phi, psi and the fractions per
        /// sample of the last forward.
        struct Iqn {
            nn::Mlp::Workspace embed, head;
            ops::Buffer<float> x, dx, d_psi, d_phi, mean, act_features, act_taus;
            ops::View<const float> phi, psi;
            int quantiles = 0, max_quantiles = 0;
        } iqn;
    };

    explicit QNetwork(const QNetworkConfig& config);

    const nn::ParamLayout& layout() const noexcept { return layout_; }
    const dqn::HeadParams& head() const noexcept { return config_.head; }
    int state_dim() const noexcept { return config_.state_dim; }
    /// Floats of one sample's outputs (every head's row; the IQN head: one fraction's row).
    int output_width() const noexcept { return dqn::output_width(config_.head); }
    /// With the IQN head, `quantiles` (> 0) sizes the workspace for forward_quantiles with that
    /// many fractions per sample; 0: for forward (acting's K fractions).
    Workspace make_workspace(ops::Device& ops, int max_batch, int quantiles = 0) const;
    /// What make_workspace(ops, max_batch, quantiles) allocates.
    nn::WorkspaceSize workspace_size(int max_batch, int quantiles = 0) const;
    /// The IQN head's sizes (quantiles 0: another head).
    const iqn::Params& iqn_params() const noexcept { return config_.iqn; }

    /// Outputs (batch, output_width) of states X (batch, state_dim) under `params`. With the
    /// IQN head: the head layer on phi(s) * the mean embedding of acting's K midpoint fractions,
    /// the scalar head's row whose Q is the mean over those fractions of Z_tau(a) (the head layer
    /// and the dueling combination are linear in the embedding).
    ops::View<const float> forward(ops::Device& ops, ops::View<const float> params, ops::View<const float> X, int batch,
                                   Workspace& ws) const;
    /// Head outputs of `count` networks of this layout at once (online and target): params holds
    /// their parameters one after the other (count * layout().total()); all run on the same X
    /// (batch, state_dim). Returns (count, batch, output_width); ws needs count * batch rows.
    /// backward() then differentiates the first network.
    ops::View<const float> forward_batched(ops::Device& ops, ops::View<const float> params, int count,
                                           ops::View<const float> X, int batch, Workspace& ws) const;
    /// A population's networks (DqnEngine of several agents; the trunk and head without attention or the IQN
    /// head): network k's parameters at k * param_stride in `params`, its states X[k * x_stride ...]
    /// (batch, state_dim). Returns (count, batch, output_width); ws needs count * batch rows.
    /// Network k's rows are forward's with its parameters: bit for bit on the CPU.
    ops::View<const float> forward_agents(ops::Device& ops, ops::View<const float> params, std::size_t param_stride,
                                          ops::View<const float> X, std::size_t x_stride, int batch, int count,
                                          Workspace& ws) const;
    /// Gradients of every network of the last forward_agents on ws, each on all its rows: d_head
    /// (count, batch, output_width), network k's block k, overwritten; network k's gradients at
    /// k * param_stride in `grads` (set; padding untouched). Network k's are backward's.
    void backward_agents(ops::Device& ops, ops::View<const float> params, ops::View<float> grads,
                         ops::View<float> d_head, Workspace& ws) const;
    /// The IQN head (dqn.head = "iqn"): the head rows of `count` networks on X (batch,
    /// state_dim) under the fractions whose features are `features` (batch * quantiles, n_cos; the
    /// same for every network): (count, batch * quantiles, output_width), sample b's rows b *
    /// quantiles ... backward() then takes d_head (batch' * quantiles, output_width) for the first
    /// network's first batch' samples.
    ops::View<const float> forward_quantiles(ops::Device& ops, ops::View<const float> params, int count,
                                             ops::View<const float> X, int batch, ops::View<const float> features,
                                             int quantiles, Workspace& ws) const;
    /// Gradients for the first `batch` rows of the last forward on ws (batch <= its rows), from
    /// d_head (batch, output_width) = dL/d(head outputs), overwritten; `grads` is set (padding
    /// untouched).
    void backward(ops::Device& ops, ops::View<const float> params, ops::View<float> grads, ops::View<float> d_head,
                  int batch, Workspace& ws) const;

    /// The attention weights (rows, G) of the last forward on ws (every network's rows, in
    /// order); empty without attention.
    ops::View<const float> attention_weights(const Workspace& ws) const;
    /// The feature groups attention weighs (empty without attention).
    const std::vector<data::FeatureGroup>& attention_groups() const noexcept { return config_.attention; }

    /// Q (batch, A) and the greedy actions (batch) of states X: forward, then ops::dqn_act.
    void q_values(ops::Device& ops, ops::View<const float> params, ops::View<const float> X, int batch, Workspace& ws,
                  ops::View<float> q, ops::View<int> actions) const;

private:
    QNetworkConfig config_;
    nn::ParamLayout layout_;
    nn::Mlp net_;
    std::optional<nn::Mlp> attention_;  ///< the scores: state_dim -> G, linear (dqn.attention)
    std::optional<nn::Mlp> iqn_embed_;  ///< dqn.head = "iqn": n_cos -> H, ReLU
    std::optional<nn::Mlp> iqn_head_;   ///< dqn.head = "iqn": H -> output_width, linear
    /// The trunk's output rows (count * batch) of states X: attention (when on), then the trunk.
    ops::View<const float> trunk_forward(ops::Device& ops, ops::View<const float> params, int count,
                                         ops::View<const float> X, int batch, Workspace& ws) const;
    attention::Groups groups_{};
    /// The attended states (rows of the trunk's input) under the scores of the last attention forward.
    ops::View<const float> attend(ops::Device& ops, ops::View<const float> scores, ops::View<const float> X, int rows,
                                  int x_rows, Workspace& ws) const;
};

/// The ensemble's disagreement over network outputs (rows, output_width) of a K > 1 head: the
/// mean over rows of the heads' spread (dqn::ensemble_q) of Q at the action their mean prefers.
/// Host math (the metric q/ensemble_spread reads a few hundred rows per log line).
double ensemble_spread(const std::vector<float>& outputs, const dqn::HeadParams& h);

}  // namespace fh::trainers
