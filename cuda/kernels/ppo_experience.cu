/* ppo_experience.cu — PPO collection: sampling actions from the policy and the
 * action-diversity penalty (docs/ppo.md, "Kernel-level math").
 *
 * Math:        sample:    u = unit_float(Philox(seed, policy_sample, e, step).v[0]);
 *                         action = policy::sample(logits row e, u) (inverse CDF);
 *                         log_prob = policy::log_prob(logits row e, action)  (ppo::sample_action)
 *              diversity: ring window (W) of each env's last W actions and their counts (A);
 *                         slot = step % W, uncount the leaving action once step >= W, store and
 *                         count the new one; penalty = coef * max(0, (c - 0.5) / 0.5) with c the
 *                         most frequent action's share once step + 1 >= W, else 0
 *                         (ppo::diversity_update, ppo::diversity_penalty).
 * Agents:      sample with agent_seeds: environment e is agent e / envs_per_agent's environment
 *              e % envs_per_agent, drawn with that agent's seed (what its own launch draws);
 *              diversity with agent_coef: that agent's coefficient.
 * Layout:      logits (n, A); actions, log_probs, penalty (n); window (n, W); counts (n, A).
 * Launch:      one thread per environment, any 1-D grid (grid-stride).
 * Determinism: exact. Diversity: integers and IEEE float division (--fmad=false), = CPU twin
 *              bit for bit. Sampling: expf/logf differ from the host's in the last bits, so the
 *              log-probabilities are ≈ CPU and an action can differ from the CPU's only when u
 *              falls within rounding of a CDF boundary (tests allow a mismatch rate <= 1e-3).
 * Aliasing:    every pointer is __restrict__: all buffers of a launch are distinct (checked by
 *              ops::ppo_sample / ops::ppo_diversity, src/ops/ppo/ops.hpp).
 * Signatures:  cuda/abi/ppo_experience.h. CPU twins: src/ops/ppo/cpu.cpp.
 */
#include "abi/ppo_experience.h"
#include "device_functions.cuh"

using fh::device::global_thread_index;
using fh::device::grid_thread_count;

extern "C" __global__ void ppo_sample_kernel(int* __restrict__ actions, float* __restrict__ log_probs,
                                             const float* __restrict__ logits, int num_actions, std::uint64_t seed,
                                             fh::core::CounterValue step_value, int n,
                                             const std::uint64_t* __restrict__ agent_seeds, int envs_per_agent) {
    for (long long e = global_thread_index(); e < n; e += grid_thread_count()) {
        float lp = 0.0f;
        const long long agent = agent_seeds == nullptr ? 0 : e / envs_per_agent;
        const auto step = static_cast<std::uint64_t>(step_value.agent(agent).value());
        actions[e] = fh::ppo::sample_action(logits + e * num_actions, num_actions,
                                            agent_seeds == nullptr ? seed : agent_seeds[agent],
                                            static_cast<int>(e - agent * envs_per_agent), step, lp);
        log_probs[e] = lp;
    }
}

extern "C" __global__ void ppo_diversity_kernel(int* __restrict__ window, int* __restrict__ counts,
                                                float* __restrict__ penalty, const int* __restrict__ actions,
                                                int num_actions, int W, float coef, fh::core::CounterValue step_value,
                                                int n, const float* __restrict__ agent_coef, int envs_per_agent) {
    for (long long e = global_thread_index(); e < n; e += grid_thread_count()) {
        const long long agent = agent_coef == nullptr ? 0 : e / envs_per_agent;
        const auto step = static_cast<std::uint64_t>(step_value.agent(agent).value());
        penalty[e] = fh::ppo::diversity_update(window + e * W, counts + e * num_actions, actions[e], num_actions, W,
                                               agent_coef == nullptr ? coef : agent_coef[agent], step);
    }
}

FH_KERNELS_ppo_experience(FH_CHECK_KERNEL_ABI)
