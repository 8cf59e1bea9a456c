/// @file test_pipeline.cpp
/// @brief The training pipeline through the executable (FH_TRAIN_EXE, set by meson test): the run
///        directory, eval reproducing the test metrics, SIGINT -> exit 130 -> --resume, a corrupted
///        checkpoint refused, early stopping.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "io/json.hpp"
#include "io/safetensors.hpp"
#include "support/shell.hpp"

namespace fs = std::filesystem;

namespace {

fs::path scratch(const std::string& name) {
    return fh::test::scratch_dir("fh-pipeline", name);
}

using Result = fh::test::ShellResult;
using fh::test::slurp;
Result sh(const std::string& script, const fs::path& dir) {
    return fh::test::run_shell(script, dir);
}

/// The text of the JSON object that follows `key` (objects nested one level deep at most).
std::string object_after(const std::string& json, const std::string& key) {
    const auto at = json.find(key);
    REQUIRE(at != std::string::npos);
    const auto open = json.find('{', at);
    return json.substr(open, json.find('}', open) - open + 1);
}

}  // namespace

TEST_CASE("train writes the complete run directory and eval reproduces its test metrics", "[trainers][pipeline]") {
    const auto dir = scratch("run");
    for (const std::string trainer : {"dqn", "ppo", "iql", "supervised"}) {
        const std::string profile = trainer + "-smoketest";
        const auto r = sh("\"$EXE\" --profile " + profile + " --device cpu --output '" + dir.string() + "'", dir);
        INFO(profile << ": " << r.err);
        REQUIRE(r.code == 0);
        const fs::path run = dir / profile;
        for (const char* f :
             {"config.toml", "metrics.jsonl", "eval.jsonl", "summary.json", "checkpoints/last.safetensors",
              "checkpoints/best.safetensors", "backtest/equity.csv", "backtest/trades.csv"})
            CHECK(fs::exists(run / f));
        const std::string summary = slurp(run / "summary.json");
        CHECK(summary.find("\"status\":\"completed\"") != std::string::npos);
        const std::string evals = slurp(run / "eval.jsonl");
        CHECK(std::count(evals.begin(), evals.end(), '\n') == 2);  // every smoketest validates twice
        CHECK(slurp(run / "backtest/equity.csv").rfind("segment,bar,time,close,action,position,equity,drawdown", 0) ==
              0);
        // The weights load as a plain safetensors file too.
        const auto best = fh::io::TensorFile::read((run / "checkpoints/best.safetensors").string(), {false});
        CHECK(best.has("params/online"));

        const auto e = sh("\"$EXE\" eval --checkpoint '" + (run / "checkpoints/best.safetensors").string() +
                              "' --split test --device cpu",
                          dir);
        INFO(e.err);
        REQUIRE(e.code == 0);
        CHECK(object_after(e.out, "\"strategy\":") ==
              object_after(summary.substr(summary.find("\"test\":")), "\"strategy\":"));
    }
    fs::remove_all(dir);
}

TEST_CASE("a DQN run's replay dump is an IQL dataset; a corrupted dump is refused with exit 3",
          "[trainers][pipeline][replay]") {
    const auto dir = scratch("dump");
    const auto r = sh("\"$EXE\" --profile dqn-smoketest --device cpu --output '" + dir.string() +
                          "' --set replay_buffer.save_dump=true",
                      dir);
    INFO(r.err);
    REQUIRE(r.code == 0);
    const fs::path dump = dir / "dqn-smoketest" / "replay.fhreplay";
    REQUIRE(fs::exists(dump));
    const std::string use_dump = " --set 'iql.dataset=\"" + dump.string() + "\"'";
    const auto iql =
        sh("\"$EXE\" --profile iql-smoketest --device cpu --output '" + dir.string() + "'" + use_dump, dir);
    INFO(iql.err);
    REQUIRE(iql.code == 0);
    CHECK(iql.err.find("replay dump") != std::string::npos);
    CHECK(slurp(dir / "iql-smoketest" / "summary.json").find("\"status\":\"completed\"") != std::string::npos);

    {  // one flipped byte in the data
        std::fstream f(dump, std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(200);
        f.put('\x5a');
    }
    const auto bad =
        sh("\"$EXE\" --profile iql-smoketest --device cpu --output '" + dir.string() + "'" + use_dump, dir);
    CHECK(bad.code == 3);
    CHECK(bad.err.find(dump.string()) != std::string::npos);
    // Only DQN has a replay memory to dump.
    const auto wrong = sh("\"$EXE\" check ppo-smoketest --set replay_buffer.save_dump=true", dir);
    CHECK(wrong.code == 2);
    fs::remove_all(dir);
}

TEST_CASE(
    "dqn.her: the smoketest trains, eval reproduces its test metrics, a resumed run equals an uninterrupted "
    "one, its replay dump is an IQL dataset",
    "[trainers][pipeline][her]") {
    const auto dir = scratch("her");
    const std::string her = " --set dqn.her=true --set dqn.her_eval_goal=0.5";
    const auto a = sh("\"$EXE\" --profile dqn-smoketest --device cpu -q --output '" + dir.string() +
                          "' --set run.name=straight --set replay_buffer.save_dump=true" + her,
                      dir);
    INFO(a.err);
    REQUIRE(a.code == 0);
    const fs::path straight = dir / "straight";
    const std::string sa = slurp(straight / "summary.json");
    CHECK(sa.find("\"status\":\"completed\"") != std::string::npos);
    CHECK(slurp(straight / "config.toml").find("her_eval_goal = 0.5") != std::string::npos);
    // eval conditions the policy on the checkpoint's dqn.her_eval_goal, as the run's test backtest did
    const auto e = sh("\"$EXE\" eval --checkpoint '" + (straight / "checkpoints/best.safetensors").string() +
                          "' --split test --device cpu",
                      dir);
    INFO(e.err);
    REQUIRE(e.code == 0);
    CHECK(object_after(e.out, "\"strategy\":") == object_after(sa.substr(sa.find("\"test\":")), "\"strategy\":"));
    // eval asks the same policy for other targets within the training goals [-2, 4], not beyond
    for (const char* goal : {"-2", "4"}) {
        const auto other = sh("\"$EXE\" eval --checkpoint '" + (straight / "checkpoints/best.safetensors").string() +
                                  "' --split test --device cpu --set dqn.her_eval_goal=" + goal,
                              dir);
        INFO(other.err);
        CHECK(other.code == 0);
        CHECK(other.out.find(std::string("\"dqn.her_eval_goal=") + goal + "\"") != std::string::npos);
    }
    const auto beyond = sh("\"$EXE\" eval --checkpoint '" + (straight / "checkpoints/best.safetensors").string() +
                               "' --split test --device cpu --set dqn.her_eval_goal=7",
                           dir);
    CHECK(beyond.code == 2);
    CHECK(beyond.err.find("lies outside the training goals [-2, 4]") != std::string::npos);

    // 1000 steps, then resumed to 2000: the same weights, optimizer, goals and test metrics.
    const auto b = sh("\"$EXE\" --profile dqn-smoketest --device cpu -q --output '" + dir.string() +
                          "' --set run.name=resumed --set run.total_steps=1000" + her,
                      dir);
    REQUIRE(b.code == 0);
    const auto c =
        sh("\"$EXE\" --resume '" + (dir / "resumed").string() + "' --device cpu -q --set run.total_steps=2000", dir);
    INFO(c.err);
    REQUIRE(c.code == 0);
    const auto fa = fh::io::TensorFile::read((straight / "checkpoints" / "last.safetensors").string());
    const auto fb = fh::io::TensorFile::read((dir / "resumed" / "checkpoints" / "last.safetensors").string());
    for (const char* t : {"params/online", "params/target", "adam/m", "adam/v", "her/goals", "replay/rewards"}) {
        INFO(t);
        REQUIRE(fa.has(t));
        CHECK(std::ranges::equal(fa.tensor(t).bytes, fb.tensor(t).bytes));
    }
    const std::string sb = slurp(dir / "resumed" / "summary.json");
    CHECK(object_after(sa.substr(sa.find("\"test\":")), "\"strategy\":") ==
          object_after(sb.substr(sb.find("\"test\":")), "\"strategy\":"));

    // The dump holds the plain observations and the environment's rewards: IQL trains on it.
    const fs::path dump = straight / "replay.fhreplay";
    REQUIRE(fs::exists(dump));
    const auto iql = sh("\"$EXE\" --profile iql-smoketest --device cpu -q --output '" + dir.string() +
                            "' --set 'iql.dataset=\"" + dump.string() + "\"'",
                        dir);
    INFO(iql.err);
    CHECK(iql.code == 0);

    // A checkpoint without HER does not resume as a HER run: the network's inputs differ.
    const auto plain = sh("\"$EXE\" --profile dqn-smoketest --device cpu -q --output '" + dir.string() +
                              "' --set run.name=plain --set run.total_steps=400 --set run.eval_interval=0",
                          dir);
    REQUIRE(plain.code == 0);
    const auto mixed = sh("\"$EXE\" --resume '" + (dir / "plain").string() +
                              "' --device cpu -q --set run.total_steps=800 --set dqn.her=true",
                          dir);
    INFO(mixed.err);
    CHECK(mixed.code == 2);  // a clear refusal naming the parameters that differ
    CHECK(mixed.err.find("tensor params/online is F32") != std::string::npos);
    fs::remove_all(dir);
}

TEST_CASE("SIGINT saves a checkpoint and the summary, exits 130; --resume finishes the run", "[trainers][pipeline]") {
    const auto dir = scratch("sigint");
    // Signal once training is running (its first metrics line is written), however slow the machine.
    const std::string metrics = (dir / "dqn-smoketest" / "metrics.jsonl").string();
    const auto r = sh("\"$EXE\" --profile dqn-smoketest --device cpu --output '" + dir.string() +
                          "' --set run.total_steps=100000000 --set run.log_interval=400 & pid=$!; "
                          "for i in $(seq 600); do [ -s '" +
                          metrics +
                          "' ] && break; sleep 0.1; done; "
                          "kill -INT $pid; wait $pid",
                      dir);
    INFO(r.err);
    REQUIRE(r.code == 130);
    const fs::path run = dir / "dqn-smoketest";
    CHECK(slurp(run / "summary.json").find("\"status\":\"interrupted\"") != std::string::npos);
    const auto ckpt = fh::io::TensorFile::read((run / "checkpoints/last.safetensors").string());
    CHECK(ckpt.has("replay/states"));

    const auto resumed = sh("\"$EXE\" --resume '" + run.string() + "' --device cpu --set run.total_steps=12000", dir);
    INFO(resumed.err);
    CHECK(resumed.code == 0);
    CHECK(slurp(run / "summary.json").find("\"status\":\"completed\"") != std::string::npos);

    // A corrupted checkpoint is refused with a clear error (exit 2), never used.
    {
        std::fstream f(run / "checkpoints/last.safetensors", std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(-5, std::ios::end);
        f.put('\x7f');
    }
    const auto bad = sh("\"$EXE\" --resume '" + run.string() + "' --device cpu --set run.total_steps=16000", dir);
    CHECK(bad.code == 2);
    CHECK(bad.err.find("checkpoint") != std::string::npos);
    fs::resize_file(run / "checkpoints/last.safetensors", 100);  // cut short
    const auto cut = sh("\"$EXE\" --resume '" + run.string() + "' --device cpu --set run.total_steps=16000", dir);
    CHECK(cut.code == 2);
    fs::remove_all(dir);
}

TEST_CASE("early stopping ends the run cleanly with status early_stopped", "[trainers][pipeline]") {
    const auto dir = scratch("early");
    // Evaluate every 200 env steps; one evaluation without improvement stops the run.
    const auto r = sh("\"$EXE\" --profile dqn-smoketest --device cpu --output '" + dir.string() +
                          "' --set run.total_steps=20000 --set run.eval_interval=200 --set early_stopping.patience=1",
                      dir);
    INFO(r.err);
    REQUIRE(r.code == 0);
    const fs::path run = dir / "dqn-smoketest";
    const std::string summary = slurp(run / "summary.json");
    CHECK(summary.find("\"status\":\"early_stopped\"") != std::string::npos);
    const std::string evals = slurp(run / "eval.jsonl");
    const auto last_line = evals.substr(evals.rfind('\n', evals.size() - 2) + 1);
    CHECK(last_line.find("\"best\":false") != std::string::npos);        // it stopped on a non-improvement
    CHECK(summary.find("\"test\":{\"strategy\"") != std::string::npos);  // and still reported the test split
    fs::remove_all(dir);
}

namespace {

/// Every file under `dir` with its contents.
std::map<std::string, std::string> snapshot(const fs::path& dir) {
    std::map<std::string, std::string> files;
    for (const auto& e : fs::recursive_directory_iterator(dir))
        if (e.is_regular_file()) files[fs::relative(e.path(), dir).string()] = slurp(e.path());
    return files;
}

double number_after(const std::string& json, const std::string& key) {
    const auto at = json.find("\"" + key + "\":");
    REQUIRE(at != std::string::npos);
    return std::stod(json.substr(at + key.size() + 3));
}

}  // namespace

TEST_CASE("resume: a finished run is left untouched; validation, wall time and overrides survive a resume",
          "[trainers][pipeline][resume]") {
    const auto dir = scratch("resume");
    const fs::path run = dir / "dqn-smoketest";
    // 1. A completed run: resuming it with the same budget is refused and changes no file.
    auto r = sh("\"$EXE\" --profile dqn-smoketest --device cpu --output '" + dir.string() + "'", dir);
    REQUIRE(r.code == 0);
    const auto before = snapshot(run);
    r = sh("\"$EXE\" --resume '" + run.string() + "' --device cpu", dir);
    CHECK(r.code == 2);
    CHECK(r.err.find("the run is finished (summary.json: status \"completed\"") != std::string::npos);
    CHECK(r.err.find("--set run.total_steps=4000") != std::string::npos);
    CHECK(snapshot(run) == before);  // summary.json, metrics, checkpoints: byte for byte
    fs::remove_all(run);

    // 2. Interrupted after its best validation; resumed without further evaluations.
    const std::string evals = (run / "eval.jsonl").string();
    r = sh("\"$EXE\" --profile dqn-smoketest --device cpu --output '" + dir.string() +
               "' --set run.total_steps=100000000 --set run.log_interval=400 --set run.eval_interval=400 "
               "--set run.checkpoint_interval=400 & pid=$!; "
               "for i in $(seq 600); do [ -s '" +
               evals + "' ] && break; sleep 0.1; done; kill -INT $pid; wait $pid",
           dir);
    REQUIRE(r.code == 130);
    const auto last = fh::io::TensorFile::read((run / "checkpoints" / "last.safetensors").string());
    const double wall_before = std::stod(*last.metadata("wall_seconds"));
    const long long at = std::stoll(*last.metadata("step"));
    CHECK(wall_before > 0);
    CHECK(last.metadata("best_validation").has_value());
    const long long total = at + 800;
    r = sh("\"$EXE\" --resume '" + run.string() + "' --device cpu --set run.total_steps=" + std::to_string(total) +
               " --set run.eval_interval=0",
           dir);
    INFO(r.err);
    REQUIRE(r.code == 0);
    const std::string summary = slurp(run / "summary.json");
    CHECK(summary.find("\"status\":\"completed\"") != std::string::npos);
    CHECK(summary.find("\"validation\":{\"strategy\":") != std::string::npos);  // kept across the resume
    CHECK(number_after(summary, "wall_seconds") > wall_before);                 // both processes counted
    CHECK(number_after(summary, "bars_per_year") > 5000);                       // the inferred value is recorded
    CHECK(summary.find("\"bars_per_year_inferred\":true") != std::string::npos);
    const std::string config = slurp(run / "config.toml");
    CHECK(config.find("total_steps = " + std::to_string(total) + " ") != std::string::npos);  // the resume's overrides
    CHECK(config.find("eval_interval = 0 ") != std::string::npos);
    // metrics.jsonl reads as one run: strictly increasing steps, no repeated line
    std::istringstream lines(slurp(run / "metrics.jsonl"));
    std::string line;
    long long previous = -1;
    while (std::getline(lines, line)) {
        const long long step = static_cast<long long>(number_after(line, "env_steps"));
        CHECK(step > previous);
        previous = step;
    }
    CHECK(previous == total);
    fs::remove_all(dir);
}

TEST_CASE("resume: a second process cannot resume a run in progress", "[trainers][pipeline][resume]") {
    const auto dir = scratch("lock");
    const fs::path run = dir / "dqn-smoketest";
    const std::string ckpt = (run / "checkpoints" / "last.safetensors").string();
    const auto r = sh("{ \"$EXE\" --profile dqn-smoketest --device cpu --output '" + dir.string() +
                          "' --set run.total_steps=100000000 --set run.checkpoint_interval=400 & pid=$!; "
                          "for i in $(seq 600); do [ -s '" +
                          ckpt +
                          "' ] && break; sleep 0.1; done; "
                          "\"$EXE\" --resume '" +
                          run.string() +
                          "' --device cpu --set run.total_steps=200000000; "
                          "echo \"second=$?\"; kill -INT $pid; wait $pid; }",
                      dir);
    INFO(r.err);
    CHECK(r.code == 130);  // the first run, interrupted cleanly
    CHECK(r.out.find("second=2") != std::string::npos);
    CHECK(r.err.find("another foxhunt-train process is running in this run directory") != std::string::npos);
    fs::remove_all(dir);
}

TEST_CASE("checkpoints carry the documented metadata: step, version, bars_per_year, the parameter layout",
          "[trainers][pipeline]") {
    const auto dir = scratch("meta");
    for (const std::string trainer : {"dqn", "ppo", "iql", "supervised"}) {
        const auto r =
            sh("\"$EXE\" --profile " + trainer + "-smoketest --device cpu -q --output '" + dir.string() + "'", dir);
        REQUIRE(r.code == 0);
        const auto f =
            fh::io::TensorFile::read((dir / (trainer + "-smoketest") / "checkpoints" / "last.safetensors").string());
        INFO(trainer);
        CHECK(f.format_version() == 2);
        const bool by_updates = trainer == "iql" || trainer == "supervised";
        CHECK(f.metadata("step") == (by_updates ? "500" : trainer == "ppo" ? "4000" : "2000"));
        CHECK(f.metadata("progress_unit") == (by_updates ? "updates" : "env_steps"));
        CHECK(f.metadata("created_by").value_or("").rfind("foxhunt-train ", 0) == 0);
        CHECK(std::stod(f.metadata("bars_per_year").value_or("0")) > 5000);
        CHECK(f.metadata("bars_per_year_inferred") == "true");
        CHECK(std::stod(f.metadata("wall_seconds").value_or("-1")) > 0);
        // The layout unflattens params/online: slices in order, inside the buffer, weights (out, in).
        const auto params = f.tensor("params/online");
        const auto layout = fh::io::json::parse(f.metadata("param_layout").value_or("[]"));
        REQUIRE(layout.is_array());
        REQUIRE(!layout.as_array().empty());
        std::uint64_t end = 0;
        for (const auto& slice : layout.as_array()) {
            const auto offset = slice.find("offset")->as_u64(), size = slice.find("size")->as_u64();
            CHECK(offset >= end);
            CHECK(offset % 32 == 0);
            end = offset + size;
            const auto& shape = slice.find("shape")->as_array();
            std::uint64_t n = 1;
            for (const auto& d : shape) n *= d.as_u64();
            CHECK(n == size);
            const std::string name = slice.find("name")->as_string();
            CHECK(shape.size() == (name.ends_with(".w") ? 2u : 1u));
        }
        // Only the last slice's padding after it (and the supervised adapter's 4 calibration floats).
        const std::uint64_t extra = trainer == "supervised" ? 4 : 0;
        CHECK(end + extra <= params.shape[0]);
        CHECK(params.shape[0] - extra - end < 32);
    }
    fs::remove_all(dir);
}

TEST_CASE("supervised: early stopping on the validation loss, and a resumed run equals an uninterrupted one",
          "[trainers][pipeline][supervised]") {
    const auto dir = scratch("supervised");
    // Validate every 50 updates: the validation loss soon stops improving for 3 evaluations.
    const auto r = sh("\"$EXE\" --profile supervised-smoketest --device cpu --output '" + dir.string() +
                          "' --set run.name=early --set run.total_steps=20000 --set run.eval_interval=50"
                          " --set early_stopping.patience=3",
                      dir);
    INFO(r.err);
    REQUIRE(r.code == 0);
    const std::string summary = slurp(dir / "early" / "summary.json");
    CHECK(summary.find("\"status\":\"early_stopped\"") != std::string::npos);
    CHECK(summary.find("\"metric\":\"val_loss\"") != std::string::npos);
    const std::string evals = slurp(dir / "early" / "eval.jsonl");
    CHECK(evals.find("\"metric\":\"val_loss\"") != std::string::npos);
    // The best is the lowest validation loss: its value is the smallest val_loss of eval.jsonl.
    double lowest = 1e300;
    for (std::size_t at = evals.find("\"val_loss\":"); at != std::string::npos;
         at = evals.find("\"val_loss\":", at + 1))
        lowest = std::min(lowest, std::stod(evals.substr(at + 11)));
    const auto best = object_after(summary, "\"best\":");
    CHECK(std::stod(best.substr(best.find("\"value\":") + 8)) == lowest);

    // 500 updates straight, and 250 then resumed to 500: the same last checkpoint's weights.
    const auto a = sh("\"$EXE\" --profile supervised-smoketest --device cpu -q --output '" + dir.string() +
                          "' --set run.name=straight",
                      dir);
    REQUIRE(a.code == 0);
    const auto b = sh("\"$EXE\" --profile supervised-smoketest --device cpu -q --output '" + dir.string() +
                          "' --set run.name=resumed --set run.total_steps=250",
                      dir);
    REQUIRE(b.code == 0);
    const auto c =
        sh("\"$EXE\" --resume '" + (dir / "resumed").string() + "' --device cpu -q --set run.total_steps=500", dir);
    INFO(c.err);
    REQUIRE(c.code == 0);
    const auto fa = fh::io::TensorFile::read((dir / "straight" / "checkpoints" / "last.safetensors").string());
    const auto fb = fh::io::TensorFile::read((dir / "resumed" / "checkpoints" / "last.safetensors").string());
    for (const char* t : {"params/online", "adam/m", "adam/v"}) {
        INFO(t);
        CHECK(std::ranges::equal(fa.tensor(t).bytes, fb.tensor(t).bytes));
    }
    const std::string sa = slurp(dir / "straight" / "summary.json"), sb = slurp(dir / "resumed" / "summary.json");
    CHECK(object_after(sa.substr(sa.find("\"test\":")), "\"strategy\":") ==
          object_after(sb.substr(sb.find("\"test\":")), "\"strategy\":"));
    fs::remove_all(dir);
}

TEST_CASE("dt: early stopping, eval reproduces the test metrics, a resumed run equals an uninterrupted one",
          "[trainers][pipeline][dt]") {
    const auto dir = scratch("dt");
    // Validate every 20 updates with patience 2: the run stops early, its best checkpoint kept.
    const auto r = sh("\"$EXE\" --profile dt-smoketest --device cpu --output '" + dir.string() +
                          "' --set run.name=early --set run.total_steps=5000 --set run.eval_interval=20"
                          " --set early_stopping.patience=2",
                      dir);
    INFO(r.err);
    REQUIRE(r.code == 0);
    CHECK(slurp(dir / "early" / "summary.json").find("\"status\":\"early_stopped\"") != std::string::npos);
    CHECK(fs::exists(dir / "early" / "checkpoints" / "best.safetensors"));

    // 200 updates straight, and 100 then resumed to 200: the same weights, moments, test metrics.
    const auto a = sh(
        "\"$EXE\" --profile dt-smoketest --device cpu -q --output '" + dir.string() + "' --set run.name=straight", dir);
    REQUIRE(a.code == 0);
    const auto b = sh("\"$EXE\" --profile dt-smoketest --device cpu -q --output '" + dir.string() +
                          "' --set run.name=resumed --set run.total_steps=100",
                      dir);
    REQUIRE(b.code == 0);
    const auto c =
        sh("\"$EXE\" --resume '" + (dir / "resumed").string() + "' --device cpu -q --set run.total_steps=200", dir);
    INFO(c.err);
    REQUIRE(c.code == 0);
    const auto fa = fh::io::TensorFile::read((dir / "straight" / "checkpoints" / "last.safetensors").string());
    const auto fb = fh::io::TensorFile::read((dir / "resumed" / "checkpoints" / "last.safetensors").string());
    for (const char* t : {"params/online", "adam/m", "adam/v", "guard/state"}) {
        INFO(t);
        CHECK(std::ranges::equal(fa.tensor(t).bytes, fb.tensor(t).bytes));
    }
    CHECK(fa.metadata("layout_version").value_or("") == "dt/1");
    const std::string sa = slurp(dir / "straight" / "summary.json"), sb = slurp(dir / "resumed" / "summary.json");
    const auto test_a = object_after(sa.substr(sa.find("\"test\":")), "\"strategy\":");
    CHECK(test_a == object_after(sb.substr(sb.find("\"test\":")), "\"strategy\":"));
    // eval of the last checkpoint (the policy built from the profile, its KV cache from empty)
    // reproduces the run's test backtest.
    const auto e = sh("\"$EXE\" eval --checkpoint '" +
                          (dir / "straight" / "checkpoints" / "last.safetensors").string() + "' --device cpu -q",
                      dir);
    INFO(e.err);
    REQUIRE(e.code == 0);
    CHECK(object_after(e.out, "\"strategy\":") == test_a);
    fs::remove_all(dir);
}

TEST_CASE(
    "checkpoint.keep_replay = false: checkpoints without the replay, eval reads them, a resume refills the "
    "replay and trains on",
    "[trainers][pipeline][resume][keep_replay]") {
    const auto dir = scratch("keep-replay");
    const auto counters = [](const fh::io::TensorFile& f) { return f.get<std::int64_t>("counters", {3}); };
    const auto has_replay = [](const fh::io::TensorFile& f) {
        for (const char* t : {"replay/states", "replay/next_states", "replay/rewards", "replay/actions", "replay/done"})
            if (f.has(t)) return true;
        return false;
    };
    // dqn-smoketest to 1000 env steps (250 collection steps of 4 environments, one update each once
    // the replay holds min_replay_size = 64 transitions: 16 steps): with and without the replay.
    const std::string common =
        "\"$EXE\" --profile dqn-smoketest --device cpu -q --output '" + dir.string() + "' --set run.total_steps=1000";
    const auto kept = sh(common + " --set run.name=kept", dir);
    REQUIRE(kept.code == 0);
    const auto lean = sh(common + " --set run.name=lean --set checkpoint.keep_replay=false", dir);
    INFO(lean.err);
    REQUIRE(lean.code == 0);
    for (const char* which : {"last", "best"}) {
        INFO(which);
        const fs::path with = dir / "kept" / "checkpoints" / (std::string(which) + ".safetensors");
        const fs::path without = dir / "lean" / "checkpoints" / (std::string(which) + ".safetensors");
        const auto fk = fh::io::TensorFile::read(with.string());
        const auto fl = fh::io::TensorFile::read(without.string());
        CHECK(has_replay(fk));
        CHECK(fk.metadata("replay") == "kept");
        CHECK(!has_replay(fl));
        CHECK(fl.metadata("replay") == "omitted");
        CHECK(fl.has("params/online"));
        CHECK(fs::file_size(without) + 256 * 2 * 50 * 4 < fs::file_size(with));  // the states alone: 100 KiB
        // The counters of an empty replay: steps and updates go on, no pushed steps.
        const std::vector<std::int64_t> empty{counters(fk)[0], counters(fk)[1], 0};
        CHECK(counters(fk)[2] == counters(fk)[0]);
        CHECK(counters(fl) == empty);
    }
    CHECK(counters(fh::io::TensorFile::read((dir / "lean/checkpoints/last.safetensors").string())) ==
          std::vector<std::int64_t>{250, 234, 0});
    // The weights are the same (the key changes only what is written): eval needs nothing else.
    const auto ek = sh("\"$EXE\" eval --checkpoint '" + (dir / "kept/checkpoints/last.safetensors").string() +
                           "' --split test --device cpu",
                       dir);
    const auto el = sh("\"$EXE\" eval --checkpoint '" + (dir / "lean/checkpoints/last.safetensors").string() +
                           "' --split test --device cpu",
                       dir);
    INFO(el.err);
    REQUIRE(el.code == 0);
    CHECK(object_after(el.out, "\"strategy\":") == object_after(ek.out, "\"strategy\":"));
    const auto exported =
        sh("\"$EXE\" export '" + (dir / "lean").string() + "' -o '" + (dir / "policy.safetensors").string() + "'", dir);
    INFO(exported.err);
    CHECK(exported.code == 0);
    CHECK(fh::io::TensorFile::read((dir / "policy.safetensors").string()).has("q.l0.weight"));

    // Resumed to 2000 env steps: the log says the replay refills (not exact); no update until it
    // holds 16 steps again, then one per step: 234 + 250 - 16 updates, steps continue.
    const auto resumed =
        sh("\"$EXE\" --resume '" + (dir / "lean").string() + "' --device cpu --set run.total_steps=2000", dir);
    INFO(resumed.err);
    REQUIRE(resumed.code == 0);
    CHECK(resumed.err.find("the checkpoint holds no replay memory (written with checkpoint.keep_replay = false): the "
                           "replay refills from empty") != std::string::npos);
    CHECK(resumed.err.find("this resume is not exact") != std::string::npos);
    CHECK(slurp(dir / "lean" / "summary.json").find("\"status\":\"completed\"") != std::string::npos);
    const auto after = fh::io::TensorFile::read((dir / "lean/checkpoints/last.safetensors").string());
    CHECK(!has_replay(after));
    CHECK(counters(after) == std::vector<std::int64_t>{500, 468, 0});
    // Its metrics go on counting updates past the resume.
    CHECK(slurp(dir / "lean" / "metrics.jsonl").find("\"step\":500,\"env_steps\":2000,\"updates\":468") !=
          std::string::npos);

    // Resumed again for 25 steps, now keeping the replay: its checkpoint holds the 25 steps pushed
    // since the ring was refilled (updates 468 + 25 - 16), in the ring's first 25 slots (the device
    // wrote from slot 0 again; the rest is still empty).
    const auto again = sh("\"$EXE\" --resume '" + (dir / "lean").string() +
                              "' --device cpu --set run.total_steps=2100 --set checkpoint.keep_replay=true",
                          dir);
    INFO(again.err);
    REQUIRE(again.code == 0);
    CHECK(again.err.find("replay refills from empty") != std::string::npos);  // from the lean checkpoint
    const auto full = fh::io::TensorFile::read((dir / "lean/checkpoints/last.safetensors").string());
    CHECK(has_replay(full));
    CHECK(full.metadata("replay") == "kept");
    CHECK(counters(full) == std::vector<std::int64_t>{525, 477, 25});
    const auto shape = full.tensor("replay/states").shape;  // (64 slots x 4 environments, D)
    REQUIRE(shape.size() == 2);
    REQUIRE(shape[0] == 256);
    const auto states = full.get<float>("replay/states", shape);
    const std::size_t D = shape[1];
    for (std::size_t row = 0; row < 256; ++row) {
        const bool written =
            std::any_of(states.begin() + static_cast<std::ptrdiff_t>(row * D),
                        states.begin() + static_cast<std::ptrdiff_t>((row + 1) * D), [](float x) { return x != 0.0f; });
        INFO(row);
        CHECK(written == (row < 25 * 4));
    }
    // A resume from it has all it needs: the bare --resume says nothing of a refill and updates
    // from its first step.
    const auto third =
        sh("\"$EXE\" --resume '" + (dir / "lean").string() + "' --device cpu --set run.total_steps=3000", dir);
    INFO(third.err);
    REQUIRE(third.code == 0);
    CHECK(third.err.find("resumed from") != std::string::npos);
    CHECK(third.err.find("no replay memory") == std::string::npos);
    CHECK(counters(fh::io::TensorFile::read((dir / "lean/checkpoints/last.safetensors").string())) ==
          std::vector<std::int64_t>{750, 702, 250});

    // Bad values are refused naming the key (exit 2).
    for (const char* bad : {"2", "maybe", "\"false\""}) {
        INFO(bad);
        const auto r = sh(common + " --set run.name=bad --set 'checkpoint.keep_replay=" + std::string(bad) + "'", dir);
        CHECK(r.code == 2);
        CHECK(r.err.find("checkpoint.keep_replay") != std::string::npos);
        CHECK(!fs::exists(dir / "bad"));
    }
    fs::remove_all(dir);
}
