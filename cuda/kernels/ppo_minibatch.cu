/* ppo_minibatch.cu — a shuffled minibatch of the PPO rollout (docs/ppo.md,
 * "Kernel-level math").
 *
 * Math:        minibatch row i = rollout row ppo::permute(offset + i, rows, seed, epoch): a keyed
 *              bijection of [0, rows) (a 6-round unbalanced Feistel network over Philox purpose
 *              minibatch on the smallest power-of-two domain >= rows, cycle-walked), so the
 *              minibatches at offsets 0, B, 2B, ... of one epoch partition the rollout.
 * Layout:      rollout (ppo::RolloutView): states (rows, state_dim), the rest (rows); outputs
 *              states (batch, state_dim), actions, old_log_probs, advantages, returns,
 *              old_values (batch).
 *              The learning rate of the rollout's updates: ppo::scheduled_learning_rate of the
 *              rollout count (from device memory in a captured update), one thread.
 * Launch:      a warp per rows_per_warp (1 to 32) minibatch rows: lane r finds row r's rollout
 *              row and copies its scalars, then the lanes copy the rows' states as one
 *              contiguous span (each row one contiguous read). Any 1-D grid of whole warps
 *              (grid-stride).
 * Determinism: exact; integer index math and copies, = CPU twin bit for bit.
 * Aliasing:    outputs are __restrict__, distinct from each other and from the rollout buffers
 *              (checked by ops::ppo_gather, src/ops/ppo/ops.hpp).
 * Signatures:  cuda/abi/ppo_minibatch.h. CPU twin: src/ops/ppo/cpu.cpp.
 */
#include "abi/ppo_minibatch.h"
#include "device_functions.cuh"

using fh::device::global_thread_index;
using fh::device::grid_thread_count;

extern "C" __global__ void ppo_gather_kernel(float* __restrict__ states, int* __restrict__ actions,
                                             float* __restrict__ old_log_probs, float* __restrict__ advantages,
                                             float* __restrict__ returns, float* __restrict__ old_values,
                                             fh::ppo::RolloutView rollout, std::uint64_t seed,
                                             fh::core::CounterValue epoch_value, int offset, int batch,
                                             int rows_per_warp, const std::uint64_t* __restrict__ agent_seeds) {
    constexpr int kWarp = 32;
    // Agent blockIdx.y's minibatch from its rollout (grid y 1 and agent_seeds null: one agent).
    const int agent = static_cast<int>(blockIdx.y);
    const auto epoch = static_cast<std::uint64_t>(epoch_value.agent(agent).value());
    rollout = fh::ppo::agent_rollout(rollout, agent);
    if (agent_seeds != nullptr) seed = agent_seeds[agent];
    const long long out = static_cast<long long>(agent) * batch;
    states += out * rollout.state_dim;
    actions += out;
    old_log_probs += out;
    advantages += out;
    returns += out;
    old_values += out;
    const int lane = static_cast<int>(threadIdx.x % kWarp);
    const int D = rollout.state_dim;
    const long long warp = global_thread_index() / kWarp, warps = grid_thread_count() / kWarp;
    // base is the same for the whole warp (blocks of whole warps), so every lane takes the shuffles.
    for (long long base = warp * rows_per_warp; base < batch; base += warps * rows_per_warp) {
        const int rows = static_cast<int>(batch - base < rows_per_warp ? batch - base : rows_per_warp);
        long long src = 0;  // lane r < rows: the rollout row of minibatch row base + r
        if (lane < rows) {
            const int i = static_cast<int>(base + lane);
            src = fh::ppo::gather_source(i, rollout, seed, epoch, offset);
            fh::ppo::gather_scalars(i, src, rollout, actions, old_log_probs, advantages, returns, old_values);
        }
        // The rows' states as one contiguous span of rows * D floats, the lanes over it.
        const int n = rows * D;
        for (int e0 = 0; e0 < n; e0 += kWarp) {
            const int e = e0 + lane;
            const int r = (e < n ? e : n - 1) / D;
            const long long from = __shfl_sync(0xffffffffu, src, r);
            if (e < n) states[base * D + e] = rollout.states[from * D + (e - r * D)];
        }
    }
}

extern "C" __global__ void ppo_learning_rate_kernel(float* __restrict__ lr, double base_lr, int linear,
                                                    double total_rollouts, fh::core::CounterValue rollouts) {
    if (global_thread_index() == 0)
        lr[0] = fh::ppo::scheduled_learning_rate(base_lr, linear, total_rollouts, rollouts.value());
}

FH_KERNELS_ppo_minibatch(FH_CHECK_KERNEL_ABI)
