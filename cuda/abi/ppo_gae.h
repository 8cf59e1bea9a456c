/// @file ppo_gae.h
/// @brief Signatures of cuda/kernels/ppo_gae.cu: generalised advantage estimation, the
///        deterministic in-place normalisation of the advantages, and the bootstrap values of
///        truncated episodes (gathered, their observations rebuilt, their values scattered).
#pragma once

#include <cstdint>

#include "math/ppo.h"
#include "abi/view.h"

namespace fh::ops {

/// Floats of scratch that Normalize needs.
constexpr std::size_t normalize_scratch_size() noexcept {
    return static_cast<std::size_t>(ppo::kNormalizeScratch);
}

/// GAE (ppo::gae_env) over a (T, n) rollout, n = rewards.size() / T: advantages, returns, rewards,
/// values (V(s_t)), next_values (V of the observation after step t: the terminal one when done,
/// V(s_T) at t = T-1), done (env::DoneFlag) all (T, n), row t * n + e. A termination does not
/// bootstrap; a truncation bootstraps from next_values but ends the episode (gae restarts). Outputs
/// distinct from each other and from the inputs (values and next_values may share: read-only).
/// Bit-identical on both backends. Several agents' rollouts (agent_gamma_lambda, device memory, a
/// (gamma, lambda) pair per agent): every buffer (agents, T, n), agent g's block with its pair.
struct PpoGae {
    View<float> advantages;
    View<float> returns;
    View<const float> rewards;
    View<const float> values;
    View<const float> next_values;
    View<const std::uint8_t> done;
    float gamma;
    float lambda;
    int T;
    View<const float> agent_gamma_lambda{};
};

/// The truncated episodes of one rollout step, gathered compactly: for the environments whose
/// step ended in a truncation (done[e] == env::kTruncated; n = done.size()), in environment
/// order, entries count, count + 1, ... get rows = row_base + e, bars = info[e].bar (the bar of
/// the observation after the step) and portfolio (capacity, P) = columns market_dim.. of
/// next_states[e] (n, state_dim; P = state_dim - market_dim); count (one int in device memory) is
/// the number gathered so far and grows by theirs (restart: it starts from 0 instead). Entries at
/// or past the capacity (rows.size()) are counted but not written: the caller sizes the buffers
/// so that none can occur and checks the count. Bit-identical on both backends. Several agents
/// (agents > 1): done, info and next_states hold each agent's n environments one after the other,
/// count (agents), rows, bars and portfolio each agent's capacity of entries: agent g's are
/// gathered as a call on its slices alone.
struct PpoCollectTruncated {
    View<int> rows;
    View<int> bars;
    View<float> portfolio;
    View<int> count;
    View<const float> next_states;
    View<const env::StepInfo> info;
    View<const std::uint8_t> done;
    int market_dim;
    int row_base;
    bool restart;
    int agents = 1;
};

/// The observations of gathered truncated episodes (r = bars.size() rows): observations (r,
/// state_dim), row k = ppo::terminal_observation_value(features, bars[k], portfolio row k): the
/// market features (n_bars, market_dim) of bar bars[k], then portfolio (r, state_dim -
/// market_dim) row k; a bar outside the features gives NaN. Bit-identical on both backends.
struct PpoTerminalObservations {
    View<float> observations;
    View<const int> bars;
    View<const float> portfolio;
    View<const float> features;
    int market_dim;
};

/// dst[rows[i]] = values[i] for i < values.size() (rows distinct; a row outside dst is skipped).
/// Bit-identical on both backends.
struct PpoScatterValues {
    View<float> dst;
    View<const float> values;
    View<const int> rows;
};

/// In place: x = (x - mean) / (std + 1e-8), population std, deterministic (a fixed reduction
/// order on each backend, double sums). x (>= 1), scratch (>= normalize_scratch_size()); distinct.
struct Normalize {
    View<float> x;
    View<float> scratch;
};

}  // namespace fh::ops

namespace fh::abi {

/// ops::PpoGae's, a thread per (agent, environment); agent_gamma_lambda null: gamma and lambda for
/// every agent.
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
/// ops::PpoCollectTruncated's: one block of ppo::kCollectThreads per agent, block b on agent b's n
/// environments, count[b] and capacity entries; restart != 0: count from 0.
using PpoCollectTruncated = void(int* __restrict__ rows, int* __restrict__ bars, float* __restrict__ portfolio,
                                 int* __restrict__ count, const float* __restrict__ next_states,
                                 const fh::env::StepInfo* __restrict__ info, const std::uint8_t* __restrict__ done,
                                 int n, int state_dim, int market_dim, int row_base, int capacity, int restart);
/// ops::PpoTerminalObservations', a thread per element of observations (any 1-D grid).
using PpoTerminalObservations = void(float* __restrict__ observations, const int* __restrict__ bars,
                                     const float* __restrict__ portfolio, const float* __restrict__ features,
                                     int n_bars, int rows, int state_dim, int market_dim);
/// ops::PpoScatterValues', any 1-D grid.
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

#ifndef __CUDACC__
#include "ops/op_begin.hpp"

inline void check(const PpoGae& a) {
    const auto& [advantages, returns, rewards, values, next_values, done, gamma, lambda, T, agent_gamma_lambda] = a;
    const char* op = "ppo_gae";
    detail::require_positive(T, op, "T");
    const std::size_t size = rewards.size();
    detail::require(agent_gamma_lambda.size() % 2 == 0, op,
                    "agent_gamma_lambda holds a (gamma, lambda) pair per agent");
    const std::size_t agents = std::max<std::size_t>(1, agent_gamma_lambda.size() / 2);
    detail::columns(size, static_cast<std::size_t>(T) * agents, op, "rewards");  // n = size / (agents T) >= 1
    detail::require_sizes(size, op, {FH_SIZES(advantages, returns, values, next_values, done)});
    detail::checked_int_size(size, op);
    detail::require_distinct(op, {FH_RANGES(advantages, returns, rewards, values, next_values, done)});
}
FH_LAUNCH(PpoGae) {
    const auto& [advantages, returns, rewards, values, next_values, done, gamma, lambda, T, agent_gamma_lambda] = a;
    const std::size_t agents = std::max<std::size_t>(1, agent_gamma_lambda.size() / 2);
    const std::size_t n = rewards.size() / agents / static_cast<std::size_t>(T);  // each agent's environments
    gpu.kernels().ppo_gae_kernel(gpu.stream(), LaunchDims::linear(n * agents, 128), advantages.data(), returns.data(),
                                 rewards.data(), values.data(), next_values.data(), done.data(), gamma, lambda, T,
                                 static_cast<int>(n), agent_gamma_lambda.empty() ? nullptr : agent_gamma_lambda.data(),
                                 static_cast<int>(agents));
}

inline void check(const PpoCollectTruncated& a) {
    const auto& [rows, bars, portfolio, count, next_states, info, done, market_dim, row_base, restart, agents] = a;
    const char* op = "ppo_collect_truncated";
    detail::require(agents >= 1 && done.size() % static_cast<std::size_t>(agents) == 0, op,
                    "{} environments do not split into {} agents", done.size(), agents);
    const std::size_t N = static_cast<std::size_t>(agents);
    const std::size_t n = done.size() / N;  // each agent's
    detail::require_positive(static_cast<long long>(n), op, "the number of environments");
    const std::size_t state_dim = detail::columns(next_states.size(), n * N, op, "next_states");
    detail::require(market_dim >= 0 && static_cast<std::size_t>(market_dim) <= state_dim, op,
                    "market_dim {} must be in [0, state_dim {}]", market_dim, state_dim);
    detail::require(rows.size() % N == 0, op, "rows must hold the same capacity for every agent");
    const std::size_t capacity = rows.size() / N;  // each agent's
    detail::require_positive(static_cast<long long>(capacity), op, "the capacity (rows)");
    detail::require_size(bars.size(), N * capacity, op, "bars");
    detail::require_size(portfolio.size(), N * capacity * (state_dim - static_cast<std::size_t>(market_dim)), op,
                         "portfolio");
    detail::require_size(info.size(), N * n, op, "info");
    detail::require_size(count.size(), N, op, "count");
    detail::require(row_base >= 0 &&
                        static_cast<long long>(row_base) + static_cast<long long>(n) <= std::numeric_limits<int>::max(),
                    op, "row_base {} + {} rows must fit an int", row_base, n);
    detail::checked_int_size(portfolio.size(), op);
    detail::checked_int_size(next_states.size(), op);
    detail::require_distinct(op, {FH_RANGES(rows, bars, portfolio, count, next_states, info, done)});
}
FH_LAUNCH(PpoCollectTruncated) {
    const auto& [rows, bars, portfolio, count, next_states, info, done, market_dim, row_base, restart, agents] = a;
    const std::size_t N = static_cast<std::size_t>(agents);
    gpu.kernels().ppo_collect_truncated_kernel(
        gpu.stream(), LaunchDims{dim3(static_cast<unsigned>(agents)), dim3(ppo::kCollectThreads), 0}, rows.data(),
        bars.data(), portfolio.data(), count.data(), next_states.data(), info.data(), done.data(),
        static_cast<int>(done.size() / N), static_cast<int>(next_states.size() / done.size()), market_dim, row_base,
        static_cast<int>(rows.size() / N), restart ? 1 : 0);
}

inline void check(const PpoTerminalObservations& a) {
    const auto& [observations, bars, portfolio, features, market_dim] = a;
    const char* op = "ppo_terminal_observations";
    const std::size_t r = bars.size();
    detail::require_positive(static_cast<long long>(r), op, "the number of rows");
    detail::require_positive(market_dim, op, "market_dim");
    const std::size_t state_dim = detail::columns(observations.size(), r, op, "observations");
    detail::require(static_cast<std::size_t>(market_dim) <= state_dim, op, "market_dim {} exceeds state_dim {}",
                    market_dim, state_dim);
    detail::require_size(portfolio.size(), r * (state_dim - static_cast<std::size_t>(market_dim)), op, "portfolio");
    detail::columns(features.size(), static_cast<std::size_t>(market_dim), op, "features");
    detail::checked_int_size(observations.size(), op);
    detail::checked_int_size(features.size(), op);
    detail::require_distinct(op, {FH_RANGES(observations, bars, portfolio, features)});
}
FH_LAUNCH(PpoTerminalObservations) {
    const auto& [observations, bars, portfolio, features, market_dim] = a;
    const int r = static_cast<int>(bars.size());
    gpu.kernels().ppo_terminal_observations_kernel(
        gpu.stream(), LaunchDims::linear(observations.size(), 128), observations.data(), bars.data(), portfolio.data(),
        features.data(), static_cast<int>(features.size() / static_cast<std::size_t>(market_dim)), r,
        static_cast<int>(observations.size() / bars.size()), market_dim);
}

inline bool check(const PpoScatterValues& a) {
    const auto& [dst, values, rows] = a;
    const char* op = "ppo_scatter_values";
    detail::require_size(rows.size(), values.size(), op, "rows");
    detail::checked_int_size(dst.size(), op);
    detail::checked_int_size(values.size(), op);
    detail::require_distinct(op, {FH_RANGES(dst, values, rows)});
    if (values.empty()) return false;
    return true;
}
FH_LAUNCH(PpoScatterValues) {
    const auto& [dst, values, rows] = a;
    gpu.kernels().ppo_scatter_values_kernel(gpu.stream(), LaunchDims::linear(values.size(), 128), dst.data(),
                                            values.data(), rows.data(), static_cast<int>(values.size()),
                                            static_cast<int>(dst.size()));
}

inline void check(const Normalize& a) {
    const auto& [x, scratch] = a;
    const char* op = "normalize";
    if (x.empty()) throw std::invalid_argument("ops::normalize: empty input");
    detail::require(scratch.size() >= normalize_scratch_size(), op,
                    "scratch has {} floats, needs {} (ops::normalize_scratch_size())", scratch.size(),
                    normalize_scratch_size());
    detail::checked_int_size(x.size(), op);
    detail::require_distinct(op, {FH_RANGES(x, scratch)});
}
FH_LAUNCH(Normalize) {
    const auto& [x, scratch] = a;
    // A fixed grid for the partial sums (whatever the device), so the moments are the same on
    // every run; the apply kernel's blocks each reduce the partials in the same fixed order.
    const LaunchDims partial_dims{dim3(ppo::kNormalizeBlocks), dim3(ppo::kNormalizeThreads), 0};
    const int n = static_cast<int>(x.size());
    gpu.kernels().ppo_normalize_partials_kernel(gpu.stream(), partial_dims, scratch.data(), x.data(), n);
    gpu.kernels().ppo_normalize_apply_kernel(gpu.stream(), LaunchDims::linear(x.size(), ppo::kNormalizeThreads, 1024),
                                             x.data(), scratch.data(), n);
}

#include "ops/op_end.hpp"
#endif
