/// @file dqn_iqn.h
/// @brief Kernel signatures of cuda/kernels/dqn_iqn.cu: the IQN head of the DQN trainer
///        (dqn.head = "iqn"; math in math/iqn.h, docs/dqn.md): the quantile fractions and their
///        cosine features, the Hadamard product phi(s) * psi(tau) and its backward, the
///        quantile Huber loss with the head's backward, and the mean of K rows (acting's mean
///        embedding). One agent.
#pragma once

#include "math/dqn.h"
#include "math/iqn.h"
#include "abi/view.h"

namespace fh::abi {

/// ops::IqnTaus' kernel arguments, one thread per (row, fraction).
struct IqnTausArgs {
    float* features;                ///< (rows * quantiles, n_cos) out: iqn::cos_feature(tau, i)
    float* taus;                    ///< (rows * quantiles) out
    const dqn::AgentParams* agent;  ///< seed; or null: midpoints
    const dqn::Counters* counters;  ///< with agent: this update = updates + 1
    int rows;
    int quantiles;
    int n_cos;
};
using IqnTaus = void(IqnTausArgs args);

/// ops::IqnHadamard's, grid-stride.
using IqnHadamard = void(float* __restrict__ x, const float* __restrict__ phi, const float* __restrict__ psi, int count,
                         int rows, int quantiles, int psi_rows, int width);

/// ops::IqnHadamardBackward's, one thread per (b, h).
using IqnHadamardBackward = void(float* __restrict__ d_phi, float* __restrict__ d_psi, const float* __restrict__ dx,
                                 const float* __restrict__ phi, const float* __restrict__ psi, int batch, int quantiles,
                                 int width);

/// ops::IqnLoss' kernel arguments, one thread per sample, its scratch in dynamic shared memory:
/// kIqnLossThreads * iqn::loss_scratch floats per block.
struct IqnLossArgs {
    float* d_head;  ///< (B * N, W) out
    float* stats;   ///< (kSampleStats, B) out
    const float* head_s;
    const float* head_select;
    const float* head_target;
    const float* taus;              ///< (B * N) the online fractions at s
    const int* actions;             ///< (B)
    const float* returns;           ///< (B)
    const float* discounts;         ///< (B)
    const dqn::AgentParams* agent;  ///< cql_alpha
    dqn::HeadParams head_params;    ///< the scalar head's (scalar = 1)
    int quantiles;
    int batch;
};
using IqnLoss = void(IqnLossArgs args);

/// ops::IqnMeanRows', one thread per (e, w) (iqn::mean_row_element).
using IqnMeanRows = void(float* __restrict__ out, const float* __restrict__ head, int n, int quantiles, int width);

/// Threads per block of iqn_loss_kernel.
inline constexpr int kIqnLossThreads = 32;

}  // namespace fh::abi

namespace fh::ops {

/// The fractions and their features, one thread per (row, fraction): with agent and counters (one
/// entry each), `rows` rows of `quantiles` fractions iqn::sample_tau(seed, row, counters.updates +
/// 1, k) (an update, its rows [s; s']); with both empty, the `quantiles` midpoints (k + 1/2) /
/// quantiles (iqn::midpoint_tau: acting; rows must be 1). features (rows * quantiles, n_cos) =
/// cos(pi i tau) (iqn::cos_feature); taus (rows * quantiles).
struct IqnTaus {
    View<float> features;
    View<float> taus;
    View<const dqn::AgentParams> agent;
    View<const dqn::Counters> counters;
    int rows;
    int quantiles;
    int n_cos;
};

/// x (count, rows * quantiles, width) = phi (count, rows, width) row r / quantiles times psi
/// (count, psi_rows, width) row (r % psi_rows), elementwise: psi_rows = rows * quantiles (a
/// fraction per row) or quantiles (the same fractions for every row).
struct IqnHadamard {
    View<float> x;
    View<const float> phi;
    View<const float> psi;
    int count;
    int rows;
    int quantiles;
    int psi_rows;
    int width;
};

/// The Hadamard product's backward for `batch` samples (network 0's first rows): dx (batch *
/// quantiles, width) = dL/dx; d_psi (same shape) = dx * phi of the row's sample; d_phi (batch,
/// width) = the sum over the sample's rows of dx * psi, in order (iqn::phi_gradient). phi (>= batch
/// rows), psi (>= batch * quantiles rows).
struct IqnHadamardBackward {
    View<float> d_phi;
    View<float> d_psi;
    View<const float> dx;
    View<const float> phi;
    View<const float> psi;
    int batch;
    int quantiles;
    int width;
};

/// The whole loss of one update on the IQN head (iqn::sample_loss per sample): head rows
/// (B * quantiles, W) of the online network at s (head_s), of the network that picks a* at s'
/// (head_select; may be head_target itself) and of the target network at s' (head_target);
/// taus (B * quantiles) the online fractions at s; actions, returns, discounts (B). d_head
/// (B * quantiles, W) = the gradient of the batch-mean loss (+ cql_alpha * CQL) w.r.t. head_s;
/// stats (kSampleStats, B) as dqn_loss's (the quantile Huber loss in the MSE row). h is the
/// scalar head's (scalar = 1). An action outside [0, A) gives NaN statistics and no gradient.
struct IqnLoss {
    View<float> d_head;
    View<float> stats;
    View<const float> head_s;
    View<const float> head_select;
    View<const float> head_target;
    View<const float> taus;
    View<const int> actions;
    View<const float> returns;
    View<const float> discounts;
    View<const dqn::AgentParams> agent;
    dqn::HeadParams h;
    int quantiles;
    int batch;
};

/// The mean of each group of `quantiles` rows: out (n, width) row e = the mean of rows e *
/// quantiles ... (e + 1) * quantiles - 1 of head (n * quantiles, width), summed in order, then /
/// quantiles. Acting takes the mean embedding of its K midpoints with it (n = 1).
struct IqnMeanRows {
    View<float> out;
    View<const float> head;
    int n;
    int quantiles;
    int width;
};

}  // namespace fh::ops

#define FH_KERNELS_dqn_iqn(FH_KERNEL)                                     \
    FH_KERNEL(dqn_iqn, iqn_taus_kernel, IqnTaus)                          \
    FH_KERNEL(dqn_iqn, iqn_hadamard_kernel, IqnHadamard)                  \
    FH_KERNEL(dqn_iqn, iqn_hadamard_backward_kernel, IqnHadamardBackward) \
    FH_KERNEL(dqn_iqn, iqn_loss_kernel, IqnLoss)                          \
    FH_KERNEL(dqn_iqn, iqn_mean_rows_kernel, IqnMeanRows)

#ifndef __CUDACC__
#include "ops/op_begin.hpp"

namespace detail {
inline void check_quantiles(int quantiles, const char* op) {
    require(quantiles >= 1 && quantiles <= iqn::kMaxQuantiles, op, "quantiles must be in [1, {}] (got {})",
            iqn::kMaxQuantiles, quantiles);
}
}  // namespace detail

/// Floats of dynamic shared memory iqn_loss_kernel can have per block without opting in.
inline constexpr std::size_t kIqnLossMaxSharedFloats = 48 * 1024 / sizeof(float);

/// Whether the loss's scratch fits: abi::kIqnLossThreads * (2A + N) floats of shared memory.
inline bool iqn_loss_fits(int num_actions, int quantiles) {
    return static_cast<std::size_t>(abi::kIqnLossThreads) * static_cast<std::size_t>(2 * num_actions + quantiles) <=
           kIqnLossMaxSharedFloats;
}

inline void check(const IqnTaus& a) {
    const auto& [features, taus, agent, counters, rows, quantiles, n_cos] = a;
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
    detail::require_distinct(op, {FH_RANGES(features, taus, agent, counters)});
}
FH_LAUNCH(IqnTaus) {
    const auto& [features, taus, agent, counters, rows, quantiles, n_cos] = a;
    abi::IqnTausArgs k{features.data(), taus.data(), or_null(agent), or_null(counters), rows, quantiles, n_cos};
    gpu.kernels().iqn_taus_kernel(
        gpu.stream(), LaunchDims::linear(static_cast<std::size_t>(rows) * static_cast<std::size_t>(quantiles), 128), k);
}

inline void check(const IqnHadamard& a) {
    const auto& [x, phi, psi, count, rows, quantiles, psi_rows, width] = a;
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
    detail::require_distinct(op, {FH_RANGES(x, phi, psi)});
}
FH_LAUNCH(IqnHadamard) {
    const auto& [x, phi, psi, count, rows, quantiles, psi_rows, width] = a;
    gpu.kernels().iqn_hadamard_kernel(gpu.stream(), LaunchDims::linear(x.size(), 256), x.data(), phi.data(), psi.data(),
                                      count, rows, quantiles, psi_rows, width);
}

inline void check(const IqnHadamardBackward& a) {
    const auto& [d_phi, d_psi, dx, phi, psi, batch, quantiles, width] = a;
    const char* op = "iqn_hadamard_backward";
    detail::check_quantiles(quantiles, op);
    detail::require(batch >= 1 && width >= 1, op, "batch and width must be >= 1");
    const std::size_t B = static_cast<std::size_t>(batch), H = static_cast<std::size_t>(width),
                      N = static_cast<std::size_t>(quantiles);
    detail::require_size(d_phi.size(), B * H, op, "d_phi");
    detail::require_sizes(B * N * H, op, {FH_SIZES(d_psi, dx)});
    detail::require(phi.size() >= B * H, op, "phi holds fewer than batch rows");
    detail::require(psi.size() >= B * N * H, op, "psi holds fewer than batch * quantiles rows");
    detail::checked_int_size(d_psi.size(), op);
    detail::require_distinct(op, {FH_RANGES(d_phi, d_psi, dx), detail::range("phi", phi.subview(0, B * H)),
                                  detail::range("psi", psi.subview(0, B * N * H))});
}
FH_LAUNCH(IqnHadamardBackward) {
    const auto& [d_phi, d_psi, dx, phi, psi, batch, quantiles, width] = a;
    gpu.kernels().iqn_hadamard_backward_kernel(gpu.stream(), LaunchDims::linear(d_phi.size(), 256), d_phi.data(),
                                               d_psi.data(), dx.data(), phi.data(), psi.data(), batch, quantiles,
                                               width);
}

inline void check(const IqnLoss& a) {
    const auto& [d_head, stats, head_s, head_select, head_target, taus, actions, returns, discounts, agent, h,
                 quantiles, batch] = a;
    const char* op = "iqn_loss";
    detail::check_quantiles(quantiles, op);
    detail::require(h.scalar == 1 && h.num_actions >= 1, op, "the IQN head's rows are the scalar head's");
    detail::require(agent.size() == 1, op, "one agent");
    detail::require(batch >= 1, op, "batch must be >= 1");
    detail::require(iqn_loss_fits(h.num_actions, quantiles), op,
                    "2 * num_actions + quantiles = {} exceeds the loss kernel's shared memory ({} floats "
                    "per thread)",
                    2 * h.num_actions + quantiles, kIqnLossMaxSharedFloats / abi::kIqnLossThreads);
    const std::size_t B = static_cast<std::size_t>(batch), N = static_cast<std::size_t>(quantiles),
                      W = static_cast<std::size_t>(dqn::head_width(h));
    detail::require_sizes(B * N * W, op, {FH_SIZES(head_s, head_select, head_target, d_head)});
    detail::require_size(stats.size(), B * dqn::kSampleStats, op, "stats");
    detail::require_size(taus.size(), B * N, op, "taus");
    detail::require_sizes(B, op, {FH_SIZES(actions, returns, discounts)});
    detail::checked_int_size(B * N * W, op);
    detail::require_distinct(
        op, {FH_RANGES(d_head, stats, head_s, head_select, head_target, taus, actions, returns, discounts, agent)});
}
FH_LAUNCH(IqnLoss) {
    const auto& [d_head, stats, head_s, head_select, head_target, taus, actions, returns, discounts, agent, h,
                 quantiles, batch] = a;
    constexpr int T = abi::kIqnLossThreads;
    const LaunchDims dims{
        dim3(static_cast<unsigned>((batch + T - 1) / T)), dim3(T),
        sizeof(float) * static_cast<std::size_t>(T) * static_cast<std::size_t>(iqn::loss_scratch(h, quantiles))};
    gpu.kernels().iqn_loss_kernel(gpu.stream(), dims,
                                  abi::IqnLossArgs{d_head.data(), stats.data(), head_s.data(), head_select.data(),
                                                   head_target.data(), taus.data(), actions.data(), returns.data(),
                                                   discounts.data(), agent.data(), h, quantiles, batch});
}

inline void check(const IqnMeanRows& a) {
    const auto& [out, head, n, quantiles, width] = a;
    const char* op = "iqn_mean_rows";
    detail::check_quantiles(quantiles, op);
    detail::require(n >= 1 && width >= 1, op, "n and width must be >= 1");
    const std::size_t rows = static_cast<std::size_t>(n), W = static_cast<std::size_t>(width);
    detail::require_size(out.size(), rows * W, op, "out");
    detail::require_size(head.size(), rows * static_cast<std::size_t>(quantiles) * W, op, "head");
    detail::checked_int_size(head.size(), op);
    detail::require_distinct(op, {FH_RANGES(out, head)});
}
FH_LAUNCH(IqnMeanRows) {
    const auto& [out, head, n, quantiles, width] = a;
    gpu.kernels().iqn_mean_rows_kernel(gpu.stream(), LaunchDims::linear(out.size(), 256), out.data(), head.data(), n,
                                       quantiles, width);
}

#include "ops/op_end.hpp"
#endif
