/// @file test_dt_ops.cpp
/// @brief The Decision Transformer ops: a gradient check in double of the token embeddings and
///        one transformer block (layer norm, causal attention with ALiBi, GELU MLP, residuals)
///        against central finite differences; the action loss's gradient; the windows of the
///        gather (episode starts, left-aligned, zero padding); the KV cache against the windowed
///        forward; [gpu] every dt kernel against its CPU twin on seeded random inputs.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <cstdint>
#include <vector>

#include "math/dt.h"
#include "nn/init.hpp"
#include "device/linear_reference.hpp"
#include "device/cpu_device.hpp"
#include "abi/dt_act.h"
#include "abi/dt_train.h"
#include "support/compare.hpp"
#include "support/error_model.hpp"
#include "support/gpu.hpp"
#include "trainers/dt/network.hpp"

using fh::test::random_floats;
using Vec = std::vector<double>;

namespace {

std::vector<double> random_doubles(std::size_t n, std::uint64_t seed, float lo = -1.f, float hi = 1.f) {
    const auto f = random_floats(n, seed, lo, hi);
    return Vec(f.begin(), f.end());
}

/// Embeddings + one pre-norm block in double, from the shared math: `steps` timesteps in
/// `batch` windows of K; out = the block's output rows. Parameters in one vector (offsets below).
struct Block {
    int batch, K, D, H, A;
    int tokens() const { return 3 * K; }
    int rows() const { return batch * tokens(); }
    // Parameter offsets.
    std::size_t rw, rb, table, g1, b1, qw, qb, pw, pb, g2, b2, f1w, f1b, f2w, f2b, total;
    Block(int batch_, int K_, int D_, int H_, int A_) : batch(batch_), K(K_), D(D_), H(H_), A(A_) {
        std::size_t o = 0;
        auto take = [&](std::size_t n) {
            const std::size_t at = o;
            o += n;
            return at;
        };
        const std::size_t d = static_cast<std::size_t>(D);
        rw = take(d);
        rb = take(d);
        table = take(static_cast<std::size_t>(A) * d);
        g1 = take(d);
        b1 = take(d);
        qw = take(3 * d * d);
        qb = take(3 * d);
        pw = take(d * d);
        pb = take(d);
        g2 = take(d);
        b2 = take(d);
        f1w = take(4 * d * d);
        f1b = take(4 * d);
        f2w = take(4 * d * d);
        f2b = take(d);
        total = o;
    }
    fh::dt::AttentionShape shape() const { return {batch, tokens(), D, H, K}; }

    struct Acts {
        Vec x, ln1, st1, qkv, P, attn, proj, h, ln2, st2, z, a, f2, out;
    };
    /// s_proj (batch K, D) stands for the state projection (a linear layer tested elsewhere).
    Acts forward(const Vec& p, const Vec& rtg, const Vec& s_proj, const std::vector<int>& actions) const {
        const std::size_t R = static_cast<std::size_t>(rows()), d = static_cast<std::size_t>(D);
        Acts c;
        c.x.assign(R * d, 0);
        for (std::size_t r = 0; r < R; ++r) {
            const std::size_t n = r / 3;
            fh::dt::embed_token(c.x.data() + r * d, static_cast<int>(r % 3), rtg[n], s_proj.data() + n * d, actions[n],
                                p.data() + rw, p.data() + rb, p.data() + table, D);
        }
        c.ln1.assign(R * d, 0);
        c.st1.assign(2 * R, 0);
        for (std::size_t r = 0; r < R; ++r)
            fh::dt::layer_norm_row<double>(static_cast<long long>(r), c.ln1.data(), c.st1.data(), c.x.data(),
                                           p.data() + g1, p.data() + b1, D);
        c.qkv.assign(3 * R * d, 0);
        fh::ops::ref::linear_forward(c.qkv.data(), c.ln1.data(), p.data() + qw, p.data() + qb, rows(), D, 3 * D,
                                     fh::core::Activation::none);
        c.P.assign(static_cast<std::size_t>(batch * H * tokens() * tokens()), 0);
        c.attn.assign(R * d, 0);
        for (int b = 0; b < batch; ++b)
            for (int h = 0; h < H; ++h)
                for (int i = 0; i < tokens(); ++i)
                    fh::dt::attention_query(b, h, i, c.attn.data(), c.P.data(), c.qkv.data(), shape());
        c.proj.assign(R * d, 0);
        fh::ops::ref::linear_forward(c.proj.data(), c.attn.data(), p.data() + pw, p.data() + pb, rows(), D, D,
                                     fh::core::Activation::none);
        c.h.resize(R * d);
        for (std::size_t i = 0; i < R * d; ++i) c.h[i] = c.x[i] + c.proj[i];
        c.ln2.assign(R * d, 0);
        c.st2.assign(2 * R, 0);
        for (std::size_t r = 0; r < R; ++r)
            fh::dt::layer_norm_row<double>(static_cast<long long>(r), c.ln2.data(), c.st2.data(), c.h.data(),
                                           p.data() + g2, p.data() + b2, D);
        c.z.assign(4 * R * d, 0);
        fh::ops::ref::linear_forward(c.z.data(), c.ln2.data(), p.data() + f1w, p.data() + f1b, rows(), D, 4 * D,
                                     fh::core::Activation::none);
        c.a.resize(c.z.size());
        for (std::size_t i = 0; i < c.z.size(); ++i) c.a[i] = fh::dt::gelu(c.z[i]);
        c.f2.assign(R * d, 0);
        fh::ops::ref::linear_forward(c.f2.data(), c.a.data(), p.data() + f2w, p.data() + f2b, rows(), 4 * D, D,
                                     fh::core::Activation::none);
        c.out.resize(R * d);
        for (std::size_t i = 0; i < R * d; ++i) c.out[i] = c.h[i] + c.f2[i];
        return c;
    }

    /// Gradients of L = sum(w * out) w.r.t. the parameters (dp) and s_proj (ds), from the math's backwards.
    void backward(const Vec& p, const Vec& rtg, const std::vector<int>& actions, const Acts& c, const Vec& w, Vec& dp,
                  Vec& ds) const {
        using fh::core::Activation;
        const std::size_t R = static_cast<std::size_t>(rows()), d = static_cast<std::size_t>(D);
        dp.assign(total, 0);
        Vec dres = w;  // dL/dout
        Vec dA(4 * R * d, 0), dZ(4 * R * d, 0), dtmp(R * d, 0);
        Vec dY = dres;
        fh::ops::ref::linear_backward(dA.data(), dp.data() + f2w, dp.data() + f2b, dY.data(), c.f2.data(), c.a.data(),
                                      p.data() + f2w, rows(), 4 * D, D, Activation::none, false);
        for (std::size_t i = 0; i < dZ.size(); ++i) dZ[i] = dA[i] * fh::dt::gelu_derivative(c.z[i]);
        fh::ops::ref::linear_backward(dtmp.data(), dp.data() + f1w, dp.data() + f1b, dZ.data(), c.z.data(),
                                      c.ln2.data(), p.data() + f1w, rows(), D, 4 * D, Activation::none, false);
        for (std::size_t r = 0; r < R; ++r)
            fh::dt::layer_norm_backward_row<double>(static_cast<long long>(r), dres.data(), dtmp.data(), c.h.data(),
                                                    c.st2.data(), p.data() + g2, D, 1);
        for (int col = 0; col < D; ++col)
            fh::dt::layer_norm_param_grad<double>(col, dp.data() + g2, dp.data() + b2, dtmp.data(), c.h.data(),
                                                  c.st2.data(), rows(), D);
        Vec dattn(R * d, 0);
        dY = dres;
        fh::ops::ref::linear_backward(dattn.data(), dp.data() + pw, dp.data() + pb, dY.data(), c.proj.data(),
                                      c.attn.data(), p.data() + pw, rows(), D, D, Activation::none, false);
        Vec dqkv(3 * R * d, 0), dS(c.P.size(), 0);
        for (int b = 0; b < batch; ++b)
            for (int h = 0; h < H; ++h)
                for (int i = 0; i < tokens(); ++i)
                    fh::dt::attention_backward_query(b, h, i, dqkv.data(), dS.data(), dattn.data(), c.qkv.data(),
                                                     c.P.data(), shape());
        for (int b = 0; b < batch; ++b)
            for (int h = 0; h < H; ++h)
                for (int j = 0; j < tokens(); ++j)
                    fh::dt::attention_backward_key(b, h, j, dqkv.data(), dS.data(), dattn.data(), c.qkv.data(),
                                                   c.P.data(), shape());
        fh::ops::ref::linear_backward(dtmp.data(), dp.data() + qw, dp.data() + qb, dqkv.data(), c.qkv.data(),
                                      c.ln1.data(), p.data() + qw, rows(), D, 3 * D, Activation::none, false);
        for (std::size_t r = 0; r < R; ++r)
            fh::dt::layer_norm_backward_row<double>(static_cast<long long>(r), dres.data(), dtmp.data(), c.x.data(),
                                                    c.st1.data(), p.data() + g1, D, 1);
        for (int col = 0; col < D; ++col)
            fh::dt::layer_norm_param_grad<double>(col, dp.data() + g1, dp.data() + b1, dtmp.data(), c.x.data(),
                                                  c.st1.data(), rows(), D);
        const long long steps = static_cast<long long>(batch) * K;
        ds.assign(static_cast<std::size_t>(steps) * d, 0);
        for (long long i = 0; i < fh::dt::embed_backward_elements(steps, D, A); ++i)
            fh::dt::embed_backward_element<double>(i, dp.data() + rw, dp.data() + rb, dp.data() + table, ds.data(),
                                                   dres.data(), rtg.data(), actions.data(), steps, D, A);
    }
};

/// The error bound of a central difference (up - down) / 2h in double: each side's rounding, up to
/// 100 ulp of its magnitude (a weighted sum of a few hundred outputs), over 2h, plus a relative
/// 1e-6 for the truncation (h^2 / 6 times the third derivative, ~1e-12 here) with room to spare.
double fd_bound(double up, double down, double h, double fd) {
    return 100 * std::numeric_limits<double>::epsilon() * (std::abs(up) + std::abs(down)) / (2 * h) +
           1e-6 * std::abs(fd);
}

double weighted_sum(const Vec& out, const Vec& w) {
    double s = 0;
    for (std::size_t i = 0; i < out.size(); ++i) s += out[i] * w[i];
    return s;
}

}  // namespace

TEST_CASE("dt: embeddings + one transformer block match central finite differences in double", "[dt][gradcheck]") {
    // Two windows of K = 3 timesteps (9 tokens), width 8 in 2 heads, 3 actions; span K, so every
    // earlier token of a window is visible (the ALiBi bias still differs per head and distance).
    const Block blk(2, 3, 8, 2, 3);
    Vec p = random_doubles(blk.total, 1, -0.5f, 0.5f);
    const Vec rtg = random_doubles(6, 2);
    const Vec s_proj = random_doubles(6 * 8, 3);
    const std::vector<int> actions{0, 2, 1, 1, 0, 2};
    const Vec w = random_doubles(static_cast<std::size_t>(blk.rows()) * 8, 4);
    const auto c = blk.forward(p, rtg, s_proj, actions);
    Vec dp, ds;
    blk.backward(p, rtg, actions, c, w, dp, ds);
    const double eps = 1e-6;
    double worst = 0;
    for (std::size_t i = 0; i < p.size(); ++i) {
        Vec hi = p, lo = p;
        hi[i] += eps;
        lo[i] -= eps;
        const double up = weighted_sum(blk.forward(hi, rtg, s_proj, actions).out, w),
                     down = weighted_sum(blk.forward(lo, rtg, s_proj, actions).out, w);
        const double fd = (up - down) / (2 * eps);
        const double err = std::abs(fd - dp[i]) / fd_bound(up, down, eps, fd);
        worst = std::max(worst, err);
        INFO("parameter " << i << ": analytic " << dp[i] << ", finite difference " << fd);
        REQUIRE(err <= 1);
    }
    for (std::size_t i = 0; i < s_proj.size(); ++i) {
        Vec hi = s_proj, lo = s_proj;
        hi[i] += eps;
        lo[i] -= eps;
        const double up = weighted_sum(blk.forward(p, rtg, hi, actions).out, w),
                     down = weighted_sum(blk.forward(p, rtg, lo, actions).out, w);
        const double fd = (up - down) / (2 * eps);
        INFO("state token input " << i << ": analytic " << ds[i] << ", finite difference " << fd);
        REQUIRE(std::abs(fd - ds[i]) <= fd_bound(up, down, eps, fd));
    }
    CHECK(worst <= 1);
}

TEST_CASE("dt: attention sees only the last span timesteps, itself included (ALiBi by distance)", "[dt]") {
    CHECK(fh::dt::first_visible(0, 3) == 0);
    CHECK(fh::dt::first_visible(8, 3) == 0);  // timestep 2 sees timesteps 0..2
    CHECK(fh::dt::first_visible(9, 3) == 3);  // timestep 3 sees 1..3
    CHECK(fh::dt::first_visible(11, 3) == 3);
    CHECK(fh::dt::first_visible(12, 1) == 12);  // span 1: its own timestep's tokens
    CHECK(fh::dt::alibi_slope(0, 1) == 1.0f / 256.0f);
    CHECK(fh::dt::alibi_slope(1, 2) == 1.0f / 256.0f);
    CHECK(fh::dt::alibi_slope(0, 2) == 1.0f / 16.0f);
    CHECK(fh::dt::cache_slots(20) == 63);
}

TEST_CASE("dt action loss: batch mean over real steps, gradient against finite differences", "[dt]") {
    fh::ops::CpuDevice ops;
    const int B = 3, K = 4, A = 5, T = 3 * K;
    auto logits = random_floats(static_cast<std::size_t>(B * T * A), 7, -2.f, 2.f);
    const std::vector<int> actions{1, 4, 0, 2, 3, 3, 0, 0, 2, 1, 1, 4};
    const std::vector<int> lengths{4, 1, 2};  // padded steps carry no loss
    auto run = [&](const std::vector<float>& z, std::vector<float>* grad) {
        auto bz = ops.from_host<float>(z);
        auto ba = ops.from_host<int>(actions), bl = ops.from_host<int>(lengths);
        auto loss = ops.alloc<float>(B), correct = ops.alloc<float>(B), d = ops.alloc<float>(z.size());
        fh::ops::run(ops, fh::ops::DtActionLoss{loss.view(), correct.view(), d.view(), bz.cview(), ba.cview(),
                                                bl.cview(), K, A});
        if (grad) *grad = ops.to_host(d.cview());
        double s = 0;
        for (float v : ops.to_host(loss.cview())) s += v;
        return s;
    };
    // By hand: the mean over the 7 real steps of -log softmax(z at the state token)[a].
    double want = 0;
    for (int b = 0; b < B; ++b)
        for (int k = 0; k < lengths[static_cast<std::size_t>(b)]; ++k) {
            const float* z = logits.data() + (b * T + 3 * k + 1) * A;
            double m = z[0], sum = 0;
            for (int c = 1; c < A; ++c) m = std::max(m, static_cast<double>(z[c]));
            for (int c = 0; c < A; ++c) sum += std::exp(z[c] - m);
            want += (m + std::log(sum) - z[actions[static_cast<std::size_t>(b * K + k)]]) / 7.0;
        }
    std::vector<float> grad;
    CHECK(run(logits, &grad) == Approx(want).epsilon(1e-5));
    for (std::size_t i = 0; i < logits.size(); ++i) {
        const int row = static_cast<int>(i) / A, b = row / T, tok = row % T;
        if (tok % 3 != 1 || tok / 3 >= lengths[static_cast<std::size_t>(b)]) {
            REQUIRE(grad[i] == 0.0f);
            continue;
        }
        auto hi = logits, lo = logits;
        hi[i] += 1e-2f;
        lo[i] -= 1e-2f;
        const double fd = (run(hi, nullptr) - run(lo, nullptr)) / 2e-2;
        REQUIRE(grad[i] == Approx(fd).margin(2e-4));
    }
}

TEST_CASE("dt gather: windows end at their step, start at max(episode start, end - K + 1), left-aligned", "[dt]") {
    fh::ops::CpuDevice ops;
    // 9 steps, episodes [0, 4), [4, 9); state of step n = (n, -n); rtg n / 10; action n % 3.
    std::vector<float> states, rtg;
    std::vector<int> actions, start{0, 0, 0, 0, 4, 4, 4, 4, 4};
    for (int n = 0; n < 9; ++n) {
        states.push_back(static_cast<float>(n));
        states.push_back(-static_cast<float>(n));
        rtg.push_back(static_cast<float>(n) / 10.0f);
        actions.push_back(n % 3);
    }
    auto bs = ops.from_host<float>(states), br = ops.from_host<float>(rtg);
    auto ba = ops.from_host<int>(actions), be = ops.from_host<int>(start);
    const fh::ops::DtDatasetViews d{bs.cview(), br.cview(), ba.cview(), be.cview(), 2};
    const int K = 3, B = 9;
    auto s = ops.alloc<float>(B * K * 2), r = ops.alloc<float>(B * K);
    auto a = ops.alloc<int>(B * K), len = ops.alloc<int>(B);
    fh::ops::run(ops,
                 fh::ops::DtGather{s.view(), r.view(), a.view(), len.view(), d, fh::dt::WindowParams{0, 0, 0, 0, K}});
    const auto hs = ops.to_host(s.cview()), hr = ops.to_host(r.cview());
    const auto ha = ops.to_host(a.cview()), hl = ops.to_host(len.cview());
    const std::vector<int> want_len{1, 2, 3, 3, 1, 2, 3, 3, 3};
    CHECK(hl == want_len);
    for (int b = 0; b < B; ++b) {
        const int first = b - want_len[static_cast<std::size_t>(b)] + 1;
        for (int k = 0; k < K; ++k) {
            const std::size_t row = static_cast<std::size_t>(b * K + k);
            const bool real = k < want_len[static_cast<std::size_t>(b)];
            CHECK(hs[row * 2] == (real ? static_cast<float>(first + k) : 0.0f));
            CHECK(hr[row] == (real ? static_cast<float>(first + k) / 10.0f : 0.0f));
            CHECK(ha[row] == (real ? (first + k) % 3 : 0));
        }
    }
    // Random windows: uniform end steps, the same draw on every call with the same counter.
    fh::ops::run(ops,
                 fh::ops::DtGather{s.view(), r.view(), a.view(), len.view(), d, fh::dt::WindowParams{3, 5, 0, 1, K}});
    const auto again = ops.to_host(s.cview());
    fh::ops::run(ops,
                 fh::ops::DtGather{s.view(), r.view(), a.view(), len.view(), d, fh::dt::WindowParams{3, 5, 0, 1, K}});
    CHECK(ops.to_host(s.cview()) == again);
    // Sequential windows past the dataset are refused.
    CHECK_THROWS_AS(fh::ops::run(ops, fh::ops::DtGather{s.view(), r.view(), a.view(), len.view(), d,
                                                        fh::dt::WindowParams{0, 0, 1, 0, K}}),
                    std::invalid_argument);
}

namespace {

/// A trajectory of `steps` observations for n = 1: random market features, the portfolio's
/// time-left feature 1 at step 0 only (a history starts there).
std::vector<float> trajectory(int steps, int state_dim, int market_dim, std::uint64_t seed) {
    auto s = random_floats(static_cast<std::size_t>(steps * state_dim), seed, -1.f, 1.f);
    for (int t = 0; t < steps; ++t)
        s[static_cast<std::size_t>(t * state_dim + market_dim + fh::dt::kTimeLeftFeature)] = t == 0 ? 1.0f : 0.5f;
    return s;
}

/// The network's initial parameters from `seed` plus uniform noise in +-0.3: a head that separates
/// the actions, layer norms off the identity.
fh::ops::Buffer<float> perturbed_params(fh::ops::Device& ops, const fh::trainers::DtNetwork& net, std::uint64_t seed) {
    auto params = fh::nn::alloc_zeroed(ops, net.layout());
    fh::nn::init_params(ops, params.view(), net.layout(), seed);
    auto host = ops.to_host(params.cview());
    const auto noise = random_floats(host.size(), seed + 1, -0.3f, 0.3f);
    for (std::size_t i = 0; i < host.size(); ++i) host[i] += noise[i];
    ops.upload<float>(params.view(), host);
    return params;
}

/// Acting step by step with the cache, and the windowed forward of each step's window (the last
/// min(t + 1, K) steps, with the actions taken), compared at the state token's logits.
double cache_against_windows(fh::ops::Device& ops, const fh::trainers::DtShape& shape, int steps) {
    const fh::trainers::DtNetwork net(shape);
    auto params = perturbed_params(ops, net, 9);
    const int S = shape.state_dim, K = shape.context, A = shape.num_actions;
    const auto states = trajectory(steps, S, S - 8, 11);
    const std::vector<float> target{0.7f};
    auto tgt = ops.from_host<float>(target);
    auto act_ws = net.make_act_workspace(ops, 1);
    auto act = ops.alloc<int>(1);
    auto ws = net.make_workspace(ops, 1);
    auto bs = ops.alloc<float>(static_cast<std::size_t>(K * S));
    auto br = ops.alloc<float>(static_cast<std::size_t>(K));
    auto ba = ops.alloc<int>(static_cast<std::size_t>(K));
    std::vector<int> taken;
    double worst = 0;
    for (int t = 0; t < steps; ++t) {
        auto st = ops.from_host<float>(std::vector<float>(states.begin() + t * S, states.begin() + (t + 1) * S));
        net.act(ops, params.cview(), tgt.cview(), act.view(), st.cview(), act_ws);
        const auto cached = ops.to_host(act_ws.logits.cview());  // rows a_{t-1}, R_t, s_t
        taken.push_back(ops.to_host(act.cview())[0]);
        // The window: steps first..t, padded to K.
        const int first = std::max(0, t - K + 1), len = t - first + 1;
        std::vector<float> ws_states(static_cast<std::size_t>(K * S), 0.0f), ws_rtg(static_cast<std::size_t>(K), 0.0f);
        std::vector<int> ws_actions(static_cast<std::size_t>(K), 0);
        for (int k = 0; k < len; ++k) {
            for (int c = 0; c < S; ++c)
                ws_states[static_cast<std::size_t>(k * S + c)] = states[static_cast<std::size_t>((first + k) * S + c)];
            ws_rtg[static_cast<std::size_t>(k)] = target[0];
            ws_actions[static_cast<std::size_t>(k)] = taken[static_cast<std::size_t>(first + k)];
        }
        ops.upload<float>(bs.view(), ws_states);
        ops.upload<float>(br.view(), ws_rtg);
        ops.upload<int>(ba.view(), ws_actions);
        const auto logits = ops.to_host(net.forward(ops, params.cview(), {bs.cview(), br.cview(), ba.cview()}, ws));
        const std::size_t row = static_cast<std::size_t>(3 * (len - 1) + 1);
        for (int c = 0; c < A; ++c) {
            const double err = std::abs(static_cast<double>(cached[static_cast<std::size_t>(2 * A + c)]) -
                                        logits[row * static_cast<std::size_t>(A) + static_cast<std::size_t>(c)]);
            worst = std::max(worst, err);
        }
        // The chosen action is the most likely one under the windowed forward too (no ties here).
        int best = 0;
        for (int c = 1; c < A; ++c)
            if (logits[row * static_cast<std::size_t>(A) + static_cast<std::size_t>(c)] >
                logits[row * static_cast<std::size_t>(A) + static_cast<std::size_t>(best)])
                best = c;
        CHECK(best == taken.back());
    }
    return worst;
}

}  // namespace

TEST_CASE("dt KV cache: acting step by step equals the windowed forward of the last K steps", "[dt][cache]") {
    fh::ops::CpuDevice ops;
    // One layer: the cache is exact at every step, beyond K too (the sliding window is the
    // training window). Float rounding: the same sums, in another order across rows only.
    fh::trainers::DtShape one{12, 3, 4, 1, 2, 8};
    CHECK(cache_against_windows(ops, one, 15) < 1e-5);
    // Two layers: exact while the history is shorter than K + 1 steps (the window is the whole
    // history); past that a cached key of layer 2 remembers its own window (docs/dt.md).
    fh::trainers::DtShape two{12, 3, 6, 2, 2, 8};
    CHECK(cache_against_windows(ops, two, 6) < 1e-5);
}

TEST_CASE("dt state input: the portfolio's running totals are left out, acting ignores them", "[dt]") {
    fh::ops::CpuDevice ops;
    const int S = 12, M = 4;  // 4 market features, 8 portfolio features
    const auto states = random_floats(3 * S, 31);
    auto in = ops.from_host<float>(states);
    auto out = ops.alloc<float>(states.size());
    fh::ops::run(ops, fh::ops::DtStateInput{out.view(), in.cview(), S, M});
    const auto h = ops.to_host(out.cview());
    for (std::size_t i = 0; i < h.size(); ++i) {
        const int c = static_cast<int>(i % S) - M;      // portfolio column, or negative for a market feature
        const bool total = c == 2 || c == 3 || c == 5;  // equity change, drawdown, fees paid
        CHECK(h[i] == (total ? 0.0f : states[i]));
    }
    // Acting on states that differ only there: the same logits.
    const fh::trainers::DtShape shape{S, 3, 4, 2, 2, 8};
    const fh::trainers::DtNetwork net(shape);
    auto params = fh::nn::alloc_zeroed(ops, net.layout());
    fh::nn::init_params(ops, params.view(), net.layout(), 3);
    auto tgt = ops.from_host<float>(std::vector<float>{0.5f});
    auto act = ops.alloc<int>(1);
    auto traj = trajectory(4, S, M, 33);
    std::vector<float> logits[2];
    for (int variant = 0; variant < 2; ++variant) {
        auto ws = net.make_act_workspace(ops, 1);
        for (int t = 0; t < 4; ++t) {
            std::vector<float> st(traj.begin() + t * S, traj.begin() + (t + 1) * S);
            if (variant == 1)
                for (int c : {2, 3, 5}) st[static_cast<std::size_t>(M + c)] = 100.0f + static_cast<float>(t);
            auto bs = ops.from_host<float>(st);
            net.act(ops, params.cview(), tgt.cview(), act.view(), bs.cview(), ws);
        }
        logits[variant] = ops.to_host(ws.logits.cview());
    }
    CHECK(logits[0] == logits[1]);
}

TEST_CASE("dt KV cache: a history starts over where the time-left feature is 1", "[dt][cache]") {
    fh::ops::CpuDevice ops;
    const fh::trainers::DtShape shape{12, 3, 4, 2, 2, 8};
    const fh::trainers::DtNetwork net(shape);
    auto params = fh::nn::alloc_zeroed(ops, net.layout());
    fh::nn::init_params(ops, params.view(), net.layout(), 3);
    auto tgt = ops.from_host<float>(std::vector<float>{0.5f});
    auto ws = net.make_act_workspace(ops, 2);
    auto act = ops.alloc<int>(2);
    // Environment 0 acts 5 steps then starts over; environment 1 starts fresh with the same states.
    const auto traj = trajectory(5, 12, 4, 21);
    for (int t = 0; t < 5; ++t) {
        std::vector<float> st(traj.begin() + t * 12, traj.begin() + (t + 1) * 12);
        st.insert(st.end(), traj.begin(), traj.begin() + 12);  // env 1: step 0 every time
        auto bs = ops.from_host<float>(st);
        net.act(ops, params.cview(), tgt.cview(), act.view(), bs.cview(), ws);
    }
    std::vector<float> both(traj.begin(), traj.begin() + 12);
    both.insert(both.end(), traj.begin(), traj.begin() + 12);
    auto bs = ops.from_host<float>(both);
    net.act(ops, params.cview(), tgt.cview(), act.view(), bs.cview(), ws);
    const auto l = ops.to_host(ws.logits.cview());
    const auto h = ops.to_host(ws.history.cview());
    CHECK(h[0].step == 1);
    CHECK(h[1].step == 1);
    for (int c = 0; c < 3; ++c) CHECK(l[static_cast<std::size_t>(2 * 3 + c)] == l[static_cast<std::size_t>(5 * 3 + c)]);
}

// ---- GPU twins -----------------------------------------------------------------------------
// Bounds: the kernels run the CPU twins' math, some sums in another order (warps, trees);
// differences come from the order, FMA contraction (nvcc's default for these modules) and
// expf / erff / rsqrtf ulps. Each bound is fh::test::chain_bounds (norm-relative, per row where
// the rows are the unit): the nested reductions on the path with their longest sum, and the
// transcendental functions on it.

TEST_CASE("dt kernels equal their CPU twins", "[gpu][dt]") {
    fh::ops::CpuDevice cpu;
    auto& gpu = fh::test::gpu_ops();
    for (const auto& s : {fh::dt::AttentionShape{3, 12, 8, 2, 4}, fh::dt::AttentionShape{5, 60, 64, 4, 20},
                          fh::dt::AttentionShape{2, 30, 32, 1, 3}}) {
        INFO("batch " << s.batch << " tokens " << s.tokens << " dim " << s.dim << " heads " << s.heads);
        const std::size_t R = static_cast<std::size_t>(s.batch) * s.tokens, D = static_cast<std::size_t>(s.dim);
        const std::size_t P = static_cast<std::size_t>(s.batch) * s.heads * s.tokens * s.tokens;
        const auto qkv = random_floats(3 * R * D, 1);
        const auto d_out = random_floats(R * D, 2);
        struct Out {
            std::vector<float> out, P, dqkv;
        };
        auto attention = [&](fh::ops::Device& o) {
            auto bq = o.from_host<float>(qkv), bd = o.from_host<float>(d_out);
            auto out = o.alloc<float>(R * D), bp = o.alloc<float>(P), dq = o.alloc<float>(3 * R * D),
                 ds = o.alloc<float>(P);
            fh::ops::run(o, fh::ops::DtAttention{out.view(), bp.view(), bq.cview(), s});
            fh::ops::run(o, fh::ops::DtAttentionBackward{dq.view(), ds.view(), bd.cview(), bq.cview(), bp.cview(), s});
            return Out{o.to_host(out.cview()), o.to_host(bp.cview()), o.to_host(dq.cview())};
        };
        const auto c = attention(cpu), g = attention(gpu);
        // out = softmax(Q K^T / sqrt(dh)) V: 3 levels (the dot of dh terms, the softmax's sum and
        // P V over the tokens) and expf, per row of D; P: the first two; dqkv: those and the
        // backward's three (dP, the softmax's backward sum, dQ / dK / dV).
        const int dh = s.dim / s.heads, terms = std::max(s.tokens, dh);
        FH_REQUIRE_WITHIN(g.out, c.out, fh::test::chain_bounds(c.out, D, 3, terms, 1));
        FH_REQUIRE_WITHIN(g.P, c.P, fh::test::chain_bounds(c.P, static_cast<std::size_t>(s.tokens), 2, terms, 1));
        FH_REQUIRE_WITHIN(g.dqkv, c.dqkv, fh::test::chain_bounds(c.dqkv, D, 5, terms, 1));

        // Layer norm and GELU on the token rows.
        const auto x = random_floats(R * D, 3), dy = random_floats(R * D, 4);
        const auto gain = random_floats(D, 5, -0.5f, 0.5f), bias = random_floats(D, 6);
        auto norm = [&](fh::ops::Device& o) {
            auto bx = o.from_host<float>(x), bdy = o.from_host<float>(dy), bg = o.from_host<float>(gain),
                 bb = o.from_host<float>(bias);
            auto y = o.alloc<float>(R * D), st = o.alloc<float>(2 * R), dx = o.from_host<float>(dy);
            auto dg = o.alloc<float>(D), db = o.alloc<float>(D), gy = o.alloc<float>(R * D), gz = o.alloc<float>(R * D);
            fh::ops::run(o, fh::ops::DtLayerNorm{y.view(), st.view(), bx.cview(), bg.cview(), bb.cview(), s.dim});
            fh::ops::run(o, fh::ops::DtLayerNormBackward{dx.view(), dg.view(), db.view(), bdy.cview(), bx.cview(),
                                                         st.cview(), bg.cview(), s.dim, true});
            fh::ops::run(o, fh::ops::DtGelu{gy.view(), bx.cview()});
            fh::ops::run(o, fh::ops::DtGeluBackward{gz.view(), bdy.cview(), bx.cview()});
            return std::vector<std::vector<float>>{o.to_host(y.cview()),  o.to_host(dx.cview()), o.to_host(dg.cview()),
                                                   o.to_host(db.cview()), o.to_host(gy.cview()), o.to_host(gz.cview())};
        };
        const auto nc = norm(cpu), ng = norm(gpu);
        // Layer norm, per row of D: y, 2 levels (mean, variance) of D terms and the rsqrt; dx, 2
        // more (its two sums over the row); the gain's gradient, one more of R rows; the bias's,
        // a reordered sum of R terms per column from |dy|. GELU: erff and a few roundings
        // (one level of 2 terms); its backward, erff and expf. GELU's 1 + erf cancels for
        // negative x: norm-relative over the tensor.
        FH_REQUIRE_WITHIN(ng[0], nc[0], fh::test::chain_bounds(nc[0], D, 2, static_cast<double>(D), 1));
        FH_REQUIRE_WITHIN(ng[1], nc[1], fh::test::chain_bounds(nc[1], D, 4, static_cast<double>(D), 1));
        FH_REQUIRE_WITHIN(ng[2], nc[2], fh::test::chain_bounds(nc[2], D, 3, static_cast<double>(std::max(R, D)), 1));
        std::vector<double> dy_abs(D, 0.0);
        for (std::size_t i = 0; i < R * D; ++i) dy_abs[i % D] += std::abs(static_cast<double>(dy[i]));
        FH_REQUIRE_WITHIN(ng[3], nc[3], fh::test::reordered_sum(dy_abs, static_cast<double>(R)));
        FH_REQUIRE_WITHIN(ng[4], nc[4], fh::test::chain_bounds(nc[4], nc[4].size(), 1, 2, 1));
        FH_REQUIRE_WITHIN(ng[5], nc[5], fh::test::chain_bounds(nc[5], nc[5].size(), 1, 2, 2));

        // Embeddings and their backward (steps = R / 3).
        const std::size_t steps = R / 3;
        const int A = 5;
        const auto rtg = random_floats(steps, 7), sp = random_floats(steps * D, 8), rw = random_floats(D, 9);
        const auto rb = random_floats(D, 10), table = random_floats(static_cast<std::size_t>(A) * D, 11);
        std::vector<int> acts(steps);
        for (std::size_t i = 0; i < steps; ++i) acts[i] = static_cast<int>((i * 7) % A);
        const auto dx = random_floats(R * D, 12);
        auto embed = [&](fh::ops::Device& o) {
            auto brtg = o.from_host<float>(rtg), bsp = o.from_host<float>(sp), brw = o.from_host<float>(rw);
            auto brb = o.from_host<float>(rb), bt = o.from_host<float>(table), bdx = o.from_host<float>(dx);
            auto ba = o.from_host<int>(acts);
            auto bx = o.alloc<float>(R * D), dw = o.alloc<float>(D), dbb = o.alloc<float>(D);
            auto dt = o.alloc<float>(static_cast<std::size_t>(A) * D), dsp = o.alloc<float>(steps * D);
            const fh::ops::DtEmbedViews w{brw.cview(), brb.cview(), bt.cview(), s.dim, A};
            fh::ops::run(o, fh::ops::DtEmbed{bx.view(), brtg.cview(), bsp.cview(), ba.cview(), w});
            fh::ops::run(o, fh::ops::DtEmbedBackward{dw.view(), dbb.view(), dt.view(), dsp.view(), bdx.cview(),
                                                     brtg.cview(), ba.cview(), s.dim, A});
            return std::vector<std::vector<float>>{o.to_host(bx.cview()), o.to_host(dw.cview()), o.to_host(dbb.cview()),
                                                   o.to_host(dt.cview()), o.to_host(dsp.cview())};
        };
        const auto ec = embed(cpu), eg = embed(gpu);
        // The state input (exact): rows of 20 floats, 12 market features.
        auto state_input = [&](fh::ops::Device& o) {
            auto bx = o.from_host<float>(x);
            auto y = o.alloc<float>(x.size());
            fh::ops::run(o, fh::ops::DtStateInput{y.view(), bx.cview(), 20, 12});
            return o.to_host(y.cview());
        };
        if (x.size() % 20 == 0) CHECK(state_input(gpu) == state_input(cpu));
        // The embedding: rtg w + b per element (one level of 2 terms: fused or not), per row of
        // D; its backward: sums over the steps (one level of `steps` terms), over each tensor.
        FH_REQUIRE_WITHIN(eg[0], ec[0], fh::test::chain_bounds(ec[0], D, 1, 2, 0));
        for (std::size_t k = 1; k < ec.size(); ++k)
            FH_REQUIRE_WITHIN(eg[k], ec[k],
                              fh::test::chain_bounds(ec[k], ec[k].size(), 1, static_cast<double>(steps), 0));
    }
}

TEST_CASE("dt training and acting kernels equal their CPU twins", "[gpu][dt]") {
    fh::ops::CpuDevice cpu;
    auto& gpu = fh::test::gpu_ops();
    // Gather (exact) and the action loss.
    const int steps = 500, S = 12, K = 20, B = 33, A = 7;
    const auto states = random_floats(static_cast<std::size_t>(steps * S), 1), rtg = random_floats(steps, 2);
    std::vector<int> actions(steps), start(steps);
    for (int n = 0; n < steps; ++n) {
        actions[static_cast<std::size_t>(n)] = (n * 5) % A;
        start[static_cast<std::size_t>(n)] = n / 37 * 37;
    }
    auto windows = [&](fh::ops::Device& o, long long update) {
        auto bs = o.from_host<float>(states), br = o.from_host<float>(rtg);
        auto ba = o.from_host<int>(actions), be = o.from_host<int>(start);
        auto s = o.alloc<float>(static_cast<std::size_t>(B * K * S)), r = o.alloc<float>(B * K);
        auto a = o.alloc<int>(B * K), l = o.alloc<int>(B);
        fh::ops::run(o, fh::ops::DtGather{s.view(),
                                          r.view(),
                                          a.view(),
                                          l.view(),
                                          {bs.cview(), br.cview(), ba.cview(), be.cview(), S},
                                          fh::dt::WindowParams{4, update, 0, 1, K}});
        const auto logits = random_floats(static_cast<std::size_t>(B * 3 * K * A), 3);
        auto bl = o.from_host<float>(logits);
        auto loss = o.alloc<float>(B), corr = o.alloc<float>(B), d = o.alloc<float>(logits.size()),
             lr = o.alloc<float>(1);
        fh::ops::run(o,
                     fh::ops::DtActionLoss{loss.view(), corr.view(), d.view(), bl.cview(), a.cview(), l.cview(), K, A});
        fh::ops::run(o, fh::ops::DtLearningRate{lr.view(), 3e-4, 100, update});
        return std::vector<std::vector<float>>{o.to_host(s.cview()),    o.to_host(r.cview()), o.to_host(loss.cview()),
                                               o.to_host(corr.cview()), o.to_host(d.cview()), o.to_host(lr.cview())};
    };
    for (long long u : {1LL, 2LL, 150LL}) {
        const auto c = windows(cpu, u), g = windows(gpu, u);
        CHECK(g[0] == c[0]);
        CHECK(g[1] == c[1]);
        // The action loss per sample: a log-sum-exp over the A actions, then the mean over the K
        // tokens (2 levels, expf and logf); its gradient, the softmax (1 level of A terms, expf
        // and logf), norm-relative over each tensor (pi - 1 cancels).
        FH_REQUIRE_WITHIN(g[2], c[2], fh::test::chain_bounds(c[2], c[2].size(), 2, std::max(A, K), 2));
        CHECK(g[3] == c[3]);
        FH_REQUIRE_WITHIN(g[4], c[4], fh::test::chain_bounds(c[4], c[4].size(), 1, A, 2));
        CHECK(g[5] == c[5]);
    }
    // Acting: the network with its cache for 9 environments over 30 steps (past K = 6), histories
    // restarting at different steps; the same actions, logits close (cuBLAS GEMMs vs loops).
    const fh::trainers::DtShape shape{20, 5, 6, 2, 4, 32};
    const fh::trainers::DtNetwork net(shape);
    auto run = [&](fh::ops::Device& o) {
        auto params = perturbed_params(o, net, 5);  // spread logits: no near-ties for rounding to flip
        auto tgt = o.from_host<float>(std::vector<float>{1.2f});
        auto ws = net.make_act_workspace(o, 9);
        auto act = o.alloc<int>(9);
        std::vector<int> all;
        std::vector<float> logits;
        for (int t = 0; t < 30; ++t) {
            auto st = random_floats(9 * 20, 100 + static_cast<std::uint64_t>(t));
            for (int e = 0; e < 9; ++e)
                st[static_cast<std::size_t>(e * 20 + 12 + fh::dt::kTimeLeftFeature)] = (t % (e + 3) == 0) ? 1.0f : 0.3f;
            auto bs = o.from_host<float>(st);
            net.act(o, params.cview(), tgt.cview(), act.view(), bs.cview(), ws);
            for (int a : o.to_host(act.cview())) all.push_back(a);
            const auto l = o.to_host(ws.logits.cview());
            logits.insert(logits.end(), l.begin(), l.end());
        }
        return std::pair{all, logits};
    };
    const auto c = run(cpu), g = run(gpu);
    // The whole network (fh::test::chain_bounds over the logits): the embedding (1 level), each of
    // the 2 layers 11 (two layer norms of 2, the QKV, attention's 3, the output projection, the
    // MLP's 2), the final norm's 2 and the head: 26 levels of up to 4 x 32 = 128 terms; expf,
    // erff and two rsqrtf a layer and the final rsqrtf: 9 transcendentals.
    FH_REQUIRE_WITHIN(g.second, c.second, fh::test::chain_bounds(c.second, c.second.size(), 26, 128, 9));
    CHECK(g.first == c.first);
}
