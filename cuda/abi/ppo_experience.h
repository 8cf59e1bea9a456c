/// @file ppo_experience.h
/// @brief Signatures of cuda/kernels/ppo_experience.cu: PPO action sampling and the
///        action-diversity penalty during collection.
#pragma once

#include <cstdint>

#include "math/core.h"
#include "math/ppo.h"
#include "abi/view.h"

namespace fh::ops {

/// For each env e (n = actions.size()), logits (n, A): u = unit_float(Philox(seed,
/// policy_sample, e, step).v[0]); actions[e] = policy::sample(row e, u); log_probs[e] =
/// policy::log_prob(row e, actions[e]). Several agents' environments (agent_seeds, device memory):
/// n splits evenly, environment e is agent g = e / (n / agents)'s environment e - g n / agents,
/// drawn with agent_seeds[g] in place of seed, at step.agent(g) (its own counter where
/// step.agent_stride > 0).
struct PpoSample {
    View<int> actions;
    View<float> log_probs;
    View<const float> logits;
    int num_actions;
    std::uint64_t seed;
    core::CounterValue step;
    View<const std::uint64_t> agent_seeds{};
};

/// The action-diversity penalty (ppo::diversity_update). window (n, W = diversity_window) is
/// the ring of each env's last W actions and counts (n, A) their counts (both zeroed by the
/// caller before step 0; never reset at episode ends); step = the 0-based global collection
/// step. Stores and counts actions (n) (uncounting the action W steps old), then penalty (n) =
/// coef * max(0, (c - 0.5) / 0.5), c = the most frequent action's share of the window, once
/// step + 1 >= W; 0 before. Actions must lie in [0, A). Several agents' environments (agent_coef,
/// device memory): n splits evenly, agent g's with its coefficient agent_coef[g] at step.agent(g).
struct PpoDiversity {
    View<int> window;
    View<int> counts;
    View<float> penalty;
    View<const int> actions;
    int num_actions;
    int diversity_window;
    float coef;
    core::CounterValue step;
    View<const float> agent_coef{};
};

}  // namespace fh::ops

namespace fh::abi {

/// ops::PpoSample's (ppo::sample_action), a thread per environment; agent_seeds null: `seed` for
/// every environment.
using PpoSample = void(int* __restrict__ actions, float* __restrict__ log_probs, const float* __restrict__ logits,
                       int num_actions, std::uint64_t seed, core::CounterValue step, int n,
                       const std::uint64_t* __restrict__ agent_seeds, int envs_per_agent);
/// ops::PpoDiversity's (ppo::diversity_update), a thread per environment; agent_coef null: `coef`
/// for every environment.
using PpoDiversity = void(int* __restrict__ window, int* __restrict__ counts, float* __restrict__ penalty,
                          const int* __restrict__ actions, int num_actions, int W, float coef, core::CounterValue step,
                          int n, const float* __restrict__ agent_coef, int envs_per_agent);

}  // namespace fh::abi

#define FH_KERNELS_ppo_experience(FH_KERNEL)                \
    FH_KERNEL(ppo_experience, ppo_sample_kernel, PpoSample) \
    FH_KERNEL(ppo_experience, ppo_diversity_kernel, PpoDiversity)

#ifndef __CUDACC__
#include "ops/op_begin.hpp"

inline void check(const PpoSample& a) {
    const auto& [actions, log_probs, logits, num_actions, seed, step, agent_seeds] = a;
    const char* op = "ppo_sample";
    detail::require_positive(static_cast<long long>(actions.size()), op, "the number of environments");
    detail::require(agent_seeds.empty() || actions.size() % agent_seeds.size() == 0, op,
                    "{} environments do not split into {} agents", actions.size(), agent_seeds.size());
    detail::require_positive(num_actions, op, "num_actions");
    const std::size_t n = actions.size();
    detail::require_size(log_probs.size(), n, op, "log_probs");
    detail::require_size(logits.size(), n * static_cast<std::size_t>(num_actions), op, "logits");
    detail::checked_int_size(logits.size(), op);
    detail::require_distinct(op, {FH_RANGES(actions, log_probs, logits)});
}
FH_LAUNCH(PpoSample) {
    const auto& [actions, log_probs, logits, num_actions, seed, step, agent_seeds] = a;
    gpu.kernels().ppo_sample_kernel(
        gpu.stream(), LaunchDims::linear(actions.size(), 128), actions.data(), log_probs.data(), logits.data(),
        num_actions, seed, step, static_cast<int>(actions.size()), agent_seeds.empty() ? nullptr : agent_seeds.data(),
        static_cast<int>(agent_seeds.empty() ? actions.size() : actions.size() / agent_seeds.size()));
}

inline void check(const PpoDiversity& a) {
    const auto& [window, counts, penalty, actions, num_actions, diversity_window, coef, step, agent_coef] = a;
    const char* op = "ppo_diversity";
    detail::require_positive(static_cast<long long>(actions.size()), op, "the number of environments");
    detail::require(agent_coef.empty() || actions.size() % agent_coef.size() == 0, op,
                    "{} environments do not split into {} agents", actions.size(), agent_coef.size());
    detail::require_positive(num_actions, op, "num_actions");
    detail::require_positive(diversity_window, op, "diversity_window");
    if (!std::isfinite(coef)) throw std::invalid_argument("ops::ppo_diversity: coef is not finite");
    const std::size_t n = actions.size();
    detail::require_size(window.size(), n * static_cast<std::size_t>(diversity_window), op, "window");
    detail::require_size(counts.size(), n * static_cast<std::size_t>(num_actions), op, "counts");
    detail::require_size(penalty.size(), n, op, "penalty");
    detail::checked_int_size(window.size(), op);
    detail::checked_int_size(counts.size(), op);
    detail::require_distinct(op, {FH_RANGES(window, counts, penalty, actions)});
}
FH_LAUNCH(PpoDiversity) {
    const auto& [window, counts, penalty, actions, num_actions, diversity_window, coef, step, agent_coef] = a;
    gpu.kernels().ppo_diversity_kernel(
        gpu.stream(), LaunchDims::linear(actions.size(), 128), window.data(), counts.data(), penalty.data(),
        actions.data(), num_actions, diversity_window, coef, step, static_cast<int>(actions.size()),
        agent_coef.empty() ? nullptr : agent_coef.data(),
        static_cast<int>(agent_coef.empty() ? actions.size() : actions.size() / agent_coef.size()));
}

#include "ops/op_end.hpp"
#endif
