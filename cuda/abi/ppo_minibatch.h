/// @file ppo_minibatch.h
/// @brief Signature of cuda/kernels/ppo_minibatch.cu: a shuffled minibatch of the rollout.
#pragma once

#include <cstdint>

#include "math/core.h"
#include "math/ppo.h"
#include "abi/view.h"

namespace fh::ops {

/// A shuffled minibatch of B = actions.size() rows: output row i = rollout row ppo::permute(offset
/// + i, rollout.rows, seed, epoch) (a bijection of the rollout rows keyed by (seed, epoch), so
/// offsets 0, B, 2B, ... of one epoch never repeat a row). states (B, rollout.state_dim), the rest
/// (B); 0 <= offset, offset + B <= rollout.rows; outputs distinct from each other and from the
/// rollout. Several agents (agent_seeds, device memory): the rollout's buffers hold each agent's
/// rollout.rows rows one after the other (ppo::agent_rollout), the outputs each agent's B rows;
/// agent g's minibatch is drawn with agent_seeds[g] in place of seed, at epoch.agent(g) (its own
/// counter where epoch.agent_stride > 0).
struct PpoGather {
    View<float> states;
    View<int> actions;
    View<float> old_log_probs;
    View<float> advantages;
    View<float> returns;
    View<float> old_values;
    ppo::RolloutView r;
    std::uint64_t seed;
    core::CounterValue epoch;
    int offset;
    View<const std::uint64_t> agent_seeds{};
};

/// lr (1) = ppo::scheduled_learning_rate(base_lr, linear, total_rollouts, rollouts): the
/// learning rate of a rollout's minibatch updates, written to device memory for Adam (a
/// captured update counts its rollouts on the device). total_rollouts >= 1.
struct PpoLearningRate {
    View<float> lr;
    double base_lr;
    bool linear;
    double total_rollouts;
    core::CounterValue rollouts;
};

}  // namespace fh::ops

namespace fh::abi {

/// Minibatch rows per warp of ppo_gather_kernel as the trainer launches it: measured on an H200
/// against 1 and 8 (docs/performance-log.md, "Batched PPO populations"), fastest for one agent and for 16.
inline constexpr int kPpoGatherRowsPerWarp = 4;

/// ops::PpoGather's (ppo::gather_row): a warp per rows_per_warp (1 to 32) rows, blocks of whole
/// warps, any grid in x; grid y = agents, agent y's minibatch (rows y batch..) from
/// ppo::agent_rollout(rollout, y) with agent_seeds[y] (null: `seed`).
using PpoGather = void(float* __restrict__ states, int* __restrict__ actions, float* __restrict__ old_log_probs,
                       float* __restrict__ advantages, float* __restrict__ returns, float* __restrict__ old_values,
                       ppo::RolloutView rollout, std::uint64_t seed, core::CounterValue epoch, int offset, int batch,
                       int rows_per_warp, const std::uint64_t* __restrict__ agent_seeds);

/// ops::PpoLearningRate's, one thread.
using PpoLearningRate = void(float* __restrict__ lr, double base_lr, int linear, double total_rollouts,
                             core::CounterValue rollouts);

}  // namespace fh::abi

#define FH_KERNELS_ppo_minibatch(FH_KERNEL)                \
    FH_KERNEL(ppo_minibatch, ppo_gather_kernel, PpoGather) \
    FH_KERNEL(ppo_minibatch, ppo_learning_rate_kernel, PpoLearningRate)

#ifndef __CUDACC__
#include "ops/op_begin.hpp"

inline void check(const PpoGather& a) {
    const auto& [states, actions, old_log_probs, advantages, returns, old_values, r, seed, epoch, offset, agent_seeds] =
        a;
    const char* op = "ppo_gather";
    const std::size_t N = agent_seeds.empty() ? 1 : agent_seeds.size();
    detail::require_positive(static_cast<long long>(actions.size()), op, "the minibatch size");
    detail::require(actions.size() % N == 0, op, "{} minibatch rows do not split into {} agents", actions.size(), N);
    detail::require_positive(r.rows, op, "rollout.rows");
    detail::require_positive(r.state_dim, op, "rollout.state_dim");
    if (!r.states || !r.actions || !r.log_probs || !r.advantages || !r.returns || !r.values)
        throw std::invalid_argument("ops::ppo_gather: a rollout pointer is null");
    // B, M: each agent's minibatch and rollout rows; the buffers hold N of each.
    const std::size_t B = actions.size() / N, D = static_cast<std::size_t>(r.state_dim),
                      M = static_cast<std::size_t>(r.rows);
    detail::require(offset >= 0 && static_cast<std::size_t>(offset) + B <= M, op,
                    "rows [{}, {}) lie outside the rollout's {} rows", offset,
                    static_cast<long long>(offset) + static_cast<long long>(B), M);
    detail::require_size(states.size(), N * B * D, op, "states");
    detail::require_sizes(N * B, op, {FH_SIZES(old_log_probs, advantages, returns, old_values)});
    detail::checked_int_size(N * B * D, op);
    detail::checked_int_size(N * M * D, op);
    const std::size_t NM = N * M;
    detail::require_distinct(op, {FH_RANGES(states, actions, old_log_probs, advantages, returns, old_values),
                                  detail::range("rollout.states", View<const float>(r.states, NM * D)),
                                  detail::range("rollout.actions", View<const int>(r.actions, NM)),
                                  detail::range("rollout.log_probs", View<const float>(r.log_probs, NM)),
                                  detail::range("rollout.advantages", View<const float>(r.advantages, NM)),
                                  detail::range("rollout.returns", View<const float>(r.returns, NM)),
                                  detail::range("rollout.values", View<const float>(r.values, NM))});
}
FH_LAUNCH(PpoGather) {
    const auto& [states, actions, old_log_probs, advantages, returns, old_values, rollout, seed, epoch, offset,
                 agent_seeds] = a;
    const std::size_t N = agent_seeds.empty() ? 1 : agent_seeds.size(), B = actions.size() / N;
    const std::size_t rows = static_cast<std::size_t>(abi::kPpoGatherRowsPerWarp);
    const std::size_t warps = (B + rows - 1) / rows;
    LaunchDims dims = LaunchDims::linear(warps * 32, 128);
    dims.grid.y = static_cast<unsigned>(N);  // agent y's minibatch
    gpu.kernels().ppo_gather_kernel(gpu.stream(), dims, states.data(), actions.data(), old_log_probs.data(),
                                    advantages.data(), returns.data(), old_values.data(), rollout, seed, epoch, offset,
                                    static_cast<int>(B), abi::kPpoGatherRowsPerWarp,
                                    agent_seeds.empty() ? nullptr : agent_seeds.data());
}

inline void check(const PpoLearningRate& a) {
    const auto& [lr, base_lr, linear, total_rollouts, rollouts] = a;
    detail::require_size(lr.size(), 1, "ppo_learning_rate", "lr");
    if (!std::isfinite(base_lr) || base_lr < 0 || !(total_rollouts >= 1))
        throw std::invalid_argument(
            fmt::format("ops::ppo_learning_rate: need base_lr >= 0 and total_rollouts >= 1, "
                        "got {} and {}",
                        base_lr, total_rollouts));
}
FH_LAUNCH(PpoLearningRate) {
    const auto& [lr, base_lr, linear, total_rollouts, rollouts] = a;
    gpu.kernels().ppo_learning_rate_kernel(gpu.stream(), LaunchDims{dim3(1), dim3(1), 0}, lr.data(), base_lr,
                                           linear ? 1 : 0, total_rollouts, rollouts);
}

#include "ops/op_end.hpp"
#endif
