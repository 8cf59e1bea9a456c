/// @file test_dqn_ops.cpp
/// @brief The math and shared ops DQN builds on: the C51 projection against hand-computed cases,
///        the cross-entropy gradient, n-step returns across episode ends, the guard,
///        epsilon-greedy; [gpu] replay sampling, epsilon-greedy, the guard, the mean and the action
///        histogram against their CPU twins. The fused DQN steps: tests/ops/test_dqn_step_ops.cpp.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "math/dqn.h"
#include "device/cpu_device.hpp"
#include "support/compare.hpp"
#include "support/error_model.hpp"
#include "support/gpu.hpp"
#include "abi/dqn_step.h"
#include "abi/replay_nstep.h"
#include "abi/core_optim.h"
#include "abi/core_vector.h"
#include "abi/nn_guard.h"
#include "abi/nn_select.h"

using fh::dqn::HeadParams;
using fh::test::random_floats;

namespace {

const HeadParams kFive{/*num_actions*/ 1, /*num_atoms*/ 5, /*dueling*/ 0, /*v_min*/ -2.f, /*v_max*/ 2.f};

std::vector<double> project(std::vector<double> p, double r, double discount, const HeadParams& h = kFive) {
    std::vector<double> m(p.size());
    fh::dqn::c51_project<double>(p.data(), r, discount, m.data(), h);
    return m;
}

void require_vec(const std::vector<double>& got, const std::vector<double>& want) {
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
        INFO("atom " << i);
        REQUIRE(got[i] == Approx(want[i]).margin(1e-12));
    }
}

}  // namespace

TEST_CASE("C51 projection: hand-computed cases", "[dqn]") {
    // Support -2 -1 0 1 2.
    SECTION("mass between two atoms splits by distance") {
        require_vec(project({0, 0, 1, 0, 0}, 0.5, 1.0), {0, 0, 0.5, 0.5, 0});
    }
    SECTION("terminal transition: all mass around the reward") {
        require_vec(project({0.2, 0.2, 0.2, 0.2, 0.2}, 0.3, 0.0), {0, 0, 0.7, 0.3, 0});
    }
    SECTION("rewards beyond v_max and v_min clamp to the edge atoms") {
        require_vec(project({0.2, 0.2, 0.2, 0.2, 0.2}, 5.0, 0.9), {0, 0, 0, 0, 1});
        require_vec(project({0.2, 0.2, 0.2, 0.2, 0.2}, -10.0, 0.9), {1, 0, 0, 0, 0});
    }
    SECTION("mass on the support edge landing exactly on an atom") {
        require_vec(project({0, 0, 0, 0, 1}, 0.0, 0.5), {0, 0, 0, 1, 0});
        require_vec(project({1, 0, 0, 0, 0}, 0.0, 1.0), {1, 0, 0, 0, 0});
    }
    SECTION("a general distribution, shifted by a quarter atom") {
        require_vec(project({0.1, 0.2, 0.3, 0.4, 0.0}, 0.25, 1.0), {0.075, 0.175, 0.275, 0.375, 0.1});
    }
    SECTION("the projection keeps total mass for 51 and 101 atoms") {
        for (int Z : {51, 101}) {
            const HeadParams h{1, Z, 0, -10.f, 10.f};
            std::vector<double> p(Z);
            double s = 0;
            for (int j = 0; j < Z; ++j) s += p[j] = 1.0 + (j * 7 % 13);
            for (auto& x : p) x /= s;
            for (double r : {-30.0, -1.3, 0.0, 0.77, 25.0})
                for (double d : {0.0, 0.5, 0.99}) {
                    const auto m = project(p, r, d, h);
                    double total = 0;
                    for (double x : m) {
                        REQUIRE(x >= 0);
                        total += x;
                    }
                    REQUIRE(total == Approx(1.0).margin(1e-12));
                }
        }
    }
}

TEST_CASE("C51 cross-entropy gradient is p - m on the taken action only", "[dqn]") {
    const HeadParams h{3, 5, 1, -2.f, 2.f};
    const int B = 2, AZ = 15;
    std::vector<double> value(B * 5), adv(B * AZ), logits(B * AZ), probs(B * AZ), q(B * 3);
    for (int i = 0; i < B * 5; ++i) value[i] = 0.1 * i - 0.3;
    for (int i = 0; i < B * AZ; ++i) adv[i] = std::sin(1.7 * i);
    for (int b = 0; b < B; ++b)
        fh::dqn::head_forward<double>(&value[b * 5], &adv[b * AZ], &logits[b * AZ], &probs[b * AZ], &q[b * 3], h);
    std::vector<double> probs_next = probs, q_next = q, d(B * AZ, 99.0);
    const std::vector<int> actions{2, 0};
    const std::vector<double> returns{0.5, -0.25}, discounts{0.9, 0.0};
    for (int b = 0; b < B; ++b) {
        const double loss =
            fh::dqn::c51_sample_loss<double>(b, logits.data(), probs.data(), q_next.data(), probs_next.data(),
                                             actions.data(), returns.data(), discounts.data(), d.data(), 1.0, h);
        const int a_star = fh::policy::argmax(&q_next[b * 3], 3);
        const auto m = project({&probs_next[b * AZ + a_star * 5], &probs_next[b * AZ + a_star * 5] + 5}, returns[b],
                               discounts[b], h);
        double want_loss = 0;
        for (int z = 0; z < 5; ++z) want_loss -= m[z] * std::log(probs[b * AZ + actions[b] * 5 + z]);
        CHECK(loss == Approx(want_loss).epsilon(1e-12));
        for (int a = 0; a < 3; ++a)
            for (int z = 0; z < 5; ++z) {
                const double want = a == actions[b] ? probs[b * AZ + a * 5 + z] - m[z] : 0.0;
                CHECK(d[b * AZ + a * 5 + z] == Approx(want).margin(1e-12));
            }
    }
}

TEST_CASE("n-step returns stop at episode ends; terminations do not bootstrap", "[dqn]") {
    // One environment, a ring of 8 steps; state row of step s = {s}, next state = {100 + s}.
    const int cap = 8;
    std::vector<float> states(cap), next(cap), rewards{1, 2, 4, 8, 16, 32, 64, 128};
    std::vector<int> actions{0, 1, 2, 3, 4, 5, 6, 7};
    for (int s = 0; s < cap; ++s) {
        states[s] = static_cast<float>(s);
        next[s] = 100.f + s;
    }
    auto sample = [&](std::vector<std::uint8_t> done, long long step, int n) {
        const fh::replay::ReplayView r{
            states.data(), next.data(), actions.data(), rewards.data(), done.data(), cap, 1, 1};
        const fh::replay::SampleParams p{1, 0, step, 1, n, 0.5f};
        float s = 0, ns = 0, ret = 0, disc = 0;
        int a = 0;
        fh::replay::sample_nstep(0, r, p, &s, &ns, a, ret, disc);
        CHECK(s == static_cast<float>(step % cap));
        CHECK(a == step % cap);
        return std::tuple{ret, disc, ns};
    };
    using fh::env::kTerminated;
    using fh::env::kTruncated;
    const std::vector<std::uint8_t> running(cap, 0);
    SECTION("a full window") {
        auto [ret, disc, ns] = sample(running, 1, 3);  // 2 + 0.5*4 + 0.25*8
        CHECK(ret == 6.0f);
        CHECK(disc == 0.125f);
        CHECK(ns == 103.f);
    }
    SECTION("a truncated episode stops the sum and bootstraps from its last state") {
        auto d = running;
        d[2] = kTruncated;
        auto [ret, disc, ns] = sample(d, 1, 3);  // 2 + 0.5*4
        CHECK(ret == 4.0f);
        CHECK(disc == 0.25f);
        CHECK(ns == 102.f);
    }
    SECTION("a termination stops the sum and does not bootstrap") {
        auto d = running;
        d[2] = kTerminated;
        auto [ret, disc, ns] = sample(d, 1, 3);
        CHECK(ret == 4.0f);
        CHECK(disc == 0.0f);
        CHECK(ns == 102.f);
        auto [r0, d0, n0] = sample(d, 2, 3);  // terminates at once
        CHECK(r0 == 4.0f);
        CHECK(d0 == 0.0f);
        CHECK(n0 == 102.f);
    }
    SECTION("the window wraps around the ring") {
        auto [ret, disc, ns] = sample(running, 14, 3);  // slots 6, 7, 0
        CHECK(ret == 64.0f + 0.5f * 128.0f + 0.25f * 1.0f);
        CHECK(disc == 0.125f);
        CHECK(ns == 100.f);
    }
    SECTION("1-step") {
        auto [ret, disc, ns] = sample(running, 5, 1);
        CHECK(ret == 32.0f);
        CHECK(disc == 0.5f);
        CHECK(ns == 105.f);
    }
}

TEST_CASE("the training guard skips non-finite updates and names the first bad quantity", "[dqn][guard]") {
    fh::ops::CpuDevice ops;
    auto gate = ops.alloc<int>(1);
    auto state = ops.from_host<fh::nn::GuardState>(std::vector<fh::nn::GuardState>{{0, 0, -1, 0, 0}});
    auto losses = ops.alloc<float>(2);
    auto norm = ops.alloc<float>(1);
    auto run = [&](float l0, float l1, float n, long long update) {
        ops.upload<float>(losses.view(), std::vector<float>{l0, l1});
        ops.upload<float>(norm.view(), std::vector<float>{n});
        fh::ops::run(ops, fh::ops::TrainingGuard{gate.view(), state.view(), losses.cview(), norm.cview(), update});
        return ops.to_host(gate.cview())[0];
    };
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    CHECK(run(1.f, 2.f, 3.f, 1) == 1);
    CHECK(run(1.f, 2.f, inf, 2) == 0);
    CHECK(run(nan, 2.f, 3.f, 3) == 0);
    auto s = ops.to_host(state.cview())[0];
    CHECK(s.bad_total == 2);
    CHECK(s.bad_consecutive == 2);
    CHECK(s.first_bad_quantity == 2);  // the gradient norm (index n_losses) went bad first
    CHECK(s.first_bad_update == 2);
    CHECK(run(1.f, 2.f, 3.f, 4) == 1);
    s = ops.to_host(state.cview())[0];
    CHECK(s.bad_consecutive == 0);
    CHECK(s.applied_updates == 2);
}

TEST_CASE("norm_and_guard is global_norm, training_guard and saxpy in turn; it checks its buffers", "[guard]") {
    fh::ops::CpuDevice ops;
    auto x = ops.from_host<float>(std::vector<float>{3.f, 4.f, 12.f});
    auto stats = ops.from_host<float>(std::vector<float>{1.f, 2.f, 0.f});  // losses, then the norm
    auto accum = ops.from_host<float>(std::vector<float>{10.f, 20.f, 30.f});
    auto scratch = ops.alloc<float>(fh::ops::norm_guard_scratch_size());
    fh::ops::run(ops, fh::ops::Fill{scratch.view(), 0.f});
    auto gate = ops.alloc<int>(1);
    auto state = ops.from_host<fh::nn::GuardState>(std::vector<fh::nn::GuardState>{{0, 0, -1, 0, 0}});
    const auto st = stats.cview();
    fh::ops::run(ops, fh::ops::NormAndGuard{stats.view().subview(2, 1), scratch.view(), x.cview(), gate.view(),
                                            state.view(), st.subview(0, 2), 1, accum.view(), st});
    CHECK(ops.to_host(stats.cview()) == std::vector<float>{1.f, 2.f, 13.f});
    CHECK(ops.to_host(accum.cview()) == std::vector<float>{11.f, 22.f, 43.f});
    CHECK(ops.to_host(gate.cview())[0] == 1);
    CHECK(ops.to_host(state.cview())[0].applied_updates == 1);
    auto small = ops.alloc<float>(fh::ops::norm_guard_scratch_size() - 1);
    CHECK_THROWS_AS(fh::ops::run(ops, fh::ops::NormAndGuard{stats.view().subview(2, 1), small.view(), x.cview(),
                                                            gate.view(), state.view(), st.subview(0, 2), 2}),
                    std::invalid_argument);
    CHECK_THROWS_AS(
        fh::ops::run(ops, fh::ops::NormAndGuard{stats.view().subview(2, 1), scratch.view(), x.cview(), gate.view(),
                                                state.view(), st.subview(0, 2), 2, accum.view().subview(0, 2), st}),
        std::invalid_argument);  // accum and stats of different sizes
}

TEST_CASE("epsilon-greedy: greedy at 0, uniform at 1, ties to the lowest action", "[dqn]") {
    fh::ops::CpuDevice ops;
    const int n = 3000, A = 9;
    std::vector<float> qh(n * A);
    for (int e = 0; e < n; ++e)
        for (int a = 0; a < A; ++a) qh[e * A + a] = (a == (e % A) || a == (e % A + 3) % A) ? 1.f : 0.f;
    auto q = ops.from_host<float>(qh);
    auto actions = ops.alloc<int>(n);
    fh::ops::run(ops, fh::ops::EpsilonGreedy{actions.view(), q.cview(), A, 0.f, 3, 7});
    auto a0 = ops.to_host(actions.cview());
    for (int e = 0; e < n; ++e) REQUIRE(a0[e] == std::min(e % A, (e % A + 3) % A));
    fh::ops::run(ops, fh::ops::EpsilonGreedy{actions.view(), q.cview(), A, 1.f, 3, 7});
    std::vector<int> hist(A, 0);
    for (int v : ops.to_host(actions.cview())) ++hist[v];
    for (int h : hist) CHECK(h > 250);  // ~333 each
    // The draw alone (what dqn_act_kernel takes before Q is known): epsilon-greedy's action when
    // it explores, -1 exactly when epsilon-greedy takes the argmax; about epsilon of them explore.
    int explored = 0;
    for (int e = 0; e < n; ++e) {
        const int x = fh::policy::epsilon_explore(A, 0.3f, 3, e, 7);
        const int g = fh::policy::epsilon_greedy(&qh[e * A], A, 0.3f, 3, e, 7);
        REQUIRE(x >= -1);
        REQUIRE(x < A);
        REQUIRE(g == (x >= 0 ? x : fh::policy::argmax(&qh[e * A], A)));
        explored += x >= 0;
    }
    CHECK(explored == Approx(0.3 * n).epsilon(0.1));
    CHECK(fh::policy::epsilon_explore(A, 0.f, 3, 5, 7) == -1);
}

/// nstep_sample with a CounterAdvance (a captured update's counter advanced by its sampling launch)
/// on `ops`: two launches from counter 8; the batches and the counter and ticket after each.
std::tuple<std::vector<float>, std::vector<float>, std::vector<long long>, std::vector<unsigned>> sample_advancing(
    fh::ops::Device& ops) {
    const int cap = 23, n_envs = 5, D = 7, B = 133;  // 133 rows: five blocks of four warps
    auto rs = ops.from_host<float>(random_floats(cap * n_envs * D, 11));
    auto rn = ops.from_host<float>(random_floats(cap * n_envs * D, 12));
    auto rr = ops.from_host<float>(random_floats(cap * n_envs, 13));
    std::vector<int> acts(cap * n_envs);
    std::vector<std::uint8_t> done(cap * n_envs);
    for (int i = 0; i < cap * n_envs; ++i) acts[i] = i % 5, done[i] = static_cast<std::uint8_t>(i % 13 == 0 ? 1 : 0);
    auto ra = ops.from_host<int>(acts);
    auto rd = ops.from_host<std::uint8_t>(done);
    const fh::replay::ReplayView r{
        rs.cview().data(), rn.cview().data(), ra.cview().data(), rr.cview().data(), rd.cview().data(), cap, n_envs, D};
    auto bs = ops.alloc<float>(B * D), bn = ops.alloc<float>(B * D), br = ops.alloc<float>(B), bd = ops.alloc<float>(B);
    auto ba = ops.alloc<int>(B);
    auto counter = ops.from_host<long long>(std::vector<long long>{8});
    auto ticket = ops.from_host<unsigned>(std::vector<unsigned>{0u});
    std::vector<float> states, returns;
    std::vector<long long> counts;
    std::vector<unsigned> tickets;
    for (int k = 0; k < 2; ++k) {
        fh::ops::run(ops, fh::ops::NstepSample{bs.view(),
                                               bn.view(),
                                               ba.view(),
                                               br.view(),
                                               bd.view(),
                                               r,
                                               fh::replay::SampleParams{42, 0, 3, 20, 3, 0.97f},
                                               B,
                                               {},
                                               fh::ops::CounterAdvance{counter.view(), ticket.view()}});
        const auto s = ops.to_host(bs.cview()), ret = ops.to_host(br.cview());
        states.insert(states.end(), s.begin(), s.end());
        returns.insert(returns.end(), ret.begin(), ret.end());
        counts.push_back(ops.to_host(counter.cview())[0]);
        tickets.push_back(ops.to_host(ticket.cview())[0]);
    }
    // The same draws as update numbers 9 and 10 given directly.
    for (const long long u : {9LL, 10LL}) {
        fh::ops::run(
            ops, fh::ops::NstepSample{bs.view(), bn.view(), ba.view(), br.view(), bd.view(), r,
                                      fh::replay::SampleParams{42, static_cast<std::uint64_t>(u), 3, 20, 3, 0.97f}, B});
        const auto s = ops.to_host(bs.cview()), ret = ops.to_host(br.cview());
        states.insert(states.end(), s.begin(), s.end());
        returns.insert(returns.end(), ret.begin(), ret.end());
    }
    return {states, returns, counts, tickets};
}

TEST_CASE("n-step sampling that advances its update counter samples at counter + 1 and leaves it there", "[dqn][ops]") {
    fh::ops::CpuDevice cpu;
    const auto [states, returns, counts, tickets] = sample_advancing(cpu);
    const std::size_t half_s = states.size() / 2, half_r = returns.size() / 2;
    CHECK(std::vector<float>(states.begin(), states.begin() + half_s) ==
          std::vector<float>(states.begin() + half_s, states.end()));
    CHECK(std::vector<float>(returns.begin(), returns.begin() + half_r) ==
          std::vector<float>(returns.begin() + half_r, returns.end()));
    CHECK(counts == std::vector<long long>{9, 10});
    // Not with an update number from update_from as well.
    auto c = cpu.from_host<long long>(std::vector<long long>{0});
    auto t = cpu.alloc<unsigned>(1);
    auto x = cpu.alloc<float>(8);
    auto i = cpu.alloc<int>(1);
    const std::vector<float> ring(64, 0.f);
    const std::vector<int> ring_a(8, 0);
    const std::vector<std::uint8_t> ring_d(8, 0);
    const fh::replay::ReplayView r{ring.data(), ring.data() + 32, ring_a.data(), ring.data(), ring_d.data(), 8, 1, 1};
    CHECK_THROWS_WITH(fh::ops::run(cpu, fh::ops::NstepSample{x.view().subview(0, 1), x.view().subview(1, 1), i.view(),
                                                             x.view().subview(2, 1), x.view().subview(3, 1), r,
                                                             fh::replay::SampleParams{1, 0, 0, 4, 1, 0.9f}, 1,
                                                             c.cview(), fh::ops::CounterAdvance{c.view(), t.view()}}),
                      Catch::Contains("update_from and from advance"));
}

TEST_CASE("GPU n-step sampling that advances its counter equals the CPU's, the ticket zero after", "[gpu][dqn]") {
    fh::ops::CpuDevice cpu;
    const auto c = sample_advancing(cpu);
    const auto g = sample_advancing(fh::test::gpu_ops());
    CHECK(std::get<0>(g) == std::get<0>(c));
    CHECK(std::get<1>(g) == std::get<1>(c));
    CHECK(std::get<2>(g) == std::vector<long long>{9, 10});
    CHECK(std::get<3>(g) == std::vector<unsigned>{0u, 0u});
}

TEST_CASE("GPU replay sampling, epsilon-greedy, guard, monitoring and mean equal the CPU", "[gpu][dqn]") {
    fh::ops::CpuDevice cpu;
    auto& gpu = fh::test::gpu_ops();
    // State widths below one warp, within the two columns a lane loads before the n-step reads
    // (replay::warp_sample_nstep), and beyond them (its loop over the rest).
    for (const int D : {11, 50, 131}) {
        INFO("state_dim " << D);
        const int cap = 37, n_envs = 13, B = 301;
        const auto states = random_floats(cap * n_envs * D, 1), next = random_floats(cap * n_envs * D, 2);
        const auto rewards = random_floats(cap * n_envs, 3);
        std::vector<int> acts(cap * n_envs);
        std::vector<std::uint8_t> done(cap * n_envs);
        for (int i = 0; i < cap * n_envs; ++i) {
            acts[i] = i % 9;
            done[i] = static_cast<std::uint8_t>(i % 17 == 0 ? 1 : i % 11 == 0 ? 2 : 0);
        }
        const auto q = random_floats(4099 * 9, 4);
        auto run = [&](fh::ops::Device& ops) {
            auto rs = ops.from_host<float>(states), rn = ops.from_host<float>(next), rr = ops.from_host<float>(rewards);
            auto ra = ops.from_host<int>(acts);
            auto rd = ops.from_host<std::uint8_t>(done);
            const fh::replay::ReplayView r{rs.cview().data(),
                                           rn.cview().data(),
                                           ra.cview().data(),
                                           rr.cview().data(),
                                           rd.cview().data(),
                                           cap,
                                           n_envs,
                                           D};
            auto bs = ops.alloc<float>(B * D), bn = ops.alloc<float>(B * D), br = ops.alloc<float>(B),
                 bd = ops.alloc<float>(B);
            auto ba = ops.alloc<int>(B);
            fh::ops::run(ops, fh::ops::NstepSample{bs.view(), bn.view(), ba.view(), br.view(), bd.view(), r,
                                                   fh::replay::SampleParams{42, 9, 50, 30, 3, 0.97f}, B});
            auto qb = ops.from_host<float>(q);
            auto ea = ops.alloc<int>(4099);
            fh::ops::run(ops, fh::ops::EpsilonGreedy{ea.view(), qb.cview(), 9, 0.3f, 5, 11});
            auto m = ops.alloc<float>(1);
            fh::ops::run(ops, fh::ops::Mean{m.view(), br.cview()});
            auto hist = ops.from_host<unsigned long long>(std::vector<unsigned long long>(9, 0));
            fh::ops::run(ops, fh::ops::ActionHistogram{hist.view(), ea.cview(), 9});
            return std::tuple{ops.to_host(bs.cview()), ops.to_host(bn.cview()),  ops.to_host(ba.cview()),
                              ops.to_host(br.cview()), ops.to_host(bd.cview()),  ops.to_host(ea.cview()),
                              ops.to_host(m.cview()),  ops.to_host(hist.cview())};
        };
        const auto c = run(cpu);
        const auto g = run(gpu);
        CHECK(std::get<0>(g) == std::get<0>(c));
        CHECK(std::get<1>(g) == std::get<1>(c));
        CHECK(std::get<2>(g) == std::get<2>(c));
        CHECK(std::get<3>(g) == std::get<3>(c));  // --fmad=false: bit for bit
        CHECK(std::get<4>(g) == std::get<4>(c));
        CHECK(std::get<5>(g) == std::get<5>(c));
        // The mean of B rewards: the CPU sums in double, the kernel in float (mean_bound).
        FH_REQUIRE_CLOSE(std::get<6>(g), std::get<6>(c), fh::test::mean_bound(std::get<3>(c)), 0);
        CHECK(std::get<7>(g) == std::get<7>(c));
    }
}
