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
    std::uint64_t update;      ///< RNG counter: the update number
    long long oldest_step;     ///< first step still in the ring
    long long sampleable;      ///< steps [oldest, oldest + sampleable) have n-1 steps after them
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
FH_HD NstepDraw draw_nstep(int b, const ReplayView& r, const SampleParams& s) {
    const rng::U32x4 u = rng::draw(s.seed, rng::Purpose::replay_sample, static_cast<std::uint32_t>(b), s.update);
    const std::uint64_t pick = (static_cast<std::uint64_t>(u.v[0]) << 32) | u.v[1];
    const long long step = s.oldest_step + static_cast<long long>(pick % static_cast<std::uint64_t>(s.sampleable));
    const int env_index = static_cast<int>(rng::below(u.v[2], static_cast<std::uint32_t>(r.n_envs)));
    auto row = [&](long long st) {
        return static_cast<long long>(st % r.capacity_steps) * r.n_envs + env_index;
    };
    NstepDraw d{row(step), row(step), r.actions[row(step)], 0.0f, 0.0f, step, env_index};
    float acc = 0.0f, g = 1.0f;
    for (int k = 0; k < s.n_step; ++k) {
        const long long i = row(step + k);
        acc += g * r.rewards[i];
        g *= s.gamma;
        d.last = i;
        const std::uint8_t done = r.done[i];
        if (done == env::kTerminated) { d.discount = 0.0f; break; }
        d.discount = g;
        if (done == env::kTruncated) break;
    }
    d.ret = acc;
    return d;
}

/// Batch row b, whole: the draw, then the state and next state rows (state_dim floats each).
/// Returns the draw (its step and env identify the first transition).
FH_HD NstepDraw sample_nstep(int b, const ReplayView& r, const SampleParams& s, float* state_out,
                             float* next_out, int& action, float& ret, float& discount) {
    const NstepDraw d = draw_nstep(b, r, s);
    for (int c = 0; c < r.state_dim; ++c) state_out[c] = r.states[d.first * r.state_dim + c];
    for (int c = 0; c < r.state_dim; ++c) next_out[c] = r.next_states[d.last * r.state_dim + c];
    action = d.action;
    ret = d.ret;
    discount = d.discount;
    return d;
}

}  // namespace fh::replay
