/// @file replay.h
/// @brief The replay ring's n-step sampling (cuda/kernels/replay_nstep.cu and its CPU twin), shared
///        by DQN (its replay) and IQL (its offline dataset).
#pragma once

#include <cstdint>

#include "math/env.h"
#include "math/host_device.h"
#include "math/rng.h"

namespace fh::replay {

/// The replay ring: `capacity_steps` collection steps of `n_envs` transitions each, slot
/// step % capacity_steps. Row (slot * n_envs + env). Device or host pointers.
struct ReplayView {
    const float* states;       ///< (capacity_steps * n_envs, state_dim)
    const float* next_states;  ///< (capacity_steps * n_envs, state_dim)
    const int* actions;        ///< (capacity_steps * n_envs)
    const float* rewards;      ///< (capacity_steps * n_envs)
    const std::uint8_t* done;  ///< (capacity_steps * n_envs) env::DoneFlag
    int capacity_steps;
    int n_envs;
    int state_dim;
};

/// Which transitions a batch is drawn from and how n-step returns are formed.
struct SampleParams {
    std::uint64_t seed;
    std::uint64_t update;   ///< RNG counter: the update number
    long long oldest_step;  ///< first step still in the ring
    long long sampleable;   ///< steps [oldest, oldest + sampleable) have n-1 steps after them
    int n_step;
    float gamma;
};

/// Batch row b: draws a step uniformly from the sampleable range and an environment uniformly,
/// then forms the n-step transition: R = sum_{k<n} gamma^k r_{t+k}, stopping at the first done;
/// next state = the next state of the last transition used; discount = gamma^(k+1) to bootstrap
/// from it, or 0 if that transition terminated (bankruptcy). A truncated episode bootstraps.
/// Writes the state and next state rows (state_dim floats each).
/// The scalar part of batch row b: the rows of the first and last transitions used, the action,
/// the n-step return and the discount (the state rows are copied from `first` and `last`).
struct NstepDraw {
    long long first, last;
    int action;
    float ret, discount;
    long long step;  ///< the first transition's collection step (its identity, with env)
    int env;
};
/// The first transition of batch row b: its collection step and environment (Philox on the
/// row and the update number).
struct NstepPick {
    long long step;
    int env;
};
FH_HD NstepPick pick_nstep(int b, const ReplayView& r, const SampleParams& s) {
    const rng::U32x4 u = rng::draw(s.seed, rng::Purpose::replay_sample, static_cast<std::uint32_t>(b), s.update);
    const std::uint64_t pick = (static_cast<std::uint64_t>(u.v[0]) << 32) | u.v[1];
    const long long step = s.oldest_step + static_cast<long long>(pick % static_cast<std::uint64_t>(s.sampleable));
    const int env_index = static_cast<int>(rng::below(u.v[2], static_cast<std::uint32_t>(r.n_envs)));
    return NstepPick{step, env_index};
}
/// The ring row of environment `env` at collection step `step`.
FH_HD long long ring_row(const ReplayView& r, long long step, int env) {
    return static_cast<long long>(step % r.capacity_steps) * r.n_envs + env;
}
/// The n-step transition from a pick; `load(k, reward, done)` gives the reward and done flag of
/// the pick's k-th step (row ring_row(r, pick.step + k, pick.env)), read in order k = 0, 1, ...
/// until the first done (a kernel may have read them ahead, all at once).
template <class Load>
FH_HD NstepDraw accumulate_nstep(const NstepPick& p, const ReplayView& r, const SampleParams& s, int action,
                                 Load load) {
    const long long first = ring_row(r, p.step, p.env);
    NstepDraw d{first, first, action, 0.0f, 0.0f, p.step, p.env};
    float acc = 0.0f, g = 1.0f;
    for (int k = 0; k < s.n_step; ++k) {
        float reward = 0.0f;
        std::uint8_t done = 0;
        load(k, reward, done);
        acc += g * reward;
        g *= s.gamma;
        d.last = ring_row(r, p.step + k, p.env);
        if (done == env::kTerminated) {
            d.discount = 0.0f;
            break;
        }
        d.discount = g;
        if (done == env::kTruncated) break;
    }
    d.ret = acc;
    return d;
}
FH_HD NstepDraw draw_nstep(int b, const ReplayView& r, const SampleParams& s) {
    const NstepPick p = pick_nstep(b, r, s);
    return accumulate_nstep(p, r, s, r.actions[ring_row(r, p.step, p.env)],
                            [&](int k, float& reward, std::uint8_t& done) {
                                const long long i = ring_row(r, p.step + k, p.env);
                                reward = r.rewards[i];
                                done = r.done[i];
                            });
}

#if defined(__CUDACC__)
/// accumulate_nstep by a whole warp, bit for bit (every lane holds the pick): lane k < n_step
/// reads step k's reward and done flag (one round trip to memory instead of one per step), and
/// every lane forms the return from them through shuffles. All 32 lanes must call it.
__device__ inline NstepDraw warp_accumulate_nstep(const NstepPick& p, const ReplayView& r, const SampleParams& s,
                                                  int lane) {
    const int action = r.actions[ring_row(r, p.step, p.env)];
    if (s.n_step > 32)
        return accumulate_nstep(p, r, s, action, [&](int k, float& reward, std::uint8_t& done) {
            const long long i = ring_row(r, p.step + k, p.env);
            reward = r.rewards[i];
            done = r.done[i];
        });
    float my_reward = 0.0f;
    int my_done = 0;
    if (lane < s.n_step) {
        const long long i = ring_row(r, p.step + lane, p.env);
        my_reward = r.rewards[i];
        my_done = r.done[i];
    }
    return accumulate_nstep(p, r, s, action, [&](int k, float& reward, std::uint8_t& done) {
        reward = __shfl_sync(0xffffffffu, my_reward, k);
        done = static_cast<std::uint8_t>(__shfl_sync(0xffffffffu, my_done, k));
    });
}
/// Columns of each state row a lane of warp_sample_nstep loads before the draw's rewards are
/// known (two: the 50 features of the trainers' states in one round).
inline constexpr int kWarpSampleCols = 2;
/// sample_nstep by a whole warp, bit for bit (state_out, next_out: the batch row's two outputs).
/// The first transition's state row is known from the pick, and the last transition is the n-th
/// step's unless a done flag comes first (rare): so both rows' loads go out beside the rewards and
/// done flags (the n-th step's next state read again when a done flag cut the return short), then
/// the stores; a row waits for memory once instead of once per row and per 32 columns.
__device__ inline NstepDraw warp_sample_nstep(int b, const ReplayView& r, const SampleParams& s, int lane,
                                              float* state_out, float* next_out) {
    constexpr int U = kWarpSampleCols;
    const NstepPick p = pick_nstep(b, r, s);
    const int D = r.state_dim;
    const float* state_row = r.states + ring_row(r, p.step, p.env) * D;
    const long long likely_last = ring_row(r, p.step + (s.n_step > 1 ? s.n_step - 1 : 0), p.env);
    float sv[U], nv[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
        const int c = u * 32 + lane;
        sv[u] = c < D ? state_row[c] : 0.0f;
        nv[u] = c < D ? r.next_states[likely_last * D + c] : 0.0f;
    }
    const NstepDraw d = warp_accumulate_nstep(p, r, s, lane);
    const float* next_row = r.next_states + d.last * D;
    if (d.last != likely_last) {  // the same on every lane
#pragma unroll
        for (int u = 0; u < U; ++u) nv[u] = u * 32 + lane < D ? next_row[u * 32 + lane] : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
        const int c = u * 32 + lane;
        if (c < D) state_out[c] = sv[u], next_out[c] = nv[u];
    }
    for (int c0 = 32 * U; c0 < D; c0 += 32 * U) {  // wider states: the rest, U columns a lane at a time
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int c = c0 + u * 32 + lane;
            sv[u] = c < D ? state_row[c] : 0.0f;
            nv[u] = c < D ? next_row[c] : 0.0f;
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int c = c0 + u * 32 + lane;
            if (c < D) state_out[c] = sv[u], next_out[c] = nv[u];
        }
    }
    return d;
}
#endif

/// Batch row b, whole: the draw, then the state and next state rows (state_dim floats each).
/// Returns the draw (its step and env identify the first transition).
FH_HD NstepDraw sample_nstep(int b, const ReplayView& r, const SampleParams& s, float* state_out, float* next_out,
                             int& action, float& ret, float& discount) {
    const NstepDraw d = draw_nstep(b, r, s);
    for (int c = 0; c < r.state_dim; ++c) state_out[c] = r.states[d.first * r.state_dim + c];
    for (int c = 0; c < r.state_dim; ++c) next_out[c] = r.next_states[d.last * r.state_dim + c];
    action = d.action;
    ret = d.ret;
    discount = d.discount;
    return d;
}

}  // namespace fh::replay
