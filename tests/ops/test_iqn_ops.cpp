/// @file test_iqn_ops.cpp
/// @brief The IQN op family (cuda/abi/dqn_iqn.h, dqn.head = "iqn"): the fractions and their
///        cosine features, the Hadamard product and its backward, the quantile Huber loss with the
///        head's backward (by hand, against finite differences of the per-sample math in double,
///        and the CPU op against that math), acting's mean rows; the aliasing checks; then [gpu]
///        every kernel against its CPU twin, bit for bit, on seeded random inputs.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <set>
#include <vector>

#include "math/iqn.h"
#include "device/cpu_device.hpp"
#include "abi/dqn_step.h"
#include "abi/dqn_iqn.h"
#include "support/compare.hpp"
#include "support/error_model.hpp"
#include "support/gpu.hpp"

using fh::dqn::HeadParams;
using fh::test::random_floats;

namespace {

fh::dqn::AgentParams iqn_agent(float cql = 0.f, std::uint64_t seed = 5) {
    fh::dqn::AgentParams a{};
    a.seed = seed;
    a.cql_alpha = cql;
    return a;
}

struct TausOut {
    std::vector<float> features, taus;
};
TausOut run_taus(fh::ops::Device& ops, bool midpoints, int rows, int N, int n_cos, long long updates = 41,
                 std::uint64_t seed = 5) {
    auto features = ops.alloc<float>(static_cast<std::size_t>(rows * N * n_cos));
    auto taus = ops.alloc<float>(static_cast<std::size_t>(rows * N));
    auto ag = ops.from_host<fh::dqn::AgentParams>(std::vector<fh::dqn::AgentParams>{iqn_agent(0.f, seed)});
    auto cnt = ops.from_host<fh::dqn::Counters>(std::vector<fh::dqn::Counters>{{7, updates, 7}});
    if (midpoints)
        fh::ops::run(ops, fh::ops::IqnTaus{features.view(), taus.view(), {}, {}, rows, N, n_cos});
    else
        fh::ops::run(ops, fh::ops::IqnTaus{features.view(), taus.view(), ag.cview(), cnt.cview(), rows, N, n_cos});
    return {ops.to_host(features.cview()), ops.to_host(taus.cview())};
}

/// A batch for the loss: head rows (B * N, W) of the three networks, fractions, actions (some
/// invalid when `corrupt`), returns, discounts (some terminal).
struct LossCase {
    std::vector<float> hs, hsel, ht, taus, returns, discounts;
    std::vector<int> actions;
};
LossCase loss_case(const HeadParams& h, int B, int N, std::uint64_t seed) {
    const auto W = static_cast<std::size_t>(fh::dqn::head_width(h));
    const auto rows = static_cast<std::size_t>(B) * static_cast<std::size_t>(N);
    LossCase c;
    c.hs = random_floats(rows * W, seed, -1.5f, 1.5f);
    c.hsel = random_floats(rows * W, seed + 1, -1.5f, 1.5f);
    c.ht = random_floats(rows * W, seed + 2, -1.5f, 1.5f);
    c.taus = random_floats(rows, seed + 3, 0.01f, 0.99f);
    c.returns = random_floats(static_cast<std::size_t>(B), seed + 4, -2.f, 2.f);
    c.discounts = random_floats(static_cast<std::size_t>(B), seed + 5, 0.f, 0.99f);
    for (int b = 0; b < B; ++b) {
        c.actions.push_back((b * 7 + 3) % h.num_actions);
        if (b % 5 == 4) c.discounts[static_cast<std::size_t>(b)] = 0.f;  // a termination
    }
    return c;
}
struct LossOut {
    std::vector<float> d_head, stats;
};
LossOut run_loss(fh::ops::Device& ops, const LossCase& c, const HeadParams& h, int B, int N, float cql) {
    const auto W = static_cast<std::size_t>(fh::dqn::head_width(h));
    auto hs = ops.from_host<float>(c.hs), hsel = ops.from_host<float>(c.hsel), ht = ops.from_host<float>(c.ht);
    auto taus = ops.from_host<float>(c.taus), ret = ops.from_host<float>(c.returns);
    auto disc = ops.from_host<float>(c.discounts);
    auto act = ops.from_host<int>(c.actions);
    auto ag = ops.from_host<fh::dqn::AgentParams>(std::vector<fh::dqn::AgentParams>{iqn_agent(cql)});
    auto d = ops.alloc<float>(static_cast<std::size_t>(B * N) * W);
    auto st = ops.alloc<float>(static_cast<std::size_t>(B * fh::dqn::kSampleStats));
    fh::ops::run(ops, fh::ops::IqnLoss{d.view(), st.view(), hs.cview(), hsel.cview(), ht.cview(), taus.cview(),
                                       act.cview(), ret.cview(), disc.cview(), ag.cview(), h, N, B});
    return {ops.to_host(d.cview()), ops.to_host(st.cview())};
}

/// The per-sample loss in double: stats and d_rows (N, W) of sample b.
std::vector<double> sample_loss_double(const LossCase& c, const HeadParams& h, int b, int N, double cql,
                                       const std::vector<double>& rows_s, std::vector<double>* d_rows, double scale) {
    const auto W = static_cast<std::size_t>(fh::dqn::head_width(h));
    const auto off = static_cast<std::size_t>(b * N) * W, n = static_cast<std::size_t>(N) * W;
    const std::vector<double> sel(c.hsel.begin() + off, c.hsel.begin() + off + n),
        tgt(c.ht.begin() + off, c.ht.begin() + off + n);
    const std::vector<double> taus(c.taus.begin() + b * N, c.taus.begin() + (b + 1) * N);
    std::vector<double> d(n), scratch(static_cast<std::size_t>(fh::iqn::loss_scratch(h, N))), st(fh::dqn::kSampleStats);
    fh::iqn::sample_loss<double>(rows_s.data(), sel.data(), tgt.data(), taus.data(), N, c.actions[b], c.returns[b],
                                 c.discounts[b], scale, cql, h, d.data(), scratch.data(), st.data());
    if (d_rows) *d_rows = d;
    return st;
}

}  // namespace

TEST_CASE("IQN cos(pi x) is the cosine to double rounding; features and fractions", "[dqn][iqn][ops]") {
    for (int k = 0; k <= 20000; ++k) {
        const double x = -3.0 + 1e-3 * 0.37 * k * 3.1;  // [-3, ~20], irregular steps
        REQUIRE(std::abs(fh::iqn::cos_pi(x) - std::cos(std::numbers::pi * x)) < 1e-14);
    }
    CHECK(fh::iqn::cos_pi(0.0) == 1.0);
    CHECK(fh::iqn::cos_pi(1.0) == -1.0);
    CHECK(fh::iqn::cos_pi(63.0) == -1.0);

    fh::ops::CpuDevice ops;
    const int rows = 5, N = 6, C = 9;
    const auto a = run_taus(ops, false, rows, N, C);
    std::set<float> distinct(a.taus.begin(), a.taus.end());
    CHECK(distinct.size() == a.taus.size());
    for (int r = 0; r < rows; ++r)
        for (int k = 0; k < N; ++k) {
            const float tau = a.taus[static_cast<std::size_t>(r * N + k)];
            REQUIRE(tau > 0.f);
            REQUIRE(tau < 1.f);
            // Philox(seed, iqn_tau, row, update 42 = counters.updates + 1)
            REQUIRE(tau == fh::iqn::sample_tau(5, r, 42, k));
            for (int i = 0; i < C; ++i)
                REQUIRE(a.features[static_cast<std::size_t>((r * N + k) * C + i)] ==
                        Approx(std::cos(std::numbers::pi * i * tau)).margin(1e-6));
        }
    // Another update or seed draws other fractions; the same ones draw the same.
    CHECK(run_taus(ops, false, rows, N, C, 42).taus != a.taus);
    CHECK(run_taus(ops, false, rows, N, C, 41, 6).taus != a.taus);
    CHECK(run_taus(ops, false, rows, N, C).taus == a.taus);
    // Fractions are uniform: the mean of many is near 1/2, and each quarter gets its share.
    const auto many = run_taus(ops, false, 512, 8, 1);
    double mean = 0;
    int low = 0;
    for (float t : many.taus) mean += t, low += t < 0.25f;
    mean /= static_cast<double>(many.taus.size());
    CHECK(mean == Approx(0.5).margin(0.02));
    CHECK(low == Approx(1024).margin(120));
    // Acting's midpoints.
    const auto m = run_taus(ops, true, 1, 4, 3);
    CHECK(m.taus == std::vector<float>{0.125f, 0.375f, 0.625f, 0.875f});
    CHECK(m.features[0] == 1.f);  // i = 0: cos 0
    CHECK(m.features[1] == Approx(std::cos(std::numbers::pi * 0.125)).margin(1e-7));
}

TEST_CASE("IQN Hadamard product and its backward equal the direct loops", "[dqn][iqn][ops]") {
    fh::ops::CpuDevice ops;
    const int count = 2, rows = 3, N = 4, H = 5;
    const auto phi_h = random_floats(count * rows * H, 1), psi_h = random_floats(count * rows * N * H, 2);
    auto phi = ops.from_host<float>(phi_h), psi = ops.from_host<float>(psi_h);
    auto x = ops.alloc<float>(static_cast<std::size_t>(count * rows * N * H));
    fh::ops::run(ops, fh::ops::IqnHadamard{x.view(), phi.cview(), psi.cview(), count, rows, N, rows * N, H});
    const auto xh = ops.to_host(x.cview());
    for (int c = 0; c < count; ++c)
        for (int r = 0; r < rows * N; ++r)
            for (int h = 0; h < H; ++h)
                REQUIRE(xh[static_cast<std::size_t>((c * rows * N + r) * H + h)] ==
                        phi_h[static_cast<std::size_t>((c * rows + r / N) * H + h)] *
                            psi_h[static_cast<std::size_t>((c * rows * N + r) * H + h)]);
    // Acting: the same N fractions for every row.
    auto psi_shared = ops.from_host<float>(std::vector<float>(psi_h.begin(), psi_h.begin() + N * H));
    auto x1 = ops.alloc<float>(static_cast<std::size_t>(rows * N * H));
    fh::ops::run(ops, fh::ops::IqnHadamard{x1.view(), phi.cview().subview(0, static_cast<std::size_t>(rows * H)),
                                           psi_shared.cview(), 1, rows, N, N, H});
    const auto x1h = ops.to_host(x1.cview());
    for (int r = 0; r < rows * N; ++r)
        for (int h = 0; h < H; ++h)
            REQUIRE(x1h[static_cast<std::size_t>(r * H + h)] == phi_h[static_cast<std::size_t>((r / N) * H + h)] *
                                                                    psi_h[static_cast<std::size_t>((r % N) * H + h)]);
    // The backward of the first 2 samples.
    const int B = 2;
    const auto dx_h = random_floats(B * N * H, 3);
    auto dx = ops.from_host<float>(dx_h);
    auto d_phi = ops.alloc<float>(static_cast<std::size_t>(B * H)), d_psi = ops.alloc<float>(dx_h.size());
    fh::ops::run(
        ops, fh::ops::IqnHadamardBackward{d_phi.view(), d_psi.view(), dx.cview(), phi.cview(), psi.cview(), B, N, H});
    const auto dph = ops.to_host(d_phi.cview()), dps = ops.to_host(d_psi.cview());
    for (int b = 0; b < B; ++b)
        for (int h = 0; h < H; ++h) {
            double s = 0;
            for (int k = 0; k < N; ++k) {
                const auto i = static_cast<std::size_t>((b * N + k) * H + h);
                s += static_cast<double>(dx_h[i]) * psi_h[i];
                REQUIRE(dps[i] == dx_h[i] * phi_h[static_cast<std::size_t>(b * H + h)]);
            }
            REQUIRE(dph[static_cast<std::size_t>(b * H + h)] == Approx(s).margin(1e-6));
        }
}

TEST_CASE("IQN quantile Huber loss: by hand on one pair", "[dqn][iqn][ops]") {
    // One action, no dueling, N = 1: Z = row[0], a* = 0, T = r + disc * Z'.
    const HeadParams h{1, 51, 0, -1.f, 1.f, 1};
    for (auto [z, t, tau] : {std::tuple{0.2, 1.0, 0.3}, {0.2, 3.0, 0.3}, {1.0, 0.5, 0.3}, {4.0, 0.5, 0.9}}) {
        const double zs[1] = {z}, zsel[1] = {0.0}, zt[1] = {t}, taus[1] = {tau};
        double d[1], scratch[3], st[fh::dqn::kSampleStats];
        fh::iqn::sample_loss<double>(zs, zsel, zt, taus, 1, 0, 0.0, 1.0, 1.0, 0.0, h, d, scratch, st);
        const double u = t - z, au = std::abs(u), w = u < 0 ? 1 - tau : tau;
        const double huber = au <= 1 ? 0.5 * u * u : au - 0.5;
        INFO("z " << z << " t " << t << " tau " << tau);
        CHECK(st[fh::dqn::kStatMse] == Approx(w * huber));
        CHECK(d[0] == Approx(-w * (au <= 1 ? u : (u < 0 ? -1 : 1))));
        CHECK(st[fh::dqn::kStatTd] == Approx(z - t));
        CHECK(st[fh::dqn::kStatQ] == Approx(z));
        CHECK(st[fh::dqn::kStatC51] == 0);
    }
    // Quantile regression: with fractions 0.1 .. 0.9 and targets 1 .. 9, the loss is minimal when
    // Z_i is the tau_i-quantile of the targets (the gradient vanishes there).
    const int N = 9;
    std::vector<double> zs(N), zsel(N, 0.0), zt(N), taus(N), d(N), scratch(2 + N), st(fh::dqn::kSampleStats);
    for (int i = 0; i < N; ++i) taus[i] = i / 8.0, zt[i] = i + 1, zs[i] = i + 1;
    fh::iqn::sample_loss<double>(zs.data(), zsel.data(), zt.data(), taus.data(), N, 0, 0.0, 1.0, 1.0, 0.0, h, d.data(),
                                 scratch.data(), st.data());
    for (int i = 0; i < N; ++i) CHECK(d[i] == Approx(0.0).margin(1e-12));
    zs[0] = 3.0;  // above its quantile: pushed down
    fh::iqn::sample_loss<double>(zs.data(), zsel.data(), zt.data(), taus.data(), N, 0, 0.0, 1.0, 1.0, 0.0, h, d.data(),
                                 scratch.data(), st.data());
    CHECK(d[0] > 0);
}

TEST_CASE(
    "IQN loss: gradient matches finite differences; the CPU op equals the per-sample math; a* and "
    "double DQN",
    "[dqn][iqn][ops][gradcheck]") {
    fh::ops::CpuDevice ops;
    for (int dueling : {1, 0})
        for (double cql : {0.0, 0.7}) {
            const HeadParams h{5, 51, dueling, -3.f, 3.f, 1};
            const int B = 7, N = 4, W = fh::dqn::head_width(h);
            INFO("dueling " << dueling << " cql " << cql);
            const LossCase c = loss_case(h, B, N, 900 + static_cast<std::uint64_t>(dueling));
            const LossOut got = run_loss(ops, c, h, B, N, static_cast<float>(cql));
            for (int b = 0; b < B; ++b) {
                const auto off = static_cast<std::size_t>(b * N * W);
                const std::vector<double> hs(c.hs.begin() + off, c.hs.begin() + off + N * W);
                std::vector<double> grad;
                const auto st = sample_loss_double(c, h, b, N, cql, hs, &grad, 1.0 / B);
                for (int i = 0; i < N * W; ++i) {
                    auto plus = hs, minus = hs;
                    plus[i] += 1e-6;
                    minus[i] -= 1e-6;
                    const auto lp = sample_loss_double(c, h, b, N, cql, plus, nullptr, 1.0 / B);
                    const auto lm = sample_loss_double(c, h, b, N, cql, minus, nullptr, 1.0 / B);
                    const double numeric = ((lp[fh::dqn::kStatMse] + cql * lp[fh::dqn::kStatCql]) -
                                            (lm[fh::dqn::kStatMse] + cql * lm[fh::dqn::kStatCql])) /
                                           (2e-6 * B);
                    REQUIRE(grad[i] == Approx(numeric).margin(1e-7).epsilon(1e-5));
                    REQUIRE(got.d_head[off + static_cast<std::size_t>(i)] ==
                            Approx(grad[i]).margin(1e-6).epsilon(1e-4));
                }
                for (int k = 0; k < fh::dqn::kSampleStats; ++k)
                    CHECK(got.stats[static_cast<std::size_t>(k * B + b)] == Approx(st[k]).margin(1e-5).epsilon(1e-4));
                CHECK(st[fh::dqn::kStatMse] > 0);
                if (cql > 0)
                    CHECK(st[fh::dqn::kStatCql] > 0);
                else
                    CHECK(st[fh::dqn::kStatCql] == 0);
            }
        }
    // a* is the selecting rows' argmax of the mean over fractions: make action 2 the best on the
    // select rows and action 0 on the target rows; the targets then use the target's Z(2).
    const HeadParams h{3, 51, 0, -3.f, 3.f, 1};
    const int N = 2;
    const std::vector<double> zs{0, 0, 0, 0, 0, 0}, sel{0, 0, 1, 0, 0, 1}, tgt{5, -1, 0.5, 5, -1, 0.25};
    const std::vector<double> taus{0.5, 0.5};
    std::vector<double> d(6), scratch(8), st(fh::dqn::kSampleStats);
    fh::iqn::sample_loss<double>(zs.data(), sel.data(), tgt.data(), taus.data(), N, 1, 1.0, 0.5, 1.0, 0.0, h, d.data(),
                                 scratch.data(), st.data());
    CHECK(st[fh::dqn::kStatTd] == Approx(0.0 - (1.0 + 0.5 * 0.375)));  // mean_j T_j = 1 + 0.5 * mean(0.5, 0.25)
    // Without double DQN the target rows select: a* = 0.
    fh::iqn::sample_loss<double>(zs.data(), tgt.data(), tgt.data(), taus.data(), N, 1, 1.0, 0.5, 1.0, 0.0, h, d.data(),
                                 scratch.data(), st.data());
    CHECK(st[fh::dqn::kStatTd] == Approx(0.0 - (1.0 + 0.5 * 5.0)));
    // Only the taken action's quantiles get the loss's gradient (no dueling, no CQL).
    CHECK(d[0] == 0);
    CHECK(d[2] == 0);
    CHECK(d[1] < 0);  // below every target: pushed up
}

TEST_CASE("IQN acting: the mean row over the fractions, whose scalar Q is the mean quantile", "[dqn][iqn][ops]") {
    fh::ops::CpuDevice ops;
    const HeadParams h{4, 51, 1, -3.f, 3.f, 1};
    const int n = 6, K = 5, W = fh::dqn::head_width(h);
    const auto rows_h = random_floats(static_cast<std::size_t>(n * K * W), 31);
    auto rows = ops.from_host<float>(rows_h);
    auto mean = ops.alloc<float>(static_cast<std::size_t>(n * W));
    fh::ops::run(ops, fh::ops::IqnMeanRows{mean.view(), rows.cview(), n, K, W});
    auto q = ops.alloc<float>(static_cast<std::size_t>(n * 4));
    auto actions = ops.alloc<int>(static_cast<std::size_t>(n));
    fh::ops::run(ops, fh::ops::DqnAct{actions.view(), q.view(), {}, mean.cview(), h, {}, {}});
    const auto qh = ops.to_host(q.cview());
    const auto ah = ops.to_host(actions.cview());
    for (int e = 0; e < n; ++e) {
        std::vector<double> qa(4, 0.0);
        for (int k = 0; k < K; ++k) {
            const float* r = rows_h.data() + (e * K + k) * W;
            const double m = (double(r[1]) + r[2] + r[3] + r[4]) / 4;
            for (int a = 0; a < 4; ++a) qa[static_cast<std::size_t>(a)] += (r[0] + r[1 + a] - m) / K;
        }
        for (int a = 0; a < 4; ++a)
            CHECK(qh[static_cast<std::size_t>(e * 4 + a)] == Approx(qa[static_cast<std::size_t>(a)]).margin(1e-5));
        CHECK(ah[static_cast<std::size_t>(e)] == static_cast<int>(std::max_element(qa.begin(), qa.end()) - qa.begin()));
    }
}

TEST_CASE("IQN ops: outputs may not overlap, sizes and the shared-memory limit are checked", "[dqn][iqn][aliasing]") {
    fh::ops::CpuDevice ops;
    const HeadParams h{3, 51, 1, -3.f, 3.f, 1};
    const int B = 2, N = 2, W = fh::dqn::head_width(h);
    auto rows = ops.alloc<float>(static_cast<std::size_t>(B * N * W));
    auto d = ops.alloc<float>(static_cast<std::size_t>(B * N * W));
    auto st = ops.alloc<float>(static_cast<std::size_t>(B * fh::dqn::kSampleStats));
    auto taus = ops.alloc<float>(static_cast<std::size_t>(B * N));
    auto f = ops.alloc<float>(static_cast<std::size_t>(B));
    auto act = ops.from_host<int>(std::vector<int>{0, 1});
    auto ag = ops.from_host<fh::dqn::AgentParams>(std::vector<fh::dqn::AgentParams>{iqn_agent()});
    CHECK_NOTHROW(
        fh::ops::run(ops, fh::ops::IqnLoss{d.view(), st.view(), rows.cview(), rows.cview(), rows.cview(), taus.cview(),
                                           act.cview(), f.cview(), f.cview(), ag.cview(), h, N, B}));
    CHECK_THROWS_AS(
        fh::ops::run(ops, fh::ops::IqnLoss{d.view(), st.view(), d.cview(), rows.cview(), rows.cview(), taus.cview(),
                                           act.cview(), f.cview(), f.cview(), ag.cview(), h, N, B}),
        std::invalid_argument);
    HeadParams c51 = h;
    c51.scalar = 0;
    CHECK_THROWS_AS(
        fh::ops::run(ops, fh::ops::IqnLoss{d.view(), st.view(), rows.cview(), rows.cview(), rows.cview(), taus.cview(),
                                           act.cview(), f.cview(), f.cview(), ag.cview(), c51, N, B}),
        std::invalid_argument);
    CHECK(fh::ops::iqn_loss_fits(9, 64));
    CHECK_FALSE(fh::ops::iqn_loss_fits(180, 64));
    auto x = ops.alloc<float>(static_cast<std::size_t>(B * N * 3));
    auto phi = ops.alloc<float>(static_cast<std::size_t>(B * 3));
    CHECK_THROWS_AS(fh::ops::run(ops, fh::ops::IqnHadamard{x.view(), phi.cview(), x.cview(), 1, B, N, B * N, 3}),
                    std::invalid_argument);
    CHECK_THROWS_AS(fh::ops::run(ops, fh::ops::IqnMeanRows{d.view().subview(0, 2 * 4), d.cview(), 2, 2, 4}),
                    std::invalid_argument);
}

TEST_CASE("the IQN kernels equal their CPU twins bit for bit (the loss with CQL within rounding)",
          "[gpu][dqn][iqn][ops]") {
    fh::ops::CpuDevice cpu;
    auto& gpu = fh::test::gpu_ops();
    // Fractions and features: an update's (Philox) and acting's midpoints.
    for (int N : {1, 8, 13}) {
        INFO("N " << N);
        const auto c = run_taus(cpu, false, 37, N, 64), g = run_taus(gpu, false, 37, N, 64);
        REQUIRE(g.taus == c.taus);
        REQUIRE(g.features == c.features);
        const auto cm = run_taus(cpu, true, 1, N * 4, 33), gm = run_taus(gpu, true, 1, N * 4, 33);
        REQUIRE(gm.taus == cm.taus);
        REQUIRE(gm.features == cm.features);
    }
    // Hadamard and its backward, awkward sizes.
    for (auto [count, rows, N, H] : {std::tuple{2, 66, 8, 64}, {1, 5, 3, 7}, {2, 129, 13, 33}}) {
        INFO("rows " << rows << " N " << N << " H " << H);
        const auto phi_h = random_floats(static_cast<std::size_t>(count * rows * H), 41);
        const auto psi_h = random_floats(static_cast<std::size_t>(count * rows * N * H), 42);
        const auto dx_h = random_floats(static_cast<std::size_t>(rows * N * H), 43);
        auto run = [&](fh::ops::Device& ops, int psi_rows) {
            auto phi = ops.from_host<float>(phi_h), dx = ops.from_host<float>(dx_h);
            auto psi = ops.from_host<float>(std::vector<float>(psi_h.begin(), psi_h.begin() + count * psi_rows * H));
            auto x = ops.alloc<float>(static_cast<std::size_t>(count * rows * N * H));
            fh::ops::run(ops, fh::ops::IqnHadamard{x.view(), phi.cview(), psi.cview(), count, rows, N, psi_rows, H});
            auto d_phi = ops.alloc<float>(static_cast<std::size_t>(rows * H)), d_psi = ops.alloc<float>(dx_h.size());
            if (psi_rows == rows * N)
                fh::ops::run(ops, fh::ops::IqnHadamardBackward{d_phi.view(), d_psi.view(), dx.cview(), phi.cview(),
                                                               psi.cview(), rows, N, H});
            return std::tuple{ops.to_host(x.cview()), ops.to_host(d_phi.cview()), ops.to_host(d_psi.cview())};
        };
        for (int psi_rows : {rows * N, N}) {
            const auto [xc, dpc, dsc] = run(cpu, psi_rows);
            const auto [xg, dpg, dsg] = run(gpu, psi_rows);
            REQUIRE(xg == xc);
            if (psi_rows == rows * N) {
                REQUIRE(dpg == dpc);
                REQUIRE(dsg == dsc);
            }
        }
    }
    // The loss: dueling or not, CQL or not, batch sizes around the block size, corrupt actions.
    for (int dueling : {1, 0})
        for (float cql : {0.f, 0.5f})
            for (auto [B, N] : {std::pair{1, 8}, {33, 8}, {257, 5}, {64, 32}}) {
                const HeadParams h{9, 51, dueling, -10.f, 10.f, 1};
                INFO("dueling " << dueling << " cql " << cql << " B " << B << " N " << N);
                LossCase c = loss_case(h, B, N, 7000 + static_cast<std::uint64_t>(B * N));
                if (B > 30) c.actions[17] = 9;  // out of range: NaN statistics, no gradient
                const LossOut lc = run_loss(cpu, c, h, B, N, cql), lg = run_loss(gpu, c, h, B, N, cql);
                if (cql == 0.f) {  // +, -, *, / only: the same bits
                    REQUIRE(lg.d_head == lc.d_head);
                    for (std::size_t i = 0; i < lc.stats.size(); ++i) {
                        if (std::isnan(lc.stats[i]))
                            REQUIRE(std::isnan(lg.stats[i]));
                        else
                            REQUIRE(lg.stats[i] == lc.stats[i]);
                    }
                } else {  // CQL's softmax: expf and logf may differ from the CPU's by an ulp
                    // One level (the soft maximum's sum over the 9 actions), expf and logf,
                    // norm-relative (fh::test::chain_bounds): d_head as one tensor, the stats per
                    // statistic (B rows); the corrupt row's NaN statistics on both sides.
                    FH_REQUIRE_WITHIN(lg.d_head, lc.d_head,
                                      fh::test::chain_bounds(lc.d_head, lc.d_head.size(), 1, 9, 2));
                    FH_REQUIRE_WITHIN(lg.stats, lc.stats,
                                      fh::test::chain_bounds(lc.stats, static_cast<std::size_t>(B), 1, 9, 2),
                                      fh::test::Nan::both_match);
                }
            }
    // Acting's mean rows.
    for (auto [n, K, W] : {std::tuple{1, 32, 10}, {257, 7, 4}, {64, 33, 28}}) {
        const auto rows_h = random_floats(static_cast<std::size_t>(n * K * W), 51);
        auto run = [&](fh::ops::Device& ops) {
            auto rows = ops.from_host<float>(rows_h);
            auto out = ops.alloc<float>(static_cast<std::size_t>(n * W));
            fh::ops::run(ops, fh::ops::IqnMeanRows{out.view(), rows.cview(), n, K, W});
            return ops.to_host(out.cview());
        };
        REQUIRE(run(gpu) == run(cpu));
    }
}
