/// @file test_ppo_population_ops.cpp
/// @brief The ops a batched PPO population launches once for all its agents: the environments of
///        several agents (abi::EnvAgent), ppo_sample with each agent's seed, per-agent action
///        histograms, truncated-episode lists and minibatch gathers, the PPO loss with each agent's
///        coefficients, GAE with each agent's gamma and lambda, norm_and_guard_agents with a row
///        stride, and copy_group's strided copies. On each
///        backend every agent's results equal the single op's on that agent's slices, bit for bit;
///        [gpu] the exact ops (environments, lists, gathers, GAE, copies) equal the CPU twins too.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "config/profile.hpp"
#include "data/load.hpp"
#include "env/vec_env.hpp"
#include "math/ppo.h"
#include "device/cpu_device.hpp"
#include "abi/env.h"
#include "ops/ppo/ops.hpp"
#include "support/compare.hpp"
#include "support/error_model.hpp"
#include "support/gpu.hpp"
#include "trainers/setup.hpp"
#include "abi/core_optim.h"
#include "abi/core_vector.h"
#include "abi/nn_select.h"

using fh::ops::Buffer;
using fh::ops::CpuDevice;
using fh::ops::Device;
using fh::ops::View;
using fh::test::random_floats;
using fh::test::same_bits;

namespace {

constexpr int kAgents = 3;

template <class T>
std::vector<T> part(const std::vector<T>& h, std::size_t k, std::size_t n) {
    return std::vector<T>(h.begin() + static_cast<std::ptrdiff_t>(k * n),
                          h.begin() + static_cast<std::ptrdiff_t>((k + 1) * n));
}
template <class T>
std::vector<std::byte> bytes_of(const std::vector<T>& v) {
    std::vector<std::byte> b(v.size() * sizeof(T));
    std::memcpy(b.data(), v.data(), b.size());
    return b;
}

/// What a device computed, for the CPU-GPU comparison of the exact ops.
struct Outputs {
    std::vector<std::byte> env;    ///< every agent's environment buffers after the steps
    std::vector<std::byte> lists;  ///< the truncated-episode lists and counts
    std::vector<std::byte> gather, copies;
    std::vector<int> actions;
    std::vector<float> log_probs, loss;
};

/// Three agents' environments (own markets and seeds) stepped together and alone: equal.
void environments(Device& ops, Outputs& out) {
    const int n = 5;
    std::vector<std::unique_ptr<fh::env::DeviceMarket>> markets;
    std::vector<const fh::env::DeviceMarket*> views;
    std::vector<std::uint64_t> seeds;
    fh::env::EnvParams params{};
    for (int k = 0; k < kAgents; ++k) {
        const auto p = fh::config::resolve_profile_text(
            "[run]\ntrainer = \"ppo\"\nseed = " + std::to_string(3 + 8 * k) +
                "\n[data]\nsynthetic_bars = 1500\ncache_dir = \"\"\n[env]\nbankruptcy_fraction = 0.9995\n"
                "[experience]\ngpu_timesteps_per_episode = 7\n",
            "agent", {});
        markets.push_back(
            std::make_unique<fh::env::DeviceMarket>(ops, fh::data::load_market(fh::trainers::data_options(p))));
        views.push_back(markets.back().get());
        seeds.push_back(static_cast<std::uint64_t>(p.run.seed));
        if (k == 0) params = fh::trainers::env_params(p, markets.back()->market_dim());
    }
    fh::env::VecEnv together(ops, views, seeds, fh::env::Split::train, params, n);
    REQUIRE(together.n_envs() == kAgents * n);
    std::vector<std::unique_ptr<fh::env::VecEnv>> alone;
    for (int k = 0; k < kAgents; ++k) {
        auto own = params;
        own.seed = seeds[static_cast<std::size_t>(k)];
        alone.push_back(std::make_unique<fh::env::VecEnv>(ops, *markets[static_cast<std::size_t>(k)],
                                                          fh::env::Split::train, own, n));
        alone.back()->reset_all();
    }
    together.reset_all();
    const int A = fh::env::num_actions(params);
    auto actions = ops.alloc<int>(static_cast<std::size_t>(kAgents * n));
    const std::size_t un = static_cast<std::size_t>(n), D = static_cast<std::size_t>(params.state_dim);
    int truncated = 0;
    for (int step = 0; step < 25; ++step) {
        fh::ops::run(ops, fh::ops::EnvRandomActions{actions.view(), 99, static_cast<std::uint64_t>(step), A});
        together.step(actions.cview());
        for (std::size_t k = 0; k < static_cast<std::size_t>(kAgents); ++k)
            alone[k]->step(actions.cview().subview(k * un, un));
        const auto done = ops.to_host(together.done());
        for (auto d : done) truncated += d == fh::env::kTruncated;
        for (std::size_t k = 0; k < static_cast<std::size_t>(kAgents); ++k) {
            INFO("step " << step << ", agent " << k);
            auto& a = *alone[k];
            CHECK(same_bits(ops.to_host(a.states()), part(ops.to_host(together.states()), k, un * D)));
            CHECK(same_bits(ops.to_host(a.next_states()), part(ops.to_host(together.next_states()), k, un * D)));
            CHECK(same_bits(ops.to_host(a.rewards()), part(ops.to_host(together.rewards()), k, un)));
            CHECK(ops.to_host(a.done()) == part(done, k, un));
            CHECK(bytes_of(ops.to_host(a.state())) == bytes_of(part(ops.to_host(together.state()), k, un)));
            CHECK(bytes_of(ops.to_host(a.info())) == bytes_of(part(ops.to_host(together.info()), k, un)));
        }
    }
    CHECK(truncated > 0);
    for (const auto& b : {bytes_of(ops.to_host(together.states())), bytes_of(ops.to_host(together.rewards())),
                          bytes_of(ops.to_host(together.state()))})
        out.env.insert(out.env.end(), b.begin(), b.end());
}

/// Sampling, histograms, lists, gathers and the loss of three agents at once and alone.
void ppo_ops(Device& ops, Outputs& out) {
    const std::size_t N = kAgents, n = 64, A = 9, T = 4, M = n * T, D = 6, B = 40, MD = 4, PD = D - MD;
    const std::vector<std::uint64_t> seeds{3, 11, 12};
    const auto d_seeds = ops.from_host<std::uint64_t>(seeds);
    const auto step = fh::ops::CounterValue{17};

    // Sampling with each agent's seed and the histograms.
    const auto logits = ops.from_host<float>(random_floats(N * n * A, 5));
    auto actions = ops.alloc<int>(N * n);
    auto logp = ops.alloc<float>(N * n);
    fh::ops::run(ops, fh::ops::PpoSample{actions.view(), logp.view(), logits.cview(), static_cast<int>(A), 0, step,
                                         d_seeds.cview()});
    auto hist = ops.from_host<unsigned long long>(std::vector<unsigned long long>(N * A, 1));
    fh::ops::run(ops, fh::ops::ActionHistogram{hist.view(), actions.cview(), static_cast<int>(A), static_cast<int>(N)});
    const auto ha = ops.to_host(actions.cview());
    const auto hl = ops.to_host(logp.cview());
    const auto hh = ops.to_host(hist.cview());
    for (std::size_t k = 0; k < N; ++k) {
        INFO("agent " << k);
        auto a1 = ops.alloc<int>(n);
        auto l1 = ops.alloc<float>(n);
        fh::ops::run(ops, fh::ops::PpoSample{a1.view(), l1.view(), logits.cview().subview(k * n * A, n * A),
                                             static_cast<int>(A), seeds[k], step});
        CHECK(ops.to_host(a1.cview()) == part(ha, k, n));
        CHECK(same_bits(ops.to_host(l1.cview()), part(hl, k, n)));
        auto h1 = ops.from_host<unsigned long long>(std::vector<unsigned long long>(A, 1));
        fh::ops::run(ops, fh::ops::ActionHistogram{h1.view(), a1.cview(), static_cast<int>(A)});
        CHECK(ops.to_host(h1.cview()) == part(hh, k, A));
    }
    out.actions = ha;
    out.log_probs = hl;

    // Truncated-episode lists: two steps' (a restart, then appended).
    std::vector<std::uint8_t> done(N * n);
    std::vector<fh::env::StepInfo> info(N * n);
    for (std::size_t i = 0; i < done.size(); ++i) {
        done[i] = static_cast<std::uint8_t>(i % 7 == 0 ? fh::env::kTruncated : (i % 5 == 0 ? 1 : 0));
        info[i].bar = static_cast<int>(100 + i);
    }
    const auto d_done = ops.from_host<std::uint8_t>(done);
    const auto d_info = ops.from_host<fh::env::StepInfo>(info);
    const auto next = ops.from_host<float>(random_floats(N * n * D, 6));
    auto rows = ops.alloc<int>(N * M), bars = ops.alloc<int>(N * M);
    auto pf = ops.alloc<float>(N * M * PD);
    auto count = ops.from_host<int>(std::vector<int>(N, 0));
    for (auto* b : {&rows, &bars}) ops.upload<int>(b->view(), std::vector<int>(N * M, -1));
    fh::ops::run(ops, fh::ops::Fill{pf.view(), 0.0f});
    for (int t = 0; t < 2; ++t)
        fh::ops::run(ops, fh::ops::PpoCollectTruncated{rows.view(), bars.view(), pf.view(), count.view(), next.cview(),
                                                       d_info.cview(), d_done.cview(), static_cast<int>(MD),
                                                       t * static_cast<int>(n), t == 0, static_cast<int>(N)});
    const auto hc = ops.to_host(count.cview());
    for (std::size_t k = 0; k < N; ++k) {
        INFO("agent " << k);
        auto r1 = ops.from_host<int>(std::vector<int>(M, -1)), b1 = ops.from_host<int>(std::vector<int>(M, -1));
        auto p1 = ops.alloc<float>(M * PD);
        fh::ops::run(ops, fh::ops::Fill{p1.view(), 0.0f});
        auto c1 = ops.from_host<int>(std::vector<int>{0});
        for (int t = 0; t < 2; ++t)
            fh::ops::run(ops, fh::ops::PpoCollectTruncated{
                                  r1.view(), b1.view(), p1.view(), c1.view(), next.cview().subview(k * n * D, n * D),
                                  d_info.cview().subview(k * n, n), d_done.cview().subview(k * n, n),
                                  static_cast<int>(MD), t * static_cast<int>(n), t == 0});
        CHECK(ops.to_host(c1.cview())[0] == hc[k]);
        CHECK(hc[k] > 0);
        CHECK(ops.to_host(r1.cview()) == part(ops.to_host(rows.cview()), k, M));
        CHECK(ops.to_host(b1.cview()) == part(ops.to_host(bars.cview()), k, M));
        CHECK(same_bits(ops.to_host(p1.cview()), part(ops.to_host(pf.cview()), k, M * PD)));
    }
    for (const auto& b : {bytes_of(hc), bytes_of(ops.to_host(rows.cview())), bytes_of(ops.to_host(bars.cview())),
                          bytes_of(ops.to_host(pf.cview()))})
        out.lists.insert(out.lists.end(), b.begin(), b.end());

    // Minibatch gathers from each agent's rollout with its seed.
    const auto r_states = ops.from_host<float>(random_floats(N * M * D, 7));
    std::vector<int> r_act(N * M);
    for (std::size_t i = 0; i < r_act.size(); ++i) r_act[i] = static_cast<int>(i % A);
    const auto r_actions = ops.from_host<int>(r_act);
    Buffer<float> r_scalars[4];
    for (int s = 0; s < 4; ++s)
        r_scalars[s] = ops.from_host<float>(random_floats(N * M, 8 + static_cast<std::uint64_t>(s)));
    const fh::ppo::RolloutView rollout{r_states.cview().data(),     r_actions.cview().data(),
                                       r_scalars[0].cview().data(), r_scalars[1].cview().data(),
                                       r_scalars[2].cview().data(), r_scalars[3].cview().data(),
                                       static_cast<int>(M),         static_cast<int>(D)};
    const auto epoch = fh::ops::CounterValue{2};
    auto g_states = ops.alloc<float>(N * B * D);
    auto g_actions = ops.alloc<int>(N * B);
    Buffer<float> g_s[4];
    for (auto& b : g_s) b = ops.alloc<float>(N * B);
    fh::ops::run(ops, fh::ops::PpoGather{g_states.view(), g_actions.view(), g_s[0].view(), g_s[1].view(), g_s[2].view(),
                                         g_s[3].view(), rollout, 0, epoch, static_cast<int>(B), d_seeds.cview()});
    for (std::size_t k = 0; k < N; ++k) {
        INFO("agent " << k);
        auto s1 = ops.alloc<float>(B * D);
        auto a1 = ops.alloc<int>(B);
        Buffer<float> x1[4];
        for (auto& b : x1) b = ops.alloc<float>(B);
        fh::ops::run(ops, fh::ops::PpoGather{s1.view(), a1.view(), x1[0].view(), x1[1].view(), x1[2].view(),
                                             x1[3].view(), fh::ppo::agent_rollout(rollout, static_cast<int>(k)),
                                             seeds[k], epoch, static_cast<int>(B)});
        CHECK(same_bits(ops.to_host(s1.cview()), part(ops.to_host(g_states.cview()), k, B * D)));
        CHECK(ops.to_host(a1.cview()) == part(ops.to_host(g_actions.cview()), k, B));
        for (int s = 0; s < 4; ++s)
            CHECK(same_bits(ops.to_host(x1[s].cview()), part(ops.to_host(g_s[s].cview()), k, B)));
    }
    for (const auto& b : {bytes_of(ops.to_host(g_states.cview())), bytes_of(ops.to_host(g_actions.cview()))})
        out.gather.insert(out.gather.end(), b.begin(), b.end());

    // The loss with each agent's coefficients and its own mean.
    const std::vector<fh::ppo::LossParams> lp{{0.2f, 0.5f, 0.01f, 1}, {0.1f, 0.25f, 0.05f, 1}, {0.3f, 1.0f, 0.0f, 1}};
    const auto d_lp = ops.from_host<fh::ppo::LossParams>(lp);
    const auto mb_logits = ops.from_host<float>(random_floats(N * B * A, 12));
    const auto values = ops.from_host<float>(random_floats(N * B, 13));
    auto stats = ops.alloc<float>(5 * N * B);
    auto d_logits = ops.alloc<float>(N * B * A);
    auto d_values = ops.alloc<float>(N * B);
    fh::ops::run(ops, fh::ops::PpoLoss{stats.view(), d_logits.view(), d_values.view(), mb_logits.cview(),
                                       values.cview(), g_actions.cview(), g_s[0].cview(), g_s[1].cview(),
                                       g_s[2].cview(), g_s[3].cview(), lp[0], d_lp.cview()});
    const auto hs = ops.to_host(stats.cview());
    for (std::size_t k = 0; k < N; ++k) {
        INFO("agent " << k);
        auto s1 = ops.alloc<float>(5 * B);
        auto dl1 = ops.alloc<float>(B * A);
        auto dv1 = ops.alloc<float>(B);
        const auto sub = [&](const Buffer<float>& b, std::size_t w) { return b.cview().subview(k * B * w, B * w); };
        fh::ops::run(ops, fh::ops::PpoLoss{s1.view(), dl1.view(), dv1.view(), sub(mb_logits, A), sub(values, 1),
                                           g_actions.cview().subview(k * B, B), sub(g_s[0], 1), sub(g_s[1], 1),
                                           sub(g_s[2], 1), sub(g_s[3], 1), lp[k]});
        CHECK(same_bits(ops.to_host(dl1.cview()), part(ops.to_host(d_logits.cview()), k, B * A)));
        CHECK(same_bits(ops.to_host(dv1.cview()), part(ops.to_host(d_values.cview()), k, B)));
        const auto h1 = ops.to_host(s1.cview());
        for (std::size_t s = 0; s < 5; ++s) CHECK(same_bits(part(h1, s, B), part(hs, s * N + k, B)));  // stat-major
    }
    out.loss = ops.to_host(d_logits.cview());

    // GAE of every agent's (T, n) rollout in one launch, each with its gamma and lambda.
    {
        const auto rewards = ops.from_host<float>(random_floats(N * M, 18));
        const auto vals = ops.from_host<float>(random_floats(N * M, 19));
        const auto next_vals = ops.from_host<float>(random_floats(N * M, 20));
        std::vector<std::uint8_t> flags(N * M);
        for (std::size_t i = 0; i < flags.size(); ++i)
            flags[i] = static_cast<std::uint8_t>(i % 13 == 0 ? 1 : (i % 17 == 0 ? 2 : 0));
        const auto d_flags = ops.from_host<std::uint8_t>(flags);
        const std::vector<float> gl{0.99f, 0.95f, 0.9f, 0.8f, 0.97f, 1.0f};
        const auto d_gl = ops.from_host<float>(gl);
        auto adv = ops.alloc<float>(N * M), ret = ops.alloc<float>(N * M);
        fh::ops::run(ops, fh::ops::PpoGae{adv.view(), ret.view(), rewards.cview(), vals.cview(), next_vals.cview(),
                                          d_flags.cview(), 0.5f, 0.5f, static_cast<int>(T), d_gl.cview()});
        for (std::size_t k = 0; k < N; ++k) {
            INFO("GAE, agent " << k);
            auto a1 = ops.alloc<float>(M), r1 = ops.alloc<float>(M);
            fh::ops::run(
                ops, fh::ops::PpoGae{a1.view(), r1.view(), rewards.cview().subview(k * M, M),
                                     vals.cview().subview(k * M, M), next_vals.cview().subview(k * M, M),
                                     d_flags.cview().subview(k * M, M), gl[2 * k], gl[2 * k + 1], static_cast<int>(T)});
            CHECK(same_bits(ops.to_host(a1.cview()), part(ops.to_host(adv.cview()), k, M)));
            CHECK(same_bits(ops.to_host(r1.cview()), part(ops.to_host(ret.cview()), k, M)));
        }
        const auto b = bytes_of(ops.to_host(adv.cview()));
        out.copies.insert(out.copies.end(), b.begin(), b.end());
    }

    // copy_group's strided pairs: row t = 2 of each agent's (T, n) rollout from an (agents, n)
    // step, bytes at an unaligned row, and a plain copy, in one launch.
    const auto src = ops.from_host<float>(random_floats(N * n, 14));
    const auto hsrc = ops.to_host(src.cview());
    std::vector<float> hd(N * M, -1.0f);
    for (std::size_t k = 0; k < N; ++k)
        for (std::size_t i = 0; i < n; ++i) hd[k * M + 2 * n + i] = hsrc[k * n + i];
    {
        auto dst2 = ops.alloc<float>(N * M);
        fh::ops::run(ops, fh::ops::Fill{dst2.view(), -1.0f});
        std::vector<std::uint8_t> flags(N * n);
        for (std::size_t i = 0; i < flags.size(); ++i) flags[i] = static_cast<std::uint8_t>(i * 37 % 251);
        const auto d_flags = ops.from_host<std::uint8_t>(flags);
        auto r_flags = ops.from_host<std::uint8_t>(std::vector<std::uint8_t>(N * M, 0));
        auto plain = ops.alloc<float>(N * n);
        fh::ops::run(ops, fh::ops::CopyGroup{
                              {fh::ops::CopyPair::strided<float>(dst2.view().subview(2 * n, (N - 1) * M + n), M,
                                                                 src.cview(), n, n, N),
                               fh::ops::CopyPair::strided<std::uint8_t>(
                                   r_flags.view().subview(3 * n - 1, (N - 1) * M + n), M, d_flags.cview(), n, n, N),
                               fh::ops::CopyPair(plain.view(), src.cview())}});
        CHECK(same_bits(ops.to_host(dst2.cview()), hd));
        CHECK(same_bits(ops.to_host(plain.cview()), hsrc));
        const auto hf = ops.to_host(r_flags.cview());
        for (std::size_t k = 0; k < N; ++k)
            for (std::size_t i = 0; i < M; ++i) {
                const bool copied = i + 1 >= 3 * n && i + 1 < 4 * n;  // row 3, one byte early: unaligned
                CHECK(hf[k * M + i] == (copied ? flags[k * n + i + 1 - 3 * n] : 0));
            }
        CHECK_THROWS_AS(
            fh::ops::run(
                ops, fh::ops::CopyGroup{{fh::ops::CopyPair::strided<float>(dst2.view(), M, src.cview(), n, n, N + 1)}}),
            std::invalid_argument);
        const auto b = bytes_of(hf);
        out.copies.insert(out.copies.end(), b.begin(), b.end());
    }
    const auto copied = bytes_of(hd);
    out.copies.insert(out.copies.end(), copied.begin(), copied.end());

    // norm_and_guard_agents whose sums are rows of a wider per-agent block (accum_stride).
    const std::size_t P = 257, S = 6, W = 11;
    const auto grads = ops.from_host<float>(random_floats(N * P, 15));
    auto st = ops.from_host<float>(random_floats(S * N, 16, 0.f, 1.f));
    auto accum = ops.from_host<float>(random_floats(N * W, 17));
    auto scratch = ops.alloc<float>(N * fh::ops::norm_guard_scratch_size());
    fh::ops::run(ops, fh::ops::Fill{scratch.view(), 0.0f});
    auto gate = ops.alloc<int>(N);
    auto guard =
        ops.from_host<fh::nn::GuardState>(std::vector<fh::nn::GuardState>(N, fh::nn::GuardState{0, 0, -1, 0, 0}));
    const auto before = ops.to_host(accum.cview());
    const auto update = fh::ops::CounterValue{1};
    fh::ops::run(
        ops, fh::ops::NormAndGuardAgents{static_cast<int>(N), grads.cview(), scratch.view(), gate.view(), guard.view(),
                                         st.view(), 3, 5, update, accum.view(), static_cast<int>(W)});
    const auto after = ops.to_host(accum.cview()), hst = ops.to_host(st.cview());
    for (std::size_t k = 0; k < N; ++k)
        for (std::size_t j = 0; j < W; ++j) {
            const float expect =
                j < S ? fh::core::saxpy_element(before[k * W + j], 1.0f, hst[j * N + k]) : before[k * W + j];
            CHECK(std::memcmp(&after[k * W + j], &expect, sizeof expect) == 0);
        }
}

Outputs both_ways(Device& ops) {
    Outputs out;
    environments(ops, out);
    ppo_ops(ops, out);
    return out;
}

}  // namespace

TEST_CASE("PPO population ops: each agent's results are the single op's on its slices (CPU)",
          "[population][ops][ppo]") {
    CpuDevice cpu;
    both_ways(cpu);
}

TEST_CASE("PPO population ops on CUDA: each agent's results are the single kernel's; the exact ops equal the CPU",
          "[gpu][population][ops][ppo]") {
    CpuDevice cpu;
    const Outputs c = both_ways(cpu), g = both_ways(fh::test::gpu_ops());
    CHECK(g.env == c.env);
    CHECK(g.lists == c.lists);
    CHECK(g.gather == c.gather);
    CHECK(g.copies == c.copies);
    // Sampling: expf/logf round differently (ppo_sample's contract): log-probabilities close, an
    // action differs only where the draw falls within rounding of a boundary.
    std::size_t differ = 0;
    for (std::size_t i = 0; i < c.actions.size(); ++i) differ += c.actions[i] != g.actions[i];
    CHECK(differ <= 1);
    // log pi(a) = l_a - lse: a log-sum-exp of the 9 actions (one level, expf and logf),
    // norm-relative over the tensor (fh::test::chain_bounds); compared where the actions agree.
    const auto lp_bound = fh::test::chain_bounds(c.log_probs, c.log_probs.size(), 1, 9, 2);
    for (std::size_t i = 0; i < c.log_probs.size(); ++i)
        if (c.actions[i] == g.actions[i])
            CHECK(std::abs(static_cast<double>(g.log_probs[i]) - c.log_probs[i]) <= lp_bound[i]);
    // The loss's d_logits as the single PPO loss's (test_ppo_ops.cpp: one level of A terms, expf,
    // logf and the ratio's expf), each agent's B x A rows its own scale.
    FH_CHECK_WITHIN(g.loss, c.loss, fh::test::chain_bounds(c.loss, 40 * 9, 1, 9, 3));
}
