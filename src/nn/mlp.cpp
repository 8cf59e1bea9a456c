/// @file mlp.cpp
/// @brief Mlp: forward and backward as chains of Device::linear_forward / linear_backward.
#include "nn/mlp.hpp"

#include <fmt/format.h>

#include <functional>
#include <stdexcept>

#include "nn/init.hpp"

namespace fh::nn {

using ops::View;

Mlp::Mlp(ParamLayout& layout, std::string name, MlpConfig config) : name_(std::move(name)) {
    if (config.sizes.size() < 2)
        throw std::invalid_argument(fmt::format("nn::Mlp '{}': sizes needs {{in, ..., out}}", name_));
    for (int s : config.sizes)
        if (s < 1) throw std::invalid_argument(fmt::format("nn::Mlp '{}': layer sizes must be >= 1", name_));
    const std::size_t n_layers = config.sizes.size() - 1;
    for (std::size_t l = 0; l < n_layers; ++l) {
        Layer layer;
        layer.in = config.sizes[l];
        layer.out = config.sizes[l + 1];
        const bool last = l + 1 == n_layers;
        layer.act = last ? config.output : config.hidden;
        InitSpec w_init{InitSpec::Kind::uniform_fan_in, layer.in,
                        init_gain(layer.act) * (last ? config.output_init_scale : 1.f)};
        layer.weight = layout.slice(
            layout.add(fmt::format("{}.l{}.w", name_, l), static_cast<std::size_t>(layer.out) * layer.in, w_init));
        layer.bias = layout.slice(
            layout.add(fmt::format("{}.l{}.b", name_, l), static_cast<std::size_t>(layer.out), InitSpec{}));
        layers_.push_back(std::move(layer));
    }
}

Mlp::Workspace Mlp::make_workspace(ops::Device& ops, int max_batch) const {
    if (max_batch < 1) throw std::invalid_argument("nn::Mlp::make_workspace: max_batch must be >= 1");
    Workspace ws;
    ws.max_batch_ = max_batch;
    for (std::size_t l = 0; l < layers_.size(); ++l) {
        const std::size_t n = static_cast<std::size_t>(max_batch) * layers_[l].out;
        ws.widths_.push_back(layers_[l].out);
        ws.act_.push_back(ops.alloc<float>(n));
        if (l + 1 < layers_.size()) ws.grad_.push_back(ops.alloc<float>(n));
    }
    return ws;
}

WorkspaceSize Mlp::workspace_size(int max_batch) const {
    WorkspaceSize size;
    for (std::size_t l = 0; l < layers_.size(); ++l)
        size.add(static_cast<std::size_t>(max_batch) * layers_[l].out, l + 1 < layers_.size() ? 2 : 1);
    return size;
}

View<const float> Mlp::forward(ops::Device& ops, View<const float> params, View<const float> X, int batch,
                               Workspace& ws) const {
    if (batch < 1 || batch > ws.max_batch_)
        throw std::invalid_argument(
            fmt::format("nn::Mlp '{}'::forward: batch {} outside [1, {}] "
                        "(the workspace's max_batch)",
                        name_, batch, ws.max_batch_));
    if (ws.widths_.size() != layers_.size())
        throw std::invalid_argument(
            fmt::format("nn::Mlp '{}'::forward: the workspace belongs to another network", name_));
    const std::size_t rows = static_cast<std::size_t>(batch);
    View<const float> x = X;
    for (std::size_t l = 0; l < layers_.size(); ++l) {
        const Layer& L = layers_[l];
        View<float> y = ws.act_[l].view().subview(0, rows * L.out);
        ops.linear_forward(y, x, params.subview(L.weight.offset, L.weight.size),
                           params.subview(L.bias.offset, L.bias.size), batch, L.in, L.out, L.act);
        x = y;
    }
    ws.input_ = X;
    ws.batch_ = batch;
    ws.count_ = 1;
    ws.param_stride_ = ws.x_stride_ = 0;
    return x;
}

View<const float> Mlp::infer(ops::Device& ops, View<const float> params, View<const float> X, int batch,
                             Workspace& ws) const {
    if (batch < 1 || batch > ws.max_batch_ || ws.widths_.size() != layers_.size() ||
        layers_.size() > static_cast<std::size_t>(abi::kMlpInferMaxLayers))
        return forward(ops, params, X, batch, ws);  // forward checks and explains
    abi::MlpInferLayers spec{};
    spec.count = static_cast<int>(layers_.size());
    for (std::size_t l = 0; l < layers_.size(); ++l) {
        const Layer& L = layers_[l];
        spec.in[l] = L.in;
        spec.out[l] = L.out;
        spec.act[l] = L.act;
        spec.weight[l] = static_cast<long long>(L.weight.offset);
        spec.bias[l] = static_cast<long long>(L.bias.offset);
    }
    const View<float> y = ws.act_.back().view().subview(0, static_cast<std::size_t>(batch) * out_dim());
    if (!ops.mlp_infer(y, X, params, spec, batch)) return forward(ops, params, X, batch, ws);
    ws.batch_ = 0;  // the hidden activations were not kept: no backward of this pass
    ws.count_ = 1;
    return y;
}

View<const float> Mlp::forward_batched(ops::Device& ops, View<const float> params, std::size_t param_stride,
                                       View<const float> X, std::size_t x_stride, int batch, int count,
                                       Workspace& ws) const {
    if (batch < 1 || count < 1 || static_cast<long long>(batch) * count > ws.max_batch_)
        throw std::invalid_argument(
            fmt::format("nn::Mlp '{}'::forward_batched: {} x {} rows exceed the workspace's "
                        "max_batch {}",
                        name_, count, batch, ws.max_batch_));
    if (ws.widths_.size() != layers_.size())
        throw std::invalid_argument(
            fmt::format("nn::Mlp '{}'::forward_batched: the workspace belongs to another network", name_));
    const std::size_t rows = static_cast<std::size_t>(batch) * static_cast<std::size_t>(count);
    View<const float> x = X;
    std::size_t stride = x_stride;
    for (std::size_t l = 0; l < layers_.size(); ++l) {
        const Layer& L = layers_[l];
        View<float> y = ws.act_[l].view().subview(0, rows * L.out);
        ops.linear_forward_batched(y, x, stride, params, param_stride, L.weight.offset,
                                   static_cast<std::ptrdiff_t>(L.bias.offset), count, batch, L.in, L.out, L.act);
        x = y;
        stride = static_cast<std::size_t>(batch) * L.out;
    }
    ws.input_ = X;
    ws.batch_ = batch;
    ws.count_ = count;
    ws.param_stride_ = param_stride;
    ws.x_stride_ = x_stride;
    return x;
}

void Mlp::backward(ops::Device& ops, View<const float> params, View<float> grads, View<float> dOut, View<float> dX,
                   int batch, Workspace& ws, bool accumulate, int network) const {
    if (ws.batch_ == 0 || batch < 1 || batch > ws.batch_)
        throw std::invalid_argument(
            fmt::format("nn::Mlp '{}'::backward: batch {} is not within the workspace's last forward ({} rows)", name_,
                        batch, ws.batch_));
    if (network < 0 || network >= ws.count_)
        throw std::invalid_argument(
            fmt::format("nn::Mlp '{}'::backward: network {} of a forward over {}", name_, network, ws.count_));
    backward_networks(ops, params, grads, dOut, dX, batch, ws, accumulate, network, 1);
}

void Mlp::backward_batched(ops::Device& ops, View<const float> params, View<float> grads, View<float> dOut,
                           View<float> dX, Workspace& ws, bool accumulate) const {
    if (ws.batch_ == 0)
        throw std::invalid_argument(fmt::format("nn::Mlp '{}'::backward_batched: no forward on the workspace", name_));
    backward_networks(ops, params, grads, dOut, dX, ws.batch_, ws, accumulate, 0, ws.count_);
}

void Mlp::backward_networks(ops::Device& ops, View<const float> params, View<float> grads, View<float> dOut,
                            View<float> dX, int batch, Workspace& ws, bool accumulate, int first, int networks) const {
    const std::size_t rows = static_cast<std::size_t>(batch);
    const std::size_t k = static_cast<std::size_t>(first);
    const std::size_t row0 = k * static_cast<std::size_t>(ws.batch_);  // the first network's first row
    const std::size_t p0 = k * ws.param_stride_;                       // its parameters' shift
    const std::size_t n = static_cast<std::size_t>(networks);  // networks together: all rows (batch = ws.batch_)
    // Layer l's backward, or the given parts of it.
    const auto layer = [&](std::size_t l, ops::BackwardPart parts) {
        const Layer& L = layers_[l];
        const bool last = l + 1 == layers_.size();
        const std::size_t out = static_cast<std::size_t>(L.out), in = static_cast<std::size_t>(L.in);
        View<float> dy = last ? dOut : ws.grad_[l].view().subview(row0 * out, n * rows * out);
        View<const float> y = ws.act_[l].cview().subview(row0 * out, n * rows * out);
        View<float> dx = l == 0 ? dX : ws.grad_[l - 1].view().subview(row0 * in, n * rows * in);
        // Layer 0 reads the forward's input at its stride, the others their blocks of the
        // activations below (one network: linear_backward itself).
        const std::size_t x_stride = l == 0 ? ws.x_stride_ : rows * in;
        View<const float> x = l == 0 ? ws.input_.subview(k * ws.x_stride_, (n - 1) * x_stride + rows * in)
                                     : ws.act_[l - 1].cview().subview(row0 * in, n * rows * in);
        ops.linear_backward_batched(dx, grads, dy, y, x, x_stride, params, ws.param_stride_, p0 + L.weight.offset,
                                    static_cast<std::ptrdiff_t>(p0 + L.bias.offset), networks, batch, L.in, L.out,
                                    L.act, accumulate, parts);
    };
    using Part = ops::BackwardPart;
    // A narrow output layer without activation (a value head, IQL's Q and policy heads): its
    // whole backward and the activation and bias parts of the hidden layer below in one op (one
    // pass over the hidden output on CUDA); that layer's weights and input parts follow.
    const std::size_t top = layers_.size() - 1;
    const bool narrow_head =
        top >= 1 && layers_[top].out <= abi::kHeadBackwardMaxOut && layers_[top].act == ops::Activation::none;
    const auto head = [&] {
        const Layer& H = layers_[top];
        const Layer& L = layers_[top - 1];
        const std::size_t in = static_cast<std::size_t>(H.in);
        ops.head_backward(ws.grad_[top - 1].view().subview(row0 * in, n * rows * in), grads, dOut,
                          ws.act_[top - 1].cview().subview(row0 * in, n * rows * in), params, ws.param_stride_,
                          p0 + H.weight.offset, static_cast<std::ptrdiff_t>(p0 + H.bias.offset),
                          static_cast<std::ptrdiff_t>(p0 + L.bias.offset), networks, batch, H.in, H.out, L.act,
                          accumulate);
    };
    if (!overlap_backward_) {
        std::size_t l = layers_.size();  // the layers below l are left
        if (narrow_head) {
            head();
            layer(top - 1, Part::weights | Part::input);
            l = top - 1;
        }
        for (; l-- > 0;) layer(l, Part::all);
        return;
    }
    if (batch > kChainedBackwardMaxRows) {
        // Per layer: the activation's backward and db in one pass, then dW beside dX, joined.
        const auto weights_beside_input = [&](std::size_t l) {
            ops.run_concurrently([&] { layer(l, Part::weights); }, [&] { layer(l, Part::input); });
        };
        std::size_t l = layers_.size();  // the layers below l are left
        if (narrow_head) {
            head();
            weights_beside_input(top - 1);
            l = top - 1;
        }
        for (; l-- > 0;) {
            layer(l, Part::activation | Part::bias);
            weights_beside_input(l);
        }
        return;
    }
    // The chain is activation, dX, activation, dX, ... from the top; each layer's weight and
    // bias gradients (nothing below reads them) fork beside the rest of the chain and join at its
    // end. Each part writes only its own buffers (dZ in place, its dW and db, the dX below).
    std::function<void(std::size_t)> from;
    const auto beside_chain = [&](std::size_t l, Part parts) {
        ops.run_concurrently([&] { layer(l, parts); },
                             [&] {
                                 layer(l, Part::input);
                                 if (l > 0) from(l - 1);
                             });
    };
    from = [&](std::size_t l) {
        layer(l, Part::activation);
        beside_chain(l, Part::bias | Part::weights);
    };
    if (narrow_head) {
        head();
        beside_chain(top - 1, Part::weights);
    } else {
        from(top);
    }
}

}  // namespace fh::nn
