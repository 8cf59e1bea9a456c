/// @file test_attention_ops.cpp
/// @brief Feature-group attention (math/attention.h, ops::group_attention_*, and inside
///        trainers::QNetwork with dqn.attention): the row backward against central finite
///        differences in double; the ops against the row math; the network with zero attention
///        weights equal to the network without attention, bit for bit; the network's gradient of
///        the attention and trunk weights against finite differences; [gpu] the kernels and the
///        network against the CPU.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "data/features.hpp"
#include "math/attention.h"
#include "device/cpu_device.hpp"
#include "support/compare.hpp"
#include "support/error_model.hpp"
#include "support/gpu.hpp"
#include "trainers/dqn/network.hpp"
#include "abi/core_vector.h"
#include "abi/nn_attention.h"

using fh::test::random_floats;

namespace {

/// Uneven groups of a 13-wide row.
fh::attention::Groups groups13() {
    return fh::attention::Groups{4, {0, 3, 4, 9, 13}};
}

fh::trainers::QNetworkConfig network(bool attention) {
    fh::trainers::QNetworkConfig c;
    c.state_dim = 50;
    c.hidden = {24, 16};
    c.head = fh::dqn::HeadParams{9, 11, 1, -3.f, 3.f, 0};
    if (attention) {
        c.attention = fh::data::core42_groups();
        c.attention.push_back({"portfolio", 42, 50});
    }
    return c;
}

/// The kernels' error model against the CPU twin, per element from the inputs (the same
/// attention::forward_row and backward_row on both sides, in the same order). Each side against
/// the exact row: expf of the rounded s_g - max within 2 ulp, (4 + |s_g - max|) u of e_g; their
/// sum of G positive terms, (G - 1) u more; the division u: alpha_g within e_g + the sum's + u.
/// x_out = (G alpha_g) x_j: two roundings more. Backward, on each side's own alpha: d_alpha_g =
/// G sum_j dx_out_j x_j (n_g terms, contracted or not on the device: (n_g + 1) u of
/// G sum |dx_out x|), dot = sum_g alpha_g d_alpha_g (G terms), then alpha_g (d_alpha_g - dot)
/// (two roundings). Every bound covers both sides (twice one side's).
struct AttentionBounds {
    fh::test::Bounds out, alpha, d_scores;
};
AttentionBounds attention_model(const std::vector<float>& x, const std::vector<float>& scores,
                                const std::vector<float>& dout, const fh::attention::Groups& g, int D, int rows,
                                int x_rows) {
    const double u = fh::test::kFloatU;
    const int G = g.count;
    AttentionBounds b;
    for (int r = 0; r < rows; ++r) {
        const std::size_t xr = static_cast<std::size_t>(r % x_rows) * D;
        std::vector<double> xd(x.begin() + xr, x.begin() + xr + D),
            sd(scores.begin() + r * G, scores.begin() + (r + 1) * G);
        std::vector<double> out(D), alpha(G), rel(G);
        fh::attention::forward_row<double>(out.data(), alpha.data(), xd.data(), sd.data(), g);
        const double mx = *std::max_element(sd.begin(), sd.end());
        double sum_rel = (G - 1) * u;
        for (int k = 0; k < G; ++k) sum_rel += alpha[k] * (4 + std::abs(sd[k] - mx)) * u;
        for (int k = 0; k < G; ++k) rel[k] = (4 + std::abs(sd[k] - mx)) * u + sum_rel + u;
        for (int k = 0; k < G; ++k) b.alpha.push_back(2 * rel[k] * alpha[k]);
        for (int k = 0; k < G; ++k)
            for (int j = g.begin[k]; j < g.begin[k + 1]; ++j) b.out.push_back(2 * (rel[k] + 2 * u) * std::abs(out[j]));
        if (r >= x_rows) continue;  // the backward's rows: the first x_rows
        std::vector<double> da(G), da_err(G);
        double dot = 0, dot_err = 0, dot_abs = 0;
        for (int k = 0; k < G; ++k) {
            double s = 0, a = 0;
            for (int j = g.begin[k]; j < g.begin[k + 1]; ++j) {
                s += static_cast<double>(dout[r * D + j]) * xd[j];
                a += std::abs(static_cast<double>(dout[r * D + j]) * xd[j]);
            }
            da[k] = G * s;
            da_err[k] = (g.begin[k + 1] - g.begin[k] + 1) * u * G * a;
            dot += alpha[k] * da[k];
            dot_abs += alpha[k] * std::abs(da[k]);
            dot_err += rel[k] * alpha[k] * std::abs(da[k]) + alpha[k] * da_err[k];
        }
        dot_err += G * u * dot_abs;
        for (int k = 0; k < G; ++k)
            b.d_scores.push_back(2 * (rel[k] * alpha[k] * std::abs(da[k] - dot) + alpha[k] * (da_err[k] + dot_err) +
                                      2 * u * alpha[k] * (std::abs(da[k]) + std::abs(dot))));
    }
    return b;
}

}  // namespace

TEST_CASE("feature attention: the row backward matches central finite differences (double)",
          "[ops][attention][gradcheck]") {
    const auto g = groups13();
    const int D = 13, G = g.count;
    const auto xf = random_floats(D, 1), sf = random_floats(G, 2, -1.5f, 1.5f), cf = random_floats(D, 3);
    const std::vector<double> x(xf.begin(), xf.end()), c(cf.begin(), cf.end());
    std::vector<double> scores(sf.begin(), sf.end());
    auto loss = [&](const std::vector<double>& s) {  // L = sum_j c_j x_out_j
        std::vector<double> out(D), alpha(G);
        fh::attention::forward_row<double>(out.data(), alpha.data(), x.data(), s.data(), g);
        double l = 0;
        for (int j = 0; j < D; ++j) l += c[j] * out[j];
        return l;
    };
    std::vector<double> out(D), alpha(G), d_scores(G);
    fh::attention::forward_row<double>(out.data(), alpha.data(), x.data(), scores.data(), g);
    double total = 0;
    for (double a : alpha) total += a;
    CHECK(total == Approx(1.0).epsilon(1e-14));
    fh::attention::backward_row<double>(d_scores.data(), c.data(), x.data(), alpha.data(), g);
    for (int k = 0; k < G; ++k) {
        const double h = 1e-6;
        auto up = scores, down = scores;
        up[k] += h;
        down[k] -= h;
        const double fd = (loss(up) - loss(down)) / (2 * h);
        CHECK(d_scores[k] == Approx(fd).epsilon(1e-7).margin(1e-10));
    }
}

TEST_CASE("feature attention ops equal the row math; one X under several networks' rows", "[ops][attention]") {
    fh::ops::CpuDevice ops;
    const auto g = groups13();
    const int D = 13, G = g.count, x_rows = 5, rows = 15;
    const auto xh = random_floats(x_rows * D, 4), sh = random_floats(rows * G, 5), dh = random_floats(rows * D, 6);
    auto x = ops.from_host<float>(xh);
    auto scores = ops.from_host<float>(sh);
    auto out = ops.alloc<float>(rows * D), alpha = ops.alloc<float>(rows * G);
    fh::ops::run(ops,
                 fh::ops::GroupAttentionForward{out.view(), alpha.view(), x.cview(), scores.cview(), g, rows, x_rows});
    const auto oh = ops.to_host(out.cview()), ah = ops.to_host(alpha.cview());
    for (int r = 0; r < rows; ++r) {
        std::vector<float> o(D), a(G);
        fh::attention::forward_row(o.data(), a.data(), xh.data() + (r % x_rows) * D, sh.data() + r * G, g);
        CHECK(std::vector<float>(oh.begin() + r * D, oh.begin() + (r + 1) * D) == o);
        CHECK(std::vector<float>(ah.begin() + r * G, ah.begin() + (r + 1) * G) == a);
    }
    // Backward on the first x_rows rows (network 0).
    auto dout = ops.from_host<float>(std::vector<float>(dh.begin(), dh.begin() + x_rows * D));
    auto ds = ops.alloc<float>(x_rows * G);
    fh::ops::run(ops, fh::ops::GroupAttentionBackward{ds.view(), dout.cview(), x.cview(),
                                                      alpha.cview().subview(0, x_rows * G), g, x_rows});
    const auto dsh = ops.to_host(ds.cview());
    for (int r = 0; r < x_rows; ++r) {
        std::vector<float> want(G);
        fh::attention::backward_row(want.data(), dh.data() + r * D, xh.data() + r * D, ah.data() + r * G, g);
        CHECK(std::vector<float>(dsh.begin() + r * G, dsh.begin() + (r + 1) * G) == want);
    }
    // Groups that do not cover the row, or overlap, are refused.
    auto bad = g;
    bad.begin[2] = 2;
    bad.begin[1] = 3;
    CHECK_THROWS_AS(fh::ops::run(ops, fh::ops::GroupAttentionForward{out.view(), alpha.view(), x.cview(),
                                                                     scores.cview(), bad, rows, x_rows}),
                    std::invalid_argument);
}

TEST_CASE("QNetwork with attention: zero attention weights give the plain network's outputs, bit for bit",
          "[trainers][dqn][attention]") {
    fh::ops::CpuDevice ops;
    const fh::trainers::QNetwork plain(network(false)), attended(network(true));
    const std::size_t P = plain.layout().total();
    REQUIRE(attended.layout().total() > P);  // the attention layer comes after the trunk and head
    auto params_plain = ops.from_host<float>(random_floats(P, 7, -0.3f, 0.3f));
    std::vector<float> pa(attended.layout().total(), 0.0f);  // the attention slices stay 0
    const auto pp = ops.to_host(params_plain.cview());
    std::copy(pp.begin(), pp.end(), pa.begin());
    auto params_att = ops.from_host<float>(pa);
    const int B = 6;
    auto X = ops.from_host<float>(random_floats(B * 50, 8));
    auto ws1 = plain.make_workspace(ops, B), ws2 = attended.make_workspace(ops, B);
    const auto h1 = ops.to_host(plain.forward(ops, params_plain.cview(), X.cview(), B, ws1));
    const auto h2 = ops.to_host(attended.forward(ops, params_att.cview(), X.cview(), B, ws2));
    CHECK(h1 == h2);  // every group's weight is exactly 1/8, x' = 8 * 0.125 * x = x
    const auto w = ops.to_host(attended.attention_weights(ws2));
    REQUIRE(w.size() == static_cast<std::size_t>(B * 8));
    for (float a : w) CHECK(a == 0.125f);
}

TEST_CASE("QNetwork with attention: gradients of the attention and trunk weights match finite differences",
          "[trainers][dqn][attention][gradcheck]") {
    fh::ops::CpuDevice ops;
    const fh::trainers::QNetwork net(network(true));
    const std::size_t P = net.layout().total();
    auto params_h = random_floats(P, 9, -0.3f, 0.3f);
    const int B = 5, W = net.output_width();
    auto X = ops.from_host<float>(random_floats(B * 50, 10));
    const auto c = random_floats(static_cast<std::size_t>(B * W), 11);  // L = sum c * head
    auto ws = net.make_workspace(ops, B);
    auto loss = [&](const std::vector<float>& p) {
        auto params = ops.from_host<float>(p);
        const auto h = ops.to_host(net.forward(ops, params.cview(), X.cview(), B, ws));
        double l = 0;
        for (std::size_t i = 0; i < h.size(); ++i) l += static_cast<double>(c[i]) * h[i];
        return l;
    };
    auto params = ops.from_host<float>(params_h);
    net.forward(ops, params.cview(), X.cview(), B, ws);
    auto grads = ops.alloc<float>(P);
    fh::ops::run(ops, fh::ops::Fill{grads.view(), 0.0f});
    auto d_head = ops.from_host<float>(c);
    net.backward(ops, params.cview(), grads.view(), d_head.view(), B, ws);
    const auto g = ops.to_host(grads.cview());
    // Every attention weight and bias, and a spread of the trunk's first layer.
    std::vector<std::size_t> check;
    for (const auto& s : net.layout().slices())
        if (s.name.rfind("attention", 0) == 0)
            for (std::size_t i = 0; i < s.size; i += 7) check.push_back(s.offset + i);
    for (std::size_t i = 0; i < 24 * 50; i += 97) check.push_back(net.layout().slices().front().offset + i);
    REQUIRE(check.size() > 40);
    for (std::size_t i : check) {
        // Float central differences: a smaller step drowns in the forward's rounding (~1e-5 of
        // L), a larger one crosses the trunk's ReLU kinks.
        const float h = 3e-3f;
        auto up = params_h, down = params_h;
        up[i] += h;
        down[i] -= h;
        const double fd = (loss(up) - loss(down)) / (2.0 * h);
        INFO("parameter " << i);
        CHECK(g[i] == Approx(fd).epsilon(2e-2).margin(5e-3));
    }
}

TEST_CASE("feature attention: the CPU twin is within half of attention_model's bound of the double row math",
          "[ops][attention]") {
    // The [gpu] test's model covers two float sides; one side against the exact (double) rows
    // takes at most half of it.
    fh::ops::CpuDevice cpu;
    const auto g = groups13();
    const int D = 13, G = g.count, x_rows = 301, rows = 602;
    const auto xh = random_floats(x_rows * D, 22), sh = random_floats(rows * G, 23, -6.f, 6.f),
               dh = random_floats(x_rows * D, 24);
    auto x = cpu.from_host<float>(xh);
    auto scores = cpu.from_host<float>(sh);
    auto out = cpu.alloc<float>(rows * D), alpha = cpu.alloc<float>(rows * G);
    fh::ops::run(cpu,
                 fh::ops::GroupAttentionForward{out.view(), alpha.view(), x.cview(), scores.cview(), g, rows, x_rows});
    auto dout = cpu.from_host<float>(dh);
    auto ds = cpu.alloc<float>(x_rows * G);
    fh::ops::run(cpu, fh::ops::GroupAttentionBackward{ds.view(), dout.cview(), x.cview(),
                                                      alpha.cview().subview(0, x_rows * G), g, x_rows});
    std::vector<double> eo, ea, ed;
    for (int r = 0; r < rows; ++r) {
        const std::vector<double> xr(xh.begin() + (r % x_rows) * D, xh.begin() + (r % x_rows + 1) * D),
            sr(sh.begin() + r * G, sh.begin() + (r + 1) * G);
        std::vector<double> o(D), a(G), d(G);
        fh::attention::forward_row<double>(o.data(), a.data(), xr.data(), sr.data(), g);
        eo.insert(eo.end(), o.begin(), o.end());
        ea.insert(ea.end(), a.begin(), a.end());
        if (r >= x_rows) continue;
        const std::vector<double> dr(dh.begin() + r * D, dh.begin() + (r + 1) * D);
        fh::attention::backward_row<double>(d.data(), dr.data(), xr.data(), a.data(), g);
        ed.insert(ed.end(), d.begin(), d.end());
    }
    const auto m = attention_model(xh, sh, dh, g, D, rows, x_rows);
    FH_REQUIRE_WITHIN(cpu.to_host(out.cview()), eo, fh::test::times(m.out, 0.5));
    FH_REQUIRE_WITHIN(cpu.to_host(alpha.cview()), ea, fh::test::times(m.alpha, 0.5));
    FH_REQUIRE_WITHIN(cpu.to_host(ds.cview()), ed, fh::test::times(m.d_scores, 0.5));
}

TEST_CASE("feature attention kernels and the attended network equal the CPU", "[gpu][attention]") {
    fh::ops::CpuDevice cpu;
    auto& gpu = fh::test::gpu_ops();
    const auto g = groups13();
    const int D = 13, G = g.count, x_rows = 1001, rows = 2002;
    const auto xh = random_floats(x_rows * D, 12), sh = random_floats(rows * G, 13), dh = random_floats(x_rows * D, 14);
    auto run = [&](fh::ops::Device& ops) {
        auto x = ops.from_host<float>(xh);
        auto scores = ops.from_host<float>(sh);
        auto out = ops.alloc<float>(rows * D), alpha = ops.alloc<float>(rows * G);
        fh::ops::run(
            ops, fh::ops::GroupAttentionForward{out.view(), alpha.view(), x.cview(), scores.cview(), g, rows, x_rows});
        auto dout = ops.from_host<float>(dh);
        auto ds = ops.alloc<float>(x_rows * G);
        fh::ops::run(ops, fh::ops::GroupAttentionBackward{ds.view(), dout.cview(), x.cview(),
                                                          alpha.cview().subview(0, x_rows * G), g, x_rows});
        return std::tuple{ops.to_host(out.cview()), ops.to_host(alpha.cview()), ops.to_host(ds.cview())};
    };
    const auto [oc, ac, dc] = run(cpu);
    const auto [og, ag, dg] = run(gpu);
    // The same row math: expf and FMA contraction differ (attention_model).
    const auto m = attention_model(xh, sh, dh, g, D, rows, x_rows);
    FH_REQUIRE_WITHIN(og, oc, m.out);
    FH_REQUIRE_WITHIN(ag, ac, m.alpha);
    FH_REQUIRE_WITHIN(dg, dc, m.d_scores);

    // The network: forward_batched of online and target, then the backward of network 0.
    const fh::trainers::QNetwork net(network(true));
    const std::size_t P = net.layout().total();
    const auto params_h = random_floats(2 * P, 15, -0.3f, 0.3f);
    const int B = 77;
    const auto xb = random_floats(B * 50, 16);
    const auto dhead = random_floats(static_cast<std::size_t>(B * net.output_width()), 17, -0.1f, 0.1f);
    auto run_net = [&](fh::ops::Device& ops) {
        auto params = ops.from_host<float>(params_h);
        auto X = ops.from_host<float>(xb);
        auto ws = net.make_workspace(ops, 2 * B);
        const auto heads = ops.to_host(net.forward_batched(ops, params.cview(), 2, X.cview(), B, ws));
        auto grads = ops.alloc<float>(P);
        fh::ops::run(ops, fh::ops::Fill{grads.view(), 0.0f});
        auto d = ops.from_host<float>(dhead);
        net.backward(ops, params.cview().subview(0, P), grads.view(), d.view(), B, ws);
        return std::pair{heads, ops.to_host(grads.cview())};
    };
    const auto [hc, gc] = run_net(cpu);
    const auto [hg, gg] = run_net(gpu);
    // A chain of reordered sums, norm-relative (fh::test::reordered_sums): the heads, 4 levels
    // (scores, two trunk layers, the head) of at most 50 terms; the gradients, those 4 and the
    // backward's 4 (the head, two trunk layers, the scores) with the weight gradients' sums over
    // B = 77 rows. The attention's expf adds (G + 4) u per level (attention_model), well inside.
    const auto th = fh::test::reordered_sums(4, 50, fh::test::max_abs(hc));
    FH_REQUIRE_CLOSE(hg, hc, th.atol, th.rtol);
    const auto tg = fh::test::reordered_sums(8, B, fh::test::max_abs(gc));
    FH_REQUIRE_CLOSE(gg, gc, tg.atol, tg.rtol);
}
