/// @file test_run_directory.cpp
/// @brief The run directory (issue 16, items 13-15): names that stay inside output_dir, the next
///        free name past anything that exists, the lock against a second process, the cleanup a
///        resume does (temporaries of a killed process, lines past the checkpoint, a partial line),
///        symbolic links refused.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include "io/run_directory.hpp"
#include "util/errors.hpp"

namespace fs = std::filesystem;
using fh::io::RunDirectory;

namespace {

struct Scratch {
    fs::path path = fs::temp_directory_path() / ("fh-rundir-" + std::to_string(::getpid()));
    Scratch() {
        fs::remove_all(path);
        fs::create_directories(path);
    }
    ~Scratch() { fs::remove_all(path); }
};

std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

void write(const fs::path& p, const std::string& text) {
    std::ofstream(p, std::ios::binary) << text;
}

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const fh::UsageError& e) {
        return e.what();
    }
    return "<accepted>";
}

}  // namespace

TEST_CASE("run directory: names stay inside output_dir; any existing entry makes the next name", "[io][rundir]") {
    Scratch s;
    const std::string root = s.path.string();
    for (const std::string bad : {"../x", ".", "..", "/abs", "a/b", ""})
        CHECK_THAT(error_of([&] { RunDirectory::create(root, bad); }), Catch::Contains("is not a directory name"));
    CHECK(fs::directory_iterator(s.path) == fs::directory_iterator());  // nothing was created
    write(s.path / "run", "a regular file with the run's name");
    fs::create_directory(s.path / "run-2");
    fs::create_symlink("/nonexistent", s.path / "run-3");
    const auto d = RunDirectory::create(root, "run");
    CHECK(fs::path(d.path()).filename() == "run-4");
    CHECK(slurp(s.path / "run") == "a regular file with the run's name");
}

TEST_CASE("run directory: one process at a time holds a run directory", "[io][rundir]") {
    Scratch s;
    std::string path;
    {
        const auto d = RunDirectory::create(s.path.string(), "r");
        path = d.path();
        fs::create_directories(fs::path(path) / "checkpoints");
        write(fs::path(path) / "checkpoints" / "last.safetensors", "x");
        // held by the creator: a resume is refused (flock locks conflict between open file
        // descriptions, in one process as between two)
        CHECK_THAT(error_of([&] { RunDirectory::open(path); }),
                   Catch::Contains("another foxhunt-train process is running"));
    }
    {
        const auto d = RunDirectory::open(path);  // released with the creator
        CHECK_THAT(error_of([&] { RunDirectory::open(path); }), Catch::Contains("holds the directory's lock"));
    }
    CHECK(error_of([&] { RunDirectory::open(path); }) == "<accepted>");
    // a directory without a checkpoint cannot be resumed, and nothing is written to it
    fs::remove(fs::path(path) / "checkpoints" / "last.safetensors");
    CHECK_THAT(error_of([&] { RunDirectory::open(path); }), Catch::Contains("no checkpoints/last.safetensors"));
    CHECK_THAT(error_of([&] { RunDirectory::open((s.path / "none").string()); }),
               Catch::Contains("no such run directory"));
}

TEST_CASE("run directory: a resume removes a killed process's temporaries and the lines past its checkpoint",
          "[io][rundir]") {
    Scratch s;
    auto d = RunDirectory::create(s.path.string(), "r");
    const fs::path run = d.path();
    fs::create_directories(run / "checkpoints");
    fs::create_directories(run / "backtest");
    for (const auto& f : {run / "summary.json.tmp-123", run / "checkpoints" / "last.safetensors.tmp-4567",
                          run / "backtest" / "equity.csv.tmp-8", run / "replay.fhreplay.tmp-99"})
        write(f, "partial");
    write(run / "notes.tmp-x", "not a temporary of ours");
    write(run / "metrics.jsonl",
          "{\"env_steps\":100,\"loss\":1}\n{\"env_steps\":200,\"loss\":2}\n{\"env_steps\":300,\"loss\":3}\n{\"env_st");
    write(run / "eval.jsonl", "{\"env_steps\":200,\"best\":true}\n{\"env_steps\":400,\"best\":false}\n");
    const auto c = d.prepare_resume(200, "env_steps");
    CHECK(c.temporaries_removed == 4);
    CHECK(c.lines_dropped == 3);  // metrics: the line at 300 and the partial one; eval: the line at 400
    CHECK(fs::exists(run / "notes.tmp-x"));
    CHECK_FALSE(fs::exists(run / "summary.json.tmp-123"));
    CHECK(slurp(run / "metrics.jsonl") == "{\"env_steps\":100,\"loss\":1}\n{\"env_steps\":200,\"loss\":2}\n");
    CHECK(slurp(run / "eval.jsonl") == "{\"env_steps\":200,\"best\":true}\n");
    CHECK(d.last_metrics_line() == "{\"env_steps\":200,\"loss\":2}");
    // appending continues after the kept lines
    d.append_metrics("{\"env_steps\":300,\"loss\":4}");
    CHECK(d.last_metrics_line() == "{\"env_steps\":300,\"loss\":4}");
    // nothing to clean: nothing rewritten
    CHECK(d.prepare_resume(1000, "env_steps").lines_dropped == 0);
}

TEST_CASE("run directory: symbolic links in place of its files are refused, never followed", "[io][rundir]") {
    Scratch s;
    auto d = RunDirectory::create(s.path.string(), "r");
    const fs::path run = d.path();
    const fs::path outside = s.path / "outside.txt";
    write(outside, "keep me\n");
    fs::create_symlink(outside, run / "metrics.jsonl");
    fs::create_symlink(outside, run / "eval.jsonl");
    CHECK_THAT(error_of([&] { d.append_metrics("{}"); }), Catch::Contains("is a symbolic link"));
    CHECK_THAT(error_of([&] { d.append_eval("{}"); }), Catch::Contains("is a symbolic link"));
    CHECK_THAT(error_of([&] { d.prepare_resume(0, "env_steps"); }), Catch::Contains("is a symbolic link"));
    CHECK(slurp(outside) == "keep me\n");
}

TEST_CASE("run directory: summary_status reads a summary's status", "[io][rundir]") {
    CHECK(fh::io::summary_status("{\"status\":\"completed\",\"trainer\":\"dqn\"}\n") == "completed");
    CHECK(fh::io::summary_status("{\"status\":\"early_stopped\"}") == "early_stopped");
    CHECK(fh::io::summary_status("{}").empty());
    CHECK(fh::io::summary_status("{\"status\":\"trunc").empty());
}
