/// @file test_dqn_step_ops.cpp
/// @brief The fused DQN steps (cuda/abi/dqn_step.h): each CPU twin against the unfused math it
///        replaces (the dueling C51 head, the C51 and MSE losses, their blend and the head's
///        backward, in double; Adam and the soft target as separate ops; VecEnv's step and the
///        ring copy; the n-step sampler), then [gpu] every kernel against its CPU twin on seeded
///        random inputs of awkward sizes.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "abi/dqn_step.h"
#include "data/synthetic_market.hpp"
#include "env/vec_env.hpp"
#include "math/dqn.h"
#include "device/cpu_device.hpp"
#include "abi/dqn_step.h"
#include "abi/env.h"
#include "abi/replay_nstep.h"
#include "support/compare.hpp"
#include "support/error_model.hpp"
#include "support/gpu.hpp"
#include "support/market_fixture.hpp"
#include "abi/core_optim.h"
#include "abi/core_vector.h"

using fh::dqn::HeadParams;
using fh::ops::View;
using fh::test::random_floats;

namespace {

fh::dqn::AgentParams agent(float alpha = 0.4f, float tau = 0.01f, long long period = 0, float cql = 0.f) {
    fh::dqn::AgentParams a{};
    a.seed = 11;
    a.epsilon_start = 1.0;
    a.epsilon_end = 0.05;
    a.epsilon_decay_env_steps = 1000;
    a.n_envs = 8;
    a.n_step = 3;
    a.gamma = 0.97f;
    a.mse_alpha = alpha;
    a.cql_alpha = cql;
    a.tau = tau;
    a.one_minus_tau = static_cast<float>(1.0 - static_cast<double>(tau));
    a.target_period = period;
    a.lr = 1e-3f;
    a.beta1 = 0.9f;
    a.beta2 = 0.999f;
    a.adam_eps = 1e-8f;
    a.clip_norm = 1.0f;
    a.weight_decay = 0.f;
    return a;
}

/// The loss of one batch through the unfused math in double: head_forward on the three rows,
/// c51_sample_loss, mse_sample_loss and cql_sample_loss, the blend, head_backward. d_head (B, W),
/// stats (kSampleStats, B).
void unfused_loss(const std::vector<float>& hs, const std::vector<float>& hsel, const std::vector<float>& ht,
                  const std::vector<int>& actions, const std::vector<float>& returns,
                  const std::vector<float>& discounts, double alpha, double cql, const HeadParams& h, int B,
                  std::vector<double>& d_head, std::vector<double>& stats) {
    const int A = h.num_actions, Z = h.num_atoms, W = fh::dqn::head_width(h), AZ = A * Z;
    auto forward = [&](const std::vector<float>& rows, std::vector<double>& logits, std::vector<double>& probs,
                       std::vector<double>& q) {
        logits.assign(static_cast<std::size_t>(B * AZ), 0.0);
        probs = logits;
        q.assign(static_cast<std::size_t>(B * A), 0.0);
        for (int b = 0; b < B; ++b) {
            std::vector<double> row(rows.begin() + b * W, rows.begin() + (b + 1) * W);
            const double* value = h.dueling ? row.data() : nullptr;
            const double* adv = row.data() + (h.dueling ? Z : 0);
            fh::dqn::head_forward<double>(value, adv, &logits[b * AZ], &probs[b * AZ], &q[b * A], h);
        }
    };
    std::vector<double> ls, ps, qs, lsel, psel, qsel, lt, pt, qt;
    forward(hs, ls, ps, qs);
    forward(hsel, lsel, psel, qsel);
    forward(ht, lt, pt, qt);
    std::vector<double> ret(returns.begin(), returns.end()), disc(discounts.begin(), discounts.end());
    std::vector<double> d_c51(static_cast<std::size_t>(B * AZ)), d_mse(d_c51.size()), td(static_cast<std::size_t>(B));
    stats.assign(static_cast<std::size_t>(fh::dqn::kSampleStats * B), 0.0);
    d_head.assign(static_cast<std::size_t>(B * W), 0.0);
    for (int b = 0; b < B; ++b) {
        std::vector<double> dc(static_cast<std::size_t>(B * AZ)), dm(dc.size()), dq(dc.size());
        stats[b] = fh::dqn::c51_sample_loss<double>(b, ls.data(), ps.data(), qsel.data(), pt.data(), actions.data(),
                                                    ret.data(), disc.data(), dc.data(), 1.0 / B, h);
        stats[B + b] = fh::dqn::mse_sample_loss<double>(b, ps.data(), qs.data(), qsel.data(), qt.data(), actions.data(),
                                                        ret.data(), disc.data(), dm.data(), td.data(), 1.0 / B, h);
        stats[2 * B + b] = td[b];
        stats[3 * B + b] = qs[b * A + actions[b]];
        if (cql > 0)
            stats[4 * B + b] =
                fh::dqn::cql_sample_loss<double>(b, ps.data(), qs.data(), actions.data(), dq.data(), 1.0 / B, h);
        std::vector<double> d_logits(static_cast<std::size_t>(AZ)), dv(static_cast<std::size_t>(Z)),
            da(d_logits.size());
        for (int i = 0; i < AZ; ++i)
            d_logits[i] = alpha * dc[b * AZ + i] + (1 - alpha) * dm[b * AZ + i] + cql * dq[b * AZ + i];
        fh::dqn::head_backward<double>(d_logits.data(), dv.data(), da.data(), h);
        for (int z = 0; z < Z && h.dueling; ++z) d_head[b * W + z] = dv[z];
        for (int i = 0; i < AZ; ++i) d_head[b * W + (h.dueling ? Z : 0) + i] = da[i];
    }
}

struct LossCase {
    HeadParams h;
    int B;
    std::vector<float> hs, hsel, ht, returns, discounts;
    std::vector<int> actions;
};

LossCase loss_case(const HeadParams& h, int B, std::uint64_t seed) {
    const int W = fh::dqn::head_width(h);
    LossCase c{h,
               B,
               random_floats(B * W, seed),
               random_floats(B * W, seed + 1),
               random_floats(B * W, seed + 2),
               random_floats(B, seed + 3, -4.f, 4.f),
               random_floats(B, seed + 4, 0.f, 0.99f),
               {}};
    c.discounts[0] = 0.f;  // a terminal transition
    for (int b = 0; b < B; ++b) c.actions.push_back((b * 7 + 3) % h.num_actions);
    return c;
}

struct LossOut {
    std::vector<float> d_head, stats;
};

LossOut run_loss(fh::ops::Device& ops, const LossCase& c, const fh::dqn::AgentParams& a, bool same_select) {
    const int W = fh::dqn::head_width(c.h);
    auto hs = ops.from_host<float>(c.hs), hsel = ops.from_host<float>(c.hsel), ht = ops.from_host<float>(c.ht);
    auto act = ops.from_host<int>(c.actions);
    auto ret = ops.from_host<float>(c.returns), disc = ops.from_host<float>(c.discounts);
    auto ag = ops.from_host<fh::dqn::AgentParams>(std::vector<fh::dqn::AgentParams>{a});
    auto d = ops.alloc<float>(static_cast<std::size_t>(c.B * W));
    auto st = ops.alloc<float>(static_cast<std::size_t>(fh::dqn::kSampleStats * c.B));
    fh::ops::run(ops, fh::ops::DqnLoss{d.view(), st.view(), hs.cview(), same_select ? ht.cview() : hsel.cview(),
                                       ht.cview(), act.cview(), ret.cview(), disc.cview(), ag.cview(), c.h, c.B});
    return {ops.to_host(d.cview()), ops.to_host(st.cview())};
}

/// The fused loss's error model against the CPU twin (fh::test::chain_bounds, norm-relative):
/// the C51 head, 3 nested reductions of up to max(Z, A) terms (the dueling mean over the
/// actions, the log-sum-exp over the atoms, the target's projection and expectation) and 4
/// expf / logf (the online softmax's two, the selecting row's and the target's expf), 2 more with CQL (its soft maximum
/// over the actions); the scalar head, 2 reductions over the A actions (the dueling mean, CQL's
/// sum) and CQL's two. d_head: one scale for the tensor; stats: one per statistic (its B rows).
struct LossBounds {
    fh::test::Bounds d_head, stats;
};
LossBounds loss_model(const LossOut& ref, const HeadParams& h, int B, bool cql) {
    const int levels = h.scalar ? 2 : 3, terms = h.scalar ? h.num_actions : std::max(h.num_atoms, h.num_actions);
    const int transcendentals = (h.scalar ? 0 : 4) + (cql ? 2 : 0);
    return {fh::test::chain_bounds(ref.d_head, ref.d_head.size(), levels, terms, transcendentals),
            fh::test::chain_bounds(ref.stats, static_cast<std::size_t>(B), levels, terms, transcendentals)};
}

}  // namespace

TEST_CASE("the fused DQN loss equals the unfused head, losses, blend, CQL and head backward", "[dqn][ops]") {
    fh::ops::CpuDevice ops;
    for (int dueling : {1, 0})
        for (int Z : {5, 51})
            for (double alpha : {0.0, 0.4, 1.0})
                for (double cql : {0.0, 0.7}) {
                    const HeadParams h{4, Z, dueling, -3.f, 3.f};
                    const int B = 9;
                    INFO("dueling " << dueling << " Z " << Z << " alpha " << alpha << " cql " << cql);
                    const LossCase c = loss_case(h, B, 100 + static_cast<std::uint64_t>(Z));
                    const LossOut got =
                        run_loss(ops, c, agent(static_cast<float>(alpha), 0.01f, 0, static_cast<float>(cql)), false);
                    std::vector<double> d_ref, s_ref;
                    unfused_loss(c.hs, c.hsel, c.ht, c.actions, c.returns, c.discounts, alpha, cql, h, B, d_ref, s_ref);
                    const std::vector<float> d_ref_f(d_ref.begin(), d_ref.end()), s_ref_f(s_ref.begin(), s_ref.end());
                    FH_REQUIRE_CLOSE(got.d_head, d_ref_f, 2e-6, 2e-4);
                    FH_REQUIRE_CLOSE(got.stats, s_ref_f, 2e-5, 2e-4);
                }
}

TEST_CASE("the scalar head (dqn.head = mse): its loss gradient matches finite differences; the op equals it",
          "[dqn][ops][gradcheck]") {
    fh::ops::CpuDevice ops;
    for (int dueling : {1, 0})
        for (double cql : {0.0, 0.6}) {
            const HeadParams h{5, 51, dueling, -3.f, 3.f, /*scalar*/ 1};
            const int B = 6, W = fh::dqn::head_width(h);
            REQUIRE(W == (dueling ? 1 : 0) + 5);
            INFO("dueling " << dueling << " cql " << cql);
            const LossCase c = loss_case(h, B, 300 + static_cast<std::uint64_t>(dueling));
            const LossOut got = run_loss(ops, c, agent(0.4f, 0.01f, 0, static_cast<float>(cql)), false);
            for (int b = 0; b < B; ++b) {
                auto rows = [&](const std::vector<float>& v) {
                    return std::vector<double>(v.begin() + b * W, v.begin() + (b + 1) * W);
                };
                const auto hsel = rows(c.hsel), ht = rows(c.ht);
                // L(row_s) = (MSE + cql * CQL) / B, in double.
                auto loss = [&](const std::vector<double>& hs, std::vector<double>* d) {
                    std::vector<double> grad(static_cast<std::size_t>(W)), q(10), st(fh::dqn::kSampleStats);
                    fh::dqn::scalar_sample_loss<double>(hs.data(), hsel.data(), ht.data(), c.actions[b], c.returns[b],
                                                        c.discounts[b], 1.0 / B, cql, h, grad.data(), q.data(),
                                                        st.data());
                    if (d) *d = grad;
                    return st;
                };
                const auto hs = rows(c.hs);
                std::vector<double> grad;
                const auto st = loss(hs, &grad);
                for (int i = 0; i < W; ++i) {
                    auto plus = hs, minus = hs;
                    plus[i] += 1e-6;
                    minus[i] -= 1e-6;
                    const auto lp = loss(plus, nullptr), lm = loss(minus, nullptr);
                    const double numeric = ((lp[fh::dqn::kStatMse] + cql * lp[fh::dqn::kStatCql]) -
                                            (lm[fh::dqn::kStatMse] + cql * lm[fh::dqn::kStatCql])) /
                                           (2e-6 * B);
                    REQUIRE(grad[i] == Approx(numeric).margin(1e-7).epsilon(1e-5));
                    REQUIRE(got.d_head[b * W + i] == Approx(grad[i]).margin(1e-6).epsilon(1e-4));
                }
                CHECK(st[fh::dqn::kStatC51] == 0);
                for (int k = 0; k < fh::dqn::kSampleStats; ++k)
                    CHECK(got.stats[k * B + b] == Approx(st[k]).margin(1e-5).epsilon(1e-4));
                if (cql > 0) CHECK(st[fh::dqn::kStatCql] > 0);  // logsumexp > max >= Q(a)
            }
        }
    // Acting: Q is the output itself (V + A - mean A with dueling).
    const HeadParams h{4, 51, 1, -3.f, 3.f, 1};
    const auto row = random_floats(3 * 5, 77);
    auto head = ops.from_host<float>(row);
    auto actions = ops.alloc<int>(3);
    auto q = ops.alloc<float>(3 * 4);
    fh::ops::run(ops, fh::ops::DqnAct{actions.view(), q.view(), {}, head.cview(), h, {}, {}});
    const auto qh = ops.to_host(q.cview());
    const auto ah = ops.to_host(actions.cview());
    for (int e = 0; e < 3; ++e) {
        const float* r = row.data() + e * 5;
        const double mean = (double(r[1]) + r[2] + r[3] + r[4]) / 4;
        for (int a = 0; a < 4; ++a) CHECK(qh[e * 4 + a] == Approx(r[0] + r[1 + a] - mean).margin(1e-6));
        CHECK(ah[e] == fh::policy::argmax(&qh[e * 4], 4));
    }
}

TEST_CASE("DQN acting: Q of the dueling head, greedy, epsilon from the counters, histogram", "[dqn][ops]") {
    fh::ops::CpuDevice ops;
    const HeadParams h{5, 11, 1, -2.f, 2.f};
    const int n = 64, W = fh::dqn::head_width(h);
    const auto rows = random_floats(n * W, 5);
    auto head = ops.from_host<float>(rows);
    auto actions = ops.alloc<int>(n);
    auto q = ops.alloc<float>(n * 5);
    fh::ops::run(ops, fh::ops::DqnAct{actions.view(), q.view(), {}, head.cview(), h, {}, {}});
    const auto qh = ops.to_host(q.cview());
    const auto ah = ops.to_host(actions.cview());
    for (int e = 0; e < n; ++e) {
        std::vector<double> row(rows.begin() + e * W, rows.begin() + (e + 1) * W), logits(55), probs(55), qd(5);
        fh::dqn::head_forward<double>(row.data(), row.data() + 11, logits.data(), probs.data(), qd.data(), h);
        for (int a = 0; a < 5; ++a) REQUIRE(qh[e * 5 + a] == Approx(qd[a]).margin(1e-5));
        REQUIRE(ah[e] == fh::policy::argmax(&qh[e * 5], 5));
    }
    // Epsilon from the counters: at step 0 epsilon_start = 1 (uniform), late epsilon_end.
    auto ag = ops.from_host<fh::dqn::AgentParams>(std::vector<fh::dqn::AgentParams>{agent()});
    auto counters = ops.from_host<fh::dqn::Counters>(std::vector<fh::dqn::Counters>{{0, 0, 0}});
    auto hist = ops.from_host<unsigned long long>(std::vector<unsigned long long>(5, 0));
    fh::ops::run(ops, fh::ops::DqnAct{actions.view(), {}, hist.view(), head.cview(), h, ag.cview(), counters.cview()});
    const auto explore = ops.to_host(actions.cview());
    int differ = 0;
    for (int e = 0; e < n; ++e) differ += explore[e] != ah[e];
    CHECK(differ > n / 2);  // about 4/5 of them
    unsigned long long total = 0;
    for (auto c : ops.to_host(hist.cview())) total += c;
    CHECK(total == n);
    CHECK(fh::dqn::epsilon_at(agent(), 0) == 1.0f);
    CHECK(fh::dqn::epsilon_at(agent(), 1000) == Approx(0.05f));  // 1000 steps x 8 envs > the decay
    CHECK(fh::dqn::epsilon_at(agent(), 50) == Approx(1.0 - 0.95 * 400.0 / 1000.0));
}

TEST_CASE("the DQN update's finish: norm, losses, guard, monitor, Adam constants, counters", "[dqn][ops][guard]") {
    fh::ops::CpuDevice ops;
    const int B = 300, P = 70001;
    const auto grads_h = random_floats(P, 9);
    auto stats_h = random_floats(fh::dqn::kSampleStats * B, 10, 0.f, 3.f);
    auto grads = ops.from_host<float>(grads_h);
    auto sample = ops.from_host<float>(stats_h);
    auto ag = ops.from_host<fh::dqn::AgentParams>(std::vector<fh::dqn::AgentParams>{agent(0.4f, 0.f, 3)});
    auto step = ops.alloc<fh::dqn::UpdateStep>(1);
    auto guard = ops.from_host<fh::nn::GuardState>(std::vector<fh::nn::GuardState>{{0, 0, -1, 0, 0}});
    auto monitor = ops.from_host<fh::dqn::MonitorStats>(std::vector<fh::dqn::MonitorStats>{{}});
    auto counters = ops.from_host<fh::dqn::Counters>(std::vector<fh::dqn::Counters>{{5, 0, 5}});
    auto partials = ops.alloc<float>(fh::ops::dqn_finish_scratch_size());
    fh::ops::run(ops, fh::ops::Fill{partials.view(), 0.f});
    auto finish = [&](bool inject) {
        fh::ops::run(
            ops, fh::ops::DqnUpdateFinish{step.view(), guard.view(), monitor.view(), counters.view(), partials.view(),
                                          grads.cview(), sample.cview(), ag.cview(), B, inject});
        return ops.to_host(step.cview())[0];
    };
    double sq = 0, c51 = 0, mse = 0, cql = 0;
    for (float g : grads_h) sq += static_cast<double>(g) * g;
    for (int b = 0; b < B; ++b) c51 += stats_h[b], mse += stats_h[B + b], cql += stats_h[fh::dqn::kStatCql * B + b];
    const auto s1 = finish(false);
    CHECK(s1.grad_norm == Approx(std::sqrt(sq)).epsilon(1e-6));
    CHECK(s1.losses[0] == Approx(c51 / B).epsilon(1e-6));
    CHECK(s1.losses[1] == Approx(mse / B).epsilon(1e-6));
    CHECK(s1.losses[2] == Approx(cql / B).epsilon(1e-6));
    CHECK(s1.gate == 1);
    CHECK(s1.copy_target == 0);
    CHECK(s1.adam.bias_correction1 == Approx(1 - static_cast<double>(0.9f)).epsilon(1e-6));
    const auto s2 = finish(true);
    CHECK(s2.gate == 0);
    CHECK(std::isnan(s2.losses[0]));
    const auto s3 = finish(false);
    CHECK(s3.copy_target == 1);  // update 3 of a period of 3
    CHECK(s3.adam.bias_correction2 == Approx(1 - std::pow(static_cast<double>(0.999f), 3)).epsilon(1e-6));
    const auto g = ops.to_host(guard.cview())[0];
    CHECK(g.bad_total == 1);
    CHECK(g.first_bad_update == 2);
    CHECK(g.first_bad_quantity == 0);
    const auto m = ops.to_host(monitor.cview())[0];
    CHECK(m.updates == 3);
    CHECK(m.samples == 3 * B);
    CHECK(ops.to_host(counters.cview())[0].updates == 3);
}

TEST_CASE("DQN Adam + target equals ops::AdamStep then the soft target update", "[dqn][ops]") {
    fh::ops::CpuDevice ops;
    const int P = 1000;
    const auto p0 = random_floats(P, 1), t0 = random_floats(P, 2), g = random_floats(P, 3);
    for (float tau : {0.005f, 0.f}) {
        auto a = agent(0.4f, tau, 1);
        fh::dqn::UpdateStep s{};
        s.gate = 1;
        s.copy_target = tau == 0.f ? 1 : 0;
        s.grad_norm = 3.5f;
        s.adam = fh::dqn::adam_constants(a, 4);
        auto params = ops.from_host<float>(p0), m = ops.from_host<float>(g), v = ops.from_host<float>(t0);
        auto target = ops.from_host<float>(t0), grads = ops.from_host<float>(g);
        auto sv = ops.from_host<fh::dqn::UpdateStep>(std::vector<fh::dqn::UpdateStep>{s});
        auto ag = ops.from_host<fh::dqn::AgentParams>(std::vector<fh::dqn::AgentParams>{a});
        // v must be >= 0: use squares.
        std::vector<float> vh(P);
        for (int i = 0; i < P; ++i) vh[i] = t0[i] * t0[i];
        ops.upload<float>(v.view(), vh);
        // With the iteration's counter advance in the same op (it changes nothing else).
        auto counters = ops.from_host<fh::dqn::Counters>(std::vector<fh::dqn::Counters>{{7, 4, 7}});
        fh::ops::run(ops, fh::ops::DqnAdamTarget{params.view(), m.view(), v.view(), target.view(), grads.cview(),
                                                 sv.cview(), ag.cview(), counters.view()});
        const auto c = ops.to_host(counters.cview())[0];
        CHECK(c.steps == 8);
        CHECK(c.updates == 4);
        CHECK(c.pushed == 8);
        // The same with the separate ops.
        auto p2 = ops.from_host<float>(p0), m2 = ops.from_host<float>(g), v2 = ops.from_host<float>(vh);
        auto t2 = ops.from_host<float>(t0), norm = ops.from_host<float>(std::vector<float>{3.5f});
        fh::ops::AdamParams hp;
        hp.lr = a.lr;
        hp.clip_norm = a.clip_norm;
        hp.step = 4;
        fh::ops::run(ops,
                     fh::ops::AdamStep{p2.view(), m2.view(), v2.view(), grads.cview(), norm.cview(), {}, hp.step, hp});
        if (tau > 0.f) {
            fh::ops::run(ops, fh::ops::Scale{t2.view(), a.one_minus_tau});
            fh::ops::run(ops, fh::ops::Saxpy{t2.view(), a.tau, p2.cview()});
        } else {
            fh::ops::run(ops, fh::ops::Copy{t2.view(), p2.cview()});
        }
        CHECK(ops.to_host(params.cview()) == ops.to_host(p2.cview()));
        CHECK(ops.to_host(m.cview()) == ops.to_host(m2.cview()));
        CHECK(ops.to_host(v.cview()) == ops.to_host(v2.cview()));
        CHECK(ops.to_host(target.cview()) == ops.to_host(t2.cview()));
    }
}

TEST_CASE("the steps an update samples: never the slot the collection beside it overwrites", "[dqn][ops]") {
    using fh::dqn::sample_range;
    // Ring of 10 steps, 3-step returns. Before it is full: steps 0 .. pushed - 3.
    CHECK(sample_range(3, 10, 3).oldest == 0);
    CHECK(sample_range(3, 10, 3).count == 1);
    CHECK(sample_range(9, 10, 3).count == 7);
    // Full: the collection of step 10 writes slot 0 (step 0), so sampling starts at step 1.
    CHECK(sample_range(10, 10, 3).oldest == 1);
    CHECK(sample_range(10, 10, 3).count == 7);
    CHECK(sample_range(25, 10, 3).oldest == 16);  // step 15's slot (5) is being overwritten by step 25
    CHECK(sample_range(25, 10, 3).count == 7);
    for (long long pushed = 3; pushed < 40; ++pushed) {
        const auto r = sample_range(pushed, 10, 3);
        CHECK(r.oldest % 10 != pushed % 10);      // not the slot being written
        CHECK(r.oldest + r.count + 2 == pushed);  // the newest start has its 2 successors stored
    }
}

TEST_CASE("DQN collection into the ring equals VecEnv::step and a copy; sampling equals nstep_sample",
          "[dqn][ops][env]") {
    fh::ops::CpuDevice ops;
    const auto f = fh::test::small_market(ops);
    const int n = 6, cap = 7;
    const auto& params = f.params;
    const int D = params.state_dim;
    fh::env::VecEnv reference(ops, *f.device_market, fh::env::Split::train, params, n);
    fh::env::VecEnv fused(ops, *f.device_market, fh::env::Split::train, params, n);
    reference.reset_all();
    fused.reset_all();
    auto rs = ops.alloc<float>(cap * n * D), rn = ops.alloc<float>(cap * n * D), rr = ops.alloc<float>(cap * n);
    auto ra = ops.alloc<int>(cap * n);
    auto rd = ops.alloc<std::uint8_t>(cap * n);
    const fh::ops::DqnRing ring{rs.view(), rn.view(), ra.view(), rr.view(), rd.view(), cap, n, D};
    auto counters = ops.from_host<fh::dqn::Counters>(std::vector<fh::dqn::Counters>{{0, 0, 0}});
    auto actions = ops.alloc<int>(n);
    for (int step = 0; step < 40; ++step) {
        fh::ops::run(ops, fh::ops::EnvRandomActions{actions.view(), 5, static_cast<std::uint64_t>(step),
                                                    fh::env::num_actions(params)});
        const auto before = ops.to_host(reference.states());
        reference.step(actions.cview());
        auto pers = fused.persistent();
        fh::ops::run(ops, fh::ops::DqnCollect{pers.state, pers.portfolio, pers.states, actions.cview(), ring,
                                              counters.cview(), fused.market(), params});
        fh::ops::run(ops, fh::ops::DqnAdvance{counters.view()});
        const std::size_t row = static_cast<std::size_t>(step % cap) * n;
        const auto ring_s = ops.to_host(rs.cview()), ring_n = ops.to_host(rn.cview());
        REQUIRE(std::vector<float>(ring_s.begin() + row * D, ring_s.begin() + (row + n) * D) == before);
        REQUIRE(std::vector<float>(ring_n.begin() + row * D, ring_n.begin() + (row + n) * D) ==
                ops.to_host(reference.next_states()));
        const auto rew = ops.to_host(rr.cview());
        REQUIRE(std::vector<float>(rew.begin() + row, rew.begin() + row + n) == ops.to_host(reference.rewards()));
        const auto dn = ops.to_host(rd.cview());
        REQUIRE(std::vector<std::uint8_t>(dn.begin() + row, dn.begin() + row + n) == ops.to_host(reference.done()));
        REQUIRE(ops.to_host(fused.states()) == ops.to_host(reference.states()));
    }
    CHECK(ops.to_host(counters.cview())[0].steps == 40);
    // Sampling at the counters (40 pushed, 2 updates done) equals the host-parameterised sampler
    // over the steps the ring keeps after the next push: 41 - cap .. 40 - n_step.
    ops.upload<fh::dqn::Counters>(counters.view(), std::vector<fh::dqn::Counters>{{40, 2, 40}});
    const int B = 33;
    const auto a = agent();
    auto ag = ops.from_host<fh::dqn::AgentParams>(std::vector<fh::dqn::AgentParams>{a});
    auto x = ops.alloc<float>(2 * B * D), br = ops.alloc<float>(B), bd = ops.alloc<float>(B);
    auto ba = ops.alloc<int>(B);
    fh::ops::run(ops,
                 fh::ops::DqnSample{x.view(), ba.view(), br.view(), bd.view(), ring, counters.cview(), ag.cview(), B});
    auto s2 = ops.alloc<float>(B * D), n2 = ops.alloc<float>(B * D), r2 = ops.alloc<float>(B), d2 = ops.alloc<float>(B);
    auto a2 = ops.alloc<int>(B);
    const fh::replay::ReplayView view{
        rs.cview().data(), rn.cview().data(), ra.cview().data(), rr.cview().data(), rd.cview().data(), cap, n, D};
    fh::ops::run(
        ops, fh::ops::NstepSample{s2.view(), n2.view(), a2.view(), r2.view(), d2.view(), view,
                                  fh::replay::SampleParams{a.seed, 3, 41 - cap, cap - a.n_step, a.n_step, a.gamma}, B});
    const auto xh = ops.to_host(x.cview());
    CHECK(std::vector<float>(xh.begin(), xh.begin() + B * D) == ops.to_host(s2.cview()));
    CHECK(std::vector<float>(xh.begin() + B * D, xh.end()) == ops.to_host(n2.cview()));
    CHECK(ops.to_host(ba.cview()) == ops.to_host(a2.cview()));
    CHECK(ops.to_host(br.cview()) == ops.to_host(r2.cview()));
    CHECK(ops.to_host(bd.cview()) == ops.to_host(d2.cview()));
}

TEST_CASE("DQN step ops: the select and target rows may be one buffer, outputs may not overlap", "[dqn][aliasing]") {
    fh::ops::CpuDevice ops;
    const HeadParams h{3, 5, 1, -2.f, 2.f};
    const LossCase c = loss_case(h, 4, 7);
    CHECK_NOTHROW(run_loss(ops, c, agent(), true));
    auto hs = ops.from_host<float>(c.hs), d = ops.alloc<float>(c.hs.size()), st = ops.alloc<float>(16);
    auto act = ops.from_host<int>(c.actions);
    auto ret = ops.from_host<float>(c.returns), disc = ops.from_host<float>(c.discounts);
    auto ag = ops.from_host<fh::dqn::AgentParams>(std::vector<fh::dqn::AgentParams>{agent()});
    CHECK_THROWS_AS(fh::ops::run(ops, fh::ops::DqnLoss{hs.view(), st.view(), hs.cview(), hs.cview(), hs.cview(),
                                                       act.cview(), ret.cview(), disc.cview(), ag.cview(), h, 4}),
                    std::invalid_argument);
    CHECK_THROWS_AS(fh::ops::run(ops, fh::ops::DqnLoss{d.view(), st.view(), hs.cview(), hs.cview(), hs.cview(),
                                                       act.cview(), ret.cview(), disc.cview(), ag.cview(), h, 5}),
                    std::invalid_argument);
}

TEST_CASE("the fused DQN kernels equal their CPU twins", "[gpu][dqn][ops]") {
    fh::ops::CpuDevice cpu;
    auto& gpu = fh::test::gpu_ops();
    for (int dueling : {1, 0})
        for (int Z : {51, 101, 7})
            for (int B : {1, 7, 65, 257}) {
                const HeadParams h{9, Z, dueling, -10.f, 10.f};
                INFO("dueling " << dueling << " Z " << Z << " B " << B);
                const LossCase c = loss_case(h, B, 1000 + static_cast<std::uint64_t>(B * Z));
                const auto a = agent(0.3f);
                const LossOut lc = run_loss(cpu, c, a, false), lg = run_loss(gpu, c, a, false);
                const auto ml = loss_model(lc, h, B, false);
                FH_REQUIRE_WITHIN(lg.d_head, lc.d_head, ml.d_head);
                FH_REQUIRE_WITHIN(lg.stats, lc.stats, ml.stats);
                {  // with the CQL term
                    const auto ac = agent(0.3f, 0.01f, 0, 0.5f);
                    const LossOut qc = run_loss(cpu, c, ac, false), qg = run_loss(gpu, c, ac, false);
                    const auto mq = loss_model(qc, h, B, true);
                    FH_REQUIRE_WITHIN(qg.d_head, qc.d_head, mq.d_head);
                    FH_REQUIRE_WITHIN(qg.stats, qc.stats, mq.stats);
                }
                for (float cql : {0.f, 0.5f}) {  // the scalar head (dqn.head = "mse"), acting and loss
                    HeadParams hq = h;
                    hq.scalar = 1;
                    const LossCase cq = loss_case(hq, B, 5000 + static_cast<std::uint64_t>(B * Z));
                    const auto aq = agent(0.3f, 0.01f, 0, cql);
                    const LossOut qc = run_loss(cpu, cq, aq, false), qg = run_loss(gpu, cq, aq, false);
                    const auto mq = loss_model(qc, hq, B, cql > 0);
                    FH_REQUIRE_WITHIN(qg.d_head, qc.d_head, mq.d_head);
                    FH_REQUIRE_WITHIN(qg.stats, qc.stats, mq.stats);
                    auto act_scalar = [&](fh::ops::Device& ops) {
                        auto head = ops.from_host<float>(cq.hs);
                        auto acts = ops.alloc<int>(B);
                        auto q = ops.alloc<float>(B * 9);
                        fh::ops::run(ops, fh::ops::DqnAct{acts.view(), q.view(), {}, head.cview(), hq, {}, {}});
                        return std::pair{ops.to_host(acts.cview()), ops.to_host(q.cview())};
                    };
                    const auto sc = act_scalar(cpu), sg = act_scalar(gpu);
                    CHECK(sg.first == sc.first);  // the same floats: the same argmax
                    CHECK(sg.second == sc.second);
                }
                // Acting: Q within rounding; the actions equal where the best Q leads clearly.
                auto act_run = [&](fh::ops::Device& ops, bool explore) {
                    auto head = ops.from_host<float>(c.hs);
                    auto acts = ops.alloc<int>(B);
                    auto q = ops.alloc<float>(B * 9);
                    auto hist = ops.from_host<unsigned long long>(std::vector<unsigned long long>(9, 0));
                    auto ag = ops.from_host<fh::dqn::AgentParams>(std::vector<fh::dqn::AgentParams>{a});
                    auto cnt = ops.from_host<fh::dqn::Counters>(std::vector<fh::dqn::Counters>{{37, 0, 37}});
                    if (explore)
                        fh::ops::run(ops, fh::ops::DqnAct{acts.view(), q.view(), hist.view(), head.cview(), h,
                                                          ag.cview(), cnt.cview()});
                    else
                        fh::ops::run(ops, fh::ops::DqnAct{acts.view(), q.view(), {}, head.cview(), h, {}, {}});
                    return std::tuple{ops.to_host(acts.cview()), ops.to_host(q.cview()), ops.to_host(hist.cview())};
                };
                for (bool explore : {false, true}) {
                    const auto [ac, qc, hc] = act_run(cpu, explore);
                    const auto [ag_, qg, hg] = act_run(gpu, explore);
                    // Q = sum_z p_z z: the dueling mean, the softmax's sum, the expectation (3 levels
                    // of up to Z terms) and expf, norm-relative over each row of A actions.
                    FH_REQUIRE_WITHIN(qg, qc, fh::test::chain_bounds(qc, 9, 3, std::max(Z, 9), 1));
                    for (int e = 0; e < B; ++e) {
                        std::vector<float> row(qc.begin() + e * 9, qc.begin() + e * 9 + 9);
                        std::sort(row.begin(), row.end());
                        if (row[8] - row[7] > 1e-3f) REQUIRE(ag_[e] == ac[e]);
                    }
                    if (explore) {
                        unsigned long long tc = 0, tg = 0;
                        for (auto v : hc) tc += v;
                        for (auto v : hg) tg += v;
                        CHECK(tc == static_cast<unsigned long long>(B));
                        CHECK(tg == tc);
                    }
                }
            }
}

TEST_CASE("the DQN loss's two launch shapes (four warps per row, a warp per row) give the same floats",
          "[gpu][dqn][ops]") {
    // While the rows of all agents sharing the GPU fit one wave of four-warp blocks
    // (abi::dqn_loss_split) the loss runs a block of four warps per row, beyond a warp per row.
    // The same `few` rows with one sharer (four warps) and with enough sharers to pass the limit
    // (a warp each) give the same gradient and statistics bit for bit, with and without CQL; the
    // first `few` rows of a batch past the limit (a warp per row) have the statistics of the
    // `few` alone (the gradient carries the batch's 1 / B, so it is compared with the CPU twin).
    fh::ops::CpuDevice cpu;
    auto& gpu = fh::test::gpu_ops();
    const int sms = gpu.device().sm_count;
    const int limit = fh::abi::kDqnLossBlocksPerSm * sms;
    const int many = limit + 97, few = std::min(300, limit), sharers = limit / few + 1;
    REQUIRE_FALSE(fh::abi::dqn_loss_split(many, sms));
    REQUIRE(fh::abi::dqn_loss_split(few, sms));
    REQUIRE_FALSE(fh::abi::dqn_loss_split(static_cast<long long>(few) * sharers, sms));
    for (int dueling : {1, 0})
        for (float cql : {0.f, 0.5f}) {
            const HeadParams h{9, 51, dueling, -10.f, 10.f};
            const int W = fh::dqn::head_width(h);
            const LossCase big = loss_case(h, many, 77 + static_cast<std::uint64_t>(dueling));
            LossCase small = big;
            small.B = few;
            for (auto* v : {&small.hs, &small.hsel, &small.ht}) v->resize(static_cast<std::size_t>(few * W));
            small.returns.resize(few);
            small.discounts.resize(few);
            small.actions.resize(few);
            const auto a = agent(0.3f, 0.01f, 0, cql);
            const LossOut gb = run_loss(gpu, big, a, false), gs = run_loss(gpu, small, a, false);
            gpu.set_gpu_sharers(sharers);
            const LossOut gw = run_loss(gpu, small, a, false);
            gpu.set_gpu_sharers(1);
            INFO("dueling " << dueling << " cql " << cql);
            CHECK(gw.d_head == gs.d_head);
            CHECK(gw.stats == gs.stats);
            for (int k = 0; k < fh::dqn::kSampleStats; ++k)
                for (int b = 0; b < few; ++b) {
                    INFO("statistic " << k << " row " << b);
                    REQUIRE(gs.stats[static_cast<std::size_t>(k * few + b)] ==
                            gb.stats[static_cast<std::size_t>(k * many + b)]);
                }
            const LossOut cb = run_loss(cpu, big, a, false);
            const auto mb = loss_model(cb, h, many, cql > 0);
            FH_REQUIRE_WITHIN(gb.d_head, cb.d_head, mb.d_head);
            FH_REQUIRE_WITHIN(gb.stats, cb.stats, mb.stats);
        }
}

TEST_CASE("the four-warp DQN loss gives the same floats with its head rows in shared memory or not",
          "[gpu][dqn][ops]") {
    // abi::dqn_loss_stages_rows: where they fit, the four-warp loss copies its online, select and
    // target rows to shared memory before its passes; the floats are those of the rows read where
    // they are (CudaDevice::set_stage_head_rows(false)), bit for bit, with and without CQL.
    auto& gpu = fh::test::gpu_ops();
    const long long smem = static_cast<long long>(gpu.device().shared_memory_per_sm);
    for (int dueling : {1, 0})
        for (int Z : {51, 101, 7}) {
            const HeadParams h{9, Z, dueling, -10.f, 10.f};
            const bool staged = fh::abi::dqn_loss_stages_rows(h, smem);
            INFO("dueling " << dueling << " Z " << Z << " staged " << staged);
            if (Z == 51) CHECK(staged);  // the shipped head stages on every supported GPU
            const LossCase c = loss_case(h, 257, 90 + static_cast<std::uint64_t>(Z + dueling));
            REQUIRE(fh::abi::dqn_loss_split(c.B, gpu.device().sm_count));  // the four-warp shape
            for (float cql : {0.f, 0.5f}) {
                const auto a = agent(0.3f, 0.01f, 0, cql);
                gpu.set_stage_head_rows(true);
                const LossOut with = run_loss(gpu, c, a, false), same_select = run_loss(gpu, c, a, true);
                gpu.set_stage_head_rows(false);
                const LossOut without = run_loss(gpu, c, a, false), same_without = run_loss(gpu, c, a, true);
                gpu.set_stage_head_rows(true);
                INFO("cql " << cql);
                CHECK(with.d_head == without.d_head);
                CHECK(with.stats == without.stats);
                CHECK(same_select.d_head == same_without.d_head);  // the select and target rows one buffer
                CHECK(same_select.stats == same_without.stats);
            }
        }
}

TEST_CASE("the DQN finish, Adam + target, collection and sampling kernels equal their CPU twins bit for bit",
          "[gpu][dqn][ops]") {
    fh::ops::CpuDevice cpu;
    auto& gpu = fh::test::gpu_ops();
    // Three agents in one launch, the finish run twice (its ticket must be back at zero).
    const int B = 513, P = 300007;
    const std::size_t N = 3;
    const auto grads_h = random_floats(N * P, 21), stats_h = random_floats(N * fh::dqn::kSampleStats * B, 22, 0.f, 2.f);
    auto finish_run = [&](fh::ops::Device& ops) {
        auto grads = ops.from_host<float>(grads_h);
        auto sample = ops.from_host<float>(stats_h);
        auto ag = ops.from_host<fh::dqn::AgentParams>(
            std::vector<fh::dqn::AgentParams>{agent(0.5f, 0.f, 2), agent(0.3f, 0.f, 3), agent(0.5f, 0.f, 1)});
        auto step = ops.alloc<fh::dqn::UpdateStep>(N);
        auto guard = ops.from_host<fh::nn::GuardState>(std::vector<fh::nn::GuardState>(N, {0, 0, -1, 0, 0}));
        auto monitor =
            ops.from_host<fh::dqn::MonitorStats>(std::vector<fh::dqn::MonitorStats>(N, fh::dqn::MonitorStats{}));
        auto counters = ops.from_host<fh::dqn::Counters>(std::vector<fh::dqn::Counters>(N, {9, 1, 9}));
        auto partials = ops.alloc<float>(N * fh::ops::dqn_finish_scratch_size());
        fh::ops::run(ops, fh::ops::Fill{partials.view(), 0.f});
        std::vector<float> steps;
        std::vector<double> monitors;
        for (int round = 0; round < 2; ++round) {
            fh::ops::run(
                ops, fh::ops::DqnUpdateFinish{step.view(), guard.view(), monitor.view(), counters.view(),
                                              partials.view(), grads.cview(), sample.cview(), ag.cview(), B, false});
            const auto sh = ops.to_host(step.cview());
            for (const auto& s : sh)
                for (float v : {s.grad_norm, s.losses[0], s.losses[1], s.losses[2], s.adam.bias_correction1,
                                s.adam.bias_correction2, static_cast<float>(s.gate), static_cast<float>(s.copy_target)})
                    steps.push_back(v);
            for (const auto& m : ops.to_host(monitor.cview()))
                for (double v : std::initializer_list<double>{m.loss_sum[0], m.loss_sum[1], m.loss_sum[2], m.q_sum,
                                                              m.td_abs_sum, m.grad_norm_sum, m.q_min, m.q_max})
                    monitors.push_back(v);
            for (const auto& c : ops.to_host(counters.cview())) monitors.push_back(static_cast<double>(c.updates));
        }
        // Adam + target with the last step.
        auto params = ops.from_host<float>(random_floats(N * P, 23)),
             mo = ops.from_host<float>(random_floats(N * P, 24));
        auto vo = ops.from_host<float>(random_floats(N * P, 25, 0.f, 1.f)),
             target = ops.from_host<float>(random_floats(N * P, 26));
        fh::ops::run(ops, fh::ops::DqnAdamTarget{params.view(), mo.view(), vo.view(), target.view(), grads.cview(),
                                                 step.cview(), ag.cview()});
        // Again, advancing the counters in the same launch (an iteration's last update).
        fh::ops::run(ops, fh::ops::DqnAdamTarget{params.view(), mo.view(), vo.view(), target.view(), grads.cview(),
                                                 step.cview(), ag.cview(), counters.view()});
        for (const auto& c : ops.to_host(counters.cview())) {
            monitors.push_back(static_cast<double>(c.steps));
            monitors.push_back(static_cast<double>(c.pushed));
        }
        return std::tuple{steps, monitors, ops.to_host(params.cview()), ops.to_host(target.cview()),
                          ops.to_host(vo.cview())};
    };
    const auto fc = finish_run(cpu), fg = finish_run(gpu);
    CHECK(std::get<0>(fg) == std::get<0>(fc));
    CHECK(std::get<1>(fg) == std::get<1>(fc));
    CHECK(std::get<1>(fc)[std::get<1>(fc).size() - 7] == 3.0);  // the third agent's update count after two finishes
    CHECK(std::get<1>(fc).back() == 10.0);                      // its pushed steps, advanced once
    CHECK(std::get<2>(fg) == std::get<2>(fc));
    CHECK(std::get<3>(fg) == std::get<3>(fc));
    CHECK(std::get<4>(fg) == std::get<4>(fc));

    // Collection and sampling on a market, 300 environments, 150 steps into a ring of 50.
    auto run_env = [&](fh::ops::Device& ops) {
        const auto f = fh::test::small_market(ops);
        const int n = 300, cap = 50, D = f.params.state_dim;
        fh::env::VecEnv env(ops, *f.device_market, fh::env::Split::train, f.params, n);
        env.reset_all();
        auto rs = ops.alloc<float>(cap * n * D), rn = ops.alloc<float>(cap * n * D), rr = ops.alloc<float>(cap * n);
        auto ra = ops.alloc<int>(cap * n);
        auto rd = ops.alloc<std::uint8_t>(cap * n);
        const fh::ops::DqnRing ring{rs.view(), rn.view(), ra.view(), rr.view(), rd.view(), cap, n, D};
        auto counters = ops.from_host<fh::dqn::Counters>(std::vector<fh::dqn::Counters>{{0, 0, 0}});
        auto tickets = ops.from_host<unsigned>(std::vector<unsigned>{0u});
        auto actions = ops.alloc<int>(n);
        for (int step = 0; step < 150; ++step) {
            fh::ops::run(ops, fh::ops::EnvRandomActions{actions.view(), 8, static_cast<std::uint64_t>(step),
                                                        fh::env::num_actions(f.params)});
            auto pers = env.persistent();
            // Every other step advances the counters in the step's own launch (its last block).
            const bool in_launch = step % 2 == 0;
            fh::ops::run(ops, fh::ops::DqnCollect{pers.state, pers.portfolio, pers.states, actions.cview(), ring,
                                                  counters.cview(), env.market(), f.params,
                                                  in_launch ? fh::ops::CollectAdvance{counters.view(), tickets.view()}
                                                            : fh::ops::CollectAdvance{}});
            if (!in_launch) fh::ops::run(ops, fh::ops::DqnAdvance{counters.view()});
        }
        CHECK(ops.to_host(counters.cview())[0].pushed == 150);
        CHECK(ops.to_host(tickets.cview())[0] == 0u);  // left zero for the next launch
        auto ag = ops.from_host<fh::dqn::AgentParams>(std::vector<fh::dqn::AgentParams>{agent()});
        const int Bs = 257;
        auto x = ops.alloc<float>(2 * Bs * D), br = ops.alloc<float>(Bs), bd = ops.alloc<float>(Bs);
        auto ba = ops.alloc<int>(Bs);
        fh::ops::run(
            ops, fh::ops::DqnSample{x.view(), ba.view(), br.view(), bd.view(), ring, counters.cview(), ag.cview(), Bs});
        return std::tuple{ops.to_host(rs.cview()), ops.to_host(rn.cview()),   ops.to_host(rr.cview()),
                          ops.to_host(rd.cview()), ops.to_host(env.states()), ops.to_host(x.cview()),
                          ops.to_host(br.cview()), ops.to_host(bd.cview())};
    };
    // Three agents in one launch (grid y), each at its own push count, advancing in the launch:
    // each agent's last block advances its own counters once per step. With `own`, each agent also
    // steps on its own market and episode seed (a population's; the third's market keeps half the
    // episode starts): dqn_collect_agents_kernel.
    auto run_agents = [&](fh::ops::Device& ops, bool own = false) {
        const auto f = fh::test::small_market(ops);
        const int N = 3, n = 70, cap = 9, D = f.params.state_dim;
        fh::env::VecEnv env(ops, *f.device_market, fh::env::Split::train, f.params, N * n);
        env.reset_all();
        auto rs = ops.alloc<float>(N * cap * n * D), rn = ops.alloc<float>(N * cap * n * D);
        auto rr = ops.alloc<float>(N * cap * n);
        auto ra = ops.alloc<int>(N * cap * n);
        auto rd = ops.alloc<std::uint8_t>(N * cap * n);
        const fh::ops::DqnRing ring{rs.view(), rn.view(), ra.view(), rr.view(), rd.view(), cap, n, D};
        auto counters =
            ops.from_host<fh::dqn::Counters>(std::vector<fh::dqn::Counters>{{0, 0, 0}, {5, 1, 5}, {13, 2, 13}});
        auto tickets = ops.from_host<unsigned>(std::vector<unsigned>(N, 0u));
        auto actions = ops.alloc<int>(N * n);
        fh::env::MarketView half = env.market();
        half.n_starts = std::max(1, half.n_starts / 2);
        auto own_agents = ops.from_host<fh::abi::EnvAgent>(
            std::vector<fh::abi::EnvAgent>{{env.market(), 101}, {env.market(), 102}, {half, 103}});
        for (int step = 0; step < 12; ++step) {
            fh::ops::run(ops, fh::ops::EnvRandomActions{actions.view(), 11, static_cast<std::uint64_t>(step),
                                                        fh::env::num_actions(f.params)});
            auto pers = env.persistent();
            fh::ops::run(ops, fh::ops::DqnCollect{pers.state, pers.portfolio, pers.states, actions.cview(), ring,
                                                  counters.cview(), env.market(), f.params,
                                                  fh::ops::CollectAdvance{counters.view(), tickets.view()},
                                                  own ? own_agents.cview() : fh::ops::View<const fh::abi::EnvAgent>{}});
        }
        std::vector<long long> counts;
        for (const auto& c : ops.to_host(counters.cview())) counts.insert(counts.end(), {c.steps, c.updates, c.pushed});
        return std::tuple{ops.to_host(rs.cview()),     ops.to_host(rn.cview()),   ops.to_host(rr.cview()),
                          ops.to_host(rd.cview()),     ops.to_host(env.states()), counts,
                          ops.to_host(tickets.cview())};
    };
    const auto ac = run_agents(cpu), ag3 = run_agents(gpu);
    CHECK(std::get<0>(ag3) == std::get<0>(ac));
    CHECK(std::get<1>(ag3) == std::get<1>(ac));
    CHECK(std::get<2>(ag3) == std::get<2>(ac));
    CHECK(std::get<3>(ag3) == std::get<3>(ac));
    CHECK(std::get<4>(ag3) == std::get<4>(ac));
    CHECK(std::get<5>(ag3) == std::get<5>(ac));
    CHECK(std::get<5>(ac) == std::vector<long long>{12, 0, 12, 17, 1, 17, 25, 2, 25});
    CHECK(std::get<6>(ag3) == std::vector<unsigned>(3, 0u));
    const auto oc = run_agents(cpu, true), og = run_agents(gpu, true);
    CHECK(std::get<0>(og) == std::get<0>(oc));
    CHECK(std::get<1>(og) == std::get<1>(oc));
    CHECK(std::get<2>(og) == std::get<2>(oc));
    CHECK(std::get<3>(og) == std::get<3>(oc));
    CHECK(std::get<4>(og) == std::get<4>(oc));
    CHECK(std::get<5>(og) == std::get<5>(oc));
    CHECK(std::get<0>(oc) != std::get<0>(ac));  // the agents' own seeds and markets changed their episodes

    const auto ec = run_env(cpu), eg = run_env(gpu);
    CHECK(std::get<0>(eg) == std::get<0>(ec));
    CHECK(std::get<1>(eg) == std::get<1>(ec));
    CHECK(std::get<2>(eg) == std::get<2>(ec));
    CHECK(std::get<3>(eg) == std::get<3>(ec));
    CHECK(std::get<4>(eg) == std::get<4>(ec));
    CHECK(std::get<5>(eg) == std::get<5>(ec));
    CHECK(std::get<6>(eg) == std::get<6>(ec));
    CHECK(std::get<7>(eg) == std::get<7>(ec));
}

namespace {

/// A random ring of N agents for the curiosity ops, and what they write.
struct CuriosityCase {
    int N, n, cap, D, A, M;
    std::vector<fh::dqn::Counters> counters;
    std::vector<float> states, next_states, rewards, error;
    std::vector<int> actions;
};

CuriosityCase curiosity_case(int N, int n, int cap) {
    CuriosityCase c{N, n, cap, 50, 9, 42, {}, {}, {}, {}, {}, {}};
    const std::size_t rows = static_cast<std::size_t>(N) * cap * n;
    c.states = random_floats(rows * c.D, 41);
    c.next_states = random_floats(rows * c.D, 42);
    c.rewards = random_floats(rows, 43);
    c.error = random_floats(static_cast<std::size_t>(N) * n, 44, 0.f, 3.f);
    const auto a = random_floats(rows, 45, 0.f, static_cast<float>(c.A));
    for (float v : a) c.actions.push_back(std::min(c.A - 1, static_cast<int>(v)));
    for (int g = 0; g < N; ++g)  // each agent at its own push count (its slot differs)
        c.counters.push_back({3 + g, 0, static_cast<long long>(3 * cap + 2 + g)});
    return c;
}

struct CuriosityResult {
    std::vector<float> input, next_market, rewards;
    std::vector<fh::dqn::CuriosityStats> stats;
};

/// Gather, then the bonus twice (the statistics accumulate).
CuriosityResult run_curiosity(fh::ops::Device& ops, const CuriosityCase& c, float coef) {
    const std::size_t N = static_cast<std::size_t>(c.N), n = static_cast<std::size_t>(c.n);
    auto rs = ops.from_host<float>(c.states), rn = ops.from_host<float>(c.next_states);
    auto rr = ops.from_host<float>(c.rewards);
    auto ra = ops.from_host<int>(c.actions);
    auto rd = ops.from_host<std::uint8_t>(std::vector<std::uint8_t>(c.actions.size(), 0));
    const fh::ops::DqnRing ring{rs.view(), rn.view(), ra.view(), rr.view(), rd.view(), c.cap, c.n, c.D};
    auto counters = ops.from_host<fh::dqn::Counters>(c.counters);
    std::vector<fh::dqn::AgentParams> agents;
    for (int g = 0; g < c.N; ++g) {
        auto a = agent();
        a.curiosity_coef = coef * static_cast<float>(g + 1);
        agents.push_back(a);
    }
    auto ag = ops.from_host<fh::dqn::AgentParams>(agents);
    auto input = ops.alloc<float>(N * n * static_cast<std::size_t>(c.D + c.A));
    auto next = ops.alloc<float>(N * n * static_cast<std::size_t>(c.M));
    auto error = ops.from_host<float>(c.error);
    auto stats = ops.from_host<fh::dqn::CuriosityStats>(std::vector<fh::dqn::CuriosityStats>(N, {0.5, 7}));
    fh::ops::run(ops, fh::ops::DqnCuriosityGather{input.view(), next.view(), ring, counters.cview(), c.A, c.M});
    for (int k = 0; k < 2; ++k)
        fh::ops::run(ops, fh::ops::DqnCuriosityBonus{ring, stats.view(), error.cview(), counters.cview(), ag.cview()});
    return {ops.to_host(input.cview()), ops.to_host(next.cview()), ops.to_host(rr.cview()), ops.to_host(stats.cview())};
}

}  // namespace

TEST_CASE("DQN curiosity: the gather reads and the bonus writes the slot at each agent's push count", "[dqn][ops]") {
    fh::ops::CpuDevice ops;
    const auto c = curiosity_case(2, 37, 5);
    const float coef = 0.25f;
    const auto r = run_curiosity(ops, c, coef);
    const std::size_t n = static_cast<std::size_t>(c.n), D = static_cast<std::size_t>(c.D),
                      A = static_cast<std::size_t>(c.A), M = static_cast<std::size_t>(c.M);
    for (std::size_t g = 0; g < 2; ++g) {
        const auto slot = static_cast<std::size_t>(c.counters[g].pushed % c.cap);
        double sum = 0;
        for (std::size_t row = 0; row < static_cast<std::size_t>(c.cap) * n; ++row) {
            const std::size_t ring_row = g * c.cap * n + row;
            const bool in_slot = row / n == slot;
            const std::size_t e = row % n;
            if (!in_slot) {
                REQUIRE(r.rewards[ring_row] == c.rewards[ring_row]);  // other steps untouched
                continue;
            }
            const float err = c.error[g * n + e], w = coef * static_cast<float>(g + 1);
            float want = c.rewards[ring_row];
            for (int k = 0; k < 2; ++k) want = want + w * err;
            CHECK(r.rewards[ring_row] == want);
            sum += err;
            const float* in = r.input.data() + (g * n + e) * (D + A);
            for (std::size_t j = 0; j < D; ++j) REQUIRE(in[j] == c.states[ring_row * D + j]);
            for (std::size_t a = 0; a < A; ++a)
                REQUIRE(in[D + a] == (static_cast<int>(a) == c.actions[ring_row] ? 1.0f : 0.0f));
            for (std::size_t j = 0; j < M; ++j)
                REQUIRE(r.next_market[(g * n + e) * M + j] == c.next_states[ring_row * D + j]);
        }
        CHECK(r.stats[g].transitions == 7 + 2 * c.n);
        CHECK(r.stats[g].error_sum == Approx(0.5 + 2 * sum).epsilon(1e-12));
    }
}

TEST_CASE("the DQN curiosity gather and bonus kernels equal their CPU twins bit for bit", "[gpu][dqn][ops]") {
    fh::ops::CpuDevice cpu;
    auto& gpu = fh::test::gpu_ops();
    const auto c = curiosity_case(3, 1031, 4);  // more environments than the block's threads
    const auto rc = run_curiosity(cpu, c, 0.37f), rg = run_curiosity(gpu, c, 0.37f);
    CHECK(rg.input == rc.input);
    CHECK(rg.next_market == rc.next_market);
    CHECK(rg.rewards == rc.rewards);
    for (std::size_t g = 0; g < rc.stats.size(); ++g) {
        CHECK(rg.stats[g].error_sum == rc.stats[g].error_sum);
        CHECK(rg.stats[g].transitions == rc.stats[g].transitions);
    }
}
