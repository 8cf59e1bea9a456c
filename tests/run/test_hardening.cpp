/// @file test_hardening.cpp
/// @brief Hostile inputs through the executable: `check` and `train` agree on every edge the
///        profile allows, and bad inputs end with their documented exit code and a message
///        (never a signal or an "internal error").
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include "config/profile.hpp"
#include "io/safetensors.hpp"
#include "run/population.hpp"
#include "support/shell.hpp"
#include "trainers/trainer.hpp"
#include "util/errors.hpp"

namespace fs = std::filesystem;

namespace {

fs::path scratch(const std::string& name) {
    return fh::test::scratch_dir("fh-hardening", name);
}
using fh::test::slurp;
/// `script` run in `dir` (relative paths are inside it).
fh::test::ShellResult sh(const std::string& script, const fs::path& dir) {
    return fh::test::run_shell("cd '" + dir.string() + "' && " + script, dir);
}

const std::vector<std::string> kTrainers = {"dqn", "ppo", "iql", "supervised", "dt"};

}  // namespace

TEST_CASE("check and train agree: a run check accepts trains, a run check refuses is refused with the same code",
          "[run][trainers]") {
    const auto dir = scratch("agree");
    struct Edge {
        std::string trainer, sets;
    };
    std::vector<Edge> edges;
    // No validation split and no validation backtests: documented as allowed, for every trainer.
    for (const auto& t : kTrainers)
        edges.push_back({t, "--set data.val_fraction=0 --set run.eval_interval=0 --set early_stopping.patience=0"});
    // A forecast horizon longer than the training split.
    edges.push_back({"supervised", "--set supervised.horizon=10000"});
    // A search without a population (check used to accept what train refuses).
    for (const char* search : {"pbt", "halving"}) edges.push_back({"dqn", std::string("--set run.search=") + search});
    for (const auto& e : edges) {
        const std::string args = "--profile " + e.trainer + "-smoketest --device cpu " + e.sets +
                                 " --set run.total_steps=200 --output '" + (dir / "runs").string() + "'";
        const auto check = sh("\"$EXE\" check " + args, dir);
        const auto train = sh("\"$EXE\" train " + args + " --set run.on_exists=new", dir);
        INFO(e.trainer << " " << e.sets << "\ncheck: " << check.err << "\ntrain: " << train.err);
        CHECK(check.code == train.code);
        CHECK(check.code != 1);
        CHECK(train.code != 1);
        CHECK(train.err.find("internal error") == std::string::npos);
    }
    fs::remove_all(dir);
}

TEST_CASE("an error at any stage of set-up or training unwinds cleanly and exits with its code and message",
          "[run][trainers][population]") {
    // FH_FAULT=<stage>[:N] throws at a stage's N-th pass (src/util/fault.hpp), as a full disk or a
    // bad file would there. Every stage of a single run and of a population (batched and not):
    // the process must end with exit 2 and the message, never a signal while unwinding (an
    // error after a population's engines existed used to crash in ~DqnTrainer).
    const auto dir = scratch("fault");
    struct Case {
        std::string what, args;
        std::vector<std::string> stages;
    };
    const std::string common =
        " --device cpu --set run.total_steps=400 --set run.eval_interval=200 "
        "--set run.checkpoint_interval=200 --output '" +
        (dir / "runs").string() + "'";
    const std::vector<Case> cases = {
        {"a single run",
         "--profile dqn-smoketest" + common,
         {"session", "trainer", "run-directory", "agent-run", "train-step:7", "checkpoint:2", "finish"}},
        {"a batched population",
         "--profile dqn-smoketest --seeds 1,2,3 --set run.population_batching=on" + common,
         {"population-setup", "population-engine", "agent-run:3", "train-step:8", "checkpoint:4", "finish:2"}},
        {"an unbatched population",
         "--profile dqn-smoketest --seeds 1,2,3 --set run.population_batching=off" + common,
         {"agent-run:2", "train-step:5", "finish:3"}},
        {"a PPO population",
         "--profile ppo-smoketest --seeds 1,2 --set run.population_batching=on" + common,
         {"population-engine", "train-step:2"}},
    };
    for (const auto& c : cases)
        for (const auto& stage : c.stages) {
            const auto r = sh("FH_FAULT='" + stage + "' \"$EXE\" train " + c.args + " --set run.on_exists=new", dir);
            INFO(c.what << ", FH_FAULT=" << stage << "\n" << r.err);
            CHECK(r.code == 2);
            const std::string name = stage.substr(0, stage.find(':'));
            CHECK(r.err.find("fault injected at " + name + " (FH_FAULT)") != std::string::npos);
            CHECK(r.err.find("internal error") == std::string::npos);
        }
    // Without a fault the same commands succeed (the stages are passed, not skipped).
    for (const auto& c : {cases[0], cases[1]}) {
        const auto r = sh("\"$EXE\" train " + c.args + " --set run.on_exists=new", dir);
        INFO(c.what << "\n" << r.err);
        CHECK(r.code == 0);
    }
    fs::remove_all(dir);
}

TEST_CASE("the collapse monitor: an engineered collapse onto one action is warned once and recorded in summary.json",
          "[run][trainers]") {
    // The supervised adapter with an entry threshold no score reaches never opens a position: its
    // greedy policy takes the flat action on every bar, whatever the state (a collapse by design).
    const auto dir = scratch("collapse");
    const std::string base =
        "\"$EXE\" train --profile supervised-smoketest --device cpu --set run.total_steps=300 "
        "--set run.eval_interval=50 --set early_stopping.patience=0 "
        "--set supervised.entry_threshold=1000000 --output '" +
        (dir / "runs").string() + "'";
    auto r = sh(base + " --set run.name=collapsed", dir);
    INFO(r.err);
    REQUIRE(r.code == 0);
    const auto warnings = [](const std::string& err) {
        std::size_t n = 0;
        for (auto at = err.find("collapse: the greedy policy"); at != std::string::npos;
             at = err.find("collapse: the greedy policy", at + 1))
            ++n;
        return n;
    };
    CHECK(warnings(r.err) == 1);
    const std::string summary = slurp(dir / "runs" / "collapsed" / "summary.json");
    CHECK(summary.find("\"collapse\":{\"updates\":150,") != std::string::npos);
    CHECK(summary.find("\"evaluations\":3") != std::string::npos);
    const std::string evals = slurp(dir / "runs" / "collapsed" / "eval.jsonl");
    CHECK(evals.find("\"action_entropy\":0") != std::string::npos);
    CHECK(evals.find("\"top_action_share\":1") != std::string::npos);
    // Two validations are not three in a row: no warning, "collapse": null.
    r = sh(base + " --set run.name=short --set run.total_steps=100", dir);
    REQUIRE(r.code == 0);
    CHECK(warnings(r.err) == 0);
    CHECK(slurp(dir / "runs" / "short" / "summary.json").find("\"collapse\":null") != std::string::npos);
    // The collection's histogram of DQN and PPO gets the same figures in metrics.jsonl.
    r = sh(
        "\"$EXE\" train --profile dqn-smoketest --device cpu --set run.total_steps=400 --set run.name=dqn --output '" +
            (dir / "runs").string() + "'",
        dir);
    REQUIRE(r.code == 0);
    const std::string metrics = slurp(dir / "runs" / "dqn" / "metrics.jsonl");
    CHECK(metrics.find("\"charts/action_entropy\":") != std::string::npos);
    CHECK(metrics.find("\"charts/top_action_share\":") != std::string::npos);
    fs::remove_all(dir);
}

TEST_CASE(
    "eval.collapse_window: the validations in a row the collapse monitor waits for; bad values refused naming "
    "the key",
    "[run][trainers]") {
    // The engineered collapse above (the flat action on every bar), four validations (50 .. 200
    // updates): a window of 2 reports at the second, 4 at the fourth, 5 never.
    const auto dir = scratch("collapse-window");
    const std::string base =
        "\"$EXE\" train --profile supervised-smoketest --device cpu --set run.total_steps=200 "
        "--set run.eval_interval=50 --set early_stopping.patience=0 "
        "--set supervised.entry_threshold=1000000 --output '" +
        (dir / "runs").string() + "'";
    struct Window {
        int window;
        std::string collapse;  // the start of summary.json's "collapse"
    };
    for (const Window& w : {Window{2, "\"collapse\":{\"updates\":100,"}, Window{4, "\"collapse\":{\"updates\":200,"},
                            Window{5, "\"collapse\":null"}}) {
        const std::string window = std::to_string(w.window), name = "w" + window;
        const auto r = sh(base + " --set run.name=" + name + " --set eval.collapse_window=" + window, dir);
        INFO("window " << w.window << "\n" << r.err);
        REQUIRE(r.code == 0);
        const bool fired = w.window <= 4;
        CHECK((r.err.find("collapse: the greedy policy") != std::string::npos) == fired);
        const std::string summary = slurp(dir / "runs" / name / "summary.json");
        CHECK(summary.find(w.collapse) != std::string::npos);
        if (fired) CHECK(summary.find("\"evaluations\":" + window + "}") != std::string::npos);
        CHECK(slurp(dir / "runs" / name / "config.toml").find("collapse_window = " + window) != std::string::npos);
    }
    // A population's agents are watched with the same window.
    const auto pop = sh(base + " --seeds 1,2 --set run.name=pop --set eval.collapse_window=2", dir);
    INFO(pop.err);
    REQUIRE(pop.code == 0);
    for (const char* agent : {"seed=1", "seed=2"})
        CHECK(slurp(dir / "runs" / "pop" / agent / "summary.json").find("\"collapse\":{\"updates\":100,") !=
              std::string::npos);
    // Not a count of at least one validation: exit 2 naming the key, in check and in train.
    for (const std::string bad : {"0", "-1", "1000001", "2.5", "\"3\"", "true"}) {
        for (const std::string command : {"check supervised-smoketest", "train --profile supervised-smoketest"}) {
            const auto r = sh("\"$EXE\" " + command + " --device cpu --set 'eval.collapse_window=" + bad +
                                  "' --output '" + (dir / "bad").string() + "'",
                              dir);
            INFO(command << " eval.collapse_window=" << bad << "\n" << r.err);
            CHECK(r.code == 2);
            CHECK(r.err.find("eval.collapse_window") != std::string::npos);
            CHECK(r.err.find("internal error") == std::string::npos);
        }
    }
    CHECK_FALSE(fs::exists(dir / "bad"));
    fs::remove_all(dir);
}

TEST_CASE("a run whose updates were mostly skipped ends diverged (exit 5), not completed, below max_bad_updates",
          "[run][population]") {
    // training.max_bad_updates is far away; every update of agent 1 is NaN: it trained nothing.
    const auto dir = scratch("skipped");
    const std::string file = fh::config::locate_profile("dqn-smoketest");
    const std::vector<std::string> overrides{"run.total_steps=800",
                                             "run.eval_interval=400",
                                             "run.device=\"cpu\"",
                                             "training.max_bad_updates=1000000",
                                             "run.output_dir=\"" + dir.string() + "\"",
                                             "run.population_batching=\"off\""};
    const auto profile = fh::config::resolve_profile_file(file, overrides);
    const auto plan = fh::run::plan_population(file, profile, overrides, fh::run::PopulationRequest{{1, 2}, ""}, false);
    std::vector<long long> every(100000);
    for (std::size_t i = 0; i < every.size(); ++i) every[i] = static_cast<long long>(i) + 1;
    fh::run::set_agent_hook_for_tests([&](int agent, fh::trainers::Trainer& t) {
        if (agent == 1) t.inject_nan_at_updates(every);
    });
    CHECK_THROWS_AS(fh::run::train_population(plan, false), fh::DivergedError);
    fh::run::set_agent_hook_for_tests({});
    const fs::path popdir = dir / "dqn-smoketest";
    bool seen = false;
    for (const auto& e : fs::directory_iterator(popdir)) {
        if (!fs::is_directory(e.path())) continue;
        const std::string summary = slurp(e.path() / "summary.json");
        if (summary.find("\"status\":\"diverged\"") != std::string::npos) {
            CHECK(summary.find("more than half") != std::string::npos);
            seen = true;
        } else {
            CHECK(summary.find("\"status\":\"completed\"") != std::string::npos);
        }
    }
    CHECK(seen);
    fs::remove_all(dir);
}

TEST_CASE("files are sized and typed before they are read: a huge grid, a kernel file, symlink loops", "[run]") {
    const auto dir = scratch("files");
    const std::string out = " --output '" + (dir / "runs").string() + "'";
    // A 2 GB grid (sparse: no disk) is refused at once by its size, not read.
    auto r =
        sh("truncate -s 2G big.grid && timeout 20 \"$EXE\" check dqn-smoketest --device cpu --population-grid big.grid",
           dir);
    INFO(r.err);
    CHECK(r.code == 2);
    CHECK(r.err.find("larger than 1048576 bytes") != std::string::npos);
    fs::remove(dir / "big.grid");
    // A file of the kernel that would block (or a device) is refused, never waited on.
    for (const std::string data : {"/proc/kmsg", "/dev/zero"}) {
        r = sh("timeout 20 \"$EXE\" check dqn-smoketest --device cpu --data " + data, dir);
        INFO(data << ": " << r.err);
        CHECK(r.code == 3);
    }
    // A data directory with a symlink loop, and a data path that is one: exit 3, named.
    fs::create_directories(dir / "data");
    fs::create_symlink("loop.csv", dir / "data" / "loop.csv");
    r = sh("\"$EXE\" check dqn-smoketest --device cpu --data data", dir);
    INFO(r.err);
    CHECK(r.code == 3);
    CHECK(r.err.find("loop.csv") != std::string::npos);
    CHECK(r.err.find("internal error") == std::string::npos);
    fs::create_symlink("self", dir / "self");
    r = sh("\"$EXE\" check dqn-smoketest --device cpu --data self", dir);
    CHECK(r.code == 3);
    CHECK(r.err.find("internal error") == std::string::npos);
    // compare and report of a sweep directory with a symlink loop: the loop is skipped with a warning.
    r = sh("\"$EXE\" train --profile dqn-smoketest --device cpu --set run.total_steps=200 --set run.name=a" + out, dir);
    REQUIRE(r.code == 0);
    fs::create_symlink("loop", dir / "runs" / "loop");
    for (const std::string cmd : {"compare runs", "report runs"}) {
        r = sh("\"$EXE\" " + cmd, dir);
        INFO(cmd << ": " << r.err);
        CHECK(r.code == 0);
        CHECK(r.err.find("skipped") != std::string::npos);
    }
    fs::remove_all(dir);
}

TEST_CASE(
    "grid files read as profiles: a byte order mark accepted, control characters and a key twice on a line refused",
    "[run][population]") {
    const auto dir = scratch("grid");
    const auto check = [&](const std::string& text) {
        std::ofstream(dir / "g.grid", std::ios::binary) << text;
        return sh("\"$EXE\" check dqn-smoketest --device cpu --population-grid g.grid", dir);
    };
    auto r = check("\xEF\xBB\xBFtraining.learning_rate=0.001\ntraining.learning_rate=0.002\n");
    INFO(r.err);
    CHECK(r.code == 0);
    const char with_nul[] = "training.learning_rate=0.001\ntraining.gamma=0.9\0x training.tau=0.1\n";
    r = check(std::string(with_nul, sizeof with_nul - 1));
    CHECK(r.code == 2);
    CHECK(r.err.find("g.grid:2:") != std::string::npos);
    CHECK(r.err.find("control character (byte 0x00)") != std::string::npos);
    r = check("training.learning_rate=0.001 training.gamma=0.9 training.learning_rate=0.002\n");
    CHECK(r.code == 2);
    CHECK(r.err.find("g.grid:1:49: training.learning_rate is set twice on this line (first at column 1)") !=
          std::string::npos);
    fs::remove_all(dir);
}

TEST_CASE("eval refuses what it would ignore or misreport: segments past the split, a goal without HER, NaN weights",
          "[run]") {
    const auto dir = scratch("eval");
    auto r = sh(
        "\"$EXE\" train --profile dqn-smoketest --device cpu --set run.total_steps=200 --set run.name=a --output runs",
        dir);
    REQUIRE(r.code == 0);
    const std::string ckpt = (dir / "runs" / "a" / "checkpoints" / "last.safetensors").string();
    r = sh("\"$EXE\" eval --checkpoint '" + ckpt + "'", dir);
    CHECK(r.code == 0);
    r = sh("\"$EXE\" eval --checkpoint '" + ckpt + "' --set eval.segments=4096", dir);
    INFO(r.err);
    CHECK(r.code == 2);
    CHECK(r.err.find("eval.segments = 4096") != std::string::npos);
    r = sh("\"$EXE\" eval --checkpoint '" + ckpt + "' --set dqn.her_eval_goal=1", dir);
    CHECK(r.code == 2);
    CHECK(r.err.find("hindsight experience replay") != std::string::npos);
    // The same checkpoint with every weight NaN (valid checksums: rewritten by the writer).
    {
        const auto file = fh::io::TensorFile::read(ckpt);
        fh::io::TensorFileWriter w;
        std::vector<std::vector<std::byte>> keep;
        keep.reserve(file.names().size());
        for (const auto& name : file.names()) {
            const auto t = file.tensor(name);
            keep.emplace_back(t.bytes.begin(), t.bytes.end());
            if (name == "params/online") {
                const float nan = std::nanf("");
                for (std::size_t i = 0; i + 4 <= keep.back().size(); i += 4)
                    std::memcpy(keep.back().data() + i, &nan, 4);
            }
            w.add(name, t.dtype, t.shape, std::span<const std::byte>(keep.back()));
        }
        for (const auto& [k, v] : file.all_metadata())
            if (k != "format" && k != "format_version" && k != "data_xxh64" && k != "header_xxh64")
                w.set_metadata(k, v);
        w.write((dir / "nan.safetensors").string());
    }
    r = sh("\"$EXE\" eval --checkpoint nan.safetensors", dir);
    CHECK(r.code == 2);
    CHECK(r.err.find("params/online") != std::string::npos);
    fs::remove_all(dir);
}

TEST_CASE("a run directory's lock holds before it is reused, and links in a run are refused", "[run]") {
    const auto dir = scratch("lock");
    const std::string train =
        "\"$EXE\" train --profile dqn-smoketest --device cpu --set run.total_steps=400 "
        "--set run.checkpoint_interval=200 --output runs --set run.name=a";
    // A process running in a directory before its first checkpoint holds its lock: a second
    // process with run.on_exists = resume must not delete it.
    fs::create_directories(dir / "runs" / "a");
    std::ofstream(dir / "runs" / "a" / "config.toml") << "[run]\ntrainer = \"dqn\"\n";
    {
        const int fd = ::open((dir / "runs" / "a").c_str(), O_RDONLY | O_DIRECTORY);
        REQUIRE(fd >= 0);
        REQUIRE(::flock(fd, LOCK_EX | LOCK_NB) == 0);
        const auto r = sh(train + " --set run.on_exists=resume", dir);
        ::close(fd);
        INFO(r.err);
        CHECK(r.code == 2);
        CHECK(r.err.find("another foxhunt-train process is running") != std::string::npos);
        CHECK(fs::exists(dir / "runs" / "a" / "config.toml"));
    }
    // Unlocked, the same command starts the run again there.
    auto r = sh(train + " --set run.on_exists=resume", dir);
    INFO(r.err);
    REQUIRE(r.code == 0);
    // A resume whose backtest/ is a link (outside the run) is refused before anything is written.
    fs::create_directories(dir / "outside");
    std::ofstream(dir / "outside" / "equity.csv") << "mine\n";
    fs::remove_all(dir / "runs" / "a" / "backtest");
    fs::create_directory_symlink(fs::absolute(dir / "outside"), dir / "runs" / "a" / "backtest");
    r = sh("\"$EXE\" train --resume runs/a --set run.total_steps=800", dir);
    CHECK(r.code == 2);
    CHECK(r.err.find("is a symbolic link") != std::string::npos);
    CHECK(slurp(dir / "outside" / "equity.csv") == "mine\n");
    fs::remove(dir / "runs" / "a" / "backtest");
    // A linked checkpoint is not read.
    const auto last = dir / "runs" / "a" / "checkpoints" / "last.safetensors";
    fs::rename(last, dir / "outside" / "last.safetensors");
    fs::create_symlink(fs::absolute(dir / "outside" / "last.safetensors"), last);
    r = sh("\"$EXE\" train --resume runs/a --set run.total_steps=800", dir);
    CHECK(r.code == 2);
    CHECK(r.err.find("is a symbolic link") != std::string::npos);
    fs::remove_all(dir);
}
