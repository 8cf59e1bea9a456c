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
FH_HD float goal_reward(float achieved_next, float goal, float weight) {
    return achieved_next >= goal ? weight : 0.0f;
}

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

/// The relabelling's draws of batch row b: word 0 the coin (relabel when unit_float < ratio),
/// word 1 the future's pick.
FH_HD rng::U32x4 relabel_words(std::uint64_t seed, int b, std::uint64_t update) {
    return rng::draw(seed, rng::Purpose::her_relabel, static_cast<std::uint32_t>(b), update);
}
FH_HD bool relabels(const rng::U32x4& u, float ratio) {
    return rng::unit_float(u.v[0]) < ratio;
}

/// How many steps from `step` the future scan may look at: min(horizon, newest - step + 1) (>= 1
/// for a sampled step, which the ring holds).
FH_HD int future_limit(long long step, const RelabelParams& h) {
    const long long stored = h.newest - step + 1;
    return static_cast<int>(stored < h.horizon ? stored : h.horizon);
}

/// The offset J of the episode's last transition the ring holds, from transition `step` of
/// environment `env`: the first j in [0, limit) whose done flag is set, else limit - 1 (the
/// episode goes on past what is stored). (The kernel finds the same j a warp at a time.)
FH_HD int future_last(const replay::ReplayView& r, long long step, int env, int limit) {
    int last = 0;
    for (int j = 0; j < limit; ++j) {
        last = j;
        const long long i = static_cast<long long>((step + j) % r.capacity_steps) * r.n_envs + env;
        if (r.done[i] != env::kRunning) break;
    }
    return last;
}

/// The rest of batch row b once its transition d, its relabelling words u and (when it relabels)
/// the future's end `last` are known: the goal (the achieved return after transition t + j, j =
/// below(word 1, last + 1), or the goal stored with the first transition) and the goal-conditioned
/// n-step return R = sum_k gamma^k (r_{t+k} + goal_reward(achieved(s'_{t+k}), goal)), over the same
/// transitions as the draw's (up to n, stopping at the first done).
FH_HD GoalDraw finish_goal_draw(replay::NstepDraw d, const rng::U32x4& u, bool relabel, int last,
                                const replay::ReplayView& r, const float* goals, const replay::SampleParams& s,
                                const RelabelParams& h) {
    GoalDraw out{d, goals[d.first], 0, 0};
    auto row = [&](long long st) { return static_cast<long long>(st % r.capacity_steps) * r.n_envs + d.env; };
    auto achieved = [&](long long i) { return r.next_states[i * r.state_dim + h.achieved_col]; };
    if (relabel) {
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
    out.draw.ret = acc;
    return out;
}

/// Batch row b: replay::draw_nstep's transition (the same draw as without HER), then with
/// probability `ratio` (Philox(seed, her_relabel, b, update) word 0) the goal becomes the return
/// achieved after transition t + j of the same episode, j uniform (word 1) over 0 .. J, where t + J
/// is the episode's last transition the ring holds (future_last: the first done flag at or after
/// t, at most `horizon` - 1 steps on, no further than `newest`); otherwise the goal stored with the
/// first transition. The return is finish_goal_draw's.
FH_HD GoalDraw draw_goal_nstep(int b, const replay::ReplayView& r, const float* goals, const replay::SampleParams& s,
                               const RelabelParams& h) {
    const replay::NstepDraw d = replay::draw_nstep(b, r, s);
    const rng::U32x4 u = relabel_words(s.seed, b, s.update);
    const bool relabel = relabels(u, h.ratio);
    const int last = relabel ? future_last(r, d.step, d.env, future_limit(d.step, h)) : 0;
    return finish_goal_draw(d, u, relabel, last, r, goals, s, h);
}

}  // namespace fh::her
