/// @file mlp.hpp
/// @brief A multi-layer perceptron of linear layers over a flat parameter buffer (ParamLayout),
///        run through ops::Device on either backend. Weights live in the caller's buffer; the
///        activations backward needs live in a Workspace (one per network and batch shape, so
///        the same weights can run on several batches, e.g. the online net on s and on s').
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nn/param_layout.hpp"
#include "device/device.hpp"

namespace fh::nn {

struct MlpConfig {
    std::vector<int> sizes;                          ///< {in, h1, ..., out}: >= 2 entries, each >= 1
    ops::Activation hidden = ops::Activation::relu;  ///< after every layer but the last
    ops::Activation output = ops::Activation::none;  ///< after the last layer
    float output_init_scale = 1.f;                   ///< multiplies the last layer's init bound

    /// in -> hidden... -> out, `act` after every hidden layer, no activation on the output.
    static MlpConfig stack(int in, const std::vector<std::int64_t>& hidden, int out, ops::Activation act,
                           float output_init_scale = 1.f) {
        MlpConfig c;
        c.sizes.push_back(in);
        for (auto h : hidden) c.sizes.push_back(static_cast<int>(h));
        c.sizes.push_back(out);
        c.hidden = act;
        c.output_init_scale = output_init_scale;
        return c;
    }
};

/// The floats a workspace holds in all and in its largest array (a memory plan's count, and the
/// bound of its arrays against the kernels' int index range).
struct WorkspaceSize {
    std::size_t floats = 0, largest = 0;
    /// `count` arrays of `array` floats more.
    WorkspaceSize& add(std::size_t array, std::size_t count = 1) {
        floats += array * count;
        largest = array > largest ? array : largest;
        return *this;
    }
    WorkspaceSize& operator+=(const WorkspaceSize& o) {
        floats += o.floats;
        largest = o.largest > largest ? o.largest : largest;
        return *this;
    }
    friend WorkspaceSize operator+(WorkspaceSize a, const WorkspaceSize& b) { return a += b; }
};

class Mlp {
public:
    /// One linear layer: Y (batch, out) = act(X (batch, in) W^T + b); W (out, in) and b (out)
    /// are the slices `weight` and `bias` of the layout ("<name>.l<i>.w" / "<name>.l<i>.b").
    struct Layer {
        int in = 0, out = 0;
        ops::Activation act = ops::Activation::none;
        ParamSlice weight, bias;
    };

    /// Activations of one forward pass (kept for backward) and the hidden gradients, sized for
    /// up to max_batch rows. Remembers the input view of the last forward: keep X alive and
    /// unchanged until backward.
    class Workspace {
    public:
        int max_batch() const noexcept { return max_batch_; }
        int batch() const noexcept { return batch_; }

    private:
        friend class Mlp;
        int max_batch_ = 0;
        int batch_ = 0;  ///< rows per network of the last forward (0: none yet)
        int count_ = 1;  ///< networks of the last forward (forward_batched), and its strides
        std::size_t param_stride_ = 0, x_stride_ = 0;
        std::vector<ops::Buffer<float>> act_;   ///< per layer (max_batch, out_l)
        std::vector<ops::Buffer<float>> grad_;  ///< per hidden layer (max_batch, out_l)
        ops::View<const float> input_;
        std::vector<int> widths_;
    };

    /// Registers the weights of every layer in `layout` (weights uniform_fan_in with the gain of
    /// the layer's activation, biases zero).
    Mlp(ParamLayout& layout, std::string name, MlpConfig config);

    const std::string& name() const noexcept { return name_; }
    const std::vector<Layer>& layers() const noexcept { return layers_; }
    int in_dim() const noexcept { return layers_.front().in; }
    int out_dim() const noexcept { return layers_.back().out; }

    Workspace make_workspace(ops::Device& ops, int max_batch) const;
    /// What make_workspace(ops, max_batch) allocates.
    WorkspaceSize workspace_size(int max_batch) const;

    /// Runs the network on X (batch, in_dim) with the weights in `params` (the layout's buffer);
    /// returns the output (batch, out_dim), a view into `ws`.
    ops::View<const float> forward(ops::Device& ops, ops::View<const float> params, ops::View<const float> X, int batch,
                                   Workspace& ws) const;

    /// The same output as forward for inference only (collection, acting): one launch for the
    /// whole network where the device has a fused path (Device::mlp_infer), else forward. The
    /// output is a view into `ws`; nothing is kept for backward (after a fused pass, backward on
    /// `ws` is refused until the next forward).
    ops::View<const float> infer(ops::Device& ops, ops::View<const float> params, ops::View<const float> X, int batch,
                                 Workspace& ws) const;

    /// `count` networks of this shape at once (an online and a target network, or a population):
    /// network k's parameters are this network's layout slices shifted by k * param_stride in
    /// `params` (consecutive copies of a layout, or twins registered one after the other); network
    /// k runs on X[k * x_stride ...] (batch, in_dim) (x_stride 0: all on the same X). Returns the
    /// outputs (count, batch, out_dim), a view into `ws`, which needs count * batch rows. Backward
    /// then differentiates one of the networks (`network`, default 0).
    ops::View<const float> forward_batched(ops::Device& ops, ops::View<const float> params, std::size_t param_stride,
                                           ops::View<const float> X, std::size_t x_stride, int batch, int count,
                                           Workspace& ws) const;

    /// Backward of the first `batch` rows of the last forward on `ws` (batch <= its rows: a pass
    /// over [s; s'] can be differentiated on s alone). dOut (batch, out_dim) = dL/dOutput,
    /// overwritten (scratch). grads (the layout's buffer): every layer's dW, db are set, or added
    /// to when `accumulate`; padding is untouched. dX (batch, in_dim) = dL/dX, or empty to skip.
    /// After forward_batched, `network` k < count picks the network: its rows of the workspace,
    /// its parameters and gradients at k * param_stride (the same layout slices shifted: e.g.
    /// twin networks registered one after the other). The backwards of different networks of one
    /// workspace touch disjoint memory, so they may run concurrently.
    void backward(ops::Device& ops, ops::View<const float> params, ops::View<float> grads, ops::View<float> dOut,
                  ops::View<float> dX, int batch, Workspace& ws, bool accumulate, int network = 0) const;
    /// Backward of every network of the last forward_batched on `ws`, each on all its rows: one
    /// launch per layer part for all of them (Device::linear_backward_batched) instead of `count`
    /// backwards. dOut (count, batch, out_dim): network k's dL/dOutput in block k, overwritten
    /// (scratch). Network k's gradients go to its parameters' slices in `grads` (shifted by
    /// k * param_stride), set or added to when `accumulate`. dX (count, batch, in_dim), or empty
    /// to skip. Each network's results are those of backward(..., network = k): bit for bit on the
    /// CPU; on CUDA its products are one strided batch, which may round differently
    /// (Device::linear_backward_batched).
    void backward_batched(ops::Device& ops, ops::View<const float> params, ops::View<float> grads,
                          ops::View<float> dOut, ops::View<float> dX, Workspace& ws, bool accumulate) const;
    /// Whether backward overlaps its products (the same results, bit for bit): up to
    /// kChainedBackwardMaxRows rows each layer's dW and db run beside the chain of activation and
    /// dX products below it, joined at the end; beyond, each layer's dW beside its dX (larger
    /// products leave less of the GPU idle, and running every dW beside the chain slows the
    /// chain: the H200, docs/performance.md). For a network whose backward is the only chain of
    /// work at that point (DQN's update); where other networks' backwards already run beside it
    /// (IQL, PPO), the extra joins cost more than they save.
    void set_overlap_backward(bool on) noexcept { overlap_backward_ = on; }
    static constexpr int kChainedBackwardMaxRows = 512;

private:
    /// backward (networks 1: network `first`) and backward_batched (every network from 0).
    void backward_networks(ops::Device& ops, ops::View<const float> params, ops::View<float> grads,
                           ops::View<float> dOut, ops::View<float> dX, int batch, Workspace& ws, bool accumulate,
                           int first, int networks) const;

    std::string name_;
    std::vector<Layer> layers_;
    bool overlap_backward_ = false;
};

}  // namespace fh::nn
