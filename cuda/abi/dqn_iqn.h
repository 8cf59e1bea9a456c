/// @file dqn_iqn.h
/// @brief Kernel signatures of cuda/kernels/dqn_iqn.cu: the IQN head of the DQN trainer
///        (dqn.head = "iqn"; math in math/iqn.h, docs/dqn.md): the quantile fractions and their
///        cosine features, the Hadamard product phi(s) * psi(tau) and its backward, the
///        quantile Huber loss with the head's backward, and the mean of K rows (acting's mean
///        embedding). One agent.
#pragma once

#include "math/dqn.h"
#include "math/iqn.h"

namespace fh::abi {

/// The fractions of `rows` rows, `quantiles` each, and their features, one thread per
/// (row, fraction): with agent and counters, iqn::sample_tau(seed, row, counters.updates + 1, k)
/// (an update's rows [s; s']); without, iqn::midpoint_tau(k, quantiles) (acting; rows = 1).
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

/// x[c][r * N + k][h] = phi[c][r][h] * psi[c][(r * N + k) % psi_rows][h] for `count` networks
/// (phi (count, rows, H), psi (count, psi_rows, H), x (count, rows * N, H)); psi_rows = rows * N
/// (an update: a fraction per row) or N (acting: the same fractions for every row). Grid-stride.
using IqnHadamard = void(float* __restrict__ x, const float* __restrict__ phi, const float* __restrict__ psi, int count,
                         int rows, int quantiles, int psi_rows, int width);

/// The backward of network 0's first `batch` samples: d_psi[r][h] = dx[r][h] phi[r / N][h];
/// d_phi[b][h] = iqn::phi_gradient (sum over the sample's N rows in order). One thread per (b, h).
using IqnHadamardBackward = void(float* __restrict__ d_phi, float* __restrict__ d_psi, const float* __restrict__ dx,
                                 const float* __restrict__ phi, const float* __restrict__ psi, int batch, int quantiles,
                                 int width);

/// The loss of one update, one thread per sample (iqn::sample_loss, its scratch in dynamic
/// shared memory: kIqnLossThreads * iqn::loss_scratch floats per block): head rows (B * N, W) of
/// the online network at s, of the selecting and of the target network at s' (sample b's rows
/// b * N .. b * N + N - 1).
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

/// The mean of each group of K rows: out[e][w] = iqn::mean_row_element over rows e * K .. e * K + K - 1
/// (acting: the mean embedding of its K midpoints, n = 1). One thread per (e, w).
using IqnMeanRows = void(float* __restrict__ out, const float* __restrict__ head, int n, int quantiles, int width);

/// Threads per block of iqn_loss_kernel.
inline constexpr int kIqnLossThreads = 32;

}  // namespace fh::abi

#define FH_KERNELS_dqn_iqn(FH_KERNEL)                                     \
    FH_KERNEL(dqn_iqn, iqn_taus_kernel, IqnTaus)                          \
    FH_KERNEL(dqn_iqn, iqn_hadamard_kernel, IqnHadamard)                  \
    FH_KERNEL(dqn_iqn, iqn_hadamard_backward_kernel, IqnHadamardBackward) \
    FH_KERNEL(dqn_iqn, iqn_loss_kernel, IqnLoss)                          \
    FH_KERNEL(dqn_iqn, iqn_mean_rows_kernel, IqnMeanRows)
