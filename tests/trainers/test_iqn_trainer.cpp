/// @file test_iqn_trainer.cpp
/// @brief The DQN trainer's IQN head (dqn.head = "iqn", docs/dqn.md): a gradient check of the
///        whole IQN loss w.r.t. the network's parameters in double (trunk, fraction embedding,
///        Hadamard product, head layer, quantile Huber loss, CQL), QNetwork's float backward on
///        the CPU against it (the layout's slices and the wiring), the trainer's variants and
///        determinism on the CPU, and the executable: training dqn-smoketest with head = iqn to
///        the end, eval reproducing its test metrics, `check` listing the keys.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numbers>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "config/profile.hpp"
#include "data/load.hpp"
#include "env/vec_env.hpp"
#include "io/safetensors.hpp"
#include "support/shell.hpp"
#include "math/iqn.h"
#include "nn/init.hpp"
#include "device/linear_reference.hpp"
#include "device/cpu_device.hpp"
#include "abi/dqn_iqn.h"
#include "support/trainer_support.hpp"
#include "trainers/dqn/engine.hpp"
#include "trainers/dqn/network.hpp"
#include "trainers/setup.hpp"
#include "abi/core_vector.h"

using namespace fh;
using fh::core::Activation;
namespace fs = std::filesystem;

namespace {

// A tiny IQN network: state D -> hidden H (ReLU) = phi; C cosine features -> H (ReLU) = psi;
// phi * psi -> the scalar head's W outputs per fraction.
constexpr int D = 4, H = 6, C = 5, A = 3, N = 3, B = 4;

struct Net {  // offsets into one flat double parameter vector
    static constexpr int w1 = 0, b1 = w1 + H * D, we = b1 + H, be = we + H * C, wh = be + H;
    int bh = 0, total = 0;
    explicit Net(int W) : bh(wh + W * H), total(bh + W) {}
};

struct Batch {
    std::vector<double> s, taus, features, sel, tgt, returns, discounts;  // sel, tgt: (B * N, W) fixed rows
    std::vector<int> actions;
};

/// The batch-mean loss (quantile Huber + cql * CQL) of the network `p`; dL/dp into grad when given.
double loss_and_grad(const std::vector<double>& p, const Batch& x, const dqn::HeadParams& h, double cql,
                     std::vector<double>* grad) {
    using ops::ref::linear_backward;
    using ops::ref::linear_forward;
    const int W = dqn::head_width(h), R = B * N;
    const Net o(W);
    std::vector<double> phi(B * H), psi(R * H), xh(R * H), rows(R * W), d_rows(R * W);
    linear_forward(phi.data(), x.s.data(), &p[Net::w1], &p[Net::b1], B, D, H, Activation::relu);
    linear_forward(psi.data(), x.features.data(), &p[Net::we], &p[Net::be], R, C, H, Activation::relu);
    for (int r = 0; r < R; ++r)
        for (int k = 0; k < H; ++k) xh[r * H + k] = phi[(r / N) * H + k] * psi[r * H + k];
    linear_forward(rows.data(), xh.data(), &p[Net::wh], &p[o.bh], R, H, W, Activation::none);
    double loss = 0;
    std::vector<double> scratch(static_cast<std::size_t>(iqn::loss_scratch(h, N))), st(dqn::kSampleStats);
    for (int b = 0; b < B; ++b) {
        iqn::sample_loss<double>(&rows[b * N * W], &x.sel[b * N * W], &x.tgt[b * N * W], &x.taus[b * N], N,
                                 x.actions[b], x.returns[b], x.discounts[b], 1.0 / B, cql, h, &d_rows[b * N * W],
                                 scratch.data(), st.data());
        loss += (st[dqn::kStatMse] + cql * st[dqn::kStatCql]) / B;
    }
    if (grad) {
        auto& g = *grad;
        g.assign(static_cast<std::size_t>(o.total), 0.0);
        std::vector<double> dx(R * H), d_psi(R * H), d_phi(B * H, 0.0);
        linear_backward(dx.data(), &g[Net::wh], &g[o.bh], d_rows.data(), rows.data(), xh.data(), &p[Net::wh], R, H, W,
                        Activation::none, false);
        for (int r = 0; r < R; ++r)
            for (int k = 0; k < H; ++k) {
                d_psi[r * H + k] = dx[r * H + k] * phi[(r / N) * H + k];
                d_phi[(r / N) * H + k] += dx[r * H + k] * psi[r * H + k];
            }
        linear_backward<double>(nullptr, &g[Net::we], &g[Net::be], d_psi.data(), psi.data(), x.features.data(),
                                &p[Net::we], R, C, H, Activation::relu, false);
        linear_backward<double>(nullptr, &g[Net::w1], &g[Net::b1], d_phi.data(), phi.data(), x.s.data(), &p[Net::w1], B,
                                D, H, Activation::relu, false);
    }
    return loss;
}

Batch make_batch(const dqn::HeadParams& h, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> n01(0.0, 1.0);
    std::uniform_real_distribution<double> u01(0.02, 0.98);
    const int W = dqn::head_width(h);
    const auto f = [&] { return static_cast<double>(static_cast<float>(n01(rng))); };  // float inputs, exactly
    Batch x;
    for (int i = 0; i < B * D; ++i) x.s.push_back(f());
    for (int r = 0; r < B * N; ++r) {
        x.taus.push_back(u01(rng));
        for (int i = 0; i < C; ++i) x.features.push_back(std::cos(std::numbers::pi * i * x.taus.back()));
        for (int w = 0; w < W; ++w) x.sel.push_back(f()), x.tgt.push_back(f());
    }
    for (int b = 0; b < B; ++b) {
        x.actions.push_back((b + 1) % A);
        x.returns.push_back(f());
        x.discounts.push_back(b == 0 ? 0.0 : 0.9);
    }
    return x;
}

config::Profile profile(const std::vector<std::string>& overrides) {
    return config::resolve_profile_text(R"(
[run]
trainer = "dqn"
seed = 7
total_steps = 600
log_interval = 600
[data]
synthetic_bars = 3000
cache_dir = ""
[experience]
gpu_n_episodes = 4
gpu_timesteps_per_episode = 50
[replay_buffer]
buffer_size = 256
min_replay_size = 64
batch_size = 32
[dqn]
hidden = [32, 32]
head = "iqn"
iqn_quantiles = 4
iqn_act_quantiles = 8
iqn_embedding = 16
)",
                                        "iqn-profile", overrides);
}

using Result = fh::test::ShellResult;
using fh::test::slurp;
Result sh(const std::string& script, const fs::path& dir) {
    return fh::test::run_shell(script, dir);
}

}  // namespace

TEST_CASE("IQN loss gradient w.r.t. every network parameter matches central finite differences (double)",
          "[trainers][dqn][iqn][gradcheck]") {
    for (int dueling : {1, 0})
        for (double cql : {0.0, 0.8}) {
            const dqn::HeadParams h{A, 51, dueling, -3.f, 3.f, 1};
            INFO("dueling " << dueling << " cql " << cql);
            const Net o(dqn::head_width(h));
            std::mt19937_64 rng(77);
            std::normal_distribution<double> n01(0.0, 1.0);
            std::vector<double> p(static_cast<std::size_t>(o.total));
            for (auto& w : p) w = 0.5 * n01(rng);
            const Batch x = make_batch(h, 2025);
            std::vector<double> grad;
            loss_and_grad(p, x, h, cql, &grad);
            int nonzero = 0;
            for (int i = 0; i < o.total; ++i) {
                const double eps = 1e-6;
                auto plus = p, minus = p;
                plus[i] += eps;
                minus[i] -= eps;
                const double numeric =
                    (loss_and_grad(plus, x, h, cql, nullptr) - loss_and_grad(minus, x, h, cql, nullptr)) / (2 * eps);
                INFO("parameter " << i << " analytic " << grad[i] << " numeric " << numeric);
                REQUIRE(std::abs(numeric - grad[i]) <= 1e-7 + 1e-5 * std::abs(numeric));
                nonzero += std::abs(grad[i]) > 1e-6;
            }
            CHECK(nonzero > o.total / 2);  // the check covers the trunk, the embedding and the head
        }
}

TEST_CASE("QNetwork's IQN forward and backward on the CPU equal the double gradient (layout and wiring)",
          "[trainers][dqn][iqn][gradcheck]") {
    ops::CpuDevice ops;
    trainers::QNetworkConfig cfg;
    cfg.state_dim = D;
    cfg.hidden = {H};
    cfg.head = dqn::HeadParams{A, 51, 1, -3.f, 3.f, 1};
    cfg.iqn = iqn::Params{N, 7, C};
    const trainers::QNetwork net(cfg);
    const auto& L = net.layout();
    const int W = net.output_width();
    const Net o(W);
    auto params = ops.alloc<float>(L.total());
    fh::ops::run(ops, fh::ops::Fill{params.view(), 0.f});
    nn::init_params(ops, params.view(), L, 11);
    const auto ph = ops.to_host(params.cview());
    // The double network from the layout's slices (which also pins their names and order).
    std::vector<double> p(static_cast<std::size_t>(o.total));
    auto copy = [&](const char* name, int at, int size) {
        const auto& s = L.find(name);
        REQUIRE(s.size == static_cast<std::size_t>(size));
        for (int i = 0; i < size; ++i) p[static_cast<std::size_t>(at + i)] = ph[s.offset + static_cast<std::size_t>(i)];
    };
    copy("q.l0.w", Net::w1, H * D);
    copy("q.l0.b", Net::b1, H);
    copy("iqn_embed.l0.w", Net::we, H * C);
    copy("iqn_embed.l0.b", Net::be, H);
    copy("iqn_head.l0.w", Net::wh, W * H);
    copy("iqn_head.l0.b", o.bh, W);
    for (auto& v : p) v *= 3;  // larger weights than init's: every path matters at float precision
    std::vector<float> pf(ph.size(), 0.f);
    for (std::size_t i = 0; i < pf.size(); ++i) pf[i] = 3 * ph[i];
    ops.upload<float>(params.view(), pf);

    Batch x = make_batch(cfg.head, 99);
    // The fractions and features as the update draws them (Philox), in float.
    auto feat = ops.alloc<float>(static_cast<std::size_t>(B * N * C));
    auto taus = ops.alloc<float>(static_cast<std::size_t>(B * N));
    dqn::AgentParams ag{};
    ag.seed = 3;
    ag.cql_alpha = 0.4f;
    auto agent = ops.from_host<dqn::AgentParams>(std::vector<dqn::AgentParams>{ag});
    auto counters = ops.from_host<dqn::Counters>(std::vector<dqn::Counters>{{0, 5, 0}});
    ops::run(ops, ops::IqnTaus{feat.view(), taus.view(), agent.cview(), counters.cview(), B, N, C});
    const auto tf = ops.to_host(taus.cview()), ff = ops.to_host(feat.cview());
    x.taus.assign(tf.begin(), tf.end());
    x.features.assign(ff.begin(), ff.end());
    std::vector<double> grad;
    const double loss = loss_and_grad(p, x, cfg.head, 0.4, &grad);

    auto ws = net.make_workspace(ops, B, N);
    auto X = ops.from_host<float>(std::vector<float>(x.s.begin(), x.s.end()));
    const auto rows = net.forward_quantiles(ops, params.cview(), 1, X.cview(), B, feat.cview(), N, ws);
    REQUIRE(rows.size() == static_cast<std::size_t>(B * N * W));
    auto sel = ops.from_host<float>(std::vector<float>(x.sel.begin(), x.sel.end()));
    auto tgt = ops.from_host<float>(std::vector<float>(x.tgt.begin(), x.tgt.end()));
    auto act = ops.from_host<int>(x.actions);
    auto ret = ops.from_host<float>(std::vector<float>(x.returns.begin(), x.returns.end()));
    auto disc = ops.from_host<float>(std::vector<float>(x.discounts.begin(), x.discounts.end()));
    auto d_head = ops.alloc<float>(rows.size());
    auto stats = ops.alloc<float>(static_cast<std::size_t>(B * dqn::kSampleStats));
    ops::run(ops, ops::IqnLoss{d_head.view(), stats.view(), rows, sel.cview(), tgt.cview(), taus.cview(), act.cview(),
                               ret.cview(), disc.cview(), agent.cview(), cfg.head, N, B});
    auto grads = ops.alloc<float>(L.total());
    fh::ops::run(ops, fh::ops::Fill{grads.view(), 0.f});
    net.backward(ops, params.cview(), grads.view(), d_head.view(), B, ws);
    const auto st = ops.to_host(stats.cview());
    double loss_f = 0;
    for (int b = 0; b < B; ++b)
        loss_f += (st[static_cast<std::size_t>(dqn::kStatMse * B + b)] +
                   0.4 * st[static_cast<std::size_t>(dqn::kStatCql * B + b)]) /
                  B;
    CHECK(loss_f == Approx(loss).epsilon(1e-4));
    const auto gh = ops.to_host(grads.cview());
    double max_abs = 0;
    for (double g : grad) max_abs = std::max(max_abs, std::abs(g));
    REQUIRE(max_abs > 1e-3);
    auto check = [&](const char* name, int at) {
        const auto& s = L.find(name);
        for (std::size_t i = 0; i < s.size; ++i) {
            INFO(name << "[" << i << "]");
            // d/dp of the float network at 3 * init equals the double gradient; p_double = 3 * p_float.
            REQUIRE(gh[s.offset + i] == Approx(grad[static_cast<std::size_t>(at) + i]).margin(2e-4 * max_abs));
        }
    };
    check("q.l0.w", Net::w1);
    check("q.l0.b", Net::b1);
    check("iqn_embed.l0.w", Net::we);
    check("iqn_embed.l0.b", Net::be);
    check("iqn_head.l0.w", Net::wh);
    check("iqn_head.l0.b", o.bh);

    // Acting: forward's row is the mean over acting's K midpoints of the head rows.
    auto ws_act = net.make_workspace(ops, B);
    const auto mean = ops.to_host(net.forward(ops, params.cview(), X.cview(), B, ws_act));
    auto mid_f = ops.alloc<float>(static_cast<std::size_t>(7 * C));
    auto mid_t = ops.alloc<float>(7);
    ops::run(ops, ops::IqnTaus{mid_f.view(), mid_t.view(), {}, {}, 1, 7, C});
    std::vector<float> feat_k;
    for (int b = 0; b < B; ++b) {
        const auto m = ops.to_host(mid_f.cview());
        feat_k.insert(feat_k.end(), m.begin(), m.end());
    }
    auto fk = ops.from_host<float>(feat_k);
    auto ws_k = net.make_workspace(ops, B, 7);
    const auto rows_k = ops.to_host(net.forward_quantiles(ops, params.cview(), 1, X.cview(), B, fk.cview(), 7, ws_k));
    for (int b = 0; b < B; ++b)
        for (int w = 0; w < W; ++w) {
            double s = 0;
            for (int k = 0; k < 7; ++k) s += rows_k[static_cast<std::size_t>((b * 7 + k) * W + w)];
            CHECK(mean[static_cast<std::size_t>(b * W + w)] == Approx(s / 7).margin(1e-5));
        }
}

TEST_CASE("DQN with the IQN head trains on the CPU: variants, losses, determinism", "[trainers][dqn][iqn]") {
    ops::CpuDevice ops;
    std::vector<trainers::LogLine> first;
    for (const std::vector<std::string>& variant :
         std::vector<std::vector<std::string>>{{},
                                               {"dqn.dueling=false"},
                                               {"dqn.double_dqn=false"},
                                               {"dqn.cql_alpha=0.5"},
                                               {"training.tau=0"},
                                               {"experience.n_step=5"},
                                               {"dqn.attention=true"},
                                               {"dqn.curiosity=true", "dqn.cql_alpha=0.2"},
                                               {"dqn.iqn_quantiles=1", "dqn.iqn_act_quantiles=1"},
                                               {}}) {
        std::string name;
        for (const auto& v : variant) name += v + " ";
        INFO(name);
        const auto p = profile(variant);
        const auto market = data::load_market(trainers::data_options(p));
        env::DeviceMarket dm(ops, market);
        auto trainer_engine = trainers::make_dqn_trainer(ops, p, dm);
        auto& trainer = *trainer_engine;
        const auto log = test::run_training(trainer, p);
        REQUIRE(trainer.env_steps() == 600);
        CHECK(trainer.updates() > 0);
        const auto& m = log.back();
        CHECK(std::isfinite(test::metric(m, "losses/loss")));
        CHECK(test::metric(m, "losses/loss") > 0);
        CHECK(test::metric(m, "charts/skipped_updates") == 0);
        CHECK(test::metric(m, "losses/c51") == 0);  // no distribution over atoms
        CHECK(test::metric(m, "losses/quantile_huber") == test::metric(m, "losses/mse"));
        CHECK(test::metric(m, "losses/loss") ==
              Approx(test::metric(m, "losses/quantile_huber") + p.dqn.cql_alpha * test::metric(m, "losses/cql")));
        if (p.dqn.cql_alpha > 0)
            CHECK(test::metric(m, "losses/cql") > 0);
        else
            CHECK(test::metric(m, "losses/cql") == 0);
        long long actions = 0;
        for (auto c : test::histogram(m)) actions += c;
        CHECK(actions == 600);
        CHECK(std::isfinite(test::metric(m, "q/mean")));
        if (variant.empty()) {  // the first and the last run: the same seed gives the same metrics
            if (first.empty())
                first = log;
            else
                for (const char* key : {"losses/loss", "q/mean", "charts/grad_norm"})
                    CHECK(test::metric(first.back(), key) == test::metric(m, key));
        }
    }
    // The IQN head's weights are not the C51 head's: a C51 profile's network has another layout.
    const auto p = profile({});
    const auto iqn_layout = trainers::QNetwork(trainers::network_config(p, 50)).layout();
    CHECK_NOTHROW(iqn_layout.find("iqn_embed.l0.w"));
    CHECK(iqn_layout.find("iqn_embed.l0.w").size == 32u * 16u);
    CHECK(iqn_layout.find("iqn_head.l0.w").size == 32u * (1u + static_cast<unsigned>(p.num_actions())));
    CHECK(trainers::parameter_layout(p) == "dqn-iqn/1");
}

TEST_CASE("the executable trains dqn-smoketest with head = iqn to the end; eval reproduces; check shows the keys",
          "[trainers][dqn][iqn][pipeline]") {
    const fs::path dir = fs::temp_directory_path() / ("fh-iqn-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    const auto r =
        sh("\"$EXE\" --profile dqn-smoketest --set dqn.head=iqn --device cpu --output '" + dir.string() + "'", dir);
    INFO(r.err);
    REQUIRE(r.code == 0);
    const fs::path run = dir / "dqn-smoketest";
    const std::string summary = slurp(run / "summary.json");
    CHECK(summary.find("\"status\":\"completed\"") != std::string::npos);
    const std::string metrics = slurp(run / "metrics.jsonl");
    CHECK(metrics.find("\"losses/quantile_huber\"") != std::string::npos);
    CHECK(std::count(metrics.begin(), metrics.end(), '\n') == 20);  // 2000 env steps, a line per 100
    const auto last = io::TensorFile::read((run / "checkpoints/last.safetensors").string());
    CHECK(last.metadata("layout_version").value_or("") == "dqn-iqn/1");
    CHECK(last.metadata("param_layout").value_or("").find("iqn_embed.l0.w") != std::string::npos);
    const auto e = sh("\"$EXE\" eval --checkpoint '" + (run / "checkpoints/best.safetensors").string() +
                          "' --split test --device cpu",
                      dir);
    INFO(e.err);
    REQUIRE(e.code == 0);
    const auto strategy = [](const std::string& json) {
        const auto at = json.find("\"strategy\":");
        REQUIRE(at != std::string::npos);
        const auto open = json.find('{', at);
        return json.substr(open, json.find('}', open) - open + 1);
    };
    CHECK(strategy(e.out) == strategy(summary.substr(summary.find("\"test\":"))));
    // check: the resolved profile carries the keys with their defaults.
    const auto c = sh("\"$EXE\" check dqn-smoketest --set dqn.head=iqn --device cpu", dir);
    INFO(c.err);
    REQUIRE(c.code == 0);
    for (const char* key : {"iqn_quantiles = 8", "iqn_act_quantiles = 32", "iqn_embedding = 64", "head = \"iqn\""})
        CHECK(c.out.find(key) != std::string::npos);
    fs::remove_all(dir);
}
