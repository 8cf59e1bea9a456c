/// @file test_population_ops.cpp
/// @brief The ops a batched population launches once for all its agents (nstep_sample_agents, the
///        IQL losses over several agents' batches, norm_and_guard_agents, adam_step_agents): on each
///        backend every agent's results equal the single op's on that agent's slices, bit for bit;
///        [gpu] the CUDA kernels against the CPU twins as the single ops are (sampling and Adam
///        exact, the norm within rounding).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "abi/replay_nstep.h"
#include "math/iql.h"
#include "device/cpu_device.hpp"
#include "abi/iql_awr.h"
#include "abi/replay_nstep.h"
#include "support/compare.hpp"
#include "support/error_model.hpp"
#include "support/iql_model.hpp"
#include "support/gpu.hpp"
#include "abi/core_optim.h"
#include "abi/core_vector.h"

using fh::ops::Buffer;
using fh::ops::CpuDevice;
using fh::ops::Device;
using fh::ops::View;
using fh::test::random_floats;
using fh::test::same_bits;

namespace {

constexpr int kAgents = 3;

/// A ring of `steps` x `envs` random transitions (some done flags), agent k's.
struct Ring {
    Buffer<float> states, next_states, rewards;
    Buffer<int> actions;
    Buffer<std::uint8_t> done;
    fh::replay::ReplayView view;
};
Ring random_ring(Device& ops, int steps, int envs, int D, std::uint64_t seed) {
    const std::size_t rows = static_cast<std::size_t>(steps) * static_cast<std::size_t>(envs);
    Ring r;
    r.states = ops.from_host<float>(random_floats(rows * static_cast<std::size_t>(D), seed));
    r.next_states = ops.from_host<float>(random_floats(rows * static_cast<std::size_t>(D), seed + 1));
    r.rewards = ops.from_host<float>(random_floats(rows, seed + 2));
    std::vector<int> actions(rows);
    std::vector<std::uint8_t> done(rows);
    for (std::size_t i = 0; i < rows; ++i) {
        actions[i] = static_cast<int>((i * 7 + seed) % 9);
        done[i] = static_cast<std::uint8_t>((i + seed) % 11 == 0 ? 1 : 0);
    }
    r.actions = ops.from_host<int>(actions);
    r.done = ops.from_host<std::uint8_t>(done);
    r.view = fh::replay::ReplayView{r.states.cview().data(),
                                    r.next_states.cview().data(),
                                    r.actions.cview().data(),
                                    r.rewards.cview().data(),
                                    r.done.cview().data(),
                                    steps,
                                    envs,
                                    D};
    return r;
}

/// What nstep_sample_agents wrote for every agent (x = [s; s'] per agent), and the counter after.
struct Sampled {
    std::vector<float> x, returns, discounts;
    std::vector<int> actions;
    long long counter = 0;
};

/// Three agents' batches in one launch, and each agent's by nstep_sample on its own (the same
/// update number): they must be the same bits.
Sampled sample_both_ways(Device& ops, int n_step) {
    const int B = 37, D = 5, steps = 9, envs = 4;
    std::vector<Ring> rings;
    std::vector<fh::abi::SampleAgent> agents;
    for (int k = 0; k < kAgents; ++k) {
        rings.push_back(random_ring(ops, steps, envs, D, 100 + 10 * static_cast<std::uint64_t>(k)));
        agents.push_back({rings.back().view,
                          fh::replay::SampleParams{7u + static_cast<std::uint64_t>(k), 0, k, steps - k - n_step + 1,
                                                   n_step, 0.9f + 0.03f * static_cast<float>(k)}});
    }
    const std::size_t xs = 2u * B * D, N = kAgents;
    auto agents_d = ops.from_host<fh::abi::SampleAgent>(agents);
    auto x = ops.alloc<float>(N * xs);
    fh::ops::run(ops, fh::ops::Fill{x.view(), 0.f});
    auto actions = ops.alloc<int>(N * B);
    auto returns = ops.alloc<float>(N * B), discounts = ops.alloc<float>(N * B);
    auto counter = ops.from_host<long long>(std::vector<long long>{41});
    auto ticket = ops.from_host<unsigned>(std::vector<unsigned>{0u});
    const std::size_t span = (N - 1) * xs + static_cast<std::size_t>(B) * D;
    fh::ops::run(ops, fh::ops::NstepSampleAgents{x.view().subview(0, span),
                                                 x.view().subview(static_cast<std::size_t>(B) * D, span),
                                                 actions.view(), returns.view(), discounts.view(), agents_d.cview(), xs,
                                                 fh::ops::CounterAdvance{counter.view(), ticket.view()}, B, D});
    Sampled out{ops.to_host(x.cview()), ops.to_host(returns.cview()), ops.to_host(discounts.cview()),
                ops.to_host(actions.cview()), ops.to_host(counter.cview())[0]};
    REQUIRE(out.counter == 42);
    REQUIRE(ops.to_host(ticket.cview())[0] == 0u);
    for (int k = 0; k < kAgents; ++k) {
        INFO("agent " << k);
        fh::replay::SampleParams p = agents[static_cast<std::size_t>(k)].params;
        p.update = 42;
        auto s = ops.alloc<float>(static_cast<std::size_t>(B) * D),
             s2 = ops.alloc<float>(static_cast<std::size_t>(B) * D);
        auto a = ops.alloc<int>(B);
        auto r = ops.alloc<float>(B), d = ops.alloc<float>(B);
        fh::ops::run(ops, fh::ops::NstepSample{s.view(), s2.view(), a.view(), r.view(), d.view(),
                                               rings[static_cast<std::size_t>(k)].view, p, B});
        const auto at = static_cast<std::size_t>(k) * xs, rows = static_cast<std::size_t>(B) * D;
        CHECK(same_bits(ops.to_host(s.cview()), std::vector<float>(out.x.begin() + at, out.x.begin() + at + rows)));
        CHECK(same_bits(ops.to_host(s2.cview()),
                        std::vector<float>(out.x.begin() + at + rows, out.x.begin() + at + 2 * rows)));
        const auto b0 = static_cast<std::size_t>(k) * B;
        CHECK(ops.to_host(a.cview()) == std::vector<int>(out.actions.begin() + b0, out.actions.begin() + b0 + B));
        CHECK(same_bits(ops.to_host(r.cview()),
                        std::vector<float>(out.returns.begin() + b0, out.returns.begin() + b0 + B)));
        CHECK(same_bits(ops.to_host(d.cview()),
                        std::vector<float>(out.discounts.begin() + b0, out.discounts.begin() + b0 + B)));
    }
    return out;
}

/// The three IQL losses over three agents' batches (each its own coefficients) and each agent's
/// by the single ops: the same bits. Returns the population's outputs, concatenated.
std::vector<float> losses_both_ways(Device& ops) {
    const int B = 29, A = 9;
    const std::size_t N = kAgents, rows = N * B, cells = rows * A;
    const std::vector<fh::iql::LossScalars> scalars{{0.7f, 3.f, 100.f}, {0.9f, 1.f, 20.f}, {0.5f, 10.f, 5.f}};
    auto sc = ops.from_host<fh::iql::LossScalars>(scalars);
    auto v = ops.from_host<float>(random_floats(rows, 1)), vn = ops.from_host<float>(random_floats(rows, 2));
    auto q1 = ops.from_host<float>(random_floats(cells, 3)), q2 = ops.from_host<float>(random_floats(cells, 4));
    auto logits = ops.from_host<float>(random_floats(cells, 5));
    auto r = ops.from_host<float>(random_floats(rows, 6)), d = ops.from_host<float>(random_floats(rows, 7, 0.f, 1.f));
    std::vector<int> acts(rows);
    for (std::size_t i = 0; i < rows; ++i) acts[i] = static_cast<int>((i * 5 + 3) % A);
    auto a = ops.from_host<int>(acts);
    auto lv = ops.alloc<float>(rows), dv = ops.alloc<float>(rows), lq = ops.alloc<float>(rows);
    auto dq1 = ops.alloc<float>(cells), dq2 = ops.alloc<float>(cells);
    auto lp = ops.alloc<float>(rows), w = ops.alloc<float>(rows), dl = ops.alloc<float>(cells);
    fh::ops::run(ops, fh::ops::IqlValueLoss{lv.view(), dv.view(), v.cview(), q1.cview(), q2.cview(), a.cview(), 0.5f,
                                            sc.cview()});
    fh::ops::run(ops, fh::ops::IqlQLoss{lq.view(), dq1.view(), dq2.view(), q1.cview(), q2.cview(), a.cview(), r.cview(),
                                        d.cview(), vn.cview(), kAgents});
    fh::ops::run(ops, fh::ops::AwrPolicyLoss{lp.view(), w.view(), dl.view(), logits.cview(), q1.cview(), q2.cview(),
                                             v.cview(), a.cview(), 1.f, 1.f, sc.cview()});
    std::vector<float> all;
    for (const auto* b : {&lv, &dv, &lq, &dq1, &dq2, &lp, &w, &dl}) {
        const auto h = ops.to_host(b->cview());
        all.insert(all.end(), h.begin(), h.end());
    }
    for (std::size_t k = 0; k < N; ++k) {
        INFO("agent " << k);
        const std::size_t r0 = k * B, c0 = r0 * A;
        const auto row = [&](const Buffer<float>& b) { return b.cview().subview(r0, B); };
        const auto cell = [&](const Buffer<float>& b) {
            return b.cview().subview(c0, static_cast<std::size_t>(B) * A);
        };
        const auto ak = a.cview().subview(r0, B);
        auto lv1 = ops.alloc<float>(B), dv1 = ops.alloc<float>(B), lq1 = ops.alloc<float>(B);
        auto dq11 = ops.alloc<float>(static_cast<std::size_t>(B) * A),
             dq21 = ops.alloc<float>(static_cast<std::size_t>(B) * A);
        auto lp1 = ops.alloc<float>(B), w1 = ops.alloc<float>(B),
             dl1 = ops.alloc<float>(static_cast<std::size_t>(B) * A);
        fh::ops::run(
            ops, fh::ops::IqlValueLoss{lv1.view(), dv1.view(), row(v), cell(q1), cell(q2), ak, scalars[k].expectile});
        fh::ops::run(ops, fh::ops::IqlQLoss{lq1.view(), dq11.view(), dq21.view(), cell(q1), cell(q2), ak, row(r),
                                            row(d), row(vn)});
        fh::ops::run(ops, fh::ops::AwrPolicyLoss{lp1.view(), w1.view(), dl1.view(), cell(logits), cell(q1), cell(q2),
                                                 row(v), ak, scalars[k].beta, scalars[k].max_weight});
        const auto part = [&](const Buffer<float>& pop, std::size_t at, std::size_t n) {
            const auto h = ops.to_host(pop.cview());
            return std::vector<float>(h.begin() + static_cast<std::ptrdiff_t>(at),
                                      h.begin() + static_cast<std::ptrdiff_t>(at + n));
        };
        const std::size_t BA = static_cast<std::size_t>(B) * A;
        CHECK(same_bits(ops.to_host(lv1.cview()), part(lv, r0, B)));
        CHECK(same_bits(ops.to_host(dv1.cview()), part(dv, r0, B)));
        CHECK(same_bits(ops.to_host(lq1.cview()), part(lq, r0, B)));
        CHECK(same_bits(ops.to_host(dq11.cview()), part(dq1, c0, BA)));
        CHECK(same_bits(ops.to_host(dq21.cview()), part(dq2, c0, BA)));
        CHECK(same_bits(ops.to_host(lp1.cview()), part(lp, r0, B)));
        CHECK(same_bits(ops.to_host(w1.cview()), part(w, r0, B)));
        CHECK(same_bits(ops.to_host(dl1.cview()), part(dl, c0, BA)));
    }
    return all;
}

/// ops::NormAndGuardAgents then ops::AdamStepAgents over three agents (agent 1's loss NaN at the
/// second call: its gate closes), against ops::NormAndGuard and ops::AdamStep on each agent's
/// slices; `soft`: with soft targets. Returns the population's parameters, moments, target,
/// statistics and sums after two updates.
/// The error model of losses_both_ways's results (its inputs again): the value loss exact (a
/// subtraction and products), the twin-Q and AWR losses per agent as fh::test::q_model and
/// awr_model, in losses_both_ways's order (lv, dv, lq, dq1, dq2, lp, w, dl; agents one after another).
fh::test::Bounds losses_model() {
    const int B = 29, A = 9;
    const std::size_t N = kAgents, rows = N * B, cells = rows * A;
    const std::vector<fh::iql::LossScalars> scalars{{0.7f, 3.f, 100.f}, {0.9f, 1.f, 20.f}, {0.5f, 10.f, 5.f}};
    const auto v = random_floats(rows, 1), vn = random_floats(rows, 2), q1 = random_floats(cells, 3),
               q2 = random_floats(cells, 4), logits = random_floats(cells, 5), r = random_floats(rows, 6),
               d = random_floats(rows, 7, 0.f, 1.f);
    std::vector<int> acts(rows);
    for (std::size_t i = 0; i < rows; ++i) acts[i] = static_cast<int>((i * 5 + 3) % A);
    std::vector<fh::test::QBounds> q;
    std::vector<fh::test::AwrBounds> awr;
    const auto rows_of = [&](const auto& x, std::size_t k) {
        using T = typename std::decay_t<decltype(x)>::value_type;
        return std::vector<T>(x.begin() + static_cast<std::ptrdiff_t>(k * B),
                              x.begin() + static_cast<std::ptrdiff_t>((k + 1) * B));
    };
    const auto cells_of = [&](const std::vector<float>& x, std::size_t k) {
        return std::vector<float>(x.begin() + static_cast<std::ptrdiff_t>(k * B * A),
                                  x.begin() + static_cast<std::ptrdiff_t>((k + 1) * B * A));
    };
    for (std::size_t k = 0; k < N; ++k) {
        q.push_back(fh::test::q_model(cells_of(q1, k), cells_of(q2, k), rows_of(acts, k), rows_of(r, k), rows_of(d, k),
                                      rows_of(vn, k), A));
        awr.push_back(fh::test::awr_model(cells_of(logits, k), cells_of(q1, k), cells_of(q2, k), rows_of(v, k),
                                          rows_of(acts, k), scalars[k].beta, scalars[k].max_weight, A));
    }
    fh::test::Bounds all(2 * rows, 0.0);  // the value loss and its gradient: exact
    const auto put = [&](auto member, const auto& models) {
        for (const auto& m : models) all.insert(all.end(), (m.*member).begin(), (m.*member).end());
    };
    put(&fh::test::QBounds::loss, q);
    put(&fh::test::QBounds::d_q1, q);
    put(&fh::test::QBounds::d_q2, q);
    put(&fh::test::AwrBounds::loss, awr);
    put(&fh::test::AwrBounds::weights, awr);
    put(&fh::test::AwrBounds::d_logits, awr);
    return all;
}

std::vector<float> tail_both_ways(Device& ops, std::size_t P, bool soft) {
    const std::size_t N = kAgents;
    constexpr int S = 4, kLosses = 2, kNorm = 2;  // stats: two losses, the norm, one more
    const float nan = std::numeric_limits<float>::quiet_NaN();
    fh::ops::AdamParams adam;
    adam.clip_norm = 0.5f;
    const std::vector<float> lr{1e-3f, 3e-4f, 5e-3f};
    const std::vector<float> tau_keep{0.005f, 0.995f, 0.1f, 0.9f, 1.f, 0.f};
    // The population's buffers.
    auto params = ops.from_host<float>(random_floats(N * P, 11)), m = ops.alloc<float>(N * P),
         v = ops.alloc<float>(N * P);
    auto target = ops.from_host<float>(random_floats(N * P, 12));
    fh::ops::run(ops, fh::ops::Fill{m.view(), 0.f});
    fh::ops::run(ops, fh::ops::Fill{v.view(), 0.f});
    auto lr_d = ops.from_host<float>(lr), tk = ops.from_host<float>(tau_keep);
    auto stats = ops.alloc<float>(N * S), accum = ops.alloc<float>(N * S),
         scratch = ops.alloc<float>(N * fh::ops::norm_guard_scratch_size());
    fh::ops::run(ops, fh::ops::Fill{accum.view(), 0.f});
    fh::ops::run(ops, fh::ops::Fill{scratch.view(), 0.f});
    auto gate = ops.alloc<int>(N);
    auto state = ops.from_host<fh::nn::GuardState>(std::vector<fh::nn::GuardState>(N, {0, 0, -1, 0, 0}));
    auto step = ops.from_host<long long>(std::vector<long long>{0});
    // Each agent alone.
    struct One {
        Buffer<float> params, m, v, target, stats, accum, scratch;
        Buffer<int> gate;
        Buffer<fh::nn::GuardState> state;
    };
    std::vector<One> alone;
    const auto host_params = ops.to_host(params.cview()), host_target = ops.to_host(target.cview());
    for (std::size_t k = 0; k < N; ++k) {
        One o{ops.from_host<float>(std::vector<float>(host_params.begin() + static_cast<std::ptrdiff_t>(k * P),
                                                      host_params.begin() + static_cast<std::ptrdiff_t>((k + 1) * P))),
              ops.alloc<float>(P),
              ops.alloc<float>(P),
              ops.from_host<float>(std::vector<float>(host_target.begin() + static_cast<std::ptrdiff_t>(k * P),
                                                      host_target.begin() + static_cast<std::ptrdiff_t>((k + 1) * P))),
              ops.alloc<float>(S),
              ops.alloc<float>(S),
              ops.alloc<float>(fh::ops::norm_guard_scratch_size()),
              ops.alloc<int>(1),
              ops.from_host<fh::nn::GuardState>(std::vector<fh::nn::GuardState>{{0, 0, -1, 0, 0}})};
        for (auto* b : {&o.m, &o.v, &o.accum, &o.scratch}) fh::ops::run(ops, fh::ops::Fill{b->view(), 0.f});
        alone.push_back(std::move(o));
    }
    for (int u = 1; u <= 2; ++u) {
        const auto grads = random_floats(N * P, 20 + static_cast<std::uint64_t>(u));
        auto g = ops.from_host<float>(grads);
        // Statistics: stat-major for the population, per agent for the single ops.
        std::vector<float> st(N * S), mine(S);
        for (std::size_t k = 0; k < N; ++k) {
            mine = {u == 2 && k == 1 ? nan : 0.25f * static_cast<float>(k + 1), -1.f, 0.f, static_cast<float>(u)};
            for (int j = 0; j < S; ++j) st[static_cast<std::size_t>(j) * N + k] = mine[static_cast<std::size_t>(j)];
            ops.upload<float>(alone[k].stats.view(), mine);
        }
        ops.upload<float>(stats.view(), st);
        ops.upload<long long>(step.view(), std::vector<long long>{u});
        const auto counter = fh::ops::counter_value(step.cview());
        fh::ops::run(ops, fh::ops::NormAndGuardAgents{kAgents, g.cview(), scratch.view(), gate.view(), state.view(),
                                                      stats.view(), kLosses, kNorm, counter, accum.view()});
        fh::ops::run(ops, fh::ops::AdamStepAgents{kAgents, params.view(), m.view(), v.view(), g.cview(),
                                                  stats.cview().subview(kNorm * N, N), gate.cview(), counter, adam,
                                                  lr_d.cview(), soft ? target.view() : View<float>(),
                                                  soft ? tk.cview() : View<const float>()});
        for (std::size_t k = 0; k < N; ++k) {
            One& o = alone[k];
            const auto gk = g.cview().subview(k * P, P);
            const auto s = o.stats.cview();
            fh::ops::run(ops,
                         fh::ops::NormAndGuard{o.stats.view().subview(kNorm, 1), o.scratch.view(), gk, o.gate.view(),
                                               o.state.view(), s.subview(0, kLosses), counter, o.accum.view(), s});
            fh::ops::AdamParams own = adam;
            own.lr = lr[k];
            fh::ops::run(
                ops, fh::ops::AdamStep{o.params.view(),
                                       o.m.view(),
                                       o.v.view(),
                                       gk,
                                       s.subview(kNorm, 1),
                                       o.gate.cview(),
                                       counter,
                                       own,
                                       {},
                                       soft ? fh::ops::SoftTarget{o.target.view(), tau_keep[2 * k], tau_keep[2 * k + 1]}
                                            : fh::ops::SoftTarget{}});
        }
    }
    const auto part = [&](const std::vector<float>& h, std::size_t k, std::size_t n) {
        return std::vector<float>(h.begin() + static_cast<std::ptrdiff_t>(k * n),
                                  h.begin() + static_cast<std::ptrdiff_t>((k + 1) * n));
    };
    const auto hp = ops.to_host(params.cview()), hm = ops.to_host(m.cview()), hv = ops.to_host(v.cview()),
               ht = ops.to_host(target.cview()), hs = ops.to_host(stats.cview()), ha = ops.to_host(accum.cview());
    const auto gates = ops.to_host(gate.cview());
    const auto states = ops.to_host(state.cview());
    CHECK(gates == std::vector<int>{1, 0, 1});
    for (std::size_t k = 0; k < N; ++k) {
        INFO("agent " << k << ", P " << P << ", soft " << soft);
        const One& o = alone[k];
        CHECK(same_bits(ops.to_host(o.params.cview()), part(hp, k, P)));
        CHECK(same_bits(ops.to_host(o.m.cview()), part(hm, k, P)));
        CHECK(same_bits(ops.to_host(o.v.cview()), part(hv, k, P)));
        CHECK(same_bits(ops.to_host(o.target.cview()), part(ht, k, P)));
        CHECK(same_bits(ops.to_host(o.accum.cview()), part(ha, k, S)));
        const auto os = ops.to_host(o.stats.cview());
        CHECK(std::memcmp(&os[kNorm], &hs[kNorm * N + k], sizeof(float)) == 0);
        CHECK(ops.to_host(o.gate.cview())[0] == gates[k]);
        const auto og = ops.to_host(o.state.cview())[0];
        CHECK(std::memcmp(&og, &states[k], sizeof og) == 0);
    }
    CHECK(states[1].bad_total == 1);
    CHECK(states[1].first_bad_update == 2);
    std::vector<float> all;
    for (const auto* h : {&hp, &hm, &hv, &ht, &hs, &ha}) all.insert(all.end(), h->begin(), h->end());
    return all;
}

}  // namespace

TEST_CASE("population ops: each agent's results are the single op's on its slices (CPU)", "[population][ops]") {
    CpuDevice cpu;
    for (int n : {1, 3}) sample_both_ways(cpu, n);
    losses_both_ways(cpu);
    for (std::size_t P : {std::size_t{1}, std::size_t{4099}})
        for (bool soft : {false, true}) tail_both_ways(cpu, P, soft);
}

TEST_CASE("population ops on CUDA: each agent's results are the single kernel's; sampling and Adam equal the CPU",
          "[gpu][population][ops]") {
    CpuDevice cpu;
    auto& gpu = fh::test::gpu_ops();
    for (int n : {1, 3}) {
        const Sampled g = sample_both_ways(gpu, n), c = sample_both_ways(cpu, n);
        CHECK(same_bits(g.x, c.x));
        CHECK(g.actions == c.actions);
        CHECK(same_bits(g.returns, c.returns));
        CHECK(same_bits(g.discounts, c.discounts));
    }
    const auto lg = losses_both_ways(gpu), lc = losses_both_ways(cpu);
    REQUIRE(lg.size() == lc.size());
    FH_CHECK_WITHIN(lg, lc, losses_model());
    for (std::size_t P : {std::size_t{1}, std::size_t{4099}})
        for (bool soft : {false, true}) {
            const auto g = tail_both_ways(gpu, P, soft), c = tail_both_ways(cpu, P, soft);
            REQUIRE(g.size() == c.size());
            // The norm (global_norm's model: 2.5 u) scales the clipped gradient by clip / norm,
            // 5 u apart with the division; two Adam updates carry it: m within 5 u of its terms
            // per update, v 10 u, the parameters the step's 10 u of lr and one ulp (2 u) where
            // their rounding flips; the soft target tau of that, the stats and their sums the
            // norm's. Taken as 16 u of each element and of its agent's tensor (its statistic
            // across agents for stats and accum). The NaN loss of agent 1 is NaN on both sides.
            fh::test::Bounds bound;
            const std::size_t S = 4;
            for (std::size_t t = 0; t < 6; ++t) {
                const std::size_t from = t < 4 ? t * kAgents * P : 4 * kAgents * P + (t - 4) * kAgents * S;
                const std::size_t n = t < 4 ? kAgents * P : kAgents * S, block = t < 4 ? P : kAgents;
                const auto b =
                    fh::test::block_bounds(std::vector<float>(c.begin() + static_cast<std::ptrdiff_t>(from),
                                                              c.begin() + static_cast<std::ptrdiff_t>(from + n)),
                                           block, 16);
                bound.insert(bound.end(), b.begin(), b.end());
            }
            FH_CHECK_WITHIN(g, c, bound, fh::test::Nan::both_match);
        }
}
