/// @file test_audit.cpp
/// @brief [audit] The look-ahead audit (docs/look-ahead-audit.md): its cuts, the replaced bars,
///        the decisions' alignment, and through the executable on the CPU backend: a smoketest's
///        run and profile audit clean (exit 0), a one-bar look-ahead planted in a feature
///        (FH_PLANT_LOOKAHEAD) is caught and named with its bar (exit 6), bad input exits 2 or 3.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "data/csv_bars.hpp"
#include "data/market_data.hpp"
#include "data/synthetic_market.hpp"
#include "io/json.hpp"
#include "run/audit.hpp"
#include "support/shell.hpp"

using namespace fh;
namespace fs = std::filesystem;

namespace {

/// A market of `n` synthetic bars cut into contracts at `starts` (each after the first is a boundary).
data::MarketData market(std::size_t n, std::vector<std::size_t> starts = {0}) {
    data::MarketData md;
    md.bars = data::generate_synthetic({static_cast<std::int64_t>(n), 7, 0.0});
    md.bars.segment_starts = starts;
    md.bars.segment_names.clear();
    for (std::size_t k = 0; k < starts.size(); ++k) md.bars.segment_names.push_back(fmt::format("c{}.csv", k));
    md.warmup_bars = 128;
    md.train = {0, n * 7 / 10};
    md.val = {n * 7 / 10, n * 85 / 100};
    md.test = {n * 85 / 100, n};
    return md;
}

}  // namespace

TEST_CASE("audit cuts: the last training and validation bars, the contract boundaries, seeded random bars", "[audit]") {
    const auto md = market(2000, {0, 600, 1300});
    const auto cuts = run::audit_cuts(md, run::AuditOptions{6, 1});
    std::set<std::size_t> bars;
    std::map<std::size_t, std::string> kind;
    for (const auto& [bar, k] : cuts) {
        CHECK(bars.insert(bar).second);  // each once, sorted
        kind[bar] = k;
        CHECK(bar >= md.warmup_bars - 1);
        CHECK(bar + 1 < md.bars.size());
    }
    CHECK(std::is_sorted(cuts.begin(), cuts.end()));
    CHECK(kind[1399] == "last training bar");
    CHECK(kind[1699] == "last validation bar");
    CHECK(kind[599] == "end of contract c0.csv");
    CHECK(kind[1299] == "end of contract c1.csv");
    std::size_t random = 0;
    for (const auto& [bar, k] : cuts) random += k.find("random") != std::string::npos;
    CHECK(random >= 5);  // 6 draws; a collision merges two
    // The same seed, the same cuts; another seed, others; --cuts 0: the boundaries only.
    CHECK(run::audit_cuts(md, run::AuditOptions{6, 1}) == cuts);
    CHECK(run::audit_cuts(md, run::AuditOptions{6, 2}) != cuts);
    CHECK(run::audit_cuts(md, run::AuditOptions{0, 1}).size() == 4);
}

TEST_CASE("audit: the bars after the cut are replaced by valid others, the bars up to it kept", "[audit]") {
    auto md = market(1500);
    md.bars.has_volume = true;
    for (std::size_t t = 0; t < md.bars.size(); ++t) md.bars.volume[t] = static_cast<double>(100 + t % 7);
    const data::BarSeries before = md.bars;
    const std::size_t cut = 900;
    run::replace_bars_after(md.bars, cut, 1);
    REQUIRE(md.bars.size() == before.size());
    CHECK(data::check_bar_series(md.bars, true).empty());
    for (std::size_t t = 0; t <= cut; ++t) {
        INFO("bar " << t);
        REQUIRE(md.bars.time[t] == before.time[t]);
        REQUIRE(md.bars.open[t] == before.open[t]);
        REQUIRE(md.bars.high[t] == before.high[t]);
        REQUIRE(md.bars.low[t] == before.low[t]);
        REQUIRE(md.bars.close[t] == before.close[t]);
        REQUIRE(md.bars.volume[t] == before.volume[t]);
    }
    for (std::size_t t = cut + 1; t < md.bars.size(); ++t) {
        INFO("bar " << t);
        REQUIRE(md.bars.time[t] > before.time[t]);  // the calendar too
        REQUIRE(md.bars.open[t] != before.open[t]);
        REQUIRE(md.bars.high[t] != before.high[t]);
        REQUIRE(md.bars.low[t] != before.low[t]);
        REQUIRE(md.bars.close[t] != before.close[t]);
        REQUIRE(md.bars.volume[t] != before.volume[t]);
        // Close to close: another return, not the same one rescaled.
        if (t > cut + 1)
            REQUIRE(md.bars.close[t] / md.bars.close[t - 1] != Approx(before.close[t] / before.close[t - 1]));
    }
    // Deterministic in (seed, cut).
    auto again = before;
    run::replace_bars_after(again, cut, 1);
    CHECK(again.close == md.bars.close);
    auto other = before;
    run::replace_bars_after(other, cut, 2);
    CHECK(other.close != md.bars.close);
}

TEST_CASE("audit: the decision at bar t is the action of bar t + 1's record; only decisions up to the cut count",
          "[audit]") {
    backtest::BacktestReport r;
    // Two contracts' passes: bars [10, 15) and [20, 24).
    r.segments = {backtest::Segment{10, 15, 0}, backtest::Segment{20, 24, 5}};
    r.segment_bars = {5, 3};  // the second stopped early (bankrupt at its third bar)
    r.records.resize(9);
    for (std::size_t i = 0; i < r.records.size(); ++i) r.records[i].action = static_cast<int>(i) + 1;
    r.records[0].action = r.records[5].action = -1;  // a pass's first record: no decision yet
    const auto d = run::backtest_decisions(r, 30);
    REQUIRE(d.size() == 30);
    const std::vector<int> want = {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 2,  3,  4,  5,  -1,
                                   -1, -1, -1, -1, -1, 7,  8,  -1, -1, -1, -1, -1, -1, -1, -1};
    CHECK(d == want);

    std::size_t checked = 0;
    CHECK_FALSE(run::compare_decisions(d, d, 29, &checked));
    CHECK(checked == 6);
    auto later = d;
    later[13] = 0;                                                // the decision at bar 13
    CHECK_FALSE(run::compare_decisions(d, later, 12, &checked));  // after the cut: allowed
    CHECK(checked == 3);
    const auto at = run::compare_decisions(d, later, 13, &checked);
    REQUIRE(at);
    CHECK(at->first_bar == 13);
    CHECK(at->bars_changed == 1);
    CHECK(at->before == 5);
    CHECK(at->after == 0);
    later[11] = -1;  // a decision missing is a change too
    const auto two = run::compare_decisions(d, later, 20);
    REQUIRE(two);
    CHECK(two->first_bar == 11);
    CHECK(two->bars_changed == 2);
}

namespace {

/// The JSON the audit wrote.
io::json::Value read_json(const fs::path& p) {
    io::json::Limits limits;
    limits.allow_fractions = true;
    return io::json::parse(test::slurp(p), limits);
}

}  // namespace

TEST_CASE("audit: a smoketest run and profile are clean (exit 0); bad input exits 2 or 3", "[audit]") {
    const auto dir = test::scratch_dir("fh-audit", "clean");
    auto r = test::run_shell("cd '" + dir.string() + "' && \"$EXE\" --profile dqn-smoketest --device cpu -q", dir);
    INFO(r.err);
    REQUIRE(r.code == 0);
    // The documented form: the run directory alone.
    r = test::run_shell("cd '" + dir.string() + "' && \"$EXE\" audit runs/dqn-smoketest", dir);
    INFO(r.out << r.err);
    REQUIRE(r.code == 0);
    CHECK(r.out.find("look-ahead audit of runs/dqn-smoketest (runs/dqn-smoketest/checkpoints/best.safetensors)") !=
          std::string::npos);
    CHECK(r.out.find("\nclean: ") != std::string::npos);
    CHECK(r.out.find("LOOK-AHEAD") == std::string::npos);

    r = test::run_shell("cd '" + dir.string() + "' && \"$EXE\" audit runs/dqn-smoketest --json a.json --cuts 3", dir);
    INFO(r.out << r.err);
    REQUIRE(r.code == 0);
    const auto j = read_json(dir / "a.json");
    CHECK(j.find("clean")->as_bool());
    CHECK(j.find("bars")->as_i64() == 5000);
    const auto& cuts = j.find("cuts")->as_array();
    std::set<std::string> kinds;
    bool statistics = false;
    for (const auto& c : cuts) {
        kinds.insert(c.find("kind")->as_string());
        CHECK(c.find("clean")->as_bool());
        CHECK(c.find("features")->as_array().empty());
        CHECK(c.find("decisions")->is_null());
        statistics = statistics || c.find("statistics_checked")->as_bool();
        // Decisions were compared at every bar past the warm-up up to the cut.
        const auto bar = c.find("bar")->as_i64();
        CHECK(c.find("decisions_checked")->as_i64() == bar - 128 + 1);
    }
    CHECK(statistics);
    CHECK(kinds.count("last training bar") == 1);
    CHECK(kinds.count("last validation bar") == 1);
    CHECK(cuts.size() >= 4);

    // A profile: its trainer's initial policy (the bare form).
    for (const char* profile : {"dqn-smoketest", "ppo-smoketest"}) {
        r = test::run_shell(std::string("\"$EXE\" audit --profile ") + profile + " --device cpu --cuts 2", dir);
        INFO(profile << "\n" << r.out << r.err);
        CHECK(r.code == 0);
        CHECK(r.out.find("(its trainer's initial policy)") != std::string::npos);
        CHECK(r.out.find("\nclean: ") != std::string::npos);
    }

    // Bad input.
    const std::pair<std::string, int> bad[] = {
        {"audit", 2},                                             // neither a run nor a profile
        {"audit runs/dqn-smoketest --profile dqn-smoketest", 2},  // both
        {"audit runs/missing", 2},                                // no checkpoint
        {"audit runs/dqn-smoketest --seed 3", 2},                 // the run's policy has its seed
        {"audit runs/dqn-smoketest --set dqn.hidden=[8]", 2},     // a key eval does not honour
        {"audit runs/dqn-smoketest --cuts -1", 2},
        {"audit runs/dqn-smoketest --data missing.csv", 3},
        {"audit runs/dqn-smoketest --json missing-dir/a.json", 2},
    };
    for (const auto& [args, code] : bad) {
        r = test::run_shell("cd '" + dir.string() + "' && \"$EXE\" " + args, dir);
        INFO(args << "\n" << r.err);
        CHECK(r.code == code);
        CHECK(r.err.find("internal error") == std::string::npos);
    }
    r = test::run_shell("FH_PLANT_LOOKAHEAD=no_such \"$EXE\" audit --profile dqn-smoketest --device cpu", dir);
    CHECK(r.code == 2);
    CHECK(r.err.find("FH_PLANT_LOOKAHEAD=no_such: no such feature") != std::string::npos);
    fs::remove_all(dir);
}

TEST_CASE("audit: a one-bar look-ahead planted in a feature is caught at every cut, naming the feature and bar",
          "[audit]") {
    const auto dir = test::scratch_dir("fh-audit", "planted");
    // ret_4 at bar t becomes bar t + 1's (FH_PLANT_LOOKAHEAD, a test hook): at a cut c, only bar
    // c's value reads a replaced bar.
    const auto r = test::run_shell(
        "FH_PLANT_LOOKAHEAD=ret_4 \"$EXE\" audit --profile dqn-smoketest --device cpu "
        "--cuts 3 --json '" +
            (dir / "a.json").string() + "'",
        dir);
    INFO(r.out << r.err);
    REQUIRE(r.code == 6);
    CHECK(r.err.find("look-ahead found") != std::string::npos);
    const auto j = read_json(dir / "a.json");
    CHECK_FALSE(j.find("clean")->as_bool());
    const auto train_end = j.find("splits")->find("train")->as_array()[1].as_i64();
    const auto& cuts = j.find("cuts")->as_array();
    REQUIRE(cuts.size() >= 4);
    for (const auto& c : cuts) {
        const auto bar = c.find("bar")->as_i64();
        INFO("cut " << bar);
        CHECK_FALSE(c.find("clean")->as_bool());
        const auto& features = c.find("features")->as_array();
        REQUIRE(features.size() == 1);
        const auto& f = features[0];
        CHECK(f.find("feature")->as_string() == "ret_4");
        CHECK(f.find("column")->as_i64() == 2);
        CHECK(f.find("first_bar")->as_i64() == bar);
        CHECK(f.find("bars_changed")->as_i64() == 1);
        const std::string time = f.find("first_time")->as_string();
        CHECK(time == c.find("time")->as_string());
        // The text names the feature and the bar with its time.
        CHECK(r.out.find("feature ret_4 (column 2) changed at 1 bar, first at bar " + std::to_string(bar) + " (" +
                         time + ")") != std::string::npos);
        // Past the training split, the statistics of ret_4 read the first replaced bar too (the
        // training split's last value is the next bar's).
        const auto& stats = c.find("statistics")->as_array();
        if (bar + 1 == train_end) {
            REQUIRE(stats.size() == 1);
            CHECK(stats[0].find("feature")->as_string() == "ret_4");
        } else {
            CHECK(stats.empty());
        }
    }

    // A run trained with the look-ahead (a forecaster that learnt to read the next bar's return,
    // the planted signal's observable): its audit finds the feature and decisions that change.
    auto t = test::run_shell(
        "cd '" + dir.string() + "' && FH_PLANT_LOOKAHEAD=ret_1 \"$EXE\" --profile supervised-smoketest --device cpu -q",
        dir);
    INFO(t.err);
    REQUIRE(t.code == 0);
    t = test::run_shell("cd '" + dir.string() +
                            "' && FH_PLANT_LOOKAHEAD=ret_1 \"$EXE\" audit runs/supervised-smoketest --cuts 30 "
                            "--json run.json",
                        dir);
    INFO(t.out << t.err);
    REQUIRE(t.code == 6);
    std::size_t decided = 0;
    const auto run_json = read_json(dir / "run.json");
    for (const auto& c : run_json.find("cuts")->as_array()) {
        const auto bar = c.find("bar")->as_i64();
        REQUIRE(c.find("features")->as_array().size() == 1);
        CHECK(c.find("features")->as_array()[0].find("feature")->as_string() == "ret_1");
        if (const auto* d = c.find("decisions"); !d->is_null()) {
            // Only the decision at the cut reads the replaced bar.
            CHECK(d->find("first_bar")->as_i64() == bar);
            CHECK(d->find("bars_changed")->as_i64() == 1);
            ++decided;
        }
    }
    CHECK(decided > 0);
    CHECK(t.out.find("decisions changed at 1 of ") != std::string::npos);
    // Without the planted look-ahead, the same run's policy on the same data is clean.
    t = test::run_shell("cd '" + dir.string() + "' && \"$EXE\" audit runs/supervised-smoketest --cuts 30 -q", dir);
    CHECK(t.code == 0);
    fs::remove_all(dir);
}

TEST_CASE("audit on CUDA: a smoketest run is clean, the planted look-ahead caught at each cut", "[gpu][audit]") {
    const auto dir = test::scratch_dir("fh-audit", "cuda");
    auto r = test::run_shell("cd '" + dir.string() + "' && \"$EXE\" --profile dqn-smoketest --device cuda -q", dir);
    INFO(r.err);
    REQUIRE(r.code == 0);
    // The decisions of the CUDA backtest (captured steps) repeat exactly: nothing changes but
    // what a later bar drives.
    r = test::run_shell("cd '" + dir.string() + "' && \"$EXE\" audit runs/dqn-smoketest --cuts 3 -q", dir);
    INFO(r.out << r.err);
    CHECK(r.code == 0);
    r = test::run_shell("cd '" + dir.string() +
                            "' && FH_PLANT_LOOKAHEAD=ret_4 \"$EXE\" audit --profile dqn-smoketest "
                            "--device cuda --cuts 3 --json a.json -q",
                        dir);
    INFO(r.out << r.err);
    REQUIRE(r.code == 6);
    const auto j = read_json(dir / "a.json");
    for (const auto& c : j.find("cuts")->as_array()) {
        const auto& features = c.find("features")->as_array();
        REQUIRE(features.size() == 1);
        CHECK(features[0].find("feature")->as_string() == "ret_4");
        CHECK(features[0].find("first_bar")->as_i64() == c.find("bar")->as_i64());
    }
    fs::remove_all(dir);
}
