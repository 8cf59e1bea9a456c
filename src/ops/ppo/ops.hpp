/// @file ops.hpp
/// @brief The PPO op family: action sampling, the diversity penalty, GAE, normalisation, shuffled
///        minibatches, the clipped loss and the curiosity model's input and error (the math:
///        math/ppo.h, math/policy.h; docs/ppo.md).
///
/// Each op checks its arguments here, once, then runs its CPU twin (cpu_twin::, plain loops over
/// the shared math, src/ops/ppo/cpu.cpp) or its CUDA twin (cuda_twin::, the kernels of
/// cuda/kernels/ppo_*.cu, launched by src/ops/ppo/cuda.cpp).
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <stdexcept>

#include "math/ppo.h"
#include "ops/device.hpp"

namespace fh::ops {

/// Floats of scratch that normalize needs.
constexpr std::size_t normalize_scratch_size() noexcept {
    return static_cast<std::size_t>(ppo::kNormalizeScratch);
}

namespace cpu_twin {
void ppo_sample(View<int> actions, View<float> log_probs, View<const float> logits, int num_actions, std::uint64_t seed,
                CounterValue step, View<const std::uint64_t> agent_seeds);
void ppo_diversity(View<int> window, View<int> counts, View<float> penalty, View<const int> actions, int num_actions,
                   int diversity_window, float coef, CounterValue step, View<const float> agent_coef);
void ppo_gae(View<float> advantages, View<float> returns, View<const float> rewards, View<const float> values,
             View<const float> next_values, View<const std::uint8_t> done, float gamma, float lambda, int T,
             View<const float> agent_gamma_lambda);
void normalize(View<float> x, View<float> /*scratch*/);
void ppo_collect_truncated(View<int> rows, View<int> bars, View<float> portfolio, View<int> count,
                           View<const float> next_states, View<const env::StepInfo> info, View<const std::uint8_t> done,
                           int market_dim, int row_base, bool restart, int agents);
void ppo_terminal_observations(View<float> observations, View<const int> bars, View<const float> portfolio,
                               View<const float> features, int market_dim);
void ppo_scatter_values(View<float> dst, View<const float> values, View<const int> rows);
void ppo_gather(View<float> states, View<int> actions, View<float> old_log_probs, View<float> advantages,
                View<float> returns, View<float> old_values, const ppo::RolloutView& rollout, std::uint64_t seed,
                CounterValue epoch, int offset, View<const std::uint64_t> agent_seeds);
void ppo_loss(View<float> stats, View<float> d_logits, View<float> d_values, View<const float> logits,
              View<const float> values, View<const int> actions, View<const float> old_log_probs,
              View<const float> advantages, View<const float> returns, View<const float> old_values,
              const ppo::LossParams& p, View<const ppo::LossParams> agent_params);
void ppo_learning_rate(View<float> lr, double base_lr, bool linear, double total_rollouts, CounterValue rollouts);
void curiosity_input(View<float> input, View<const float> states, View<const int> actions, int num_actions);
void curiosity_error(View<float> error, View<float> d_pred, View<const float> pred, View<const float> next_states,
                     int state_dim);
}  // namespace cpu_twin

namespace cuda_twin {
void ppo_sample(CudaDevice& device, View<int> actions, View<float> log_probs, View<const float> logits, int num_actions,
                std::uint64_t seed, CounterValue step, View<const std::uint64_t> agent_seeds);
void ppo_diversity(CudaDevice& device, View<int> window, View<int> counts, View<float> penalty, View<const int> actions,
                   int num_actions, int diversity_window, float coef, CounterValue step, View<const float> agent_coef);
void ppo_gae(CudaDevice& device, View<float> advantages, View<float> returns, View<const float> rewards,
             View<const float> values, View<const float> next_values, View<const std::uint8_t> done, float gamma,
             float lambda, int T, View<const float> agent_gamma_lambda);
void normalize(CudaDevice& device, View<float> x, View<float> scratch);
void ppo_collect_truncated(CudaDevice& device, View<int> rows, View<int> bars, View<float> portfolio, View<int> count,
                           View<const float> next_states, View<const env::StepInfo> info, View<const std::uint8_t> done,
                           int market_dim, int row_base, bool restart, int agents);
void ppo_terminal_observations(CudaDevice& device, View<float> observations, View<const int> bars,
                               View<const float> portfolio, View<const float> features, int market_dim);
void ppo_scatter_values(CudaDevice& device, View<float> dst, View<const float> values, View<const int> rows);
void ppo_gather(CudaDevice& device, View<float> states, View<int> actions, View<float> old_log_probs,
                View<float> advantages, View<float> returns, View<float> old_values, const ppo::RolloutView& rollout,
                std::uint64_t seed, CounterValue epoch, int offset, View<const std::uint64_t> agent_seeds);
void ppo_loss(CudaDevice& device, View<float> stats, View<float> d_logits, View<float> d_values,
              View<const float> logits, View<const float> values, View<const int> actions,
              View<const float> old_log_probs, View<const float> advantages, View<const float> returns,
              View<const float> old_values, const ppo::LossParams& p, View<const ppo::LossParams> agent_params);
void ppo_learning_rate(CudaDevice& device, View<float> lr, double base_lr, bool linear, double total_rollouts,
                       CounterValue rollouts);
void curiosity_input(CudaDevice& device, View<float> input, View<const float> states, View<const int> actions,
                     int num_actions);
void curiosity_error(CudaDevice& device, View<float> error, View<float> d_pred, View<const float> pred,
                     View<const float> next_states, int state_dim);
}  // namespace cuda_twin

namespace detail {
inline void require_positive(long long v, const char* op, const char* what) {
    if (v < 1) throw std::invalid_argument(fmt::format("ops::{}: {} must be >= 1 (got {})", op, what, v));
}

/// The rows (n) of a (n, cols) buffer: its size must be a non-zero multiple of n.
inline std::size_t columns(std::size_t size, std::size_t rows, const char* op, const char* what) {
    if (rows == 0 || size == 0 || size % rows != 0)
        throw std::invalid_argument(
            fmt::format("ops::{}: {} has {} elements, not a non-zero multiple of {} rows", op, what, size, rows));
    return size / rows;
}
}  // namespace detail

/// For each env e (n = actions.size()), logits (n, A): u = unit_float(Philox(seed,
/// policy_sample, e, step).v[0]); actions[e] = policy::sample(row e, u); log_probs[e] =
/// policy::log_prob(row e, actions[e]). Several agents' environments (agent_seeds, device memory):
/// n splits evenly, environment e is agent g = e / (n / agents)'s environment e - g n / agents,
/// drawn with agent_seeds[g] in place of seed.
inline void ppo_sample(Device& device, View<int> actions, View<float> log_probs, View<const float> logits,
                       int num_actions, std::uint64_t seed, CounterValue step,
                       View<const std::uint64_t> agent_seeds = {}) {
    const char* op = "ppo_sample";
    detail::require_positive(static_cast<long long>(actions.size()), op, "the number of environments");
    detail::require(agent_seeds.empty() || actions.size() % agent_seeds.size() == 0, op,
                    fmt::format("{} environments do not split into {} agents", actions.size(), agent_seeds.size()));
    detail::require_positive(num_actions, op, "num_actions");
    const std::size_t n = actions.size();
    detail::require_size(log_probs.size(), n, op, "log_probs");
    detail::require_size(logits.size(), n * static_cast<std::size_t>(num_actions), op, "logits");
    detail::checked_int_size(logits.size(), op);
    detail::require_distinct(op, {detail::range("actions", actions), detail::range("log_probs", log_probs),
                                  detail::range("logits", logits)});
    if (CudaDevice* cuda = device.cuda())
        return cuda_twin::ppo_sample(*cuda, actions, log_probs, logits, num_actions, seed, step, agent_seeds);
    cpu_twin::ppo_sample(actions, log_probs, logits, num_actions, seed, step, agent_seeds);
}

/// The action-diversity penalty (ppo::diversity_update). window (n, W = diversity_window) is
/// the ring of each env's last W actions and counts (n, A) their counts (both zeroed by the
/// caller before step 0; never reset at episode ends); step = the 0-based global collection
/// step. Stores and counts actions (n) (uncounting the action W steps old), then penalty (n) =
/// coef * max(0, (c - 0.5) / 0.5), c = the most frequent action's share of the window, once
/// step + 1 >= W; 0 before. Actions must lie in [0, A). Several agents' environments (agent_coef,
/// device memory): n splits evenly, agent g's with its coefficient agent_coef[g].
inline void ppo_diversity(Device& device, View<int> window, View<int> counts, View<float> penalty,
                          View<const int> actions, int num_actions, int diversity_window, float coef, CounterValue step,
                          View<const float> agent_coef = {}) {
    const char* op = "ppo_diversity";
    detail::require_positive(static_cast<long long>(actions.size()), op, "the number of environments");
    detail::require(agent_coef.empty() || actions.size() % agent_coef.size() == 0, op,
                    fmt::format("{} environments do not split into {} agents", actions.size(), agent_coef.size()));
    detail::require_positive(num_actions, op, "num_actions");
    detail::require_positive(diversity_window, op, "diversity_window");
    if (!std::isfinite(coef)) throw std::invalid_argument("ops::ppo_diversity: coef is not finite");
    const std::size_t n = actions.size();
    detail::require_size(window.size(), n * static_cast<std::size_t>(diversity_window), op, "window");
    detail::require_size(counts.size(), n * static_cast<std::size_t>(num_actions), op, "counts");
    detail::require_size(penalty.size(), n, op, "penalty");
    detail::checked_int_size(window.size(), op);
    detail::checked_int_size(counts.size(), op);
    detail::require_distinct(op, {detail::range("window", window), detail::range("counts", counts),
                                  detail::range("penalty", penalty), detail::range("actions", actions)});
    if (CudaDevice* cuda = device.cuda())
        return cuda_twin::ppo_diversity(*cuda, window, counts, penalty, actions, num_actions, diversity_window, coef,
                                        step, agent_coef);
    cpu_twin::ppo_diversity(window, counts, penalty, actions, num_actions, diversity_window, coef, step, agent_coef);
}

/// GAE (ppo::gae_env) over a (T, n) rollout, n = rewards.size() / T: advantages, returns,
/// rewards, values (V(s_t)), next_values (V of the observation after step t: the terminal
/// one when done, V(s_T) at t = T-1), done (env::DoneFlag) all (T, n). A termination does not
/// bootstrap; a truncation bootstraps from next_values but ends the episode (gae restarts).
/// Bit-identical on both backends. Several agents' rollouts (agent_gamma_lambda, device memory, a
/// (gamma, lambda) pair per agent): every buffer (agents, T, n), agent g's block with its pair.
inline void ppo_gae(Device& device, View<float> advantages, View<float> returns, View<const float> rewards,
                    View<const float> values, View<const float> next_values, View<const std::uint8_t> done, float gamma,
                    float lambda, int T, View<const float> agent_gamma_lambda = {}) {
    const char* op = "ppo_gae";
    detail::require_positive(T, op, "T");
    const std::size_t size = rewards.size();
    detail::require(agent_gamma_lambda.size() % 2 == 0, op,
                    "agent_gamma_lambda holds a (gamma, lambda) pair per agent");
    const std::size_t agents = std::max<std::size_t>(1, agent_gamma_lambda.size() / 2);
    detail::columns(size, static_cast<std::size_t>(T) * agents, op, "rewards");  // n = size / (agents T) >= 1
    detail::require_size(advantages.size(), size, op, "advantages");
    detail::require_size(returns.size(), size, op, "returns");
    detail::require_size(values.size(), size, op, "values");
    detail::require_size(next_values.size(), size, op, "next_values");
    detail::require_size(done.size(), size, op, "done");
    detail::checked_int_size(size, op);
    detail::require_distinct(op, {detail::range("advantages", advantages), detail::range("returns", returns),
                                  detail::range("rewards", rewards), detail::range("values", values),
                                  detail::range("next_values", next_values), detail::range("done", done)});
    if (CudaDevice* cuda = device.cuda())
        return cuda_twin::ppo_gae(*cuda, advantages, returns, rewards, values, next_values, done, gamma, lambda, T,
                                  agent_gamma_lambda);
    cpu_twin::ppo_gae(advantages, returns, rewards, values, next_values, done, gamma, lambda, T, agent_gamma_lambda);
}

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
inline void ppo_collect_truncated(Device& device, View<int> rows, View<int> bars, View<float> portfolio,
                                  View<int> count, View<const float> next_states, View<const env::StepInfo> info,
                                  View<const std::uint8_t> done, int market_dim, int row_base, bool restart,
                                  int agents = 1) {
    const char* op = "ppo_collect_truncated";
    detail::require(agents >= 1 && done.size() % static_cast<std::size_t>(agents) == 0, op,
                    fmt::format("{} environments do not split into {} agents", done.size(), agents));
    const std::size_t N = static_cast<std::size_t>(agents);
    const std::size_t n = done.size() / N;  // each agent's
    detail::require_positive(static_cast<long long>(n), op, "the number of environments");
    const std::size_t state_dim = detail::columns(next_states.size(), n * N, op, "next_states");
    detail::require(market_dim >= 0 && static_cast<std::size_t>(market_dim) <= state_dim, op,
                    fmt::format("market_dim {} must be in [0, state_dim {}]", market_dim, state_dim));
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
                    op, fmt::format("row_base {} + {} rows must fit an int", row_base, n));
    detail::checked_int_size(portfolio.size(), op);
    detail::checked_int_size(next_states.size(), op);
    detail::require_distinct(
        op, {detail::range("rows", rows), detail::range("bars", bars), detail::range("portfolio", portfolio),
             detail::range("count", count), detail::range("next_states", next_states), detail::range("info", info),
             detail::range("done", done)});
    if (CudaDevice* cuda = device.cuda())
        return cuda_twin::ppo_collect_truncated(*cuda, rows, bars, portfolio, count, next_states, info, done,
                                                market_dim, row_base, restart, agents);
    cpu_twin::ppo_collect_truncated(rows, bars, portfolio, count, next_states, info, done, market_dim, row_base,
                                    restart, agents);
}

/// The observations of gathered truncated episodes (r = bars.size() rows): observations (r,
/// state_dim), row k = ppo::terminal_observation_value(features, bars[k], portfolio row k): the
/// market features (n_bars, market_dim) of bar bars[k], then portfolio (r, state_dim -
/// market_dim) row k; a bar outside the features gives NaN. Bit-identical on both backends.
inline void ppo_terminal_observations(Device& device, View<float> observations, View<const int> bars,
                                      View<const float> portfolio, View<const float> features, int market_dim) {
    const char* op = "ppo_terminal_observations";
    const std::size_t r = bars.size();
    detail::require_positive(static_cast<long long>(r), op, "the number of rows");
    detail::require_positive(market_dim, op, "market_dim");
    const std::size_t state_dim = detail::columns(observations.size(), r, op, "observations");
    detail::require(static_cast<std::size_t>(market_dim) <= state_dim, op,
                    fmt::format("market_dim {} exceeds state_dim {}", market_dim, state_dim));
    detail::require_size(portfolio.size(), r * (state_dim - static_cast<std::size_t>(market_dim)), op, "portfolio");
    detail::columns(features.size(), static_cast<std::size_t>(market_dim), op, "features");
    detail::checked_int_size(observations.size(), op);
    detail::checked_int_size(features.size(), op);
    detail::require_distinct(op, {detail::range("observations", observations), detail::range("bars", bars),
                                  detail::range("portfolio", portfolio), detail::range("features", features)});
    if (CudaDevice* cuda = device.cuda())
        return cuda_twin::ppo_terminal_observations(*cuda, observations, bars, portfolio, features, market_dim);
    cpu_twin::ppo_terminal_observations(observations, bars, portfolio, features, market_dim);
}

/// dst[rows[i]] = values[i] for i < values.size() (rows distinct; a row outside dst is skipped).
/// Bit-identical on both backends.
inline void ppo_scatter_values(Device& device, View<float> dst, View<const float> values, View<const int> rows) {
    const char* op = "ppo_scatter_values";
    detail::require_size(rows.size(), values.size(), op, "rows");
    detail::checked_int_size(dst.size(), op);
    detail::checked_int_size(values.size(), op);
    detail::require_distinct(op,
                             {detail::range("dst", dst), detail::range("values", values), detail::range("rows", rows)});
    if (values.empty()) return;
    if (CudaDevice* cuda = device.cuda()) return cuda_twin::ppo_scatter_values(*cuda, dst, values, rows);
    cpu_twin::ppo_scatter_values(dst, values, rows);
}

/// In place: x = (x - mean) / (std + 1e-8), population std, deterministic (a fixed reduction
/// order on each backend, double sums). x (>= 1), scratch (>= normalize_scratch_size()); distinct.
inline void normalize(Device& device, View<float> x, View<float> scratch) {
    const char* op = "normalize";
    if (x.empty()) throw std::invalid_argument("ops::normalize: empty input");
    if (scratch.size() < normalize_scratch_size())
        throw std::invalid_argument(
            fmt::format("ops::normalize: scratch has {} floats, needs {} "
                        "(ops::normalize_scratch_size())",
                        scratch.size(), normalize_scratch_size()));
    detail::checked_int_size(x.size(), op);
    detail::require_distinct(op, {detail::range("x", x), detail::range("scratch", scratch)});
    if (CudaDevice* cuda = device.cuda())
        return cuda_twin::normalize(*cuda, x, scratch.subview(0, normalize_scratch_size()));
    cpu_twin::normalize(x, scratch.subview(0, normalize_scratch_size()));
}

/// A shuffled minibatch of B = actions.size() rows: output row i = rollout row
/// ppo::permute(offset + i, rollout.rows, seed, epoch) (a bijection of the rollout rows keyed
/// by (seed, epoch), so offsets 0, B, 2B, ... of one epoch never repeat a row).
/// states (B, rollout.state_dim), the rest (B); 0 <= offset, offset + B <= rollout.rows. Several
/// agents (agent_seeds, device memory): the rollout's buffers hold each agent's rollout.rows rows
/// one after the other (ppo::agent_rollout), the outputs each agent's B rows; agent g's minibatch
/// is drawn with agent_seeds[g] in place of seed.
inline void ppo_gather(Device& device, View<float> states, View<int> actions, View<float> old_log_probs,
                       View<float> advantages, View<float> returns, View<float> old_values, const ppo::RolloutView& r,
                       std::uint64_t seed, CounterValue epoch, int offset, View<const std::uint64_t> agent_seeds = {}) {
    const char* op = "ppo_gather";
    const std::size_t N = agent_seeds.empty() ? 1 : agent_seeds.size();
    detail::require_positive(static_cast<long long>(actions.size()), op, "the minibatch size");
    detail::require(actions.size() % N == 0, op,
                    fmt::format("{} minibatch rows do not split into {} agents", actions.size(), N));
    detail::require_positive(r.rows, op, "rollout.rows");
    detail::require_positive(r.state_dim, op, "rollout.state_dim");
    if (!r.states || !r.actions || !r.log_probs || !r.advantages || !r.returns || !r.values)
        throw std::invalid_argument("ops::ppo_gather: a rollout pointer is null");
    // B, M: each agent's minibatch and rollout rows; the buffers hold N of each.
    const std::size_t B = actions.size() / N, D = static_cast<std::size_t>(r.state_dim),
                      M = static_cast<std::size_t>(r.rows);
    if (offset < 0 || static_cast<std::size_t>(offset) + B > M)
        throw std::invalid_argument(fmt::format("ops::ppo_gather: rows [{}, {}) lie outside the rollout's {} rows",
                                                offset, static_cast<long long>(offset) + static_cast<long long>(B), M));
    detail::require_size(states.size(), N * B * D, op, "states");
    detail::require_size(old_log_probs.size(), N * B, op, "old_log_probs");
    detail::require_size(advantages.size(), N * B, op, "advantages");
    detail::require_size(returns.size(), N * B, op, "returns");
    detail::require_size(old_values.size(), N * B, op, "old_values");
    detail::checked_int_size(N * B * D, op);
    detail::checked_int_size(N * M * D, op);
    const std::size_t NM = N * M;
    detail::require_distinct(op,
                             {detail::range("states", states), detail::range("actions", actions),
                              detail::range("old_log_probs", old_log_probs), detail::range("advantages", advantages),
                              detail::range("returns", returns), detail::range("old_values", old_values),
                              detail::range("rollout.states", View<const float>(r.states, NM * D)),
                              detail::range("rollout.actions", View<const int>(r.actions, NM)),
                              detail::range("rollout.log_probs", View<const float>(r.log_probs, NM)),
                              detail::range("rollout.advantages", View<const float>(r.advantages, NM)),
                              detail::range("rollout.returns", View<const float>(r.returns, NM)),
                              detail::range("rollout.values", View<const float>(r.values, NM))});
    if (CudaDevice* cuda = device.cuda())
        return cuda_twin::ppo_gather(*cuda, states, actions, old_log_probs, advantages, returns, old_values, r, seed,
                                     epoch, offset, agent_seeds);
    cpu_twin::ppo_gather(states, actions, old_log_probs, advantages, returns, old_values, r, seed, epoch, offset,
                         agent_seeds);
}

/// The PPO loss of a minibatch (ppo::loss_sample): B = actions.size(), logits (B, A),
/// A = logits.size() / B; values (B) = the critic's current output; old_log_probs, advantages,
/// returns, old_values (B). d_logits (B, A) and d_values (B) = gradients of the minibatch-mean
/// total loss; stats (ppo::kPpoLossStats, B), stat k of sample i at k * B + i: policy loss,
/// value loss, entropy, approx KL, clipped (ppo::LossStat). Several agents (agent_params, device
/// memory): their minibatches of B / agents rows one after the other, each with its agent's
/// params (p is then unused) and its own mean (1 / (B / agents)); stat k is then (agents, B /
/// agents), so that one ops::mean of stats over agents x kPpoLossStats means is stat-major.
inline void ppo_loss(Device& device, View<float> stats, View<float> d_logits, View<float> d_values,
                     View<const float> logits, View<const float> values, View<const int> actions,
                     View<const float> old_log_probs, View<const float> advantages, View<const float> returns,
                     View<const float> old_values, const ppo::LossParams& p,
                     View<const ppo::LossParams> agent_params = {}) {
    const char* op = "ppo_loss";
    detail::require_positive(static_cast<long long>(actions.size()), op, "the minibatch size");
    const std::size_t B = actions.size();
    detail::require(agent_params.empty() || B % agent_params.size() == 0, op,
                    fmt::format("{} minibatch rows do not split into {} agents", B, agent_params.size()));
    const std::size_t A = detail::columns(logits.size(), B, op, "logits");
    if (!(p.clip >= 0.f) || !std::isfinite(p.clip) || !std::isfinite(p.value_coef) || !std::isfinite(p.entropy_coef))
        throw std::invalid_argument(
            fmt::format("ops::ppo_loss: need a finite clip >= 0 and finite coefficients (got clip {}, value_coef {}, "
                        "entropy_coef {})",
                        p.clip, p.value_coef, p.entropy_coef));
    detail::require_size(stats.size(), static_cast<std::size_t>(ppo::kPpoLossStats) * B, op, "stats");
    detail::require_size(d_logits.size(), B * A, op, "d_logits");
    detail::require_size(d_values.size(), B, op, "d_values");
    detail::require_size(values.size(), B, op, "values");
    detail::require_size(old_log_probs.size(), B, op, "old_log_probs");
    detail::require_size(advantages.size(), B, op, "advantages");
    detail::require_size(returns.size(), B, op, "returns");
    detail::require_size(old_values.size(), B, op, "old_values");
    detail::checked_int_size(B * A, op);
    detail::checked_int_size(stats.size(), op);
    detail::require_distinct(
        op, {detail::range("stats", stats), detail::range("d_logits", d_logits), detail::range("d_values", d_values),
             detail::range("logits", logits), detail::range("values", values), detail::range("actions", actions),
             detail::range("old_log_probs", old_log_probs), detail::range("advantages", advantages),
             detail::range("returns", returns), detail::range("old_values", old_values)});
    if (CudaDevice* cuda = device.cuda())
        return cuda_twin::ppo_loss(*cuda, stats, d_logits, d_values, logits, values, actions, old_log_probs, advantages,
                                   returns, old_values, p, agent_params);
    cpu_twin::ppo_loss(stats, d_logits, d_values, logits, values, actions, old_log_probs, advantages, returns,
                       old_values, p, agent_params);
}

/// The curiosity forward model's input (n, D + A) = [states row (D) | one-hot(action) (A)],
/// n = actions.size(), D = states.size() / n.
inline void curiosity_input(Device& device, View<float> input, View<const float> states, View<const int> actions,
                            int num_actions) {
    const char* op = "curiosity_input";
    detail::require_positive(static_cast<long long>(actions.size()), op, "the number of rows");
    detail::require_positive(num_actions, op, "num_actions");
    const std::size_t n = actions.size();
    const std::size_t D = detail::columns(states.size(), n, op, "states");
    detail::require_size(input.size(), n * (D + static_cast<std::size_t>(num_actions)), op, "input");
    detail::checked_int_size(input.size(), op);
    detail::require_distinct(
        op, {detail::range("input", input), detail::range("states", states), detail::range("actions", actions)});
    if (CudaDevice* cuda = device.cuda()) return cuda_twin::curiosity_input(*cuda, input, states, actions, num_actions);
    cpu_twin::curiosity_input(input, states, actions, num_actions);
}

/// The forward model's error: pred (n, P), P = pred.size() / n <= state_dim, predicts the
/// first P columns of next_states (n, state_dim); n = error.size(). error[e] = 0.5 * mean_j
/// (pred - target)^2 (the intrinsic reward before its coefficient); d_pred (n, P) =
/// (pred - target) / (n * P), the gradient of mean_e error[e].
inline void curiosity_error(Device& device, View<float> error, View<float> d_pred, View<const float> pred,
                            View<const float> next_states, int state_dim) {
    const char* op = "curiosity_error";
    detail::require_positive(static_cast<long long>(error.size()), op, "the number of rows");
    detail::require_positive(state_dim, op, "state_dim");
    const std::size_t n = error.size();
    const std::size_t P = detail::columns(pred.size(), n, op, "pred");
    if (P > static_cast<std::size_t>(state_dim))
        throw std::invalid_argument(
            fmt::format("ops::curiosity_error: the prediction has {} columns, more than the state's {}", P, state_dim));
    detail::require_size(d_pred.size(), pred.size(), op, "d_pred");
    detail::require_size(next_states.size(), n * static_cast<std::size_t>(state_dim), op, "next_states");
    detail::checked_int_size(next_states.size(), op);
    detail::require_distinct(op, {detail::range("error", error), detail::range("d_pred", d_pred),
                                  detail::range("pred", pred), detail::range("next_states", next_states)});
    if (CudaDevice* cuda = device.cuda())
        return cuda_twin::curiosity_error(*cuda, error, d_pred, pred, next_states, state_dim);
    cpu_twin::curiosity_error(error, d_pred, pred, next_states, state_dim);
}

/// lr (1) = ppo::scheduled_learning_rate(base_lr, linear, total_rollouts, rollouts): the
/// learning rate of a rollout's minibatch updates, written to device memory for Adam (a
/// captured update counts its rollouts on the device). total_rollouts >= 1.
inline void ppo_learning_rate(Device& device, View<float> lr, double base_lr, bool linear, double total_rollouts,
                              CounterValue rollouts) {
    detail::require_size(lr.size(), 1, "ppo_learning_rate", "lr");
    if (!std::isfinite(base_lr) || base_lr < 0 || !(total_rollouts >= 1))
        throw std::invalid_argument(
            fmt::format("ops::ppo_learning_rate: need base_lr >= 0 and total_rollouts >= 1, "
                        "got {} and {}",
                        base_lr, total_rollouts));
    if (CudaDevice* cuda = device.cuda())
        return cuda_twin::ppo_learning_rate(*cuda, lr, base_lr, linear, total_rollouts, rollouts);
    cpu_twin::ppo_learning_rate(lr, base_lr, linear, total_rollouts, rollouts);
}

}  // namespace fh::ops
