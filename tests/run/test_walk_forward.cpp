/// @file test_walk_forward.cpp
/// @brief [walk_forward] The folds' geometry and refusals, and a walk-forward through the
///        executable on a CSV: its directory (folds, walk_forward.json, stitched curve, report,
///        compare), and that altering bars inside or after fold k's test block changes nothing that
///        fold k decided before them (docs/walk-forward.md).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "data/walk_forward.hpp"
#include "io/json.hpp"
#include "support/shell.hpp"
#include "support/xml_check.hpp"
#include "util/errors.hpp"

using namespace fh;
namespace fs = std::filesystem;

TEST_CASE("walk-forward folds: consecutive test blocks, validation before each, expanding or sliding training",
          "[walk_forward]") {
    const data::SplitFractions f{0.7, 0.15, 0.15};
    const auto e = data::walk_forward_folds(1000, f, 3, false);
    REQUIRE(e.size() == 3);
    const std::size_t tests[][2] = {{850, 900}, {900, 950}, {950, 1000}};
    for (std::size_t k = 0; k < 3; ++k) {
        CHECK(e[k].test.begin == tests[k][0]);
        CHECK(e[k].test.end == tests[k][1]);
        CHECK(e[k].val.begin == tests[k][0] - 150);
        CHECK(e[k].val.end == tests[k][0]);
        CHECK(e[k].train.begin == 0);
        CHECK(e[k].train.end == tests[k][0] - 150);
    }
    const auto s = data::walk_forward_folds(1000, f, 3, true);
    for (std::size_t k = 0; k < 3; ++k) {
        CHECK(s[k].train.size() == 700);  // the first fold's training length, moved forward
        CHECK(s[k].train.end == s[k].val.begin);
        CHECK(s[k].test.begin == e[k].test.begin);
    }
    // Fractions summing to less than 1: the test span ends where the ordinary test split does.
    const auto short_span = data::walk_forward_folds(1000, data::SplitFractions{0.6, 0.1, 0.2}, 4, false);
    CHECK(short_span.front().test.begin == 700);
    CHECK(short_span.back().test.end == 900);
    for (std::size_t k = 1; k < short_span.size(); ++k) CHECK(short_span[k].test.begin == short_span[k - 1].test.end);
}

TEST_CASE("walk-forward folds too short to trade or train are refused naming the key", "[walk_forward]") {
    const auto msg = [&](std::size_t n, int k, std::size_t episode, data::SplitFractions fr = {0.7, 0.15, 0.15}) {
        try {
            data::check_walk_forward_folds(data::walk_forward_folds(n, fr, k, false), 128, episode, k);
        } catch (const UsageError& e) {
            return std::string(e.what());
        }
        return std::string();
    };
    CHECK(msg(5000, 5, 50).empty());  // 150-bar test blocks, 750-bar validation blocks
    CHECK(msg(5000, 6, 50).find("walk_forward.folds = 6") != std::string::npos);                // 125 < 128 + 2
    CHECK(msg(5000, 2, 50, {0.8, 0.02, 0.18}).find("data.val_fraction") != std::string::npos);  // 100 < 130
    CHECK(msg(5000, 2, 4000).find("data.train_fraction") != std::string::npos);                 // 3500 < 128 + 4000
}

namespace {

/// A random walk of n hourly bars as a CSV; bars from `alter_from` on get another walk.
void write_csv(const fs::path& path, std::size_t n, std::size_t alter_from) {
    std::ofstream out(path);
    out << "time,open,high,low,close,volume\n";
    std::uint64_t state = 12345, other = 999;
    double price = 4000;
    for (std::size_t i = 0; i < n; ++i) {
        std::uint64_t& s = i >= alter_from ? other : state;
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        const double u = static_cast<double>(s >> 11) / 9007199254740992.0;
        const double open = price;
        price = std::max(100.0, price + (u - 0.5) * 20);
        out << 1600000000 + 3600 * static_cast<std::int64_t>(i) << ',' << open << ',' << std::max(open, price) + 1
            << ',' << std::min(open, price) - 1 << ',' << price << ',' << 1000 + i % 7 << '\n';
    }
}

std::vector<std::string> lines(const fs::path& p) {
    std::ifstream in(p);
    std::vector<std::string> out;
    std::string l;
    while (std::getline(in, l)) out.push_back(l);
    return out;
}

}  // namespace

TEST_CASE("walk-forward through the executable; fold k is blind to bars inside or after its test block",
          "[walk_forward][cli]") {
    const auto dir = test::scratch_dir("fh-walk-forward", "cli");
    // 4000 bars: train [0, 2800), validation 600 bars, test span [3400, 4000) in 2 blocks of 300.
    // The altered copy changes every bar from 3710 on: inside fold 1's test block [3700, 4000),
    // after fold 0's [3400, 3700).
    const std::size_t altered = 3710;
    write_csv(dir / "a.csv", 4000, 4000);
    write_csv(dir / "b.csv", 4000, altered);
    const std::string common =
        "\"$EXE\" walk-forward --profile dqn-smoketest --device cpu --set run.total_steps=400 "
        "--set run.eval_interval=200 --set walk_forward.folds=2 "
        "--set eval.bootstrap_resamples=200 --set data.cache_dir='" +
        (dir / "cache").string() + "'";
    const auto a = test::run_shell(
        common + " --data '" + (dir / "a.csv").string() + "' --set run.name=wf --output '" + (dir / "A").string() + "'",
        dir);
    INFO(a.err);
    REQUIRE(a.code == 0);
    const auto b = test::run_shell(
        common + " --data '" + (dir / "b.csv").string() + "' --set run.name=wf --output '" + (dir / "B").string() + "'",
        dir);
    INFO(b.err);
    REQUIRE(b.code == 0);
    const fs::path A = dir / "A" / "wf", B = dir / "B" / "wf";
    CHECK(a.out.find(A.string()) != std::string::npos);

    // Fold 0 (its test block ends before the altered bars): everything it decided is the same.
    CHECK(lines(A / "fold-0" / "eval.jsonl") == lines(B / "fold-0" / "eval.jsonl"));
    CHECK(lines(A / "fold-0" / "backtest" / "equity.csv") == lines(B / "fold-0" / "backtest" / "equity.csv"));
    CHECK(lines(A / "fold-0" / "backtest" / "trades.csv") == lines(B / "fold-0" / "backtest" / "trades.csv"));
    // Fold 1: its training and selection (validation backtests) are the same; its test decisions
    // are the same up to the altered bar and differ after it.
    CHECK(lines(A / "fold-1" / "eval.jsonl") == lines(B / "fold-1" / "eval.jsonl"));
    const auto ea = lines(A / "fold-1" / "backtest" / "equity.csv"),
               eb = lines(B / "fold-1" / "backtest" / "equity.csv");
    REQUIRE(ea.size() == eb.size());
    std::size_t same = 0, checked = 0;
    for (std::size_t i = 1; i < ea.size(); ++i) {
        const std::size_t bar = std::stoul(ea[i].substr(ea[i].find(',') + 1));
        if (bar < altered) {
            CHECK(ea[i] == eb[i]);
            ++checked;
        } else {
            same += ea[i] == eb[i];
        }
    }
    CHECK(checked == altered - 3700);
    CHECK(same < ea.size() - 1 - checked);  // the altered bars do change the later rows

    // The walk-forward's own files.
    const auto wf = io::json::parse(test::slurp(A / "walk_forward.json"), io::json::Limits{1u << 26, 64, true});
    CHECK(wf.find("folds")->as_double() == 2);
    const auto* runs = wf.find("fold_runs");
    REQUIRE(runs != nullptr);
    REQUIRE(runs->as_array().size() == 2);
    CHECK(runs->as_array()[1].find("test")->find("begin")->as_double() == 3700);
    const auto* st = wf.find("stitched");
    REQUIRE(st != nullptr);
    REQUIRE(st->find("inference")->find("bootstrap")->is_object());
    CHECK(st->find("inference")->find("bootstrap")->find("resamples")->as_double() == 200);
    // The stitched curve: one row for the first fold's start, then one per return of every fold.
    const auto stitched = lines(A / "stitched_equity.csv");
    const double n_returns = st->find("inference")->find("bars")->as_double();
    CHECK(static_cast<double>(stitched.size()) == n_returns + 2);  // header + start row + returns
    // Its total return compounds the folds' test returns.
    double growth = 1;
    for (const char* f : {"fold-0", "fold-1"}) {
        const auto s = io::json::parse(test::slurp(A / f / "summary.json"), io::json::Limits{1u << 26, 64, true});
        growth *= 1 + s.find("test")->find("strategy")->find("total_return")->as_double();
    }
    CHECK(st->find("strategy")->find("total_return")->as_double() == Catch::Detail::Approx(growth - 1).epsilon(1e-9));
    const std::string page = test::slurp(A / "report.html");
    CHECK(page.find("Stitched out-of-sample curve") != std::string::npos);
    CHECK(page.find("beat buy-and-hold?") != std::string::npos);
    CHECK(test::xml_problem(page).empty());
    const std::string fold_page = test::slurp(A / "fold-1" / "report.html");
    CHECK(fold_page.find("The 95% interval of the annualised Sharpe ratio") != std::string::npos);
    CHECK(test::xml_problem(fold_page).empty());
    const auto c = test::run_shell("\"$EXE\" compare '" + A.string() + "'", dir);
    CHECK(c.code == 0);
    CHECK(c.out.find("Walk-forward") != std::string::npos);
    CHECK(c.out.find("Deflated Sharpe ratio of the best of 2 runs") != std::string::npos);
    const auto r = test::run_shell("\"$EXE\" report '" + A.string() + "'", dir);
    CHECK(r.code == 0);

    // Running it again finds both folds finished and only stitches again.
    const auto again =
        test::run_shell(common + " --data '" + (dir / "a.csv").string() +
                            "' --set run.name=wf --set run.on_exists=resume --output '" + (dir / "A").string() + "'",
                        dir);
    CHECK(again.code == 0);
    CHECK(again.err.find("fold 1 finished already") != std::string::npos);
}

TEST_CASE("walk-forward refusals: no folds, one fold, folds too short", "[walk_forward][cli]") {
    const auto dir = test::scratch_dir("fh-walk-forward", "refusals");
    const auto none = test::run_shell(
        "\"$EXE\" walk-forward --profile dqn-smoketest --device cpu --output '" + (dir / "o").string() + "'", dir);
    CHECK(none.code == 2);
    CHECK(none.err.find("walk_forward.folds") != std::string::npos);
    const auto one = test::run_shell("\"$EXE\" check dqn-smoketest --set walk_forward.folds=1", dir);
    CHECK(one.code == 2);
    CHECK(one.err.find("walk_forward.folds") != std::string::npos);
    const auto many = test::run_shell(
        "\"$EXE\" walk-forward --profile dqn-smoketest --device cpu "
        "--set walk_forward.folds=20 --output '" +
            (dir / "o").string() + "'",
        dir);
    CHECK(many.code == 2);
    CHECK(many.err.find("walk_forward.folds = 20") != std::string::npos);
    CHECK(!fs::exists(dir / "o" / "dqn-smoketest" / "fold-0"));  // refused before anything trained
    const auto fold =
        test::run_shell("\"$EXE\" check dqn-smoketest --set walk_forward.folds=3 --set walk_forward.fold=3", dir);
    CHECK(fold.code == 2);
    CHECK(fold.err.find("walk_forward.fold = 3") != std::string::npos);
}
