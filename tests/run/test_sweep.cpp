/// @file test_sweep.cpp
/// @brief [sweep] The CI sweep through the executable (FH_TRAIN_EXE) and scripts/sweep.sh
///        (FH_SOURCE_DIR): a 3 x 3 CPU grid of tiny DQN runs, a second invocation that skips every
///        run, `compare --group-by-seed`, `report` (rendered by headless Chromium where
///        installed); Ctrl-C of a sweep and the re-run that resumes it; --auto-name and
///        run.on_exists through the command line; `eval --output` and the keys eval refuses; the bare
///        documented form (nothing after --) with and without GNU parallel and populations, and as
///        Slurm array tasks; failures counted in runs; --dry-run writing nothing; the sweep examples
///        of README.md and docs/sweeps.md run verbatim.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
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

/// Runs a shell script with $EXE (the executable), $SRC (the source tree) and $SWEEP
/// (scripts/sweep.sh) set.
Result sh(const std::string& script, const fs::path& dir) {
    const char* exe = std::getenv("FH_TRAIN_EXE");
    const char* src = std::getenv("FH_SOURCE_DIR");
    if (exe == nullptr || src == nullptr)
        FAIL("FH_TRAIN_EXE and FH_SOURCE_DIR are not set: run the tests through meson test");
    const std::string cmd = "cd '" + dir.string() + "' && EXE='" + exe + "'; SRC='" + std::string(src) + "'; SWEEP='" +
                            std::string(src) + "/scripts/sweep.sh'; { " + script + " ; } >'" +
                            (dir / ".stdout").string() + "' 2>'" + (dir / ".stderr").string() + "'";
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
const std::string kGrid =
    " --profile dqn-smoketest --cpu -j 2 --output sweep --set training.learning_rate=1e-3,3e-4,1e-4 "
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
    CHECK(fs::exists(dir / "sweep" /
                     "dqn-smoketest,run.eval_interval=300,run.log_interval=100,run.total_steps=600,"
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
    CHECK(slurp(dir / "evaldir" / "equity.csv")
              .rfind("segment,bar,time,close,action,position,equity,drawdown,buy_and_hold_equity", 0) == 0);
    CHECK(fh::test::xml_problem(slurp(dir / "evaldir" / "report.html")).empty());
    const auto costly =
        sh("\"$EXE\" eval --checkpoint '" + ckpt + "' --device cpu --set instrument.commission=40", dir);
    REQUIRE(costly.code == 0);
    const auto plain = json::parse(ev.out, json::Limits{1 << 20, 16, true});
    const auto dear = json::parse(costly.out, json::Limits{1 << 20, 16, true});
    if (plain.find("strategy")->find("trades")->as_i64() > 0)
        CHECK(dear.find("strategy")->find("total_return")->as_double() <
              plain.find("strategy")->find("total_return")->as_double());
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
    const std::string grid =
        " --profile dqn-smoketest --cpu -j 2 --output sweep --no-parallel --seeds 1,2 -- "
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

TEST_CASE("--auto-name and run.on_exists through the command line; the run directory is stdout's last line",
          "[sweep]") {
    const auto dir = scratch("onexists");
    const std::string base =
        "\"$EXE\" --profile dqn-smoketest --device cpu --output out --set run.total_steps=400 "
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

namespace {

/// The issue's own example, the documented bare form: nothing after --, the profile's budget.
const std::string kBare =
    " --profile dqn-smoketest --cpu --output D --set training.learning_rate=1e-3,3e-4 --seeds 1,2";

bool have_parallel() {
    return std::system("command -v parallel >/dev/null 2>&1") == 0;
}

/// A finished bare sweep: every run of the 2 x 2 grid completed, nothing failed, no empty argument.
void check_bare(const fs::path& dir, const Result& r, bool population) {
    INFO(r.out << r.err);
    REQUIRE(r.code == 0);
    const auto runs = run_dirs(dir / "D");
    CHECK(runs.size() == 4);
    CHECK(count(r.out, ": done ") == 4);
    CHECK(r.err.find("failed") == std::string::npos);
    for (const auto& d : runs) {
        INFO(d);
        CHECK(slurp(d / "summary.json").find("\"status\":\"completed\"") != std::string::npos);
    }
    for (int i = 0; i < 4; ++i) {
        const std::string log = slurp(dir / "D" / "sweep-logs" / ("point-" + std::to_string(i) + ".log"));
        INFO(log);
        CHECK(log.find("not expected") == std::string::npos);
        CHECK(log.find(" ''") == std::string::npos);
    }
    // One process for the population of 4 (one job slot), else one per run.
    CHECK(slurp(dir / "D" / "sweep-jobs.tsv") == (population ? "0 1 2 3\n" : "0\n1\n2\n3\n"));
}

}  // namespace

TEST_CASE("the bare sweep (nothing after --) runs with GNU parallel, as populations and one process per run",
          "[sweep]") {
    if (!have_parallel())
        std::fprintf(stderr, "NOTICE: GNU parallel is not installed: these sweeps use the built-in job pool\n");
    for (const bool population : {true, false}) {
        const auto dir = scratch(population ? "bare-parallel" : "bare-parallel-single");
        const auto r = sh("\"$SWEEP\" --exe \"$EXE\"" + kBare + (population ? "" : " --no-population"), dir);
        if (have_parallel()) CHECK(r.err.find("sweep: GNU parallel") != std::string::npos);
        check_bare(dir, r, population);
        fs::remove_all(dir);
    }
}

TEST_CASE("the bare sweep (nothing after --) runs with the built-in job pool, as populations and one process per run",
          "[sweep]") {
    for (const bool population : {true, false}) {
        const auto dir = scratch(population ? "bare-pool" : "bare-pool-single");
        const auto r =
            sh("\"$SWEEP\" --exe \"$EXE\" --no-parallel" + kBare + (population ? "" : " --no-population"), dir);
        CHECK(r.err.find("sweep: built-in job pool") != std::string::npos);
        check_bare(dir, r, population);
        fs::remove_all(dir);
    }
}

TEST_CASE("the bare sweep as Slurm array tasks: each task's log under the sweep, one grid and one job table",
          "[sweep]") {
    // sweep.sbatch as Slurm runs it (SLURM_* set), two tasks at a time, without a Slurm here;
    // scripts/test-slurm.sh runs the same through a real single-node Slurm.
    const auto dir = scratch("sbatch");
    const std::string task =
        "SLURM_ARRAY_JOB_ID=77 FH_SWEEP_SCRIPT=\"$SWEEP\" bash \"$SRC/scripts/sweep.sbatch\" --exe \"$EXE\"" + kBare;
    const auto r =
        sh("for i in 0 1 2 3; do SLURM_ARRAY_TASK_ID=$i " + task + " & [ $i != 1 ] || wait; done; wait", dir);
    INFO(r.out << r.err);
    CHECK(r.out.empty());  // everything in the tasks' logs
    const auto runs = run_dirs(dir / "D");
    CHECK(runs.size() == 4);
    for (const auto& d : runs) CHECK(slurp(d / "summary.json").find("\"status\":\"completed\"") != std::string::npos);
    for (int i = 0; i < 4; ++i) {
        const std::string log = slurp(dir / "D" / "sweep-logs" / ("slurm-77_" + std::to_string(i) + ".out"));
        INFO(i << ": " << log);
        CHECK(log.find("sweep: point " + std::to_string(i) + " on cpu: done ") != std::string::npos);
        CHECK(log.find("the run ended with exit status 0") != std::string::npos);
    }
    // Nothing where it was submitted but the sweep; in the sweep, the runs, one grid, one job table.
    std::vector<std::string> top, files;
    for (const auto& e : fs::directory_iterator(dir))
        if (e.path().filename().string()[0] != '.') top.push_back(e.path().filename().string());
    CHECK(top == std::vector<std::string>{"D"});
    for (const auto& e : fs::directory_iterator(dir / "D"))
        if (!fs::exists(e.path() / "config.toml")) files.push_back(e.path().filename().string());
    std::sort(files.begin(), files.end());
    CHECK(files == std::vector<std::string>{"sweep-grid.tsv", "sweep-jobs.tsv", "sweep-logs"});
    CHECK(count(slurp(dir / "D" / "sweep-grid.tsv"), "\n") == 4);
    CHECK(slurp(dir / "D" / "sweep-jobs.tsv") == "0\n1\n2\n3\n");
    // A task that runs again (requeued after its run finished) skips it.
    const auto again = sh("SLURM_ARRAY_TASK_ID=0 " + task, dir);
    CHECK(again.code == 0);
    CHECK(slurp(dir / "D" / "sweep-logs" / "slurm-77_0.out").find("on cpu: skipped ") != std::string::npos);
    // Without a sweep directory or outside an array: exit 2, the reason in a log where it ran.
    const auto no_array = sh("bash \"$SRC/scripts/sweep.sbatch\" --output E --profile dqn-smoketest", dir);
    CHECK(no_array.code == 2);
    CHECK(slurp(dir / "E" / "sweep-logs" / "slurm-0_x.out").find("job array") != std::string::npos);
    fs::remove_all(dir);
}

TEST_CASE("a sweep's summary counts failed runs, not processes; --dry-run and --print-grid write nothing", "[sweep]") {
    const auto dir = scratch("failures");
    // Every run fails (a key no profile has): one population process of 4 runs, or 4 processes.
    for (const std::string how : {"", " --no-population --no-parallel"}) {
        const auto r = sh("\"$SWEEP\" --exe \"$EXE\"" + kBare + how + " -- --set bogus.key=1", dir);
        INFO(how << ": " << r.out << r.err);
        CHECK(r.code == 1);
        CHECK(count(r.out, ": failed (exit 2") == 4);
        CHECK(r.err.find("sweep: 4 of 4 runs failed (points 0 1 2 3)") != std::string::npos);
        fs::remove_all(dir / "D");
    }
    // Two of four fail (a learning rate the profile rules refuse), one process each.
    const auto half =
        sh("\"$SWEEP\" --exe \"$EXE\" --profile dqn-smoketest --cpu -j 2 --output D --no-population "
           "--set training.learning_rate=1e-3,-1 --seeds 1,2 -- --set run.total_steps=400 --set run.eval_interval=0",
           dir);
    INFO(half.out << half.err);
    CHECK(half.code == 1);
    CHECK(half.err.find("sweep: 2 of 4 runs failed (points 2 3)") != std::string::npos);
    CHECK(run_dirs(dir / "D").size() == 2);
    fs::remove_all(dir / "D");

    // --dry-run: one command per process, each runnable as printed (no empty argument), nothing written.
    for (const std::string how : {" -j 2", " -j 2 --no-population"}) {
        const auto dry = sh("\"$SWEEP\" --exe \"$EXE\"" + kBare + how + " --dry-run", dir);
        INFO(how << ": " << dry.out << dry.err);
        CHECK(dry.code == 0);
        CHECK(count(dry.out, "\n") == (how.find("no-population") != std::string::npos ? 4 : 2));
        CHECK(dry.out.find("''") == std::string::npos);
        CHECK(dry.out.find(" --profile dqn-smoketest --output D --auto-name --set run.on_exists=resume --device cpu") !=
              std::string::npos);
        CHECK(!fs::exists(dir / "D"));
    }
    const auto grid = sh("\"$SWEEP\"" + kBare + " --print-grid", dir);
    CHECK(grid.code == 0);
    CHECK(grid.out ==
          "training.learning_rate=1e-3\trun.seed=1\ntraining.learning_rate=1e-3\trun.seed=2\n"
          "training.learning_rate=3e-4\trun.seed=1\ntraining.learning_rate=3e-4\trun.seed=2\n");
    CHECK(!fs::exists(dir / "D"));
    fs::remove_all(dir);
}

namespace {

/// The logical lines (a trailing backslash joins the next) of each code block of a Markdown file:
/// fenced blocks and blocks indented by four spaces.
std::vector<std::vector<std::string>> code_blocks(const std::string& text) {
    std::vector<std::vector<std::string>> blocks;
    std::vector<std::string> block;
    std::string pending;
    bool fenced = false;
    const auto flush = [&] {
        if (!pending.empty()) block.push_back(pending);
        pending.clear();
        if (!block.empty()) blocks.push_back(block);
        block.clear();
    };
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("```", 0) == 0) {
            flush();
            fenced = !fenced;
            continue;
        }
        std::string code;
        if (fenced)
            code = line;
        else if (line.rfind("    ", 0) == 0)
            code = line.substr(4);
        else {
            flush();
            continue;
        }
        if (pending.empty()) {
            pending = code;
        } else {  // a continuation line: its indentation is not part of the command
            const auto text = code.find_first_not_of(' ');
            pending += text == std::string::npos ? "" : code.substr(text);
        }
        if (!pending.empty() && pending.back() == '\\')
            pending.pop_back();
        else {
            block.push_back(pending);
            pending.clear();
        }
    }
    flush();
    return blocks;
}

/// The value of `--output DIR` in a command line ("" if none).
std::string output_of(const std::string& command) {
    std::smatch m;
    return std::regex_search(command, m, std::regex(R"(--output (\S+))")) ? m[1].str() : "";
}

}  // namespace

TEST_CASE("the sweep examples of README.md and docs/sweeps.md run verbatim", "[sweep]") {
    // Every code block with a scripts/sweep.sh or sweep.sbatch command, run in a folder where
    // scripts/ has the source tree's scripts and build/foxhunt-train is the executable under test
    // (FH_TRAIN_EXE). How each
    // command runs (printed to the test log):
    // - a sweep on the CPU of a smoketest profile: verbatim, in full (the profile's own budget);
    //   then every run of its grid must have completed, and the block's other foxhunt-train
    //   commands (compare, report) run verbatim too;
    // - any other sweep (GPUs, a full profile): too long here, so verbatim with --dry-run added
    //   after scripts/sweep.sh (the grid, the options and the commands must all be accepted);
    // - `n=$(scripts/sweep.sh --print-grid ...)`: verbatim; n must be positive;
    // - `sbatch [options] scripts/sweep.sbatch ARGS`: no Slurm here: `scripts/sweep.sh --dry-run
    //   ARGS` (scripts/test-slurm.sh submits such an array to a real single-node Slurm);
    // - a block's other lines (e.g. the printf that writes a --grid file): verbatim.
    const char* src = std::getenv("FH_SOURCE_DIR");
    REQUIRE(src != nullptr);
    int examples = 0;
    for (const char* doc : {"README.md", "docs/sweeps.md", "docs/cli.md"}) {
        const fs::path path = fs::path(src) / doc;
        if (!fs::exists(path)) continue;
        int block_index = 0;
        for (const auto& block : code_blocks(slurp(path))) {
            ++block_index;
            bool sweep_block = false;
            for (const auto& c : block)
                if (c.find("scripts/sweep.sh ") != std::string::npos ||
                    c.find("scripts/sweep.sbatch ") != std::string::npos)
                    sweep_block = true;
            if (!sweep_block) continue;
            const auto dir = scratch("example");
            fs::create_directories(dir / "build");
            // scripts/ holds links to the source tree's scripts (a link to the folder itself would make
            // sweep.sh's default executable, ../build/foxhunt-train, the source tree's build).
            fs::create_directories(dir / "scripts");
            for (const auto& e : fs::directory_iterator(fs::path(src) / "scripts"))
                fs::create_symlink(e.path(), dir / "scripts" / e.path().filename());
            fs::create_symlink(std::getenv("FH_TRAIN_EXE"), dir / "build" / "foxhunt-train");
            std::string script = "set -e -o pipefail\n";
            std::vector<std::string> full_runs;
            bool ran_full = false;
            for (const auto& c : block) {
                std::string line = c, how;
                const auto sbatch = c.find("scripts/sweep.sbatch ");
                if (c.rfind("scripts/sweep.sh ", 0) == 0) {
                    if (c.find(" --cpu") != std::string::npos && c.find("-smoketest") != std::string::npos) {
                        how = "verbatim, in full";
                        full_runs.push_back(c);
                        ran_full = true;
                    } else {
                        how = "verbatim with --dry-run (GPUs or a full profile: too long here)";
                        line = "scripts/sweep.sh --dry-run " + c.substr(17) + " >/dev/null";
                    }
                } else if (c.rfind("n=$(scripts/sweep.sh --print-grid ", 0) == 0) {
                    how = "verbatim";
                    line = c + "\ntest \"$n\" -gt 0";
                } else if (c.find("sbatch ") == 0 && sbatch != std::string::npos) {
                    how = "its arguments through scripts/sweep.sh --dry-run (no Slurm here)";
                    line = "scripts/sweep.sh --dry-run " + c.substr(sbatch + 21) + " >/dev/null";
                } else if (c.rfind("build/foxhunt-train ", 0) == 0 || c.rfind("foxhunt-train ", 0) == 0) {
                    if (!ran_full) continue;  // it reads a sweep that was not run
                    how = "verbatim";
                    if (c.rfind("foxhunt-train ", 0) == 0) line = "build/" + c;
                    line += " >/dev/null";
                } else {
                    how = "verbatim";
                }
                std::printf("%s, block %d: %s\n    %s\n", doc, block_index, how.c_str(), c.c_str());
                script += "echo '+ " + std::regex_replace(line, std::regex("'"), "'\\''") + "' >&2\n" + line + "\n";
                ++examples;
            }
            std::ofstream(dir / "example.sh") << script;
            const auto r = sh("bash example.sh", dir);
            INFO(doc << " block " << block_index << ":\n" << script << "\n" << r.out << r.err);
            CHECK(r.code == 0);
            for (const auto& c : full_runs) {
                const fs::path out = dir / output_of(c);
                const auto grid = sh("scripts/sweep.sh --print-grid " + c.substr(17), dir);
                const auto runs = run_dirs(out);
                CHECK(runs.size() == static_cast<std::size_t>(count(grid.out, "\n")));
                for (const auto& d : runs)
                    CHECK(slurp(d / "summary.json").find("\"status\":\"completed\"") != std::string::npos);
            }
            fs::remove_all(dir);
        }
    }
    CHECK(examples > 0);
}
