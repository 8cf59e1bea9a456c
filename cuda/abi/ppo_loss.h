/// @file ppo_loss.h
/// @brief Signature of cuda/kernels/ppo_loss.cu: the clipped surrogate, value and entropy losses
///        and their gradients.
#pragma once

#include "math/ppo.h"
#include "abi/view.h"

namespace fh::ops {

/// The PPO loss of a minibatch (ppo::loss_sample): B = actions.size(), logits (B, A),
/// A = logits.size() / B; values (B) = the critic's current output; old_log_probs, advantages,
/// returns, old_values (B). d_logits (B, A) and d_values (B) = gradients of the minibatch-mean
/// total loss; stats (ppo::kPpoLossStats, B), stat k of sample i at k * B + i: policy loss,
/// value loss, entropy, approx KL, clipped (ppo::LossStat). Several agents (agent_params, device
/// memory): their minibatches of B / agents rows one after the other, each with its agent's
/// params (p is then unused) and its own mean (1 / (B / agents)); stat k is then (agents, B /
/// agents), so that one ops::mean of stats over agents x kPpoLossStats means is stat-major.
struct PpoLoss {
    View<float> stats;
    View<float> d_logits;
    View<float> d_values;
    View<const float> logits;
    View<const float> values;
    View<const int> actions;
    View<const float> old_log_probs;
    View<const float> advantages;
    View<const float> returns;
    View<const float> old_values;
    ppo::LossParams p;
    View<const ppo::LossParams> agent_params{};
};

}  // namespace fh::ops

namespace fh::abi {

/// ops::PpoLoss' (ppo::loss_sample): blocks of kPpoLossThreads threads, kPpoLossLanes lanes per
/// sample (grid-stride over the groups) sharing its row's sums; agent_params null: params,
/// rows_per_agent = batch.
using PpoLoss = void(float* __restrict__ stats, float* __restrict__ d_logits, float* __restrict__ d_values,
                     const float* __restrict__ logits, const float* __restrict__ values,
                     const int* __restrict__ actions, const float* __restrict__ old_log_probs,
                     const float* __restrict__ advantages, const float* __restrict__ returns,
                     const float* __restrict__ old_values, ppo::LossParams params, int num_actions, int batch,
                     const ppo::LossParams* __restrict__ agent_params, int rows_per_agent);
inline constexpr int kPpoLossThreads = 256;
/// Lanes per sample: a group of eight adds a row of PPO's 45 actions in six steps a lane and three
/// shuffles, where a warp's 32 lanes repeat the sample's scalar work 32 times.
inline constexpr int kPpoLossLanes = 8;

}  // namespace fh::abi

#define FH_KERNELS_ppo_loss(FH_KERNEL) FH_KERNEL(ppo_loss, ppo_loss_kernel, PpoLoss)

#ifndef __CUDACC__
#include "ops/op_begin.hpp"

inline void check(const PpoLoss& a) {
    const auto& [stats, d_logits, d_values, logits, values, actions, old_log_probs, advantages, returns, old_values, p,
                 agent_params] = a;
    const char* op = "ppo_loss";
    detail::require_positive(static_cast<long long>(actions.size()), op, "the minibatch size");
    const std::size_t B = actions.size();
    detail::require(agent_params.empty() || B % agent_params.size() == 0, op,
                    "{} minibatch rows do not split into {} agents", B, agent_params.size());
    const std::size_t A = detail::columns(logits.size(), B, op, "logits");
    detail::require(
        p.clip >= 0.f && std::isfinite(p.clip) && std::isfinite(p.value_coef) && std::isfinite(p.entropy_coef), op,
        "need a finite clip >= 0 and finite coefficients (got clip {}, value_coef {}, entropy_coef {})", p.clip,
        p.value_coef, p.entropy_coef);
    detail::require_size(stats.size(), static_cast<std::size_t>(ppo::kPpoLossStats) * B, op, "stats");
    detail::require_size(d_logits.size(), B * A, op, "d_logits");
    detail::require_sizes(B, op, {FH_SIZES(d_values, values, old_log_probs, advantages, returns, old_values)});
    detail::checked_int_size(B * A, op);
    detail::checked_int_size(stats.size(), op);
    detail::require_distinct(op, {FH_RANGES(stats, d_logits, d_values, logits, values, actions, old_log_probs,
                                            advantages, returns, old_values)});
}
FH_LAUNCH(PpoLoss) {
    const auto& [stats, d_logits, d_values, logits, values, actions, old_log_probs, advantages, returns, old_values, p,
                 agent_params] = a;
    const std::size_t B = actions.size();
    const LaunchDims dims = LaunchDims::linear(B * abi::kPpoLossLanes, abi::kPpoLossThreads);  // lanes per sample
    gpu.kernels().ppo_loss_kernel(gpu.stream(), dims, stats.data(), d_logits.data(), d_values.data(), logits.data(),
                                  values.data(), actions.data(), old_log_probs.data(), advantages.data(),
                                  returns.data(), old_values.data(), p, static_cast<int>(logits.size() / B),
                                  static_cast<int>(B), agent_params.empty() ? nullptr : agent_params.data(),
                                  static_cast<int>(agent_params.empty() ? B : B / agent_params.size()));
}

#include "ops/op_end.hpp"
#endif
