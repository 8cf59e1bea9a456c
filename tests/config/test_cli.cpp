/// @file test_cli.cpp
/// @brief The executable: `check`, `train`, `--help`, exit codes (FH_TRAIN_EXE, set by meson test).
#include <sys/wait.h>
#include <algorithm>
#include <cmath>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "io/json.hpp"
#include "support.hpp"

namespace fs = std::filesystem;

namespace {

struct Run {
    int code = -1;
    std::string out, err;
};

std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

/// Runs the executable with `args` (already shell-quoted); stdout and stderr captured apart.
Run run_exe(const std::string& args) {
    const char* exe = std::getenv("FH_TRAIN_EXE");
    Run r;
    if (exe == nullptr) return r;
    const auto dir = fs::temp_directory_path() / ("fh-cli-test-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    const std::string cmd =
        std::string("'") + exe + "' " + args + " >'" + (dir / "out").string() + "' 2>'" + (dir / "err").string() + "'";
    const int status = std::system(cmd.c_str());
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = slurp(dir / "out");
    r.err = slurp(dir / "err");
    fs::remove_all(dir);
    return r;
}

fs::path write_temp(const std::string& name, const std::string& text) {
    const auto p = fs::temp_directory_path() / (std::to_string(::getpid()) + "-" + name);
    std::ofstream(p, std::ios::binary) << text;
    return p;
}

/// The executable tests need FH_TRAIN_EXE (meson test sets it): without it they fail, loudly,
/// rather than pass without testing anything.
bool have_exe() {
    if (std::getenv("FH_TRAIN_EXE") == nullptr)
        FAIL("FH_TRAIN_EXE is not set: run the tests through `meson test` (scripts/test.sh)");
    return true;
}

}  // namespace

TEST_CASE("cli: check prints a resolved profile that feeds back to the same resolution", "[config]") {
    if (!have_exe()) return;
    // 600 daily bars: enough for the features' warm-up and three splits.
    std::string csv = "timestamp,open,high,low,close,volume\n";
    for (int d = 0; d < 600; ++d) {
        const double c = 100.0 + 10.0 * std::sin(d * 0.05) + d * 0.01;
        csv += std::to_string(1'600'000'000LL + d * 86'400LL) + "," + std::to_string(c - 0.2) + "," +
               std::to_string(c + 1.0) + "," + std::to_string(c - 1.0) + "," + std::to_string(c) + ",1000\n";
    }
    const auto bars = write_temp("bars.csv", csv);
    const auto first =
        run_exe("check dqn-smoketest --set dqn.hidden=[32,32] --seed 9 --set data.cache_dir='\"" +
                (fs::temp_directory_path() / "fh-cli-cache").string() + "\"' --data '" + bars.string() + "'");
    INFO(first.err);
    REQUIRE(first.code == 0);
    CHECK(first.out.find("hidden = [32, 32]") != std::string::npos);
    CHECK(first.out.find("seed = 9") != std::string::npos);
    CHECK(first.out.find("path = \"" + bars.string() + "\"") != std::string::npos);
    CHECK(first.out.find("#   bars:           600") != std::string::npos);  // the data summary
    CHECK(first.out.find("# Estimated device memory") != std::string::npos);
    CHECK(first.out.find("(replay_buffer.buffer_size)") != std::string::npos);
    const auto resolved = write_temp("resolved.toml", first.out);
    const auto second = run_exe("check '" + resolved.string() + "'");
    REQUIRE(second.code == 0);
    // identical apart from the first line, which names the file, the fxcache status line
    // (built by the first run, reused by the second) and the memory available (it varies: the host's,
    // and with a GPU the device's, each on a "(fits: " line)
    auto without_cache_line = [](std::string s) {
        for (const char* varying : {"#   fxcache:", "(fits: "}) {
            for (auto at = s.find(varying); at != std::string::npos; at = s.find(varying, at)) {
                at = s.rfind('\n', at) + 1;
                s.erase(at, s.find('\n', at) - at);
            }
        }
        return s.substr(s.find('\n'));
    };
    CHECK(without_cache_line(first.out) == without_cache_line(second.out));
    fs::remove(resolved);

    // A data error is exit code 3 and names the file and line.
    const auto bad =
        write_temp("bad.csv", "timestamp,open,high,low,close\n2024-01-02,1,2,0.5,1.5\n2024-01-01,1,2,0.5,1.5\n");
    const auto r = run_exe("check dqn-smoketest --data '" + bad.string() + "'");
    CHECK(r.code == 3);
    CHECK(r.err.find(bad.string() + ":3:") != std::string::npos);
    fs::remove(bad);
    fs::remove(bars);
    fs::remove_all(fs::temp_directory_path() / "fh-cli-cache");
}

TEST_CASE("cli: profile errors and usage errors exit with 2", "[config]") {
    if (!have_exe()) return;
    const auto bad = write_temp("bad.toml", "[run]\ntrainer = \"dqn\"\n[training]\ngamma = 7\n");
    auto r = run_exe("check '" + bad.string() + "'");
    CHECK(r.code == 2);
    CHECK(r.err.find(bad.string() + ":4:9: training.gamma must be [0, 1]") != std::string::npos);
    r = run_exe("--profile '" + bad.string() + "'");  // train validates too
    CHECK(r.code == 2);
    fs::remove(bad);

    r = run_exe("check dqn-smoketest --set dqn.hiden=[1]");
    CHECK(r.code == 2);
    CHECK(r.err.find("did you mean 'hidden'") != std::string::npos);
    r = run_exe("check no-such-profile");
    CHECK(r.code == 2);
    r = run_exe("--no-such-option");
    CHECK(r.code == 2);
    r = run_exe("check dqn-smoketest --seed -3");
    CHECK(r.code == 2);
    r = run_exe("");  // train without a profile
    CHECK(r.code == 2);
    CHECK(r.err.find("no profile") != std::string::npos);
}

TEST_CASE("cli: train runs each smoketest profile and writes the run directory", "[config][trainers]") {
    if (!have_exe()) return;
    const fs::path out = fs::temp_directory_path() / ("fh-cli-train-" + std::to_string(::getpid()));
    fs::remove_all(out);
    // Metrics lines: dqn 2000 env steps / 100; ppo 4000 / 400; iql and supervised 500 updates / 50;
    // dt 200 updates / 50.
    for (const auto& [trainer, lines] :
         {std::pair<std::string, long>{"dqn", 20}, {"ppo", 10}, {"iql", 10}, {"supervised", 10}, {"dt", 4}}) {
        const std::string profile = trainer + "-smoketest";
        const auto r = run_exe("--profile " + profile + " --device cpu --output '" + out.string() + "'");
        INFO(profile << ": " << r.err);
        REQUIRE(r.code == 0);
        const fs::path run = out / profile;
        CHECK(fs::exists(run / "config.toml"));
        CHECK(fs::exists(run / "checkpoints" / "best.safetensors"));
        CHECK(fs::exists(run / "backtest" / "equity.csv"));
        const std::string metrics = slurp(run / "metrics.jsonl");
        CHECK(std::count(metrics.begin(), metrics.end(), '\n') == lines);
        CHECK(metrics.find("NaN") == std::string::npos);
        CHECK(metrics.find("null") == std::string::npos);  // every figure finite
        const std::string summary = slurp(run / "summary.json");
        CHECK(summary.find("\"status\":\"completed\"") != std::string::npos);
        CHECK(summary.find("\"trainer\":\"" + trainer + "\"") != std::string::npos);
    }
    fs::remove_all(out);
}

TEST_CASE("cli: bench prints each trainer's throughput as one JSON object", "[config][trainers]") {
    if (!have_exe()) return;
    for (const std::string trainer : {"dqn", "ppo", "iql", "supervised", "dt"}) {
        const auto r = run_exe("bench --profile " + trainer + "-smoketest --device cpu --quiet");
        INFO(trainer << ": " << r.err << r.out);
        REQUIRE(r.code == 0);
        CHECK(r.out.find("\"trainer\":\"" + trainer + "\"") != std::string::npos);
        CHECK(r.out.find("\"updates_per_s\":") != std::string::npos);
        CHECK(r.out.find("\"updates_per_s\":0,") == std::string::npos);  // updates were timed
        CHECK(r.out.find("null") == std::string::npos);
        // Online trainers also time collection and both together.
        if (trainer != "iql" && trainer != "supervised" && trainer != "dt")
            CHECK(r.out.find("\"end_to_end_env_steps_per_s\":0,") == std::string::npos);
    }
}

TEST_CASE(
    "cli: bench --kernel-times and --ablate are CUDA diagnostics: none on the CPU (--ablate refused); an unbatched "
    "population takes --ablate only",
    "[config]") {
    if (!have_exe()) return;
    for (const std::string population : {"", " --set run.population=2"}) {
        const auto refused = run_exe(
            "bench --profile dqn-smoketest --device cpu --quiet --ablate --set run.total_steps=80" + population);
        INFO(refused.err);
        CHECK(refused.code == 2);
        CHECK(refused.err.find("--ablate is a CUDA diagnostic") != std::string::npos);
    }
    const auto r = run_exe(
        "bench --profile dqn-smoketest --device cpu --quiet --kernel-times "
        "--set run.total_steps=80");
    INFO(r.err);
    REQUIRE(r.code == 0);
    CHECK(r.out.find("\"updates_per_s\":") != std::string::npos);
    CHECK(r.out.find("\"kernel_times\"") == std::string::npos);
    CHECK(r.out.find("\"ablation\"") == std::string::npos);
    const auto p = run_exe(
        "bench --profile dqn-smoketest --device cpu --quiet --kernel-times --set run.population=2 "
        "--set run.population_batching=off");
    CHECK(p.code == 2);
    CHECK(p.err.find("a population times its ops when it is batched") != std::string::npos);
    const auto q = run_exe(
        "bench --profile dqn-smoketest --device cpu --quiet --kernel-times --set run.population=2 "
        "--set run.total_steps=80 --set run.population_batching=on");
    INFO(q.err);
    CHECK(q.code == 0);
    CHECK(q.out.find("\"batched\":true") != std::string::npos);
    CHECK(q.out.find("\"kernel_times\"") == std::string::npos);
}

TEST_CASE("cli: bench --ablate times the captured steps again without each op and without their work, on CUDA",
          "[gpu][config]") {
    if (!have_exe()) return;
    namespace json = fh::io::json;
    for (const std::string profile : {"dqn-smoketest", "iql-smoketest"}) {
        const auto r = run_exe("bench --profile " + profile + " --device cuda --quiet --kernel-times --ablate");
        INFO(profile << ": " << r.err);
        REQUIRE(r.code == 0);
        const json::Value v = json::parse(r.out.substr(r.out.rfind('{', r.out.find("\"trainer\""))),
                                          json::Limits{64u << 20, 64, true});  // fractions allowed
        const json::Value* ablation = v.find("ablation");
        const json::Value* times = v.find("kernel_times");
        REQUIRE(ablation != nullptr);
        REQUIRE(times != nullptr);
        for (const char* phase : {"collection", "update"}) {
            const json::Value* a = ablation->find(phase);
            if (profile == "iql-smoketest" && std::string(phase) == "collection") {  // offline: no collection
                CHECK(a == nullptr);
                continue;
            }
            INFO(phase);
            REQUIRE(a != nullptr);
            const double captured = a->find("us_captured")->as_double();
            CHECK(captured > 0);
            // The graph's nodes and edges without their work take less than the whole step.
            const double skeleton = a->find("us_skeleton")->as_double();
            CHECK(skeleton > 0);
            CHECK(skeleton < captured);
            // Every op the events timed is left out once and stood in for once; neither ever
            // costs more than the whole step (a loose bound: timing noise), and leaving out every
            // kernel of the step's fused work, or only their work, saves something.
            const auto& ops = a->find("ops")->as_array();
            REQUIRE(ops.size() == times->find(phase)->find("ops")->as_array().size());
            double saved = 0, work = 0;
            for (const auto& op : ops) {
                CHECK(op.find("us_without")->as_double() > 0);
                CHECK(op.find("us_without")->as_double() < 3 * captured);
                CHECK(op.find("us_stand_in")->as_double() > 0);
                CHECK(op.find("us_stand_in")->as_double() < 3 * captured);
                CHECK(op.find("us_alone")->as_double() > 0);
                CHECK(op.find("us_alone")->as_double() < 3 * captured);
                saved += op.find("us_saved")->as_double();
                work += op.find("us_work")->as_double();
            }
            CHECK(saved > 0);
            CHECK(work > 0);
        }
    }
}

TEST_CASE(
    "cli: bench --ablate on a population leaves each op out of the batched engine or every agent's graphs, on CUDA",
    "[gpu][config][population]") {
    if (!have_exe()) return;
    namespace json = fh::io::json;
    // The batched engine (every op one launch for all agents) and the agents' own graphs.
    for (const bool batched : {true, false}) {
        INFO("batched " << batched);
        const auto r = run_exe("bench --profile dqn-smoketest --device cuda --quiet --ablate --set run.population=3" +
                               std::string(batched ? " --kernel-times --set run.population_batching=on" : ""));
        INFO(r.err);
        REQUIRE(r.code == 0);
        const json::Value v =
            json::parse(r.out.substr(r.out.rfind('{', r.out.find("\"trainer\""))), json::Limits{64u << 20, 64, true});
        REQUIRE(v.find("population") != nullptr);
        REQUIRE(v.find("batched") != nullptr);
        CHECK(v.find("batched")->as_bool() == batched);
        CHECK((v.find("kernel_times") != nullptr) == batched);
        const json::Value* ablation = v.find("ablation");
        REQUIRE(ablation != nullptr);
        for (const char* phase : {"collection", "update"}) {
            INFO(phase);
            const json::Value* a = ablation->find(phase);
            REQUIRE(a != nullptr);
            const double captured = a->find("us_captured")->as_double();
            CHECK(captured > 0);
            const auto& ops = a->find("ops")->as_array();
            REQUIRE(!ops.empty());
            bool loss = false, act = false;
            for (const auto& op : ops) {
                const std::string name = op.find("op")->as_string();
                loss = loss || name.find("dqn_loss") != std::string::npos;
                act = act || name.find("dqn_act") != std::string::npos;
                CHECK(op.find("us_without")->as_double() > 0);
                CHECK(op.find("us_without")->as_double() < 3 * captured);
            }
            CHECK((std::string(phase) == "update" ? loss : act));
        }
    }
}

namespace {

/// The long option names of a --help's "Options:" section (without --help and --version).
std::set<std::string> listed_options(const std::string& help) {
    std::set<std::string> out;
    std::istringstream in(help);
    std::string line;
    bool options = false;
    while (std::getline(in, line)) {
        if (line == "Options:")
            options = true;
        else if (!line.empty() && line[0] != ' ')
            options = false;
        if (!options || line.rfind("  -", 0) != 0) continue;
        const std::string first = line.substr(2, line.find(' ', 2) - 2);  // "-p,--profile"
        const auto at = first.find("--");
        if (at == std::string::npos) continue;
        const std::string name = first.substr(at);
        if (name != "--help" && name != "--version") out.insert(name);
    }
    return out;
}

int occurrences(const std::string& text, const std::string& what) {
    int n = 0;
    for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
}

/// What each subcommand accepts ("" is the top level, which trains).
const std::vector<std::pair<std::string, std::set<std::string>>>& accepted_options() {
    static const std::set<std::string> logging = {"--quiet", "--verbose", "--log-format"};
    static const auto with_logging = [](std::set<std::string> s) {
        s.insert(logging.begin(), logging.end());
        return s;
    };
    static const std::set<std::string> train =
        with_logging({"--profile", "--set", "--data", "--seed", "--device", "--output", "--resume", "--auto-name",
                      "--seeds", "--population-grid", "--population-record", "--force", "--cuda-sync-debug"});
    static const std::vector<std::pair<std::string, std::set<std::string>>> all = {
        {"", train},
        {"train", train},
        {"check", with_logging({"--profile", "--set", "--data", "--seed", "--device", "--output", "--resume",
                                "--auto-name", "--seeds", "--population-grid", "--force"})},
        {"bench", with_logging({"--profile", "--set", "--data", "--seed", "--device", "--kernel-times", "--ablate",
                                "--force", "--cuda-sync-debug"})},
        {"eval", with_logging({"--checkpoint", "--split", "--set", "--data", "--device", "--output", "--force",
                               "--cuda-sync-debug"})},
        {"walk-forward", with_logging({"--profile", "--set", "--data", "--seed", "--device", "--output", "--force",
                                       "--cuda-sync-debug"})},
        {"audit", with_logging({"--profile", "--set", "--data", "--seed", "--device", "--cuts", "--cut-seed", "--json",
                                "--force", "--cuda-sync-debug"})},
        {"export", with_logging({"--out", "--force"})},
        {"compare", with_logging({"--format", "--group-by-seed"})},
        {"report", with_logging({"--out"})},
        {"info", logging},
    };
    return all;
}

}  // namespace

TEST_CASE("cli: --help names every option, the examples and exit codes once, no parser leftovers", "[config]") {
    if (!have_exe()) return;
    const auto r = run_exe("--help");
    CHECK(r.code == 0);
    for (const char* s : {"--profile", "--set", "--data", "--seed", "--device", "--output", "--resume", "--quiet",
                          "--verbose", "--log-format", "check", "train", "info", "130"})
        CHECK(r.out.find(s) != std::string::npos);
    CHECK(occurrences(r.out, "Examples:") == 1);
    CHECK(occurrences(r.out, "Exit codes:") == 1);
    CHECK(occurrences(r.out, "Profiles:") == 1);
    for (const auto& [sub, options] : accepted_options()) {
        const auto h = run_exe(sub + " --help");
        INFO(sub << " --help:\n" << h.out);
        CHECK(h.code == 0);
        CHECK(h.err.empty());
        // CLI11's own vocabulary: validator names after the type, "Excludes:", "Needs:", its
        // default type names.
        for (const char* leftover : {"Excludes", "Needs:", ":NONNEGATIVE", "NONNEGATIVE", ":{", "TEXT", " INT", "UINT"})
            CHECK(h.out.find(leftover) == std::string::npos);
    }
}

TEST_CASE("cli: each subcommand's --help lists exactly the options it accepts, and it refuses the others", "[config]") {
    if (!have_exe()) return;
    std::set<std::string> every;
    for (const auto& [sub, options] : accepted_options()) every.insert(options.begin(), options.end());
    // A value each option takes (flags take none); the value only has to be consumed.
    const std::map<std::string, std::string> value = {{"--profile", "dqn-smoketest"},
                                                      {"--set", "run.seed=1"},
                                                      {"--data", "x.csv"},
                                                      {"--seed", "1"},
                                                      {"--device", "cpu"},
                                                      {"--output", "out"},
                                                      {"--resume", "run"},
                                                      {"--seeds", "1,2"},
                                                      {"--population-grid", "g"},
                                                      {"--population-record", "r"},
                                                      {"--checkpoint", "c"},
                                                      {"--split", "val"},
                                                      {"--format", "csv"},
                                                      {"--out", "o.html"},
                                                      {"--cuts", "3"},
                                                      {"--cut-seed", "2"},
                                                      {"--json", "a.json"},
                                                      {"--log-format", "json"}};
    // What each subcommand needs besides the option under test (not run: the parser stops first).
    const std::map<std::string, std::string> needs = {{"eval", " --checkpoint missing.safetensors"},
                                                      {"compare", " missing-dir"},
                                                      {"report", " missing-dir"},
                                                      {"export", " missing-dir -o missing.safetensors"}};
    for (const auto& [sub, options] : accepted_options()) {
        const auto h = run_exe(sub + " --help");
        INFO(sub << " --help:\n" << h.out);
        CHECK(listed_options(h.out) == options);
        if (!sub.empty()) {
            CHECK(h.out.find("Examples:") == std::string::npos);
            CHECK(h.out.find("Exit codes:") == std::string::npos);
            CHECK(h.out.find("Usage: foxhunt-train " + sub + " ") != std::string::npos);
        }
        if (sub.empty()) continue;  // the top level trains: every option of train, none refused
        const std::string rest = needs.count(sub) ? needs.at(sub) : "";
        bool before = true;
        for (const auto& o : every) {
            if (options.count(o)) continue;
            const std::string arg = o + (value.count(o) ? " " + value.at(o) : "");
            // After the subcommand; once per subcommand also before it (where the top level
            // reads it as train's, and the subcommand must take it too).
            std::vector<std::string> commands = {sub + rest + " " + arg};
            if (before) commands.push_back(arg + " " + sub + rest);
            before = false;
            for (const auto& cmd : commands) {
                const auto r = run_exe(cmd);
                INFO(cmd << "\n" << r.err);
                CHECK(r.code == 2);
                CHECK(r.err.find(sub + ": " + o + " ") != std::string::npos);
                CHECK(r.err.find(sub + " --help") != std::string::npos);
            }
        }
    }
    // An option before and after the subcommand: one would replace the other's values.
    const auto twice = run_exe("--set run.seed=2 check dqn-smoketest --set run.seed=3");
    CHECK(twice.code == 2);
    CHECK(twice.err.find("--set") != std::string::npos);
    // Before a subcommand that takes it: as after it.
    const auto before = run_exe("--set run.seed=7 check dqn-smoketest");
    INFO(before.err);
    CHECK(before.code == 0);
    CHECK(before.out.find("seed = 7") != std::string::npos);
    const auto both = run_exe("check dqn-smoketest -q -v");
    CHECK(both.code == 2);
    CHECK(both.err.find("--quiet and --verbose") != std::string::npos);
}

TEST_CASE("cli: eval --help names --data and what eval honours", "[config]") {
    if (!have_exe()) return;
    const auto e = run_exe("eval --help");
    CHECK(e.out.find("--checkpoint") != std::string::npos);
    CHECK(e.out.find("--data PATH backtests other bars") != std::string::npos);
    CHECK(e.out.find("instrument.commission") != std::string::npos);
}

TEST_CASE("cli: another tool's override syntax gets the --set to use", "[config]") {
    if (!have_exe()) return;
    auto r = run_exe("check dqn-smoketest dqn.hidden=[64]");  // Hydra
    CHECK(r.code == 2);
    CHECK(r.err.find("not expected: dqn.hidden=[64]") != std::string::npos);
    CHECK(r.err.find("To override a profile key, use --set: --set dqn.hidden=[64]") != std::string::npos);
    r = run_exe("check dqn-smoketest --training.learning_rate 3e-4");  // PufferLib
    CHECK(r.code == 2);
    CHECK(r.err.find("--set training.learning_rate=3e-4") != std::string::npos);
    r = run_exe("check dqn-smoketest --bogus");  // an unknown option: no hint
    CHECK(r.code == 2);
    CHECK(r.err.find("use --set") == std::string::npos);
    // A --set's own value is no other tool's syntax: an empty argument after it gets no hint.
    r = run_exe("check dqn-smoketest --set run.on_exists=resume ''");
    CHECK(r.code == 2);
    CHECK(r.err.find("check: ") != std::string::npos);
    CHECK(r.err.find("use --set") == std::string::npos);
}

namespace {

/// Every non-empty line of `text` is one JSON object (a cheap shape check: {...} on one line).
bool all_lines_json(const std::string& text) {
    std::istringstream in(text);
    std::string line;
    int n = 0;
    while (std::getline(in, line)) {
        if (line.empty()) continue;
        ++n;
        if (line.front() != '{' || line.back() != '}') return false;
    }
    return n > 0;
}

}  // namespace

TEST_CASE("cli: --log-format json makes every stderr line JSON, errors and interrupts included", "[config]") {
    if (!have_exe()) return;
    auto r = run_exe("--log-format json check dqn-smoketest --bogus");
    CHECK(r.code == 2);
    INFO(r.err);
    CHECK(all_lines_json(r.err));
    r = run_exe("check dqn-smoketest --log-format=json --set dqn.hiden=[1]");
    CHECK(r.code == 2);
    CHECK(all_lines_json(r.err));
    // A training run interrupted by SIGINT: the notice is JSON too.
    const fs::path out = fs::temp_directory_path() / ("fh-cli-json-" + std::to_string(::getpid()));
    fs::remove_all(out);
    const std::string metrics = (out / "dqn-smoketest" / "metrics.jsonl").string();
    fs::create_directories(out);
    const std::string err = (out / "err").string();
    const int status = std::system(("'" + std::string(std::getenv("FH_TRAIN_EXE")) +
                                    "' --log-format json --profile dqn-smoketest --device cpu "
                                    "--output '" +
                                    out.string() + "' --set run.total_steps=100000000 --set run.log_interval=400 2>'" +
                                    err + "' & pid=$!; for i in $(seq 600); do [ -s '" + metrics +
                                    "' ] && break; sleep 0.1; done; "
                                    "kill -INT $pid; wait $pid")
                                       .c_str());
    CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 130));
    const std::string text = slurp(err);
    INFO(text);
    CHECK(all_lines_json(text));
    CHECK(text.find("interrupt received") != std::string::npos);
    fs::remove_all(out);
}

TEST_CASE("cli: a CPU run does not talk about CUDA Graphs", "[config]") {
    if (!have_exe()) return;
    const fs::path out = fs::temp_directory_path() / ("fh-cli-cpu-" + std::to_string(::getpid()));
    fs::remove_all(out);
    const auto r = run_exe("--profile dqn-smoketest --device cpu --output '" + out.string() +
                           "' --set run.total_steps=200 --set run.eval_interval=100");
    INFO(r.err);
    CHECK(r.code == 0);
    CHECK(r.err.find("device: cpu") != std::string::npos);
    CHECK(r.err.find("CUDA Graph") == std::string::npos);
    fs::remove_all(out);
}
