/// @file ops.hpp
/// @brief The DQN op family: the dueling C51 head forward and backward, the C51 and MSE losses and the
///        training statistics (the math: cuda/math/dqn.h; docs/dqn.md).
///
/// Each op checks its arguments here, once, then runs its CPU twin (cpu_twin::, plain loops over
/// the shared math, src/ops/dqn/cpu.cpp) or its CUDA twin (cuda_twin::, the kernels of
/// cuda/kernels/dqn_c51.cu, dqn_mse.cu, dqn_monitor.cu, launched by src/ops/dqn/cuda.cpp).
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <stdexcept>

#include "math/dqn.h"
#include "ops/device.hpp"

namespace fh::ops {

namespace cpu_twin {
void c51_head_forward(View<float> logits, View<float> probs, View<float> q, View<const float> value,
                      View<const float> adv, const dqn::HeadParams& h, int batch);
void c51_head_backward(View<float> d_value, View<float> d_adv, View<const float> d_logits, const dqn::HeadParams& h,
                       int batch);
void c51_loss(View<float> loss, View<float> d_logits, View<const float> logits, View<const float> probs,
              View<const float> q_next_select, View<const float> probs_next_target, View<const int> actions,
              View<const float> returns, View<const float> discounts, const dqn::HeadParams& h, int batch);
void mse_loss(View<float> loss, View<float> d_logits, View<float> td, View<const float> probs, View<const float> q,
              View<const float> q_next_select, View<const float> q_next_target, View<const int> actions,
              View<const float> returns, View<const float> discounts, const dqn::HeadParams& h, int batch);
void dqn_monitor_update(View<dqn::MonitorStats> stats, View<const float> losses, View<const float> q,
                    View<const int> actions, View<const float> td, View<const float> grad_norm, int num_actions,
                    int batch);
}  // namespace cpu_twin

namespace cuda_twin {
void c51_head_forward(CudaDevice& device, View<float> logits, View<float> probs, View<float> q, View<const float> value,
                      View<const float> adv, const dqn::HeadParams& h, int batch);
void c51_head_backward(CudaDevice& device, View<float> d_value, View<float> d_adv, View<const float> d_logits,
                       const dqn::HeadParams& h, int batch);
void c51_loss(CudaDevice& device, View<float> loss, View<float> d_logits, View<const float> logits,
              View<const float> probs, View<const float> q_next_select, View<const float> probs_next_target,
              View<const int> actions, View<const float> returns, View<const float> discounts, const dqn::HeadParams& h,
              int batch);
void mse_loss(CudaDevice& device, View<float> loss, View<float> d_logits, View<float> td, View<const float> probs,
              View<const float> q, View<const float> q_next_select, View<const float> q_next_target,
              View<const int> actions, View<const float> returns, View<const float> discounts, const dqn::HeadParams& h,
              int batch);
void dqn_monitor_update(CudaDevice& device, View<dqn::MonitorStats> stats, View<const float> losses, View<const float> q,
                    View<const int> actions, View<const float> td, View<const float> grad_norm, int num_actions,
                    int batch);
}  // namespace cuda_twin

namespace detail {
inline void check_head(const dqn::HeadParams& h, int batch, const char* op) {
    if (h.num_actions < 1 || h.num_atoms < 2 || batch < 1 || !(h.v_min < h.v_max))
        throw std::invalid_argument(
            fmt::format("ops::{}: need num_actions >= 1, num_atoms >= 2, batch >= 1 and v_min < v_max (got {}, {}, {}, "
                        "[{}, {}])",
                        op, h.num_actions, h.num_atoms, batch, h.v_min, h.v_max));
}
}  // namespace detail

/// logits, probs (B, A, Z) and q (B, A) of the C51 head from value (B, Z; empty without
/// dueling) and adv (B, A*Z).
inline void c51_head_forward(Device& device, View<float> logits, View<float> probs, View<float> q,
                             View<const float> value, View<const float> adv, const dqn::HeadParams& h, int batch) {
    detail::check_head(h, batch, "c51_head_forward");
    const std::size_t B = static_cast<std::size_t>(batch), A = static_cast<std::size_t>(h.num_actions),
                      Z = static_cast<std::size_t>(h.num_atoms);
    detail::require_size(logits.size(), B * A * Z, "c51_head_forward", "logits");
    detail::require_size(probs.size(), B * A * Z, "c51_head_forward", "probs");
    detail::require_size(q.size(), B * A, "c51_head_forward", "q");
    detail::require_size(value.size(), h.dueling ? B * Z : 0, "c51_head_forward", "value");
    detail::require_size(adv.size(), B * A * Z, "c51_head_forward", "adv");
    detail::checked_int_size(B * A * Z, "c51_head_forward");
    detail::require_distinct("c51_head_forward",
                             {detail::range("logits", logits), detail::range("probs", probs), detail::range("q", q),
                              detail::range("value", value), detail::range("adv", adv)});
    if (CudaDevice* cuda = device.cuda())
        return cuda_twin::c51_head_forward(*cuda, logits, probs, q, value, adv, h, batch);
    cpu_twin::c51_head_forward(logits, probs, q, value, adv, h, batch);
}

/// d_value (B, Z; empty without dueling) and d_adv (B, A*Z) from d_logits (B, A, Z).
inline void c51_head_backward(Device& device, View<float> d_value, View<float> d_adv, View<const float> d_logits,
                              const dqn::HeadParams& h, int batch) {
    detail::check_head(h, batch, "c51_head_backward");
    const std::size_t B = static_cast<std::size_t>(batch), A = static_cast<std::size_t>(h.num_actions),
                      Z = static_cast<std::size_t>(h.num_atoms);
    detail::require_size(d_value.size(), h.dueling ? B * Z : 0, "c51_head_backward", "d_value");
    detail::require_size(d_adv.size(), B * A * Z, "c51_head_backward", "d_adv");
    detail::require_size(d_logits.size(), B * A * Z, "c51_head_backward", "d_logits");
    detail::require_distinct("c51_head_backward", {detail::range("d_value", d_value), detail::range("d_adv", d_adv),
                                                   detail::range("d_logits", d_logits)});
    if (CudaDevice* cuda = device.cuda())
        return cuda_twin::c51_head_backward(*cuda, d_value, d_adv, d_logits, h, batch);
    cpu_twin::c51_head_backward(d_value, d_adv, d_logits, h, batch);
}

/// Per-sample C51 cross-entropy loss (B) and d_logits (B, A, Z) of the batch-mean loss.
/// q_next_select (B, A) picks a* (online Q(s') for double DQN); probs_next_target (B, A, Z).
inline void c51_loss(Device& device, View<float> loss, View<float> d_logits, View<const float> logits,
                     View<const float> probs, View<const float> q_next_select, View<const float> probs_next_target,
                     View<const int> actions, View<const float> returns, View<const float> discounts,
                     const dqn::HeadParams& h, int batch) {
    detail::check_head(h, batch, "c51_loss");
    const std::size_t B = static_cast<std::size_t>(batch), A = static_cast<std::size_t>(h.num_actions),
                      Z = static_cast<std::size_t>(h.num_atoms);
    detail::require_size(loss.size(), B, "c51_loss", "loss");
    detail::require_size(d_logits.size(), B * A * Z, "c51_loss", "d_logits");
    detail::require_size(logits.size(), B * A * Z, "c51_loss", "logits");
    detail::require_size(probs.size(), B * A * Z, "c51_loss", "probs");
    detail::require_size(q_next_select.size(), B * A, "c51_loss", "q_next_select");
    detail::require_size(probs_next_target.size(), B * A * Z, "c51_loss", "probs_next_target");
    detail::require_size(actions.size(), B, "c51_loss", "actions");
    detail::require_size(returns.size(), B, "c51_loss", "returns");
    detail::require_size(discounts.size(), B, "c51_loss", "discounts");
    detail::require_distinct(
        "c51_loss", {detail::range("loss", loss), detail::range("d_logits", d_logits), detail::range("logits", logits),
                     detail::range("probs", probs), detail::range("q_next_select", q_next_select),
                     detail::range("probs_next_target", probs_next_target), detail::range("actions", actions),
                     detail::range("returns", returns), detail::range("discounts", discounts)});
    if (CudaDevice* cuda = device.cuda())
        return cuda_twin::c51_loss(*cuda, loss, d_logits, logits, probs, q_next_select, probs_next_target, actions,
                                   returns, discounts, h, batch);
    cpu_twin::c51_loss(loss, d_logits, logits, probs, q_next_select, probs_next_target, actions, returns, discounts, h,
                       batch);
}

/// Per-sample MSE loss on the expected Q (B), d_logits (B, A, Z) and TD errors (B).
inline void mse_loss(Device& device, View<float> loss, View<float> d_logits, View<float> td, View<const float> probs,
                     View<const float> q, View<const float> q_next_select, View<const float> q_next_target,
                     View<const int> actions, View<const float> returns, View<const float> discounts,
                     const dqn::HeadParams& h, int batch) {
    detail::check_head(h, batch, "mse_loss");
    const std::size_t B = static_cast<std::size_t>(batch), A = static_cast<std::size_t>(h.num_actions),
                      Z = static_cast<std::size_t>(h.num_atoms);
    detail::require_size(loss.size(), B, "mse_loss", "loss");
    detail::require_size(d_logits.size(), B * A * Z, "mse_loss", "d_logits");
    detail::require_size(td.size(), B, "mse_loss", "td");
    detail::require_size(probs.size(), B * A * Z, "mse_loss", "probs");
    detail::require_size(q.size(), B * A, "mse_loss", "q");
    detail::require_size(q_next_select.size(), B * A, "mse_loss", "q_next_select");
    detail::require_size(q_next_target.size(), B * A, "mse_loss", "q_next_target");
    detail::require_size(actions.size(), B, "mse_loss", "actions");
    detail::require_size(returns.size(), B, "mse_loss", "returns");
    detail::require_size(discounts.size(), B, "mse_loss", "discounts");
    detail::require_distinct(
        "mse_loss",
        {detail::range("loss", loss), detail::range("d_logits", d_logits), detail::range("td", td),
         detail::range("probs", probs), detail::range("q", q), detail::range("q_next_select", q_next_select),
         detail::range("q_next_target", q_next_target), detail::range("actions", actions),
         detail::range("returns", returns), detail::range("discounts", discounts)});
    if (CudaDevice* cuda = device.cuda())
        return cuda_twin::mse_loss(*cuda, loss, d_logits, td, probs, q, q_next_select, q_next_target, actions, returns,
                                   discounts, h, batch);
    cpu_twin::mse_loss(loss, d_logits, td, probs, q, q_next_select, q_next_target, actions, returns, discounts, h,
                       batch);
}

/// Accumulates one update's statistics: losses (2), q (B, A), actions (B), td (B), grad_norm (1).
inline void dqn_monitor_update(Device& device, View<dqn::MonitorStats> stats, View<const float> losses, View<const float> q,
                           View<const int> actions, View<const float> td, View<const float> grad_norm, int num_actions,
                           int batch) {
    const std::size_t B = static_cast<std::size_t>(batch);
    detail::require_size(stats.size(), 1, "dqn_monitor_update", "stats");
    detail::require_size(losses.size(), 2, "dqn_monitor_update", "losses");
    detail::require_size(q.size(), B * static_cast<std::size_t>(num_actions), "dqn_monitor_update", "q");
    detail::require_size(actions.size(), B, "dqn_monitor_update", "actions");
    detail::require_size(td.size(), B, "dqn_monitor_update", "td");
    detail::require_size(grad_norm.size(), 1, "dqn_monitor_update", "grad_norm");
    detail::require_distinct("dqn_monitor_update", {detail::range("stats", stats), detail::range("losses", losses),
                                                detail::range("q", q), detail::range("actions", actions),
                                                detail::range("td", td), detail::range("grad_norm", grad_norm)});
    if (CudaDevice* cuda = device.cuda())
        return cuda_twin::dqn_monitor_update(*cuda, stats, losses, q, actions, td, grad_norm, num_actions, batch);
    cpu_twin::dqn_monitor_update(stats, losses, q, actions, td, grad_norm, num_actions, batch);
}

/// The C51/MSE gradient blend: c51_grad = alpha * c51_grad + (1 - alpha) * mse_grad, done as an
/// in-place scale followed by a saxpy on two distinct buffers (never saxpy(y, alpha - 1, y)).
inline void blend_c51_mse_gradient(Device& device, View<float> c51_grad, View<const float> mse_grad, float alpha) {
    detail::require(alpha >= 0.f && alpha <= 1.f, "blend_c51_mse_gradient",
                    fmt::format("alpha {} is outside [0, 1]", alpha));
    device.scale(c51_grad, alpha);                  // c51 *= alpha (single pointer, in place)
    device.saxpy(c51_grad, 1.f - alpha, mse_grad);  // c51 += (1 - alpha) * mse (distinct buffers)
}

}  // namespace fh::ops
