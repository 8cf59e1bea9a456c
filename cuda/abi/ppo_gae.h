/// @file ppo_gae.h
/// @brief Signatures of cuda/kernels/ppo_gae.cu: generalised advantage estimation, the
///        deterministic in-place normalisation of the advantages, and the bootstrap values of
///        truncated episodes (gathered, their observations rebuilt, their values scattered).
#pragma once

#include <cstdint>

#include "math/ppo.h"

namespace fh::abi {

/// For e < n: ppo::gae_env(e, n, T, ...); every buffer (T, n), row t * n + e. Several agents
/// (agents > 1): each buffer (agents, T, n), agent g's block as one agent's with its gamma and
/// lambda agent_gamma_lambda[2 g], [2 g + 1] (null: gamma and lambda for every agent). Outputs distinct
/// from each other and from the inputs (values and next_values may share: read-only).
using PpoGae = void(float* __restrict__ advantages, float* __restrict__ returns, const float* __restrict__ rewards,
                    const float* __restrict__ values, const float* __restrict__ next_values,
                    const std::uint8_t* __restrict__ done, float gamma, float lambda, int T, int n,
                    const float* __restrict__ agent_gamma_lambda, int agents);
/// Launch exactly ppo::kNormalizeBlocks x ppo::kNormalizeThreads. partials (kNormalizeScratch):
/// block b writes the double sums of d = x - x[0] and d^2 over its grid-stride share, each as a
/// float pair (hi, lo = d - hi) at 4b..4b+3; block 0 writes x[0] at 4 * kNormalizeBlocks.
using PpoNormalizePartials = void(float* __restrict__ partials, const float* __restrict__ x, int n);
/// Any 1-D grid of kNormalizeThreads-thread blocks: every block reduces the partials in the same
/// fixed order (identical moments in every block), then x[i] = ppo::normalize_element(x[i], ...).
using PpoNormalizeApply = void(float* __restrict__ x, const float* __restrict__ partials, int n);
/// Launch one block of ppo::kCollectThreads per agent (one: a single run); block b works on agent
/// b's n environments (next_states, info, done at b n..), count[b] and lists (capacity entries
/// from b capacity), as one block on those alone. The environments with done[e] ==
/// env::kTruncated, in environment order, are appended at entries *count, *count + 1, ... (from 0
/// when restart != 0): rows[k] = row_base + e, bars[k] = info[e].bar (the bar of the observation
/// after the step), portfolio[k] (state_dim - market_dim floats) = columns market_dim.. of
/// next_states[e] (n, state_dim); *count grows by their number. Entries at or past the capacity
/// are counted but not written. All buffers distinct.
using PpoCollectTruncated = void(int* __restrict__ rows, int* __restrict__ bars, float* __restrict__ portfolio,
                                 int* __restrict__ count, const float* __restrict__ next_states,
                                 const fh::env::StepInfo* __restrict__ info, const std::uint8_t* __restrict__ done,
                                 int n, int state_dim, int market_dim, int row_base, int capacity, int restart);
/// For r < rows, c < state_dim: observations[r * state_dim + c] =
/// ppo::terminal_observation_value(features, n_bars, bars[r], market_dim, portfolio + r *
/// (state_dim - market_dim), c); features (n_bars, market_dim). Any 1-D grid. All buffers distinct.
using PpoTerminalObservations = void(float* __restrict__ observations, const int* __restrict__ bars,
                                     const float* __restrict__ portfolio, const float* __restrict__ features,
                                     int n_bars, int rows, int state_dim, int market_dim);
/// For i < count: dst[rows[i]] = values[i] where 0 <= rows[i] < size (other rows skipped); rows
/// distinct. Any 1-D grid.
using PpoScatterValues = void(float* __restrict__ dst, const float* __restrict__ values, const int* __restrict__ rows,
                              int count, int size);

}  // namespace fh::abi

#define FH_KERNELS_ppo_gae(FH_KERNEL)                                             \
    FH_KERNEL(ppo_gae, ppo_gae_kernel, PpoGae)                                    \
    FH_KERNEL(ppo_gae, ppo_normalize_partials_kernel, PpoNormalizePartials)       \
    FH_KERNEL(ppo_gae, ppo_normalize_apply_kernel, PpoNormalizeApply)             \
    FH_KERNEL(ppo_gae, ppo_collect_truncated_kernel, PpoCollectTruncated)         \
    FH_KERNEL(ppo_gae, ppo_terminal_observations_kernel, PpoTerminalObservations) \
    FH_KERNEL(ppo_gae, ppo_scatter_values_kernel, PpoScatterValues)
