/// @file test_dqn_her_ops.cpp
/// @brief Hindsight experience replay (dqn.her; math/her.h, docs/dqn.md): the goal, the goal
///        reward and features by hand, relabelling on a hand-made ring (the worked example of
///        docs/dqn.md), the CPU ops against the math and against dqn_sample, and [gpu] every HER
///        kernel against its CPU twin on a ring filled by real collection.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include "env/vec_env.hpp"
#include "math/dqn.h"
#include "math/her.h"
#include "device/cpu_device.hpp"
#include "abi/dqn_step.h"
#include "abi/env.h"
#include "support/compare.hpp"
#include "support/gpu.hpp"
#include "support/market_fixture.hpp"
#include "abi/core_vector.h"

using fh::ops::View;
using fh::test::random_floats;

namespace {

fh::dqn::AgentParams her_agent(float ratio, float weight, int horizon = 20) {
    fh::dqn::AgentParams a{};
    a.seed = 17;
    a.n_envs = 8;
    a.n_step = 3;
    a.gamma = 0.97f;
    a.bootstrap_prob = 0.5f;
    a.her_ratio = ratio;
    a.her_reward = weight;
    a.her_goal_min = -1.5f;
    a.her_goal_max = 2.5f;
    a.her_horizon = horizon;
    return a;
}

// The worked example of docs/dqn.md ("Hindsight experience replay"): one environment, a ring of 8
// steps, market_dim 1 (D = 9, the achieved return in column 1 + 2 = 3). Episode A is steps 0..3
// (step 3 truncated), episode B steps 4..7. Rewards 0.1, 0.2, ...; the returns achieved after each
// step, in percent: A 0.0, 0.5, 1.2, 0.8; B 0.1, -0.3, 2.0, 1.0. Stored goals: A 1.0, B 0.5.
constexpr int kD = 9, kCap = 8, kCol = 3;
struct HandRing {
    std::vector<float> states, next_states, rewards, goals;
    std::vector<int> actions;
    std::vector<std::uint8_t> done;
    fh::replay::ReplayView view() const {
        return {states.data(), next_states.data(), actions.data(), rewards.data(), done.data(), kCap, 1, kD};
    }
};
HandRing hand_ring() {
    HandRing r;
    const float achieved[kCap] = {0.0f, 0.5f, 1.2f, 0.8f, 0.1f, -0.3f, 2.0f, 1.0f};
    r.states.assign(kCap * kD, 0.0f);
    r.next_states.assign(kCap * kD, 0.0f);
    for (int t = 0; t < kCap; ++t) {
        for (int c = 0; c < kD; ++c) r.states[t * kD + c] = static_cast<float>(t) + static_cast<float>(c) / 100.0f;
        r.states[t * kD + kCol] = t == 0 || t == 4 ? 0.0f : achieved[t - 1];  // what was achieved before step t
        r.next_states[t * kD + kCol] = achieved[t];
        r.rewards.push_back(0.1f * static_cast<float>(t + 1));
        r.actions.push_back(t % 3);
        r.done.push_back(t == 3 ? fh::env::kTruncated : fh::env::kRunning);
        r.goals.push_back(t < 4 ? 1.0f : 0.5f);
    }
    return r;
}

}  // namespace

TEST_CASE("HER math: episode goals, the goal reward and features", "[dqn][her][ops]") {
    CHECK(fh::her::achieved_column(50) == 44);  // core42 + 8 portfolio features: the equity change
    // Goals: uniform in [min, max], a function of (seed, env, episode) only.
    std::set<float> seen;
    for (std::uint32_t episode = 1; episode <= 200; ++episode) {
        const float g = fh::her::episode_goal(5, 3, episode, -1.5f, 2.5f);
        CHECK(g >= -1.5f);
        CHECK(g <= 2.5f);
        CHECK(g == fh::her::episode_goal(5, 3, episode, -1.5f, 2.5f));
        seen.insert(g);
    }
    CHECK(seen.size() == 200);
    CHECK(fh::her::episode_goal(5, 3, 7, -1.5f, 2.5f) != fh::her::episode_goal(5, 4, 7, -1.5f, 2.5f));
    CHECK(fh::her::episode_goal(5, 3, 7, 0.75f, 0.75f) == 0.75f);  // one goal: always it
    // The reward: the weight at or above the goal, else nothing.
    CHECK(fh::her::goal_reward(1.2f, 1.0f, 0.05f) == 0.05f);
    CHECK(fh::her::goal_reward(1.0f, 1.0f, 0.05f) == 0.05f);
    CHECK(fh::her::goal_reward(0.99f, 1.0f, 0.05f) == 0.0f);
    CHECK(fh::her::goal_reward(-0.5f, -1.0f, 0.05f) == 0.05f);  // a loss budget: kept
    float f[2];
    fh::her::goal_features(1.0f, 0.25f, f);
    CHECK(f[0] == 1.0f);
    CHECK(f[1] == 0.75f);
    std::vector<float> state(10), row(12);
    for (int c = 0; c < 10; ++c) state[static_cast<std::size_t>(c)] = static_cast<float>(c);
    fh::her::goal_state_row(row.data(), state.data(), 10, 4, 2.5f);
    CHECK(std::vector<float>(row.begin(), row.begin() + 10) == state);
    CHECK(row[10] == 2.5f);
    CHECK(row[11] == -1.5f);  // 2.5 - state[4]
}

TEST_CASE("HER relabelling on a hand-made ring: the worked example of docs/dqn.md", "[dqn][her][ops]") {
    const HandRing r = hand_ring();
    // One sampleable step, 1: the draw is transitions 1, 2, 3 (3 ends episode A, truncated).
    const fh::replay::SampleParams sp{17, 5, 1, 1, 3, 0.5f};
    SECTION("the stored goal (ratio 0): R = 0.2 + 0.5 (0.3 + 0.05) + 0.25 * 0.4 = 0.475") {
        const fh::her::RelabelParams hp{0.0f, 0.05f, 50, kCol, 7};
        for (int b = 0; b < 16; ++b) {
            const auto gd = fh::her::draw_goal_nstep(b, r.view(), r.goals.data(), sp, hp);
            REQUIRE(gd.draw.step == 1);
            CHECK(gd.relabelled == 0);
            CHECK(gd.goal == 1.0f);
            CHECK(gd.draw.ret == Approx(0.475).epsilon(1e-6));
            CHECK(gd.draw.discount == 0.125f);  // gamma^3: truncated, bootstraps
            CHECK(gd.draw.action == 1);
            CHECK(gd.draw.first == 1);
            CHECK(gd.draw.last == 3);
        }
    }
    SECTION("relabelled (ratio 1): a return achieved at step 1, 2 or 3 of the same episode, each R by hand") {
        const fh::her::RelabelParams hp{1.0f, 0.05f, 50, kCol, 7};
        // goal 0.5 (j = 0): 0.25 + 0.5 * 0.35 + 0.25 * 0.45; goal 1.2 (j = 1): 0.2 + 0.5 * 0.35 + 0.25 * 0.4;
        // goal 0.8 (j = 2): 0.2 + 0.5 * 0.35 + 0.25 * 0.45.
        const double want[3] = {0.5375, 0.475, 0.4875};
        const float goal_of[3] = {0.5f, 1.2f, 0.8f};
        std::set<int> futures;
        for (int b = 0; b < 64; ++b) {
            const auto gd = fh::her::draw_goal_nstep(b, r.view(), r.goals.data(), sp, hp);
            REQUIRE(gd.relabelled == 1);
            REQUIRE(gd.future >= 0);
            REQUIRE(gd.future <= 2);  // never past the episode's end (step 3) into episode B
            CHECK(gd.goal == goal_of[gd.future]);
            CHECK(gd.draw.ret == Approx(want[gd.future]).epsilon(1e-6));
            futures.insert(gd.future);
        }
        CHECK(futures.size() == 3);
    }
    SECTION("the future is bounded by the newest stored step and by the horizon") {
        for (const auto& hp : {fh::her::RelabelParams{1.0f, 0.05f, 50, kCol, 2},    // steps 1, 2 stored
                               fh::her::RelabelParams{1.0f, 0.05f, 2, kCol, 7}}) {  // 2 steps looked at
            std::set<int> futures;
            for (int b = 0; b < 64; ++b)
                futures.insert(fh::her::draw_goal_nstep(b, r.view(), r.goals.data(), sp, hp).future);
            CHECK(futures == std::set<int>{0, 1});
        }
    }
    SECTION("episode B: its own goal, and futures within it") {
        const fh::replay::SampleParams spb{17, 5, 5, 1, 3, 0.5f};  // step 5: transitions 5, 6, 7
        const auto kept = fh::her::draw_goal_nstep(0, r.view(), r.goals.data(), spb,
                                                   fh::her::RelabelParams{0.0f, 0.05f, 50, kCol, 7});
        CHECK(kept.goal == 0.5f);
        // -0.3 < 0.5; 2.0 and 1.0 >= 0.5: 0.6 + 0.5 (0.7 + 0.05) + 0.25 (0.8 + 0.05)
        CHECK(kept.draw.ret == Approx(0.6 + 0.375 + 0.2125).epsilon(1e-6));
        std::set<float> goals;
        for (int b = 0; b < 64; ++b)
            goals.insert(fh::her::draw_goal_nstep(b, r.view(), r.goals.data(), spb,
                                                  fh::her::RelabelParams{1.0f, 0.05f, 50, kCol, 7})
                             .goal);
        CHECK(goals == std::set<float>{-0.3f, 2.0f, 1.0f});
    }
}

TEST_CASE("HER's future scan: the first done flag at or after the step, bounded by the horizon and the newest step",
          "[dqn][her][ops]") {
    // One environment, a ring of 100 steps; episodes end (done) at steps 9, 80 and 99.
    std::vector<std::uint8_t> done(100, fh::env::kRunning);
    done[9] = fh::env::kTerminated;
    done[80] = fh::env::kTruncated;
    done[99] = fh::env::kTruncated;
    const fh::replay::ReplayView r{nullptr, nullptr, nullptr, nullptr, done.data(), 100, 1, 9};
    auto last = [&](long long step, int horizon, long long newest) {
        const fh::her::RelabelParams h{1.0f, 0.05f, horizon, kCol, newest};
        return fh::her::future_last(r, step, 0, fh::her::future_limit(step, h));
    };
    CHECK(last(0, 100, 99) == 9);
    CHECK(last(9, 100, 99) == 0);    // the episode's last transition: itself
    CHECK(last(10, 100, 99) == 70);  // 80 - 10: past two rounds of a warp's 32
    CHECK(last(10, 50, 99) == 49);   // the horizon
    CHECK(last(10, 100, 40) == 30);  // the newest stored step
    CHECK(last(81, 100, 99) == 18);
}

TEST_CASE(
    "HER ops on the CPU: observe writes the slot's goals and the acting rows; the sampler is dqn_sample's "
    "draw with goals",
    "[dqn][her][ops]") {
    fh::ops::CpuDevice ops;
    const auto f = fh::test::small_market(ops);
    const int n = 6, cap = 9, D = f.params.state_dim, DG = D + fh::her::kGoalFeatures;
    const int col = fh::her::achieved_column(D);
    fh::env::VecEnv env(ops, *f.device_market, fh::env::Split::train, f.params, n);
    env.reset_all();
    auto rs = ops.alloc<float>(cap * n * D), rn = ops.alloc<float>(cap * n * D), rr = ops.alloc<float>(cap * n);
    auto ra = ops.alloc<int>(cap * n);
    auto rd = ops.alloc<std::uint8_t>(cap * n);
    auto goals = ops.alloc<float>(cap * n);
    const fh::ops::DqnRing ring{rs.view(), rn.view(), ra.view(), rr.view(), rd.view(), cap, n, D};
    auto counters = ops.from_host<fh::dqn::Counters>(std::vector<fh::dqn::Counters>{{0, 0, 0}});
    const auto a = her_agent(0.8f, 0.05f, f.params.episode_length);
    auto ag = ops.from_host<fh::dqn::AgentParams>(std::vector<fh::dqn::AgentParams>{a});
    auto actions = ops.alloc<int>(n);
    auto obs = ops.alloc<float>(n * DG);
    for (int step = 0; step < 60; ++step) {
        auto pers = env.persistent();
        const auto states = ops.to_host(env.states());
        const auto es = ops.to_host(View<const fh::env::EnvState>(pers.state));
        fh::ops::run(ops, fh::ops::DqnHerObserve{obs.view(), goals.view(), pers.state, env.states(), counters.cview(),
                                                 ag.cview(), cap, D});
        const auto o = ops.to_host(obs.cview()), gl = ops.to_host(goals.cview());
        for (int e = 0; e < n; ++e) {
            const float g = fh::her::episode_goal(a.seed, e, es[static_cast<std::size_t>(e)].episode, a.her_goal_min,
                                                  a.her_goal_max);
            REQUIRE(gl[static_cast<std::size_t>((step % cap) * n + e)] == g);
            const float* row = o.data() + e * DG;
            REQUIRE(std::vector<float>(row, row + D) ==
                    std::vector<float>(states.begin() + e * D, states.begin() + (e + 1) * D));
            REQUIRE(row[D] == g);
            REQUIRE(row[D + 1] == g - states[static_cast<std::size_t>(e * D + col)]);
        }
        fh::ops::run(ops, fh::ops::EnvRandomActions{actions.view(), 5, static_cast<std::uint64_t>(step),
                                                    fh::env::num_actions(f.params)});
        fh::ops::run(ops, fh::ops::DqnCollect{pers.state, pers.portfolio, pers.states, actions.cview(), ring,
                                              counters.cview(), env.market(), f.params});
        fh::ops::run(ops, fh::ops::DqnAdvance{counters.view()});
    }
    ops.upload<fh::dqn::Counters>(counters.view(), std::vector<fh::dqn::Counters>{{60, 4, 60}});
    const int B = 41;
    auto x = ops.alloc<float>(2 * B * DG), br = ops.alloc<float>(B), bd = ops.alloc<float>(B), bg = ops.alloc<float>(B);
    auto ba = ops.alloc<int>(B);
    auto masks = ops.alloc<float>(B * 3);
    auto x0 = ops.alloc<float>(2 * B * D), br0 = ops.alloc<float>(B), bd0 = ops.alloc<float>(B);
    auto ba0 = ops.alloc<int>(B);
    auto masks0 = ops.alloc<float>(B * 3);
    fh::ops::run(ops, fh::ops::DqnSample{x0.view(), ba0.view(), br0.view(), bd0.view(), ring, counters.cview(),
                                         ag.cview(), B, masks0.view(), 3});
    const auto x0h = ops.to_host(x0.cview());
    SECTION("goal reward 0: the same transitions and returns as dqn_sample, with goal features") {
        auto a0 = a;
        a0.her_reward = 0.0f;
        auto ag0 = ops.from_host<fh::dqn::AgentParams>(std::vector<fh::dqn::AgentParams>{a0});
        fh::ops::run(ops, fh::ops::DqnHerSample{x.view(), ba.view(), br.view(), bd.view(), ring, goals.cview(),
                                                counters.cview(), ag0.cview(), B, masks.view(), 3, bg.view()});
        CHECK(ops.to_host(br.cview()) == ops.to_host(br0.cview()));
    }
    SECTION("with the goal reward: returns at least dqn_sample's, more where a goal was reached") {
        fh::ops::run(ops, fh::ops::DqnHerSample{x.view(), ba.view(), br.view(), bd.view(), ring, goals.cview(),
                                                counters.cview(), ag.cview(), B, masks.view(), 3, bg.view()});
        const auto r1 = ops.to_host(br.cview()), r0 = ops.to_host(br0.cview());
        int more = 0;
        for (int b = 0; b < B; ++b) {
            CHECK(r1[static_cast<std::size_t>(b)] >= r0[static_cast<std::size_t>(b)] - 1e-6f);
            more += r1[static_cast<std::size_t>(b)] > r0[static_cast<std::size_t>(b)] + 1e-6f;
        }
        CHECK(more > 0);  // relabelled goals are reached at least at their own step
    }
    // Both sections: the same rows as dqn_sample, goal features from each row's goal.
    const auto xh = ops.to_host(x.cview()), gh = ops.to_host(bg.cview());
    CHECK(ops.to_host(ba.cview()) == ops.to_host(ba0.cview()));
    CHECK(ops.to_host(bd.cview()) == ops.to_host(bd0.cview()));
    CHECK(ops.to_host(masks.cview()) == ops.to_host(masks0.cview()));
    const auto gl = ops.to_host(goals.cview());
    int stored = 0;
    for (int r = 0; r < 2 * B; ++r) {
        const float* row = xh.data() + r * DG;
        const float* plain = x0h.data() + r * D;
        REQUIRE(std::vector<float>(row, row + D) == std::vector<float>(plain, plain + D));
        const float g = gh[static_cast<std::size_t>(r % B)];
        CHECK(row[D] == g);
        CHECK(row[D + 1] == g - plain[col]);
        if (r < B) stored += std::count(gl.begin(), gl.end(), g) > 0;
    }
    CHECK(stored > 0);  // some rows kept an episode's goal (ratio 0.8)
    CHECK(stored < B);  // and most were relabelled
    // The evaluation rows: a fixed goal.
    auto eval_goal = ops.from_host<float>(std::vector<float>{1.25f});
    auto eval_obs = ops.alloc<float>(n * DG);
    fh::ops::run(ops, fh::ops::DqnGoalStates{eval_obs.view(), env.states(), eval_goal.cview(), D});
    const auto eo = ops.to_host(eval_obs.cview()), st = ops.to_host(env.states());
    for (int e = 0; e < n; ++e) {
        CHECK(eo[static_cast<std::size_t>(e * DG + D)] == 1.25f);
        CHECK(eo[static_cast<std::size_t>(e * DG + D + 1)] == 1.25f - st[static_cast<std::size_t>(e * D + col)]);
    }
}

TEST_CASE("HER ops refuse wrong sizes and overlapping outputs", "[dqn][her][ops][aliasing]") {
    fh::ops::CpuDevice ops;
    const int n = 4, cap = 5, D = 12;
    auto rs = ops.alloc<float>(cap * n * D), rn = ops.alloc<float>(cap * n * D), rr = ops.alloc<float>(cap * n);
    auto ra = ops.alloc<int>(cap * n);
    auto rd = ops.alloc<std::uint8_t>(cap * n);
    const fh::ops::DqnRing ring{rs.view(), rn.view(), ra.view(), rr.view(), rd.view(), cap, n, D};
    auto goals = ops.alloc<float>(cap * n);
    auto counters = ops.from_host<fh::dqn::Counters>(std::vector<fh::dqn::Counters>{{10, 0, 10}});
    auto ag = ops.from_host<fh::dqn::AgentParams>(std::vector<fh::dqn::AgentParams>{her_agent(0.5f, 0.1f)});
    const int B = 3;
    auto x = ops.alloc<float>(2 * B * D), r = ops.alloc<float>(B), d = ops.alloc<float>(B);
    auto a = ops.alloc<int>(B);
    // x without room for the goal features
    CHECK_THROWS_WITH(fh::ops::run(ops, fh::ops::DqnHerSample{x.view(), a.view(), r.view(), d.view(), ring,
                                                              goals.cview(), counters.cview(), ag.cview(), B}),
                      Catch::Contains("dqn_her_sample") && Catch::Contains("x"));
    auto xg = ops.alloc<float>(2 * B * (D + 2));
    CHECK_THROWS_WITH(fh::ops::run(ops, fh::ops::DqnHerSample{xg.view(), a.view(), r.view(), r.view(), ring,
                                                              goals.cview(), counters.cview(), ag.cview(), B}),
                      Catch::Contains("dqn_her_sample"));
    auto short_goals = ops.alloc<float>(cap * n - 1);
    CHECK_THROWS_WITH(fh::ops::run(ops, fh::ops::DqnHerSample{xg.view(), a.view(), r.view(), d.view(), ring,
                                                              short_goals.cview(), counters.cview(), ag.cview(), B}),
                      Catch::Contains("goals"));
    auto states = ops.alloc<float>(n * D);
    auto obs = ops.alloc<float>(n * (D + 2));
    auto st = ops.alloc<fh::env::EnvState>(n);
    CHECK_THROWS_WITH(fh::ops::run(ops, fh::ops::DqnHerObserve{obs.view(), short_goals.view(), st.cview(),
                                                               states.cview(), counters.cview(), ag.cview(), cap, D}),
                      Catch::Contains("goals"));
    auto goal = ops.from_host<float>(std::vector<float>{1.0f});
    CHECK_THROWS_WITH(fh::ops::run(ops, fh::ops::DqnGoalStates{states.view(), states.cview(), goal.cview(), D}),
                      Catch::Contains("dqn_goal_states"));
}

namespace {

/// Collection with HER's observe on a market (N agents, each its own goals and push count), then
/// a batch: everything the HER kernels write.
struct HerRun {
    std::vector<float> obs, goals, x, returns, discounts, masks, goals_out, eval_obs;
    std::vector<int> actions;
};
HerRun run_her(fh::ops::Device& ops) {
    const auto f = fh::test::small_market(ops);
    // Episodes of up to 75 steps in a ring of 80: the kernel's future scan takes up to 3 rounds of 32.
    auto params = f.params;
    params.episode_length = 75;
    const int N = 2, n = 300, cap = 80, D = params.state_dim, DG = D + fh::her::kGoalFeatures, B = 257, K = 3;
    const std::size_t rows = static_cast<std::size_t>(cap) * n;
    // Agent 0 collects; both agents' rings hold its transitions (agent 1 at another push count,
    // with its own goals and relabelling).
    fh::env::VecEnv env(ops, *f.device_market, fh::env::Split::train, params, n);
    env.reset_all();
    auto rs = ops.alloc<float>(N * rows * D), rn = ops.alloc<float>(N * rows * D), rr = ops.alloc<float>(N * rows);
    auto ra = ops.alloc<int>(N * rows);
    auto rd = ops.alloc<std::uint8_t>(N * rows);
    auto goals = ops.alloc<float>(N * rows);
    fh::ops::run(ops, fh::ops::Fill{goals.view(), 0.0f});
    const fh::ops::DqnRing one{rs.view().subview(0, rows * D),
                               rn.view().subview(0, rows * D),
                               ra.view().subview(0, rows),
                               rr.view().subview(0, rows),
                               rd.view().subview(0, rows),
                               cap,
                               n,
                               D};
    auto counters = ops.from_host<fh::dqn::Counters>(std::vector<fh::dqn::Counters>{{0, 0, 0}});
    std::vector<fh::dqn::AgentParams> agents{her_agent(0.8f, 0.05f, params.episode_length),
                                             her_agent(0.5f, 0.2f, params.episode_length)};
    agents[1].seed = 99;
    auto ag = ops.from_host<fh::dqn::AgentParams>(agents);
    auto ag0 = ops.from_host<fh::dqn::AgentParams>(std::vector<fh::dqn::AgentParams>{agents[0]});
    auto actions = ops.alloc<int>(n);
    auto obs = ops.alloc<float>(n * DG);
    for (int step = 0; step < 200; ++step) {
        auto pers = env.persistent();
        fh::ops::run(ops, fh::ops::DqnHerObserve{obs.view(), goals.view().subview(0, rows), pers.state, env.states(),
                                                 counters.cview(), ag0.cview(), cap, D});
        fh::ops::run(ops, fh::ops::EnvRandomActions{actions.view(), 8, static_cast<std::uint64_t>(step),
                                                    fh::env::num_actions(params)});
        fh::ops::run(ops, fh::ops::DqnCollect{pers.state, pers.portfolio, pers.states, actions.cview(), one,
                                              counters.cview(), env.market(), params});
        fh::ops::run(ops, fh::ops::DqnAdvance{counters.view()});
    }
    // The second agent's ring: a copy at another push count, with goals of its own.
    for (auto [buf, size] : {std::pair{rs.view(), rows * D}, {rn.view(), rows * D}, {rr.view(), rows}})
        fh::ops::run(ops, fh::ops::Copy{buf.subview(size, size), View<const float>(buf.subview(0, size))});
    ops.copy_raw(ra.view().subview(rows, rows), View<const int>(ra.view().subview(0, rows)));
    ops.copy_raw(rd.view().subview(rows, rows), View<const std::uint8_t>(rd.view().subview(0, rows)));
    const auto other_goals = random_floats(rows, 77, -1.5f, 2.5f);
    ops.upload<float>(goals.view().subview(rows, rows), other_goals);
    // Both agents' acting rows for the current step (agent 1 reuses agent 0's environments).
    auto state2 = ops.alloc<fh::env::EnvState>(N * n);
    auto states2 = ops.alloc<float>(N * n * D);
    for (int g = 0; g < N; ++g) {
        auto pers = env.persistent();
        ops.copy_raw(state2.view().subview(g * n, n), View<const fh::env::EnvState>(pers.state));
        fh::ops::run(ops, fh::ops::Copy{states2.view().subview(g * n * D, n * D), env.states()});
    }
    auto counters2 = ops.from_host<fh::dqn::Counters>(std::vector<fh::dqn::Counters>{{200, 6, 200}, {193, 2, 193}});
    auto obs2 = ops.alloc<float>(N * n * DG);
    fh::ops::run(ops, fh::ops::DqnHerObserve{obs2.view(), goals.view(), state2.cview(), states2.cview(),
                                             counters2.cview(), ag.cview(), cap, D});
    const fh::ops::DqnRing ring{rs.view(), rn.view(), ra.view(), rr.view(), rd.view(), cap, n, D};
    auto x = ops.alloc<float>(N * 2 * B * DG), br = ops.alloc<float>(N * B), bd = ops.alloc<float>(N * B);
    auto bg = ops.alloc<float>(N * B), masks = ops.alloc<float>(N * B * K);
    auto ba = ops.alloc<int>(N * B);
    fh::ops::run(ops, fh::ops::DqnHerSample{x.view(), ba.view(), br.view(), bd.view(), ring, goals.cview(),
                                            counters2.cview(), ag.cview(), B, masks.view(), K, bg.view()});
    auto eval_goal = ops.from_host<float>(std::vector<float>{0.7f, -0.4f});
    auto eval_obs = ops.alloc<float>(N * n * DG);
    fh::ops::run(ops, fh::ops::DqnGoalStates{eval_obs.view(), states2.cview(), eval_goal.cview(), D});
    return {ops.to_host(obs2.cview()), ops.to_host(goals.cview()),    ops.to_host(x.cview()),
            ops.to_host(br.cview()),   ops.to_host(bd.cview()),       ops.to_host(masks.cview()),
            ops.to_host(bg.cview()),   ops.to_host(eval_obs.cview()), ops.to_host(ba.cview())};
}

}  // namespace

TEST_CASE("the HER kernels (observe, goal states, sample) equal their CPU twins bit for bit", "[gpu][dqn][her][ops]") {
    fh::ops::CpuDevice cpu;
    auto& gpu = fh::test::gpu_ops();
    const HerRun c = run_her(cpu), g = run_her(gpu);
    CHECK(g.obs == c.obs);
    CHECK(g.goals == c.goals);
    CHECK(g.x == c.x);
    CHECK(g.actions == c.actions);
    CHECK(g.returns == c.returns);
    CHECK(g.discounts == c.discounts);
    CHECK(g.masks == c.masks);
    CHECK(g.goals_out == c.goals_out);
    CHECK(g.eval_obs == c.eval_obs);
}
