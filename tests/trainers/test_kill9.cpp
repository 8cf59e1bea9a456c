/// @file test_kill9.cpp
/// @brief `kill -9` at random moments of a training run and of its resumes (issue 16, item 14):
///        no file is ever corrupt under its final name, every temporary a killed process left is
///        gone once a resume has started, metrics.jsonl and eval.jsonl read as one run, and the
///        run still completes. FH_KILL9_COUNT kills (default 50), FH_KILL9_SEED (default 16);
///        scripts/kill9-loop.sh runs it with more kills and prints the report.
#include <algorithm>
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "config/profile.hpp"
#include "io/safetensors.hpp"

extern char** environ;
namespace fs = std::filesystem;

namespace {

std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

/// Starts the executable with `args`, stdout and stderr to `log`.
pid_t spawn(const std::vector<std::string>& args, const fs::path& log) {
    const char* exe = std::getenv("FH_TRAIN_EXE");
    REQUIRE(exe != nullptr);
    std::vector<std::string> all{exe};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, exe, &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    REQUIRE(rc == 0);
    return pid;
}

/// The pid of `<name>.tmp-<pid>`, or -1.
long temp_pid(const std::string& name) {
    const auto at = name.rfind(".tmp-");
    if (at == std::string::npos || at + 5 >= name.size()) return -1;
    const std::string digits = name.substr(at + 5);
    if (digits.find_first_not_of("0123456789") != std::string::npos) return -1;
    return std::stol(digits);
}

struct Report {
    int kills = 0, killed_in_startup = 0, finished_early = 0, fresh_starts = 0;
    int temporaries_seen = 0, corrupt = 0, leftovers = 0, broken_lines = 0;
};

/// Every file under its final name must be whole; temporaries of processes other than `last_pid`
/// must be gone when `resumed` (the last process got past its resume's cleanup).
void inspect(const fs::path& run, pid_t last_pid, bool resumed, Report& rep) {
    for (const auto& e : fs::recursive_directory_iterator(run)) {
        if (!e.is_regular_file()) continue;
        const std::string name = e.path().filename().string();
        if (const long pid = temp_pid(name); pid >= 0) {
            ++rep.temporaries_seen;
            if (resumed && pid != last_pid) {
                ++rep.leftovers;
                FAIL_CHECK("a temporary of an earlier process survived a resume: " << e.path());
            }
            continue;
        }
        if (e.path().extension() == ".safetensors") {
            try {
                (void)fh::io::TensorFile::read(e.path().string());
            } catch (const std::exception& ex) {
                ++rep.corrupt;
                FAIL_CHECK("corrupt checkpoint " << e.path() << ": " << ex.what());
            }
        } else if (name == "summary.json") {
            const std::string s = slurp(e.path());
            if (s.rfind("{\"status\":\"", 0) != 0 || s.size() < 3 || s.substr(s.size() - 2) != "}\n") {
                ++rep.corrupt;
                FAIL_CHECK("corrupt summary.json: " << s);
            }
        } else if (name == "config.toml") {
            try {
                (void)fh::config::resolve_profile_file(e.path().string());
            } catch (const std::exception& ex) {
                ++rep.corrupt;
                FAIL_CHECK("corrupt config.toml: " << ex.what());
            }
        } else if (name == "metrics.jsonl" || name == "eval.jsonl") {
            // Whole lines in increasing order; only the last may be cut (the resume drops it).
            std::istringstream in(slurp(e.path()));
            std::string line, previous;
            long long last_step = -1;
            while (std::getline(in, line)) {
                if (!previous.empty()) {
                    const auto at = previous.find("\"env_steps\":");
                    const long long step = at == std::string::npos ? -1 : std::stoll(previous.substr(at + 12));
                    if (previous.front() != '{' || previous.back() != '}' || step <= last_step) {
                        ++rep.broken_lines;
                        FAIL_CHECK(name << ": a broken or repeated line before the last: " << previous);
                    }
                    last_step = step;
                }
                previous = line;
            }
        }
    }
}

}  // namespace

TEST_CASE("kill -9 at random moments never leaves a corrupt file, and a resume leaves no temporary",
          "[trainers][pipeline][kill9]") {
    const int kills = std::getenv("FH_KILL9_COUNT") ? std::atoi(std::getenv("FH_KILL9_COUNT")) : 50;
    const unsigned seed =
        std::getenv("FH_KILL9_SEED") ? static_cast<unsigned>(std::atoi(std::getenv("FH_KILL9_SEED"))) : 16;
    const fs::path dir = fs::temp_directory_path() / ("fh-kill9-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    const fs::path run = dir / "dqn-smoketest", log = dir / "log";
    // Checkpoints every 100 env steps and validations (best checkpoints) every 200, each about
    // 60 MB (a 150,000-transition replay) written and fsynced: kills often land inside a write.
    const std::vector<std::string> settings{"--device", "cpu",
                                            "--set",    "run.total_steps=100000000",
                                            "--set",    "run.checkpoint_interval=100",
                                            "--set",    "run.eval_interval=200",
                                            "--set",    "run.log_interval=100",
                                            "--set",    "replay_buffer.buffer_size=150000"};
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> delay_ms(150, 1500);
    Report rep;
    // Fresh starts in a row: on a loaded machine a run may not reach its first checkpoint within
    // the drawn delay, so each fresh start in a row doubles it (up to 16 times).
    int fresh_in_a_row = 0;
    while (rep.kills < kills) {
        const bool resume = fs::exists(run / "checkpoints" / "last.safetensors");
        fresh_in_a_row = resume ? 0 : fresh_in_a_row + 1;
        if (!resume) {  // killed before its first checkpoint: a run starts afresh
            fs::remove_all(run);
            ++rep.fresh_starts;
        }
        std::vector<std::string> args =
            resume ? std::vector<std::string>{"--resume", run.string()}
                   : std::vector<std::string>{"--profile", "dqn-smoketest", "--output", dir.string()};
        args.insert(args.end(), settings.begin(), settings.end());
        const pid_t pid = spawn(args, log);
        const int stretch = 1 << std::min(std::max(fresh_in_a_row - 1, 0), 4);
        std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms(rng) * stretch));
        ::kill(pid, SIGKILL);
        int status = 0;
        ::waitpid(pid, &status, 0);
        if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)) {
            ++rep.finished_early;  // it ended by itself (an error shows in the log)
            INFO(slurp(log));
            CHECK(WIFEXITED(status));
            CHECK(WEXITSTATUS(status) == 0);
            continue;
        }
        ++rep.kills;
        const std::string text = slurp(log);
        const bool got_past_cleanup = resume && text.find("resumed from") != std::string::npos;
        if (resume && !got_past_cleanup) ++rep.killed_in_startup;
        if (fs::exists(run)) inspect(run, pid, got_past_cleanup, rep);
    }
    // The run still completes, and then nothing temporary is left at all.
    REQUIRE(fs::exists(run / "checkpoints" / "last.safetensors"));
    const auto last = fh::io::TensorFile::read((run / "checkpoints" / "last.safetensors").string());
    const long long at = std::stoll(last.metadata("step").value_or("0"));
    std::vector<std::string> args{"--resume", run.string()};
    args.insert(args.end(), settings.begin(), settings.end());
    args.push_back("--set");
    args.push_back("run.total_steps=" + std::to_string(at + 400));
    const pid_t pid = spawn(args, log);
    int status = 0;
    ::waitpid(pid, &status, 0);
    INFO(slurp(log));
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) == 0);
    inspect(run, pid, true, rep);
    int temporaries = 0;
    for (const auto& e : fs::recursive_directory_iterator(run))
        temporaries += temp_pid(e.path().filename().string()) >= 0;
    CHECK(temporaries == 0);
    CHECK(slurp(run / "summary.json").rfind("{\"status\":\"completed\"", 0) == 0);
    std::printf(
        "kill -9 loop: %d kills (%d during a resume's start-up, %d runs started afresh before a first "
        "checkpoint), %d temporaries seen right after kills, %d corrupt files, %d temporaries left after a "
        "resume, %d broken jsonl lines; the run completed afterwards\n",
        rep.kills, rep.killed_in_startup, rep.fresh_starts, rep.temporaries_seen, rep.corrupt, rep.leftovers,
        rep.broken_lines);
    CHECK(rep.corrupt == 0);
    CHECK(rep.leftovers == 0);
    CHECK(rep.broken_lines == 0);
    fs::remove_all(dir);
}
