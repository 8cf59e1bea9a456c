/// @file ops.hpp
/// @brief The IQN op family: the DQN trainer's IQN head (dqn.head = "iqn"; math in
///        math/iqn.h, docs/dqn.md). The fractions of an update (Philox, the update number
///        from device memory) or of acting (fixed midpoints) with their cosine features, the
///        Hadamard product phi(s) * psi(tau) of the trunk's and the embedding's outputs and its
///        backward, the quantile Huber loss of an update with the head's backward, and the mean
///        of K rows (acting's mean embedding). The GEMMs are the network's (nn::Mlp).
///
/// Each op checks its arguments here, once, then runs its CPU twin (cpu_twin::, src/ops/iqn/
/// cpu.cpp) or its CUDA twin (cuda_twin::, cuda/kernels/dqn_iqn.cu): the same bits on the same
/// inputs. One agent (the agent and counter arrays hold one entry).
#pragma once

#include <fmt/format.h>

#include <stdexcept>

#include "abi/dqn_iqn.h"
#include "math/dqn.h"
#include "math/iqn.h"
#include "ops/device.hpp"

namespace fh::ops {

namespace cpu_twin {
void iqn_taus(View<float> features, View<float> taus, View<const dqn::AgentParams> agent,
              View<const dqn::Counters> counters, int rows, int quantiles, int n_cos);
void iqn_hadamard(View<float> x, View<const float> phi, View<const float> psi, int count, int rows, int quantiles,
                  int psi_rows, int width);
void iqn_hadamard_backward(View<float> d_phi, View<float> d_psi, View<const float> dx, View<const float> phi,
                           View<const float> psi, int batch, int quantiles, int width);
void iqn_loss(View<float> d_head, View<float> stats, View<const float> head_s, View<const float> head_select,
              View<const float> head_target, View<const float> taus, View<const int> actions, View<const float> returns,
              View<const float> discounts, View<const dqn::AgentParams> agent, const dqn::HeadParams& h, int quantiles,
              int batch);
void iqn_mean_rows(View<float> out, View<const float> head, int n, int quantiles, int width);
}  // namespace cpu_twin

namespace cuda_twin {
void iqn_taus(CudaDevice& device, View<float> features, View<float> taus, View<const dqn::AgentParams> agent,
              View<const dqn::Counters> counters, int rows, int quantiles, int n_cos);
void iqn_hadamard(CudaDevice& device, View<float> x, View<const float> phi, View<const float> psi, int count, int rows,
                  int quantiles, int psi_rows, int width);
void iqn_hadamard_backward(CudaDevice& device, View<float> d_phi, View<float> d_psi, View<const float> dx,
                           View<const float> phi, View<const float> psi, int batch, int quantiles, int width);
void iqn_loss(CudaDevice& device, View<float> d_head, View<float> stats, View<const float> head_s,
              View<const float> head_select, View<const float> head_target, View<const float> taus,
              View<const int> actions, View<const float> returns, View<const float> discounts,
              View<const dqn::AgentParams> agent, const dqn::HeadParams& h, int quantiles, int batch);
void iqn_mean_rows(CudaDevice& device, View<float> out, View<const float> head, int n, int quantiles, int width);
}  // namespace cuda_twin

namespace detail {
inline void check_quantiles(int quantiles, const char* op) {
    if (quantiles < 1 || quantiles > iqn::kMaxQuantiles)
        throw std::invalid_argument(
            fmt::format("ops::{}: quantiles must be in [1, {}] (got {})", op, iqn::kMaxQuantiles, quantiles));
}
}  // namespace detail

/// The fractions and their features: with agent and counters (one entry each), `rows` rows of
/// `quantiles` fractions iqn::sample_tau(seed, row, counters.updates + 1, k) (an update, its rows
/// [s; s']); with both empty, the `quantiles` midpoints (k + 1/2) / quantiles (acting; rows must
/// be 1). features (rows * quantiles, n_cos) = cos(pi i tau); taus (rows * quantiles).
inline void iqn_taus(Device& device, View<float> features, View<float> taus, View<const dqn::AgentParams> agent,
                     View<const dqn::Counters> counters, int rows, int quantiles, int n_cos) {
    const char* op = "iqn_taus";
    detail::check_quantiles(quantiles, op);
    detail::require(rows >= 1 && n_cos >= 1, op, "rows and n_cos must be >= 1");
    detail::require(agent.size() == counters.size() && agent.size() <= 1, op,
                    "agent and counters: one entry each (an update) or both empty (midpoints)");
    detail::require(!agent.empty() || rows == 1, op, "the midpoints are one row");
    const std::size_t n = static_cast<std::size_t>(rows) * static_cast<std::size_t>(quantiles);
    detail::require_size(taus.size(), n, op, "taus");
    detail::require_size(features.size(), n * static_cast<std::size_t>(n_cos), op, "features");
    detail::checked_int_size(features.size(), op);
    detail::require_distinct(op, {detail::range("features", features), detail::range("taus", taus),
                                  detail::range("agent", agent), detail::range("counters", counters)});
    if (CudaDevice* cuda = device.cuda())
        return cuda_twin::iqn_taus(*cuda, features, taus, agent, counters, rows, quantiles, n_cos);
    cpu_twin::iqn_taus(features, taus, agent, counters, rows, quantiles, n_cos);
}

/// x (count, rows * quantiles, width) = phi (count, rows, width) row r / quantiles times psi
/// (count, psi_rows, width) row (r % psi_rows), elementwise: psi_rows = rows * quantiles (a
/// fraction per row) or quantiles (the same fractions for every row).
inline void iqn_hadamard(Device& device, View<float> x, View<const float> phi, View<const float> psi, int count,
                         int rows, int quantiles, int psi_rows, int width) {
    const char* op = "iqn_hadamard";
    detail::check_quantiles(quantiles, op);
    detail::require(count >= 1 && rows >= 1 && width >= 1, op, "count, rows and width must be >= 1");
    detail::require(psi_rows == rows * quantiles || psi_rows == quantiles, op,
                    "psi_rows must be rows * quantiles or quantiles");
    const std::size_t C = static_cast<std::size_t>(count), H = static_cast<std::size_t>(width);
    const std::size_t R = static_cast<std::size_t>(rows);
    detail::require_size(phi.size(), C * R * H, op, "phi");
    detail::require_size(psi.size(), C * static_cast<std::size_t>(psi_rows) * H, op, "psi");
    detail::require_size(x.size(), C * R * static_cast<std::size_t>(quantiles) * H, op, "x");
    detail::checked_int_size(x.size(), op);
    detail::require_distinct(op, {detail::range("x", x), detail::range("phi", phi), detail::range("psi", psi)});
    if (CudaDevice* cuda = device.cuda())
        return cuda_twin::iqn_hadamard(*cuda, x, phi, psi, count, rows, quantiles, psi_rows, width);
    cpu_twin::iqn_hadamard(x, phi, psi, count, rows, quantiles, psi_rows, width);
}

/// The Hadamard product's backward for `batch` samples (network 0's first rows): dx (batch *
/// quantiles, width) = dL/dx; d_psi (same shape) = dx * phi of the row's sample; d_phi (batch,
/// width) = the sum over the sample's rows of dx * psi, in order. phi (>= batch rows), psi
/// (>= batch * quantiles rows).
inline void iqn_hadamard_backward(Device& device, View<float> d_phi, View<float> d_psi, View<const float> dx,
                                  View<const float> phi, View<const float> psi, int batch, int quantiles, int width) {
    const char* op = "iqn_hadamard_backward";
    detail::check_quantiles(quantiles, op);
    detail::require(batch >= 1 && width >= 1, op, "batch and width must be >= 1");
    const std::size_t B = static_cast<std::size_t>(batch), H = static_cast<std::size_t>(width),
                      N = static_cast<std::size_t>(quantiles);
    detail::require_size(d_phi.size(), B * H, op, "d_phi");
    detail::require_size(d_psi.size(), B * N * H, op, "d_psi");
    detail::require_size(dx.size(), B * N * H, op, "dx");
    detail::require(phi.size() >= B * H, op, "phi holds fewer than batch rows");
    detail::require(psi.size() >= B * N * H, op, "psi holds fewer than batch * quantiles rows");
    detail::checked_int_size(d_psi.size(), op);
    detail::require_distinct(
        op, {detail::range("d_phi", d_phi), detail::range("d_psi", d_psi), detail::range("dx", dx),
             detail::range("phi", phi.subview(0, B * H)), detail::range("psi", psi.subview(0, B * N * H))});
    if (CudaDevice* cuda = device.cuda())
        return cuda_twin::iqn_hadamard_backward(*cuda, d_phi, d_psi, dx, phi, psi, batch, quantiles, width);
    cpu_twin::iqn_hadamard_backward(d_phi, d_psi, dx, phi, psi, batch, quantiles, width);
}

/// Floats of dynamic shared memory iqn_loss_kernel can have per block without opting in.
inline constexpr std::size_t kIqnLossMaxSharedFloats = 48 * 1024 / sizeof(float);

/// Whether the loss's scratch fits: abi::kIqnLossThreads * (2A + N) floats of shared memory.
inline bool iqn_loss_fits(int num_actions, int quantiles) {
    return static_cast<std::size_t>(abi::kIqnLossThreads) * static_cast<std::size_t>(2 * num_actions + quantiles) <=
           kIqnLossMaxSharedFloats;
}

/// The whole loss of one update on the IQN head (iqn::sample_loss per sample): head rows
/// (B * quantiles, W) of the online network at s (head_s), of the network that picks a* at s'
/// (head_select; may be head_target itself) and of the target network at s' (head_target);
/// taus (B * quantiles) the online fractions at s; actions, returns, discounts (B). d_head
/// (B * quantiles, W) = the gradient of the batch-mean loss (+ cql_alpha * CQL) w.r.t. head_s;
/// stats (kSampleStats, B) as dqn_loss's (the quantile Huber loss in the MSE row). h is the
/// scalar head's (scalar = 1). An action outside [0, A) gives NaN statistics and no gradient.
inline void iqn_loss(Device& device, View<float> d_head, View<float> stats, View<const float> head_s,
                     View<const float> head_select, View<const float> head_target, View<const float> taus,
                     View<const int> actions, View<const float> returns, View<const float> discounts,
                     View<const dqn::AgentParams> agent, const dqn::HeadParams& h, int quantiles, int batch) {
    const char* op = "iqn_loss";
    detail::check_quantiles(quantiles, op);
    detail::require(h.scalar == 1 && h.num_actions >= 1, op, "the IQN head's rows are the scalar head's");
    detail::require(agent.size() == 1, op, "one agent");
    detail::require(batch >= 1, op, "batch must be >= 1");
    detail::require(iqn_loss_fits(h.num_actions, quantiles), op,
                    fmt::format("2 * num_actions + quantiles = {} exceeds the loss kernel's shared memory ({} floats "
                                "per thread)",
                                2 * h.num_actions + quantiles, kIqnLossMaxSharedFloats / abi::kIqnLossThreads));
    const std::size_t B = static_cast<std::size_t>(batch), N = static_cast<std::size_t>(quantiles),
                      W = static_cast<std::size_t>(dqn::head_width(h));
    for (auto [v, name] : {std::pair{head_s, "head_s"}, {head_select, "head_select"}, {head_target, "head_target"}})
        detail::require_size(v.size(), B * N * W, op, name);
    detail::require_size(d_head.size(), B * N * W, op, "d_head");
    detail::require_size(stats.size(), B * dqn::kSampleStats, op, "stats");
    detail::require_size(taus.size(), B * N, op, "taus");
    detail::require_size(actions.size(), B, op, "actions");
    detail::require_size(returns.size(), B, op, "returns");
    detail::require_size(discounts.size(), B, op, "discounts");
    detail::checked_int_size(B * N * W, op);
    detail::require_distinct(
        op, {detail::range("d_head", d_head), detail::range("stats", stats), detail::range("head_s", head_s),
             detail::range("head_select", head_select), detail::range("head_target", head_target),
             detail::range("taus", taus), detail::range("actions", actions), detail::range("returns", returns),
             detail::range("discounts", discounts), detail::range("agent", agent)});
    if (CudaDevice* cuda = device.cuda())
        return cuda_twin::iqn_loss(*cuda, d_head, stats, head_s, head_select, head_target, taus, actions, returns,
                                   discounts, agent, h, quantiles, batch);
    cpu_twin::iqn_loss(d_head, stats, head_s, head_select, head_target, taus, actions, returns, discounts, agent, h,
                       quantiles, batch);
}

/// The mean of each group of `quantiles` rows: out (n, width) row e = the mean of rows e *
/// quantiles ... (e + 1) * quantiles - 1 of head (n * quantiles, width), summed in order, then /
/// quantiles. Acting takes the mean embedding of its K midpoints with it (n = 1).
inline void iqn_mean_rows(Device& device, View<float> out, View<const float> head, int n, int quantiles, int width) {
    const char* op = "iqn_mean_rows";
    detail::check_quantiles(quantiles, op);
    detail::require(n >= 1 && width >= 1, op, "n and width must be >= 1");
    const std::size_t rows = static_cast<std::size_t>(n), W = static_cast<std::size_t>(width);
    detail::require_size(out.size(), rows * W, op, "out");
    detail::require_size(head.size(), rows * static_cast<std::size_t>(quantiles) * W, op, "head");
    detail::checked_int_size(head.size(), op);
    detail::require_distinct(op, {detail::range("out", out), detail::range("head", head)});
    if (CudaDevice* cuda = device.cuda()) return cuda_twin::iqn_mean_rows(*cuda, out, head, n, quantiles, width);
    cpu_twin::iqn_mean_rows(out, head, n, quantiles, width);
}

}  // namespace fh::ops
