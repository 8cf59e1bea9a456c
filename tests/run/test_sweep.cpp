/// @file test_sweep.cpp
/// @brief [sweep] The CI sweep through the executable (FH_TRAIN_EXE) and scripts/sweep.sh
///        (FH_SOURCE_DIR): a 3 x 3 CPU grid of tiny DQN runs, a second invocation that skips every
///        run, `compare --group-by-seed`, `report` (rendered by headless Chromium where
///        installed); Ctrl-C of a sweep and the re-run that resumes it; --auto-name and
///        run.on_exists through the command line; `eval --output` and the keys eval refuses.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "io/json.hpp"
#include "support/chromium.hpp"
#include "support/shell.hpp"
#include "support/xml_check.hpp"

namespace fs = std::filesystem;
namespace json = fh::io::json;

namespace {

struct Result {
    int code = -1;
    std::string out, err;
};

std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

fs::path scratch(const std::string& name) {
    const fs::path p = fs::temp_directory_path() / ("fh-sweep-" + std::to_string(::getpid()) + "-" + name);
    fs::remove_all(p);
    fs::create_directories(p);
    return p;
}

/// Runs a shell script with $EXE (the executable) and $SWEEP (scripts/sweep.sh) set.
Result sh(const std::string& script, const fs::path& dir) {
    const char* exe = std::getenv("FH_TRAIN_EXE");
    const char* src = std::getenv("FH_SOURCE_DIR");
    if (exe == nullptr || src == nullptr) FAIL("FH_TRAIN_EXE and FH_SOURCE_DIR are not set: run the tests through meson test");
    const std::string cmd = "cd '" + dir.string() + "' && EXE='" + exe + "'; SWEEP='" + std::string(src) +
                            "/scripts/sweep.sh'; { " + script + " ; } >'" + (dir / ".stdout").string() + "' 2>'" +
                            (dir / ".stderr").string() + "'";
    const int status = std::system(cmd.c_str());
    Result r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = slurp(dir / ".stdout");
    r.err = slurp(dir / ".stderr");
    return r;
}

int count(const std::string& text, const std::string& what) {
    int n = 0;
    for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
}

std::vector<fs::path> run_dirs(const fs::path& sweep) {
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(sweep))
        if (fs::exists(e.path() / "config.toml")) out.push_back(e.path());
    std::sort(out.begin(), out.end());
    return out;
}

std::string last_line(const std::string& s) {
    const auto end = s.find_last_not_of('\n');
    if (end == std::string::npos) return "";
    const auto begin = s.rfind('\n', end);
    return s.substr(begin == std::string::npos ? 0 : begin + 1, end - (begin == std::string::npos ? 0 : begin + 1) + 1);
}

void render(const fs::path& html, const fs::path& png) {
    const std::string chromium = fh::test::chromium_for("the sweep report");
    if (chromium.empty()) return;
    const auto r = fh::test::render_with_chromium(chromium, html, png);
    INFO(r.log);
    CHECK(r.code == 0);
    CHECK(r.console.empty());
    CHECK(r.png_signature);
}

// Tiny budgets: each run trains 600 env steps and validates twice (about a second on the CPU).
const std::string kTiny = " -- --set run.total_steps=600 --set run.eval_interval=300 --set run.log_interval=100";
const std::string kGrid = " --profile dqn-smoketest --cpu -j 2 --output sweep --set training.learning_rate=1e-3,3e-4,1e-4 "
                          "--seeds 1,2,3";

}  // namespace

TEST_CASE("a 3 x 3 CPU sweep runs, a second invocation skips every run, compare and report read it", "[sweep]") {
    const auto dir = scratch("grid");
    const auto first = sh("\"$SWEEP\" --exe \"$EXE\"" + kGrid + kTiny, dir);
    INFO(first.out << first.err);
    REQUIRE(first.code == 0);
    const auto runs = run_dirs(dir / "sweep");
    REQUIRE(runs.size() == 9);
    CHECK(count(first.out, ": done ") == 9);
    for (const auto& r : runs) {
        INFO(r);
        CHECK(slurp(r / "summary.json").find("\"status\":\"completed\"") != std::string::npos);
        CHECK(r.filename().string().find(",training.learning_rate=") != std::string::npos);
    }
    CHECK(fs::exists(dir / "sweep" / "dqn-smoketest,run.eval_interval=300,run.log_interval=100,run.total_steps=600,"
                                     "training.learning_rate=0.0003,seed=2"));
    std::vector<std::string> before;
    for (const auto& r : runs) before.push_back(slurp(r / "summary.json"));

    // The same command again (with the built-in job pool this time): every run is skipped.
    const auto second = sh("\"$SWEEP\" --exe \"$EXE\" --no-parallel" + kGrid + kTiny, dir);
    INFO(second.out << second.err);
    REQUIRE(second.code == 0);
    CHECK(count(second.out, ": skipped ") == 9);
    CHECK(run_dirs(dir / "sweep").size() == 9);
    for (std::size_t i = 0; i < runs.size(); ++i) CHECK(slurp(runs[i] / "summary.json") == before[i]);

    // compare --group-by-seed: three settings, mean +- sd over three seeds, one marked best.
    const auto grouped = sh("\"$EXE\" compare sweep --group-by-seed", dir);
    INFO(grouped.err);
    REQUIRE(grouped.code == 0);
    std::printf("%s", grouped.out.c_str());  // the table, in the test log
    CHECK(count(grouped.out, "| 3/3 | 1 2 3 |") == 3);
    CHECK(count(grouped.out, "| * |") == 1);
    CHECK(count(grouped.out, " ± ") >= 3 * 7);
    CHECK(grouped.out.find("training.learning_rate") != std::string::npos);
    const auto as_json = sh("\"$EXE\" compare sweep --format json", dir);
    REQUIRE(as_json.code == 0);
    CHECK(json::parse(as_json.out, json::Limits{1 << 22, 16, true}).find("rows")->as_array().size() == 9);
    const auto as_csv = sh("\"$EXE\" compare sweep/*seed=1 --format csv --group-by-seed", dir);
    REQUIRE(as_csv.code == 0);
    CHECK(count(as_csv.out, "\n") == 4);  // header + three settings
    CHECK(sh("\"$EXE\" compare sweep/sweep-logs", dir).code == 2);

    // summary.json has what compare needs without the command line.
    const auto summary = json::parse(before[0], json::Limits{1 << 22, 64, true});
    CHECK(summary.find("seed")->is_integer());
    CHECK(summary.find("overrides")->as_array().size() >= 5);
    CHECK(summary.find("data")->find("xxh64")->as_string().size() == 16);
    CHECK(summary.find("bars_per_year")->as_double() > 0);

    // report: the sweep page and every run's page.
    const auto rep = sh("\"$EXE\" report sweep", dir);
    INFO(rep.err);
    REQUIRE(rep.code == 0);
    CHECK(last_line(rep.out) == "sweep/report.html");
    const std::string page = slurp(dir / "sweep" / "report.html");
    CHECK(fh::test::xml_problem(page).empty());
    CHECK(count(page, "/report.html\"") >= 9);
    for (const auto& r : runs) {
        const std::string html = slurp(r / "report.html");
        INFO(r << ": " << fh::test::xml_problem(html));
        CHECK(fh::test::xml_problem(html).empty());
    }
    render(dir / "sweep" / "report.html", dir / "sweep.png");
    render(runs[0] / "report.html", dir / "run.png");

    // eval --output of one run: the CSVs, the JSON and a report; costs honoured, other keys refused.
    const std::string ckpt = (runs[0] / "checkpoints" / "best.safetensors").string();
    const auto ev = sh("\"$EXE\" eval --checkpoint '" + ckpt + "' --device cpu --output evaldir", dir);
    INFO(ev.err);
    REQUIRE(ev.code == 0);
    for (const char* f : {"eval.json", "equity.csv", "trades.csv", "config.toml", "report.html"})
        CHECK(fs::exists(dir / "evaldir" / f));
    CHECK(slurp(dir / "evaldir" / "equity.csv").rfind("segment,bar,time,close,action,position,equity,drawdown,buy_and_hold_equity", 0) == 0);
    CHECK(fh::test::xml_problem(slurp(dir / "evaldir" / "report.html")).empty());
    const auto costly = sh("\"$EXE\" eval --checkpoint '" + ckpt + "' --device cpu --set instrument.commission=40", dir);
    REQUIRE(costly.code == 0);
    const auto plain = json::parse(ev.out, json::Limits{1 << 20, 16, true});
    const auto dear = json::parse(costly.out, json::Limits{1 << 20, 16, true});
    if (plain.find("strategy")->find("trades")->as_i64() > 0)
        CHECK(dear.find("strategy")->find("total_return")->as_double() < plain.find("strategy")->find("total_return")->as_double());
    for (const std::string bad : {" --set dqn.hidden=[8]", " --set env.position_levels=5", " --profile dqn-smoketest",
                                  " --seed 3", " --auto-name"}) {
        const auto r = sh("\"$EXE\" eval --checkpoint '" + ckpt + "' --device cpu" + bad, dir);
        INFO(bad << ": " << r.err);
        CHECK(r.code == 2);
        CHECK(r.err.find("eval") != std::string::npos);
    }
    fs::remove_all(dir);
}

TEST_CASE("Ctrl-C stops a sweep with every run checkpointed; the same command resumes and completes it", "[sweep]") {
    const auto dir = scratch("interrupt");
    const std::string grid = " --profile dqn-smoketest --cpu -j 2 --output sweep --no-parallel --seeds 1,2 -- "
                             "--set run.total_steps=3000 --set run.log_interval=100";
    // Like a terminal's Ctrl-C: SIGINT to the sweep's whole process group once both runs train.
    // (Started from Python as a new process group with the default SIGINT action, as a terminal's
    // foreground job: a shell's `&` would start it with SIGINT ignored.)
    const auto r = sh(fh::test::ctrl_c_once("sweep/*/metrics.jsonl", 2) + "\"$SWEEP\" --exe \"$EXE\"" + grid, dir);
    INFO(r.out << r.err);
    CHECK(r.code == 130);
    const auto runs = run_dirs(dir / "sweep");
    REQUIRE(runs.size() == 2);
    for (const auto& d : runs) {
        INFO(d);
        CHECK(slurp(d / "summary.json").find("\"status\":\"interrupted\"") != std::string::npos);
        CHECK(fs::exists(d / "checkpoints" / "last.safetensors"));
    }
    const auto again = sh("\"$SWEEP\" --exe \"$EXE\"" + grid, dir);
    INFO(again.out << again.err);
    CHECK(again.code == 0);
    CHECK(count(again.out, ": done (resumed) ") == 2);
    for (const auto& d : runs) CHECK(slurp(d / "summary.json").find("\"status\":\"completed\"") != std::string::npos);
    fs::remove_all(dir);
}

TEST_CASE("--auto-name and run.on_exists through the command line; the run directory is stdout's last line", "[sweep]") {
    const auto dir = scratch("onexists");
    const std::string base = "\"$EXE\" --profile dqn-smoketest --device cpu --output out --set run.total_steps=400 "
                             "--set run.eval_interval=0 --seed 5";
    const auto a = sh(base + " --auto-name --set run.on_exists=resume", dir);
    INFO(a.err);
    REQUIRE(a.code == 0);
    const std::string name = "out/dqn-smoketest,run.eval_interval=0,run.total_steps=400,seed=5";
    CHECK(a.out == name + "\n");
    const auto skipped = sh(base + " --auto-name --set run.on_exists=skip", dir);
    CHECK(skipped.code == 0);
    CHECK(skipped.out == name + "\n");
    CHECK(skipped.err.find("skipped") != std::string::npos);
    const auto error = sh(base + " --auto-name --set run.on_exists=error", dir);
    CHECK(error.code == 2);
    CHECK(error.err.find("exists") != std::string::npos);
    const auto fresh = sh(base + " --auto-name", dir);  // on_exists = new: beside it
    CHECK(fresh.code == 0);
    CHECK(last_line(fresh.out) == name + "-2");
    CHECK(sh(base + " --auto-name --resume '" + name + "'", dir).code == 2);
    CHECK(sh(base + " --set run.on_exists=maybe", dir).code == 2);
    fs::remove_all(dir);
}
