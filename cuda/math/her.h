/// @file her.h
/// @brief Hindsight experience replay for the DQN trainer (dqn.her, docs/dqn.md "Hindsight
///        experience replay"): the goal is a target return of the episode, in percent of the initial
///        equity; the achieved goal of an observation is its portfolio feature "equity change"
///        (env::portfolio_features, row[2]); the goal-conditioned reward adds `weight` at every step
///        whose next observation is at or above the goal; a replayed transition is relabelled with
///        probability `ratio` with a return the same episode achieved later (the "future"
///        strategy of Andrychowicz et al. 2017). Written once for the kernels
///        (cuda/kernels/dqn_step.cu) and the CPU twins (src/ops/dqn/cpu.cpp): same bits on both.
#pragma once

#include <cstdint>

#include "math/env.h"
#include "math/host_device.h"
#include "math/replay.h"
#include "math/rng.h"

namespace fh::her {

/// Floats a goal adds to an observation: [goal, goal - achieved], both in percent of the initial
/// equity (the units of the portfolio features).
inline constexpr int kGoalFeatures = 2;
/// The portfolio feature that is the achieved goal: the episode's equity change in percent.
inline constexpr int kAchievedPortfolioFeature = 2;

/// The column of the achieved goal in an environment observation of `env_state_dim` floats.
FH_HD int achieved_column(int env_state_dim) {
    return env_state_dim - env::kPortfolioFeatures + kAchievedPortfolioFeature;
}

/// The goal of episode `episode` (env::EnvState::episode) of environment `env`: uniform in
/// [goal_min, goal_max] from Philox(seed, her_goal, env, episode), in double, rounded to float.
/// A function of the episode's identity: nothing to store for the running episodes, and a
/// resumed run draws the same goals.
FH_HD float episode_goal(std::uint64_t seed, int env, std::uint32_t episode, float goal_min, float goal_max) {
    const rng::U32x4 u = rng::draw(seed, rng::Purpose::her_goal, static_cast<std::uint32_t>(env), episode);
    const double x = rng::unit_double(u.v[0], u.v[1]);
    return static_cast<float>(static_cast<double>(goal_min) +
                              (static_cast<double>(goal_max) - static_cast<double>(goal_min)) * x);
}

/// The goal term of a transition's reward: `weight` when the next observation's achieved return
/// is at or above the goal, else 0. (Positive, so that ending an episode early, bankrupt, never
/// avoids a penalty.)
FH_HD float goal_reward(float achieved_next, float goal, float weight) { return achieved_next >= goal ? weight : 0.0f; }

/// The goal features appended to an observation whose achieved return is `achieved`.
FH_HD void goal_features(float goal, float achieved, float* out) {
    out[0] = goal;
    out[1] = goal - achieved;
}

/// One observation with its goal: out (D + kGoalFeatures) = [state (D) | goal_features].
FH_HD void goal_state_row(float* out, const float* state, int D, int achieved_col, float goal) {
    for (int c = 0; c < D; ++c) out[c] = state[c];
    goal_features(goal, state[achieved_col], out + D);
}

/// Relabelling's parameters (one agent's).
struct RelabelParams {
    float ratio;       ///< probability that a batch row gets a future achieved goal (dqn.her_ratio)
    float weight;      ///< the goal reward (dqn.her_reward)
    int horizon;       ///< the longest episode (experience.gpu_timesteps_per_episode): the future scan's bound
    int achieved_col;  ///< achieved_column of the ring's observations
    long long newest;  ///< the newest step the ring holds that no collection is writing (pushed - 1)
};

/// A batch row's n-step transition under a goal.
struct GoalDraw {
    replay::NstepDraw draw;  ///< replay::draw_nstep's; ret is the goal-conditioned return
    float goal;              ///< the goal of the row (stored, or relabelled)
    int relabelled;          ///< 1: a future achieved goal replaced the stored one
    int future;              ///< relabelled: the future transition's offset j >= 0 from the first
};

/// Batch row b: replay::draw_nstep's transition (the same draw as without HER), then with
/// probability `ratio` (Philox(seed, her_relabel, b, update) word 0) the goal becomes the return
/// achieved after transition t + j of the same episode, j uniform (word 1) over 0 .. J, where t + J
/// is the episode's last transition the ring holds (the first done flag at or after t, at most
/// `horizon` - 1 steps on, no further than `newest`); otherwise the goal stored with the first
/// transition. The return is R = sum_k gamma^k (r_{t+k} + goal_reward(achieved(s'_{t+k}), goal)),
/// over the same transitions as the draw's (up to n, stopping at the first done).
FH_HD GoalDraw draw_goal_nstep(int b, const replay::ReplayView& r, const float* goals,
                               const replay::SampleParams& s, const RelabelParams& h) {
    GoalDraw out{replay::draw_nstep(b, r, s), 0.0f, 0, 0};
    replay::NstepDraw& d = out.draw;
    auto row = [&](long long st) { return static_cast<long long>(st % r.capacity_steps) * r.n_envs + d.env; };
    auto achieved = [&](long long i) { return r.next_states[i * r.state_dim + h.achieved_col]; };
    out.goal = goals[d.first];
    const rng::U32x4 u = rng::draw(s.seed, rng::Purpose::her_relabel, static_cast<std::uint32_t>(b), s.update);
    if (rng::unit_float(u.v[0]) < h.ratio) {
        int last = 0;
        for (int j = 0; j < h.horizon && d.step + j <= h.newest; ++j) {
            last = j;
            if (r.done[row(d.step + j)] != env::kRunning) break;
        }
        out.future = static_cast<int>(rng::below(u.v[1], static_cast<std::uint32_t>(last) + 1u));
        out.goal = achieved(row(d.step + out.future));
        out.relabelled = 1;
    }
    float acc = 0.0f, g = 1.0f;
    for (int k = 0; k < s.n_step; ++k) {
        const long long i = row(d.step + k);
        acc += g * (r.rewards[i] + goal_reward(achieved(i), out.goal, h.weight));
        g *= s.gamma;
        if (r.done[i] != env::kRunning) break;
    }
    d.ret = acc;
    return out;
}

}  // namespace fh::her
