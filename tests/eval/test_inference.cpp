/// @file test_inference.cpp
/// @brief [eval][inference] The block bootstrap's resampling and intervals, the probabilistic and
///        deflated Sharpe ratios against independently computed worked examples, and a run's
///        summary.json intervals recomputed from backtest/equity.csv alone (docs/metrics.md).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "backtest/bootstrap.hpp"
#include "backtest/inference.hpp"
#include "backtest/sharpe_inference.hpp"
#include "io/json.hpp"
#include "math/rng.h"
#include "support/shell.hpp"
#include "util/errors.hpp"

using namespace fh;
using Approx = Catch::Detail::Approx;

namespace {

// ---- An independent implementation of docs/metrics.md "Confidence intervals", written from the
// ---- docs (not calling the evaluator's bootstrap).

/// Resample b's indices: blocks j = 0, 1, ... with W = Philox(seed, 15, b, j); start = floor(W0 n /
/// 2^32); length 1 + floor(ln(1 - u) / ln(1 - 1/L)), u = (((W2 << 32) | W3) >> 11) / 2^53.
std::vector<std::size_t> doc_indices(std::size_t n, long long L, std::uint64_t seed, std::uint32_t b) {
    std::vector<std::size_t> out;
    for (std::uint64_t j = 0; out.size() < n; ++j) {
        const auto w =
            rng::philox4x32_10(rng::U32x4{{static_cast<std::uint32_t>(j), static_cast<std::uint32_t>(j >> 32), b, 15u}},
                               static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32));
        std::size_t start = static_cast<std::size_t>((static_cast<std::uint64_t>(w.v[0]) * n) >> 32);
        std::size_t length = 1;
        if (L > 1) {
            const double u =
                static_cast<double>(((static_cast<std::uint64_t>(w.v[2]) << 32) | w.v[3]) >> 11) / 9007199254740992.0;
            length +=
                static_cast<std::size_t>(std::floor(std::log(1 - u) / std::log(1 - 1.0 / static_cast<double>(L))));
        }
        for (std::size_t k = 0; k < length && out.size() < n; ++k) out.push_back((start + k) % n);
    }
    return out;
}

double doc_sharpe(const std::vector<double>& x, double P) {
    double m = 0;
    for (double v : x) m += v;
    m /= static_cast<double>(x.size());
    double ss = 0;
    for (double v : x) ss += (v - m) * (v - m);
    const double sd = std::sqrt(ss / static_cast<double>(x.size() - 1));
    return sd > 0 ? m / sd * std::sqrt(P) : 0.0;
}

double doc_percentile(std::vector<double> v, double q) {
    std::sort(v.begin(), v.end());
    const double h = static_cast<double>(v.size() - 1) * q;
    const auto f = static_cast<std::size_t>(h);
    return f + 1 < v.size() ? v[f] + (h - static_cast<double>(f)) * (v[f + 1] - v[f]) : v.back();
}

struct DocIntervals {
    double sharpe_lo, sharpe_hi, ret_lo, ret_hi, diff_lo, diff_hi;
};

/// The three intervals of docs/metrics.md from per-segment curves of the strategy and buy-and-hold.
DocIntervals doc_intervals(const std::vector<std::vector<double>>& eq, const std::vector<std::vector<double>>& hold,
                           double P, int B, long long block, std::uint64_t seed, double conf) {
    std::vector<double> r, rp, hp;
    for (std::size_t s = 0; s < eq.size(); ++s) {
        for (std::size_t i = 1; i < eq[s].size(); ++i) r.push_back(eq[s][i] / eq[s][i - 1] - 1);
        const std::size_t both = std::min(eq[s].size(), hold[s].size());
        for (std::size_t i = 1; i < both; ++i) {
            rp.push_back(eq[s][i] / eq[s][i - 1] - 1);
            hp.push_back(hold[s][i] / hold[s][i - 1] - 1);
        }
    }
    const auto cube = [](std::size_t n) {
        long long b = 1;
        while (static_cast<double>(b) * b * b < static_cast<double>(n)) ++b;
        return b;
    };
    const long long L = block > 0 ? block : cube(r.size()), Lp = block > 0 ? block : cube(rp.size());
    std::vector<double> sh, ret, diff;
    for (int b = 0; b < B; ++b) {
        std::vector<double> x, y, z;
        for (auto i : doc_indices(r.size(), L, seed, static_cast<std::uint32_t>(b))) x.push_back(r[i]);
        sh.push_back(doc_sharpe(x, P));
        double g = 1;
        for (double v : x) g *= 1 + v;
        ret.push_back(g - 1);
        for (auto i : doc_indices(rp.size(), Lp, seed, static_cast<std::uint32_t>(B + b))) {
            y.push_back(rp[i]);
            z.push_back(hp[i]);
        }
        diff.push_back(doc_sharpe(y, P) - doc_sharpe(z, P));
    }
    const double a = (1 - conf) / 2;
    return {doc_percentile(sh, a),      doc_percentile(sh, 1 - a), doc_percentile(ret, a),
            doc_percentile(ret, 1 - a), doc_percentile(diff, a),   doc_percentile(diff, 1 - a)};
}

backtest::BootstrapOptions options(int resamples, long long block, std::uint64_t seed, double confidence) {
    backtest::BootstrapOptions o;
    o.resamples = resamples;
    o.block = block;
    o.seed = seed;
    o.confidence = confidence;
    return o;
}

double at(const io::json::Value& v, const std::string& dotted) {
    const io::json::Value* cur = &v;
    std::size_t b = 0;
    while (true) {
        const auto dot = dotted.find('.', b);
        cur = cur->find(dotted.substr(b, dot == std::string::npos ? std::string::npos : dot - b));
        REQUIRE(cur != nullptr);
        if (dot == std::string::npos) break;
        b = dot + 1;
    }
    REQUIRE(cur->is_number());
    return cur->as_double();
}

}  // namespace

TEST_CASE("automatic block length is ceil(n^(1/3))", "[eval][inference]") {
    CHECK(backtest::automatic_block_length(0) == 1);
    CHECK(backtest::automatic_block_length(1) == 1);
    CHECK(backtest::automatic_block_length(8) == 2);
    CHECK(backtest::automatic_block_length(9) == 3);
    CHECK(backtest::automatic_block_length(1000) == 10);
    CHECK(backtest::automatic_block_length(1001) == 11);
    CHECK(backtest::automatic_block_length(15000) == 25);
}

TEST_CASE("percentile interpolates linearly between order statistics", "[eval][inference]") {
    // numpy.percentile([1, 2, 3, 4], [25, 97.5]) = [1.75, 3.925]
    const std::vector<double> v{1, 2, 3, 4};
    CHECK(backtest::percentile(v, 0.25) == Approx(1.75));
    CHECK(backtest::percentile(v, 0.975) == Approx(3.925));
    CHECK(backtest::percentile(v, 0.0) == 1);
    CHECK(backtest::percentile(v, 1.0) == 4);
}

TEST_CASE("stationary bootstrap indices: blocks wrap circularly, mean length L, seeded", "[eval][inference]") {
    const std::size_t n = 50;
    for (long long L : {1LL, 4LL, 50LL}) {
        const auto idx = backtest::bootstrap_indices(n, L, 7, 3);
        REQUIRE(idx.size() == n);
        CHECK(idx == doc_indices(n, L, 7, 3));
        CHECK(idx == backtest::bootstrap_indices(n, L, 7, 3));  // deterministic
        CHECK(idx != backtest::bootstrap_indices(n, L, 8, 3));  // the seed matters
        CHECK(idx != backtest::bootstrap_indices(n, L, 7, 4));  // each resample its own
        for (auto i : idx) CHECK(i < n);
    }
    // The mean block length over many resamples of a long series is L (geometric lengths): count
    // the block starts (an index that does not follow its predecessor, or a draw that happens to).
    const std::size_t big = 200000;
    const long long L = 8;
    double starts = 0;
    for (int b = 0; b < 5; ++b) {
        const auto idx = backtest::bootstrap_indices(big, L, 1, b);
        starts += 1;
        for (std::size_t t = 1; t < big; ++t) starts += idx[t] != (idx[t - 1] + 1) % big;
    }
    CHECK(5.0 * big / starts == Approx(static_cast<double>(L)).epsilon(0.03));
}

TEST_CASE("block_bootstrap equals the documented procedure; a block longer than the series is refused",
          "[eval][inference]") {
    std::vector<std::vector<double>> eq{{100, 101, 100.5, 102, 101, 103, 104, 103.5, 105, 104},
                                        {100, 99, 99.5, 101, 100.2, 100.9, 102, 101.5}};
    std::vector<std::vector<double>> hold{{100, 100.4, 100.1, 101, 101.2, 100.8, 101.5, 102, 101.7, 102.5},
                                          {100, 99.6, 100.2, 100.1}};  // a shorter curve: bankrupt
    const auto r = backtest::segment_returns(eq, hold);
    REQUIRE(r.strategy.size() == 16);
    REQUIRE(r.strategy_paired.size() == 12);
    for (long long block : {0LL, 3LL}) {
        const backtest::BootstrapOptions o = options(500, block, 42, 0.9);
        const auto got = backtest::block_bootstrap(r.strategy, r.strategy_paired, r.hold_paired, 252, o);
        const auto want = doc_intervals(eq, hold, 252, 500, block, 42, 0.9);
        CHECK(got.block == 3);  // the fixed 3, or ceil(16^(1/3)) = 3
        CHECK(got.sharpe.lo == Approx(want.sharpe_lo).epsilon(1e-12));
        CHECK(got.sharpe.hi == Approx(want.sharpe_hi).epsilon(1e-12));
        CHECK(got.total_return.lo == Approx(want.ret_lo).epsilon(1e-12));
        CHECK(got.total_return.hi == Approx(want.ret_hi).epsilon(1e-12));
        CHECK(got.sharpe_difference.lo == Approx(want.diff_lo).epsilon(1e-12));
        CHECK(got.sharpe_difference.hi == Approx(want.diff_hi).epsilon(1e-12));
        CHECK(got.sharpe.lo < got.sharpe.hi);
    }
    try {
        backtest::block_bootstrap(r.strategy, r.strategy_paired, r.hold_paired, 252, options(500, 13, 1, 0.95));
        FAIL("a block of 13 > 12 paired returns was accepted");
    } catch (const UsageError& e) {
        CHECK(std::string(e.what()).find("eval.bootstrap_block = 13") != std::string::npos);
    }
    backtest::BootstrapOptions cut = options(500, 13, 1, 0.95);
    cut.cut_block_to_series = true;
    CHECK(backtest::block_bootstrap(r.strategy, r.strategy_paired, r.hold_paired, 252, cut).block == 12);
}

TEST_CASE("normal quantile and the expected maximum of N standard normals", "[eval][inference]") {
    // Python: from statistics import NormalDist; NormalDist().inv_cdf(p)
    const std::pair<double, double> q[] = {{1e-10, -6.361340902404056},
                                           {0.001, -3.090232306167813},
                                           {0.02, -2.0537489106318225},
                                           {0.3, -0.5244005127080407},
                                           {0.5, 0.0},
                                           {0.9, 1.2815515655446008},
                                           {0.99, 2.3263478740408408},
                                           {0.999999, 4.753424308817089}};
    for (const auto& [p, x] : q) CHECK(backtest::normal_quantile(p) == Approx(x).epsilon(1e-12).margin(1e-14));
    // g = 0.5772156649015329; (1-g)*inv_cdf(1-1/n) + g*inv_cdf(1-1/(n*e))
    CHECK(backtest::expected_maximum_normal(2) == Approx(0.5197553442805939).epsilon(1e-12));
    CHECK(backtest::expected_maximum_normal(10) == Approx(1.57459830134575).epsilon(1e-12));
    CHECK(backtest::expected_maximum_normal(1000) == Approx(3.255121513652723).epsilon(1e-12));
    CHECK(backtest::expected_maximum_normal(1) == 0);
}

TEST_CASE("probabilistic Sharpe ratio of a worked example", "[eval][inference]") {
    // Python (statistics.NormalDist as N):
    //   r = [0.01,-0.02,0.015,0.003,-0.007,0.021,-0.004,0.012,-0.018,0.009,0.006,-0.001]
    //   n = len(r); m = sum(r)/n; sd = sqrt(sum((x-m)**2 for x in r)/(n-1))
    //   mk = lambda k: sum((x-m)**k for x in r)/n; sr = m/sd; sk = mk(3)/mk(2)**1.5; ku = mk(4)/mk(2)**2
    //   psr = lambda b: N.cdf((sr-b)*sqrt(n-1)/sqrt(1-sk*sr+(ku-1)/4*sr*sr))
    //   -> sr 0.17082157003758297, sk -0.4433999910384397, ku 2.237317326605141,
    //      psr(0) 0.7067670308809001, psr(0.1) 0.5892142909750664
    const std::vector<double> r{0.01, -0.02, 0.015, 0.003, -0.007, 0.021, -0.004, 0.012, -0.018, 0.009, 0.006, -0.001};
    const auto m = backtest::sharpe_moments(r);
    CHECK(m.n == 12);
    CHECK(m.sharpe == Approx(0.17082157003758297).epsilon(1e-12));
    CHECK(m.skewness == Approx(-0.4433999910384397).epsilon(1e-12));
    CHECK(m.kurtosis == Approx(2.237317326605141).epsilon(1e-12));
    CHECK(*backtest::probabilistic_sharpe(m, 0.0) == Approx(0.7067670308809001).epsilon(1e-12));
    CHECK(*backtest::probabilistic_sharpe(m, 0.1) == Approx(0.5892142909750664).epsilon(1e-12));
    CHECK(!backtest::probabilistic_sharpe(backtest::sharpe_moments({0.01}), 0.0));
}

TEST_CASE("deflated Sharpe ratio: the paper's numerical example", "[eval][inference]") {
    // Bailey & Lopez de Prado (2014), "The Deflated Sharpe Ratio", section 6: N = 100 trials,
    // V[SR] = 1/2 annualised, annualised SR 2.5 over T = 1250 daily returns, skewness -3,
    // kurtosis 10: SR0 = 0.1132 and DSR = 0.9004 (per day: SR = 2.5 / sqrt(250),
    // V = 0.5 / 250). Python, as above: em = (1-g)*inv_cdf(1-1/100) + g*inv_cdf(1-1/(100*e))
    // = 2.5306028932016846; sr0 = sqrt(0.5/250)*em = 0.11317200186513214; DSR = 0.9003968344493904.
    backtest::SharpeMoments best;
    best.n = 1250;
    best.sharpe = 2.5 / std::sqrt(250.0);
    best.skewness = -3;
    best.kurtosis = 10;
    const auto d = backtest::deflated_sharpe(best, 100, 0.5 / 250);
    CHECK(d.sr0 == Approx(0.11317200186513214).epsilon(1e-12));
    REQUIRE(d.dsr);
    CHECK(*d.dsr == Approx(0.9003968344493904).epsilon(1e-10));
    CHECK(std::round(*d.dsr * 1e4) / 1e4 == 0.9004);  // the paper's figure
}

TEST_CASE("a run's summary.json intervals recompute from backtest/equity.csv alone", "[eval][inference][cli]") {
    const auto dir = test::scratch_dir("fh-inference", "run");
    const auto r = test::run_shell(
        "\"$EXE\" --profile dqn-smoketest --device cpu --set run.total_steps=400 "
        "--set run.eval_interval=200 --set eval.bootstrap_resamples=300 "
        "--set eval.bootstrap_seed=5 --set eval.confidence=0.9 --output '" +
            (dir / "runs").string() + "'",
        dir);
    INFO(r.err);
    REQUIRE(r.code == 0);
    const auto run = dir / "runs" / "dqn-smoketest";
    const auto summary = io::json::parse(test::slurp(run / "summary.json"), io::json::Limits{1u << 24, 64, true});
    const double P = at(summary, "bars_per_year");
    for (const std::string split : {"test", "validation"}) {
        INFO(split);
        // equity.csv alone: the segment, equity and buy_and_hold_equity columns.
        std::ifstream in(run / "backtest" / (split == "test" ? "equity.csv" : "val_equity.csv"));
        std::string line;
        std::getline(in, line);
        REQUIRE(line == "segment,bar,time,close,action,position,equity,drawdown,buy_and_hold_equity");
        std::vector<std::vector<double>> eq, hold;
        std::string seg;
        while (std::getline(in, line)) {
            std::vector<std::string> c;
            std::stringstream ss(line);
            std::string cell;
            while (std::getline(ss, cell, ',')) c.push_back(cell);
            if (c[0] != seg) {
                seg = c[0];
                eq.emplace_back();
                hold.emplace_back();
            }
            eq.back().push_back(std::stod(c[6]));
            if (c.size() > 8 && !c[8].empty()) hold.back().push_back(std::stod(c[8]));
        }
        const std::string pre = split + ".inference.";
        const auto want = doc_intervals(eq, hold, P, 300, 0, 5, 0.9);
        CHECK(at(summary, pre + "bootstrap.resamples") == 300);
        CHECK(at(summary, pre + "bootstrap.seed") == 5);
        CHECK(at(summary, pre + "bootstrap.confidence") == 0.9);
        CHECK(at(summary, pre + "bootstrap.sharpe.lo") == Approx(want.sharpe_lo).epsilon(1e-9));
        CHECK(at(summary, pre + "bootstrap.sharpe.hi") == Approx(want.sharpe_hi).epsilon(1e-9));
        CHECK(at(summary, pre + "bootstrap.total_return.lo") == Approx(want.ret_lo).epsilon(1e-9));
        CHECK(at(summary, pre + "bootstrap.total_return.hi") == Approx(want.ret_hi).epsilon(1e-9));
        CHECK(at(summary, pre + "bootstrap.sharpe_difference.lo") == Approx(want.diff_lo).epsilon(1e-9));
        CHECK(at(summary, pre + "bootstrap.sharpe_difference.hi") == Approx(want.diff_hi).epsilon(1e-9));
    }
    // compare shows the interval column and the PSR.
    const auto c = test::run_shell("\"$EXE\" compare '" + run.string() + "'", dir);
    REQUIRE(c.code == 0);
    CHECK(c.out.find("test_sharpe [lo, hi]") != std::string::npos);
    CHECK(c.out.find("test_psr") != std::string::npos);
    // eval --output writes the same keys in eval.json.
    const auto e =
        test::run_shell("\"$EXE\" eval --checkpoint '" + (run / "checkpoints" / "best.safetensors").string() +
                            "' --device cpu --output '" + (dir / "ev").string() + "'",
                        dir);
    INFO(e.err);
    REQUIRE(e.code == 0);
    const auto ev = io::json::parse(test::slurp(dir / "ev" / "eval.json"), io::json::Limits{1u << 24, 64, true});
    CHECK(at(ev, "inference.bootstrap.resamples") == 300);
    CHECK(at(ev, "inference.bootstrap.sharpe.lo") == Approx(at(summary, "test.inference.bootstrap.sharpe.lo")));
    CHECK(test::slurp(dir / "ev" / "report.html").find("Sharpe difference against buy-and-hold") != std::string::npos);
    // A fixed block longer than the test split's returns: refused before training, naming the key.
    const auto bad = test::run_shell(
        "\"$EXE\" --profile dqn-smoketest --device cpu --set eval.bootstrap_block=100000 "
        "--output '" +
            (dir / "bad").string() + "'",
        dir);
    CHECK(bad.code == 2);
    CHECK(bad.err.find("eval.bootstrap_block") != std::string::npos);
}
