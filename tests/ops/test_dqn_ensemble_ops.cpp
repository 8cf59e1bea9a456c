/// @file test_dqn_ensemble_ops.cpp
/// @brief The DQN ensemble (dqn.ensemble_size = K > 1) in the fused DQN ops: acting on the heads'
///        mean Q (and the UCB score), the loss as K per-head losses weighted by the bootstrap
///        masks, the masks drawn by sampling; then [gpu] each against its CPU twin.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "math/dqn.h"
#include "math/replay.h"
#include "device/cpu_device.hpp"
#include "abi/dqn_step.h"
#include "support/compare.hpp"
#include "support/error_model.hpp"
#include "support/gpu.hpp"

using fh::dqn::HeadParams;
using fh::test::random_floats;

namespace {

fh::dqn::AgentParams ensemble_agent(float ucb = 0.f, float bootstrap = 0.5f, float cql = 0.f) {
    fh::dqn::AgentParams a{};
    a.seed = 23;
    a.epsilon_start = 0.0;  // greedy unless a test says otherwise
    a.epsilon_end = 0.0;
    a.n_envs = 8;
    a.n_step = 3;
    a.gamma = 0.97f;
    a.mse_alpha = 0.4f;
    a.cql_alpha = cql;
    a.bootstrap_prob = bootstrap;
    a.ucb = ucb;
    return a;
}

HeadParams with_heads(HeadParams h, int K) {
    h.ensemble = K;
    return h;
}

/// Head k's rows (n, W) of network outputs (n, K * W).
std::vector<float> head_rows(const std::vector<float>& outputs, const HeadParams& hk, int k, int n) {
    const int W = fh::dqn::head_width(hk), OW = fh::dqn::output_width(hk);
    std::vector<float> rows;
    for (int r = 0; r < n; ++r)
        rows.insert(rows.end(), outputs.begin() + r * OW + k * W, outputs.begin() + r * OW + (k + 1) * W);
    return rows;
}

struct Acted {
    std::vector<int> actions;
    std::vector<float> q;
};

Acted act(fh::ops::Device& ops, const std::vector<float>& outputs, const HeadParams& h, int n,
          const fh::dqn::AgentParams* agent, bool explore = true) {
    auto head = ops.from_host<float>(outputs);
    auto actions = ops.alloc<int>(static_cast<std::size_t>(n));
    auto q = ops.alloc<float>(static_cast<std::size_t>(n * h.num_actions));
    if (agent == nullptr) {
        fh::ops::run(ops, fh::ops::DqnAct{actions.view(), q.view(), {}, head.cview(), h, {}, {}});
    } else {
        auto ag = ops.from_host<fh::dqn::AgentParams>(std::vector<fh::dqn::AgentParams>{*agent});
        auto cnt = ops.from_host<fh::dqn::Counters>(std::vector<fh::dqn::Counters>{{5, 0, 5}});
        fh::ops::run(ops,
                     fh::ops::DqnAct{actions.view(), q.view(), {}, head.cview(), h, ag.cview(), cnt.cview(), explore});
    }
    return {ops.to_host(actions.cview()), ops.to_host(q.cview())};
}

struct EnsembleLossCase {
    HeadParams h;  ///< with the ensemble
    int B;
    std::vector<float> hs, hsel, ht, returns, discounts, masks;
    std::vector<int> actions, target_actions;
};

EnsembleLossCase ensemble_loss_case(const HeadParams& h, int B, std::uint64_t seed) {
    const int OW = fh::dqn::output_width(h), K = h.ensemble;
    EnsembleLossCase c{h,
                       B,
                       random_floats(B * OW, seed),
                       random_floats(B * OW, seed + 1),
                       random_floats(B * OW, seed + 2),
                       random_floats(B, seed + 3, -4.f, 4.f),
                       random_floats(B, seed + 4, 0.f, 0.99f),
                       {},
                       {},
                       {}};
    c.discounts[0] = 0.f;
    const auto u = random_floats(B * K, seed + 5, 0.f, 1.f);
    for (float v : u) c.masks.push_back(v < 0.5f ? 1.f : 0.f);
    for (int b = 0; b < B; ++b) {
        c.actions.push_back((b * 5 + 1) % h.num_actions);
        c.target_actions.push_back((b * 3 + 2) % h.num_actions);
    }
    return c;
}

struct LossOut {
    std::vector<float> d_head, stats;
};

/// dqn_loss with head params h on rows (B, output_width(h)); target_actions and masks optional.
LossOut loss(fh::ops::Device& ops, const HeadParams& h, int B, const std::vector<float>& hs,
             const std::vector<float>& hsel, const std::vector<float>& ht, const EnsembleLossCase& c,
             const std::vector<int>& target_actions, const std::vector<float>& masks, float cql = 0.f) {
    const std::size_t rows = static_cast<std::size_t>(B) * static_cast<std::size_t>(h.ensemble);
    auto dhs = ops.from_host<float>(hs), dsel = ops.from_host<float>(hsel), dt = ops.from_host<float>(ht);
    auto act = ops.from_host<int>(c.actions);
    auto ret = ops.from_host<float>(c.returns), disc = ops.from_host<float>(c.discounts);
    auto ta = ops.from_host<int>(target_actions);
    auto mk = ops.from_host<float>(masks);
    auto ag = ops.from_host<fh::dqn::AgentParams>(std::vector<fh::dqn::AgentParams>{ensemble_agent(0.f, 0.5f, cql)});
    auto d = ops.alloc<float>(rows * static_cast<std::size_t>(fh::dqn::head_width(h)));
    auto st = ops.alloc<float>(rows * fh::dqn::kSampleStats);
    fh::ops::run(ops, fh::ops::DqnLoss{d.view(), st.view(), dhs.cview(), dsel.cview(), dt.cview(), act.cview(),
                                       ret.cview(), disc.cview(), ag.cview(), h, B, ta.cview(), mk.cview()});
    return {ops.to_host(d.cview()), ops.to_host(st.cview())};
}

}  // namespace

TEST_CASE("DQN ensemble acting: the heads' mean Q, greedy on it, the UCB score only when exploring",
          "[dqn][ops][ensemble]") {
    fh::ops::CpuDevice ops;
    for (int scalar : {0, 1})
        for (int K : {2, 5}) {
            HeadParams h1{4, 11, 1, -2.f, 2.f};
            h1.scalar = scalar;
            const HeadParams h = with_heads(h1, K);
            const int n = 40, A = h.num_actions;
            INFO("scalar " << scalar << " K " << K);
            const auto outputs =
                random_floats(n * fh::dqn::output_width(h), 60 + static_cast<std::uint64_t>(K), -2.f, 2.f);
            std::vector<Acted> heads;
            for (int k = 0; k < K; ++k) heads.push_back(act(ops, head_rows(outputs, h, k, n), h1, n, nullptr));
            const Acted greedy = act(ops, outputs, h, n, nullptr);
            const auto ucb_agent = ensemble_agent(3.f);
            const Acted ucb = act(ops, outputs, h, n, &ucb_agent);
            auto eps_agent = ensemble_agent(3.f);
            eps_agent.epsilon_start = eps_agent.epsilon_end = 1.0;  // exploring would be uniform
            const Acted target = act(ops, outputs, h, n, &eps_agent, /*explore*/ false);
            int ucb_differs = 0;
            for (int e = 0; e < n; ++e) {
                std::vector<double> mean(static_cast<std::size_t>(A)), score(mean.size());
                for (int a = 0; a < A; ++a) {
                    double s = 0, s2 = 0;
                    for (int k = 0; k < K; ++k)
                        s += heads[static_cast<std::size_t>(k)].q[static_cast<std::size_t>(e * A + a)];
                    const double m = s / K;
                    for (int k = 0; k < K; ++k) {
                        const double d = heads[static_cast<std::size_t>(k)].q[static_cast<std::size_t>(e * A + a)] - m;
                        s2 += d * d;
                    }
                    mean[static_cast<std::size_t>(a)] = m;
                    score[static_cast<std::size_t>(a)] = m + 3.0 * std::sqrt(s2 / K);
                    REQUIRE(greedy.q[static_cast<std::size_t>(e * A + a)] == Approx(m).margin(1e-6));
                    REQUIRE(ucb.q[static_cast<std::size_t>(e * A + a)] ==
                            greedy.q[static_cast<std::size_t>(e * A + a)]);
                }
                const auto best = [&](const std::vector<double>& v) {
                    return static_cast<int>(std::max_element(v.begin(), v.end()) - v.begin());
                };
                const auto margin = [&](const std::vector<double>& v) {
                    auto s = v;
                    std::sort(s.begin(), s.end());
                    return s[s.size() - 1] - s[s.size() - 2];
                };
                if (margin(mean) > 1e-4) {
                    CHECK(greedy.actions[static_cast<std::size_t>(e)] == best(mean));
                    CHECK(target.actions[static_cast<std::size_t>(e)] == best(mean));  // explore = false: the mean
                }
                if (margin(score) > 1e-4) CHECK(ucb.actions[static_cast<std::size_t>(e)] == best(score));
                ucb_differs += ucb.actions[static_cast<std::size_t>(e)] != greedy.actions[static_cast<std::size_t>(e)];
            }
            CHECK(ucb_differs > 0);  // the bonus changes some choices at these spreads
        }
}

TEST_CASE("DQN ensemble loss: each head row is the one-head loss, weighted by its mask over B * K",
          "[dqn][ops][ensemble]") {
    fh::ops::CpuDevice ops;
    for (int scalar : {0, 1})
        for (float cql : {0.f, 0.5f}) {
            HeadParams h1{4, 9, 1, -3.f, 3.f};
            h1.scalar = scalar;
            const int K = 3, B = 7, W = fh::dqn::head_width(h1);
            const HeadParams h = with_heads(h1, K);
            INFO("scalar " << scalar << " cql " << cql);
            const auto c = ensemble_loss_case(h, B, 700 + static_cast<std::uint64_t>(scalar));
            const LossOut all = loss(ops, h, B, c.hs, c.hsel, c.ht, c, c.target_actions, c.masks, cql);
            for (int k = 0; k < K; ++k) {
                const auto one = loss(ops, h1, B, head_rows(c.hs, h, k, B), head_rows(c.hsel, h, k, B),
                                      head_rows(c.ht, h, k, B), c, c.target_actions, {}, cql);
                for (int b = 0; b < B; ++b) {
                    const int r = b * K + k;
                    const float mask = c.masks[static_cast<std::size_t>(r)];
                    for (int s = 0; s < fh::dqn::kSampleStats; ++s)  // the statistics do not depend on the weight
                        REQUIRE(all.stats[static_cast<std::size_t>(s * B * K + r)] ==
                                one.stats[static_cast<std::size_t>(s * B + b)]);
                    for (int i = 0; i < W; ++i) {
                        const float got = all.d_head[static_cast<std::size_t>(r * W + i)];
                        if (mask == 0.f)
                            REQUIRE(got == 0.f);
                        else
                            REQUIRE(
                                got ==
                                Approx(one.d_head[static_cast<std::size_t>(b * W + i)] / K).margin(1e-9).epsilon(1e-5));
                    }
                }
            }
            // The target action is honoured: the rows' own argmax gives other targets.
            const LossOut own = loss(ops, h, B, c.hs, c.hsel, c.ht, c, {}, c.masks, cql);
            CHECK(own.stats != all.stats);
            // ... and the ensemble's a* computed by acting (explore = false) on the select rows is
            // what the loss uses when given: equal to a given copy of it.
            const auto agent = ensemble_agent();
            const Acted picked = act(ops, c.hsel, h, B, &agent, false);
            const LossOut via = loss(ops, h, B, c.hs, c.hsel, c.ht, c, picked.actions, c.masks, cql);
            for (int b = 0; b < B; ++b)
                for (int k = 0; k < K; ++k) {  // each head's TD target uses the same a*: Q_target(s', a*) of head k
                    const auto one = loss(ops, h1, B, head_rows(c.hs, h, k, B), head_rows(c.hsel, h, k, B),
                                          head_rows(c.ht, h, k, B), c, picked.actions, {}, cql);
                    REQUIRE(via.stats[static_cast<std::size_t>(fh::dqn::kStatTd * B * K + b * K + k)] ==
                            one.stats[static_cast<std::size_t>(fh::dqn::kStatTd * B + b)]);
                }
        }
}

TEST_CASE("DQN ensemble bootstrap masks: fixed per transition, Bernoulli(p), drawn by sampling",
          "[dqn][ops][ensemble]") {
    // The mask function: 1 at p = 1; about p of the heads otherwise; a function of (env, step, head).
    for (int k = 0; k < 32; ++k) CHECK(fh::dqn::bootstrap_mask(5, 3, 1000, k, 1.0f) == 1.0f);
    for (float p : {0.2f, 0.5f, 0.9f}) {
        double ones = 0;
        const int envs = 50, steps = 40, K = 10;
        for (int e = 0; e < envs; ++e)
            for (int s = 0; s < steps; ++s)
                for (int k = 0; k < K; ++k) ones += fh::dqn::bootstrap_mask(5, e, s, k, p);
        CHECK(ones / (envs * steps * K) == Approx(p).margin(0.02));
    }
    int heads_differ = 0;
    for (int s = 0; s < 64; ++s)
        heads_differ += fh::dqn::bootstrap_mask(5, 1, s, 0, 0.5f) != fh::dqn::bootstrap_mask(5, 1, s, 7, 0.5f);
    CHECK(heads_differ > 10);
    CHECK(fh::dqn::bootstrap_mask(5, 2, 9, 3, 0.5f) == fh::dqn::bootstrap_mask(5, 2, 9, 3, 0.5f));

    // dqn_sample writes each row's masks of its first transition (the draw's env and step).
    fh::ops::CpuDevice ops;
    const int cap = 20, n = 6, D = 3, B = 41, K = 4;
    auto rs = ops.from_host<float>(random_floats(cap * n * D, 1)),
         rn = ops.from_host<float>(random_floats(cap * n * D, 2));
    auto rr = ops.from_host<float>(random_floats(cap * n, 3));
    auto ra = ops.from_host<int>(std::vector<int>(cap * n, 1));
    auto rd = ops.from_host<std::uint8_t>(std::vector<std::uint8_t>(cap * n, 0));
    const fh::ops::DqnRing ring{rs.view(), rn.view(), ra.view(), rr.view(), rd.view(), cap, n, D};
    const auto a = ensemble_agent(0.f, 0.5f);
    auto ag = ops.from_host<fh::dqn::AgentParams>(std::vector<fh::dqn::AgentParams>{a});
    const fh::dqn::Counters counters{57, 4, 57};
    auto cnt = ops.from_host<fh::dqn::Counters>(std::vector<fh::dqn::Counters>{counters});
    auto x = ops.alloc<float>(2 * B * D), br = ops.alloc<float>(B), bd = ops.alloc<float>(B),
         masks = ops.alloc<float>(B * K);
    auto ba = ops.alloc<int>(B);
    fh::ops::run(ops, fh::ops::DqnSample{x.view(), ba.view(), br.view(), bd.view(), ring, cnt.cview(), ag.cview(), B,
                                         masks.view(), K});
    const auto got = ops.to_host(masks.cview());
    const fh::replay::ReplayView view{
        rs.cview().data(), rn.cview().data(), ra.cview().data(), rr.cview().data(), rd.cview().data(), cap, n, D};
    const auto range = fh::dqn::sample_range(counters.pushed, cap, a.n_step);
    const fh::replay::SampleParams sp{
        a.seed, static_cast<std::uint64_t>(counters.updates + 1), range.oldest, range.count, a.n_step, a.gamma};
    double ones = 0;
    for (int b = 0; b < B; ++b) {
        const auto draw = fh::replay::draw_nstep(b, view, sp);
        CHECK(draw.step >= range.oldest);
        CHECK(draw.step < range.oldest + range.count);
        CHECK(draw.first == (draw.step % cap) * n + draw.env);
        for (int k = 0; k < K; ++k) {
            REQUIRE(got[static_cast<std::size_t>(b * K + k)] ==
                    fh::dqn::bootstrap_mask(a.seed, draw.env, draw.step, k, 0.5f));
            ones += got[static_cast<std::size_t>(b * K + k)];
        }
    }
    CHECK(ones > 0);
    CHECK(ones < B * K);
}

TEST_CASE("the DQN ensemble's acting, loss and masks on the GPU equal their CPU twins", "[gpu][dqn][ops][ensemble]") {
    fh::ops::CpuDevice cpu;
    auto& gpu = fh::test::gpu_ops();
    for (int scalar : {0, 1})
        for (int K : {2, 7})
            for (int B : {1, 33, 256}) {
                HeadParams h1{9, 51, 1, -10.f, 10.f};
                h1.scalar = scalar;
                const HeadParams h = with_heads(h1, K);
                INFO("scalar " << scalar << " K " << K << " B " << B);
                const auto c = ensemble_loss_case(h, B, 900 + static_cast<std::uint64_t>(B * K));
                for (float cql : {0.f, 0.5f}) {
                    const LossOut lc = loss(cpu, h, B, c.hs, c.hsel, c.ht, c, c.target_actions, c.masks, cql);
                    const LossOut lg = loss(gpu, h, B, c.hs, c.hsel, c.ht, c, c.target_actions, c.masks, cql);
                    // Each head's loss as the single head's (test_dqn_step_ops.cpp, loss_model: 3
                    // reductions of up to Z terms and 4 expf / logf for C51; 2 reductions of A terms
                    // for the scalar head; CQL 2 more), one more level for the mean over the K heads;
                    // norm-relative, d_head as one tensor, the stats per statistic.
                    const int levels = (scalar ? 2 : 3) + 1, terms = scalar ? 9 : 51;
                    const int tr = (scalar ? 0 : 4) + (cql > 0 ? 2 : 0);
                    const auto bounds = [&](const LossOut& r) {
                        return std::pair{
                            fh::test::chain_bounds(r.d_head, r.d_head.size(), levels, terms, tr),
                            fh::test::chain_bounds(r.stats, r.stats.size() / fh::dqn::kSampleStats, levels, terms, tr)};
                    };
                    const auto ml = bounds(lc);
                    FH_REQUIRE_WITHIN(lg.d_head, lc.d_head, ml.first);
                    FH_REQUIRE_WITHIN(lg.stats, lc.stats, ml.second);
                    const LossOut oc = loss(cpu, h, B, c.hs, c.hsel, c.ht, c, {}, {}, cql);
                    const LossOut og = loss(gpu, h, B, c.hs, c.hsel, c.ht, c, {}, {}, cql);
                    const auto mo = bounds(oc);
                    FH_REQUIRE_WITHIN(og.d_head, oc.d_head, mo.first);
                    FH_REQUIRE_WITHIN(og.stats, oc.stats, mo.second);
                }
                const auto ucb_agent = ensemble_agent(2.f);
                for (int mode = 0; mode < 3; ++mode) {  // greedy, UCB exploring, explore = false
                    const fh::dqn::AgentParams* ag = mode == 0 ? nullptr : &ucb_agent;
                    const Acted ac = act(cpu, c.hs, h, B, ag, mode != 2), ag_ = act(gpu, c.hs, h, B, ag, mode != 2);
                    // Each head's Q (the dueling mean, the softmax's sum, the expectation: 3 levels
                    // of up to Z terms, expf), then the heads' mean and spread (UCB): 2 levels of K
                    // terms and a sqrt; norm-relative over each row of A actions.
                    FH_REQUIRE_WITHIN(ag_.q, ac.q, fh::test::chain_bounds(ac.q, 9, 5, 51, 2));
                    for (int e = 0; e < B; ++e) {
                        std::vector<float> row(ac.q.begin() + e * 9, ac.q.begin() + e * 9 + 9);
                        std::sort(row.begin(), row.end());
                        if (row[8] - row[7] > 1e-3f && mode != 1)
                            REQUIRE(ag_.actions[static_cast<std::size_t>(e)] ==
                                    ac.actions[static_cast<std::size_t>(e)]);
                    }
                    if (scalar) CHECK(ag_.actions == ac.actions);  // the same floats per head: the same choices
                }
            }
    // The masks: sampling on both backends from one ring.
    const int cap = 30, n = 11, D = 5, B = 100, K = 6;
    auto sample_masks = [&](fh::ops::Device& ops) {
        auto rs = ops.from_host<float>(random_floats(cap * n * D, 1)),
             rn = ops.from_host<float>(random_floats(cap * n * D, 2));
        auto rr = ops.from_host<float>(random_floats(cap * n, 3));
        auto ra = ops.from_host<int>(std::vector<int>(cap * n, 2));
        auto rd = ops.from_host<std::uint8_t>(std::vector<std::uint8_t>(cap * n, 0));
        const fh::ops::DqnRing ring{rs.view(), rn.view(), ra.view(), rr.view(), rd.view(), cap, n, D};
        auto ag = ops.from_host<fh::dqn::AgentParams>(std::vector<fh::dqn::AgentParams>{ensemble_agent(0.f, 0.3f)});
        auto cnt = ops.from_host<fh::dqn::Counters>(std::vector<fh::dqn::Counters>{{95, 12, 95}});
        auto x = ops.alloc<float>(2 * B * D), br = ops.alloc<float>(B), bd = ops.alloc<float>(B),
             m = ops.alloc<float>(B * K);
        auto ba = ops.alloc<int>(B);
        fh::ops::run(ops, fh::ops::DqnSample{x.view(), ba.view(), br.view(), bd.view(), ring, cnt.cview(), ag.cview(),
                                             B, m.view(), K});
        return std::pair{ops.to_host(m.cview()), ops.to_host(x.cview())};
    };
    const auto mc = sample_masks(cpu), mg = sample_masks(gpu);
    CHECK(mg.first == mc.first);
    CHECK(mg.second == mc.second);
}
