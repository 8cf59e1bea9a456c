/// @file test_iql_trainer.cpp
/// @brief The IQL trainer on the CPU backend: smoke (finite metrics, dataset size), exact resume,
///        the guard, the dataset from a DQN replay dump (and a mismatched dump refused); learning
///        from the behaviour dataset: test_learning_ci.cpp.
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "config/profile.hpp"
#include "data/load.hpp"
#include "env/vec_env.hpp"
#include "io/replay_dump.hpp"
#include "device/cpu_device.hpp"
#include "support/gpu.hpp"
#include "support/trainer_support.hpp"
#include "trainers/iql/engine.hpp"
#include "trainers/setup.hpp"
#include "util/errors.hpp"

using namespace fh;
using test::run_training;
using test::snapshot;

namespace {

config::Profile iql_profile(const std::vector<std::string>& overrides = {}) {
    return config::resolve_profile_text(R"(
[run]
trainer = "iql"
seed = 4
total_steps = 300
log_interval = 100
[data]
synthetic_bars = 3000
cache_dir = ""
[experience]
gpu_n_episodes = 8
gpu_timesteps_per_episode = 50
[replay_buffer]
batch_size = 32
[iql]
hidden = [32, 32]
dataset_size = 1000
)",
                                        "iql-test-profile", overrides);
}

struct Fixture {
    config::Profile p;
    data::MarketData market;
    env::DeviceMarket dm;
    Fixture(ops::Device& o, config::Profile profile)
        : p(std::move(profile)), market(data::load_market(trainers::data_options(p))), dm(o, market) {}
};

std::string temp_path(const std::string& name) {
    return (std::filesystem::temp_directory_path() / ("fh-iql-test-" + std::to_string(::getpid()) + "-" + name))
        .string();
}

}  // namespace

TEST_CASE("IQL smoke run on the CPU: behaviour dataset, finite metrics, every update counted", "[trainers][iql]") {
    ops::CpuDevice ops;
    Fixture f(ops, iql_profile());
    const auto engine = trainers::make_iql_trainer(ops, f.p, f.dm);
    trainers::Trainer& trainer = *engine;
    CHECK(trainer.env_steps() == 1000);  // 8 environments x 125 steps
    const auto lines = run_training(trainer, f.p);
    CHECK(trainer.updates() == 300);
    REQUIRE(lines.size() == 3);
    for (const auto& l : lines) {
        const std::string text = io::json::serialize(l.json);
        INFO(text);
        CHECK(text.find("null") == std::string::npos);
        CHECK(std::isfinite(l.loss));
    }
}

TEST_CASE("IQL with tau = 0 copies the target every target_update_period updates", "[trainers][iql]") {
    ops::CpuDevice ops;
    Fixture f(ops, iql_profile({"training.tau=0", "training.target_update_period=25"}));
    const auto engine = trainers::make_iql_trainer(ops, f.p, f.dm);
    trainers::Trainer& trainer = *engine;
    const auto online_and_target = [&] {
        const auto s = snapshot(ops, trainer);  // params/online, params/target first
        return std::pair{s.at(0), s.at(1)};
    };
    for (int i = 0; i < 49; ++i) trainer.iterate();
    auto [online, target] = online_and_target();
    CHECK(online != target);  // copied at update 25, trained since
    trainer.iterate();        // update 50
    std::tie(online, target) = online_and_target();
    CHECK(online == target);
}

static void check_resume_equivalence(ops::Device& ops) {
    Fixture f(ops, iql_profile());
    test::check_resume_equivalence(ops, f.p, 120, [&] { return trainers::make_iql_trainer(ops, f.p, f.dm); });
}

TEST_CASE("IQL resumed from its saved state equals an uninterrupted run (CPU, exact)", "[trainers][iql][resume]") {
    ops::CpuDevice ops;
    check_resume_equivalence(ops);
}

TEST_CASE("IQL resumed from its saved state equals an uninterrupted run (GPU, exact)", "[gpu][trainers][iql][resume]") {
    check_resume_equivalence(test::gpu_ops());
}

TEST_CASE("IQL on the GPU: the captured update equals every op issued alone (exact), both target rules",
          "[gpu][trainers][iql]") {
    auto& ops = test::gpu_ops();
    for (const char* target : {"training.tau=0.005", "training.tau=0"}) {
        INFO(target);
        // tau = 0: periodic copies every 25 updates, decided on the device.
        Fixture f(ops, iql_profile({target, "training.target_update_period=25"}));
        const auto r =
            test::run_captured_and_one_by_one(ops, f.p, [&] { return trainers::make_iql_trainer(ops, f.p, f.dm); });
        r.check_equal();
    }
}

TEST_CASE("IQL guard: injected NaN updates are skipped, too many exit 5 naming the value loss",
          "[trainers][iql][guard]") {
    ops::CpuDevice ops;
    Fixture f(ops, iql_profile({"training.max_bad_updates=2"}));
    const auto engine = trainers::make_iql_trainer(ops, f.p, f.dm);
    trainers::Trainer& trainer = *engine;
    trainer.inject_nan_at_updates({1, 3});
    const auto before = snapshot(ops, trainer);
    trainer.iterate();
    const auto after = snapshot(ops, trainer);
    CHECK(before[0] == after[0]);  // params/online untouched by the skipped update
    trainer.iterate();
    CHECK(snapshot(ops, trainer)[0] != after[0]);  // a good update applies
    trainer.iterate();
    try {
        (void)trainer.read_log(1.0);
        FAIL("expected DivergedError");
    } catch (const DivergedError& e) {
        CHECK(std::string(e.what()).find("the value (expectile) loss at update 1") != std::string::npos);
    }
}

TEST_CASE("IQL trains from a DQN run's replay dump; a dump of another shape is refused", "[trainers][iql][replay]") {
    ops::CpuDevice ops;
    const std::string path = temp_path("replay.fhreplay");
    test::write_small_dqn_dump(ops, path);

    Fixture f(ops, iql_profile({"iql.dataset=\"" + path + "\"", "run.total_steps=50"}));
    const auto engine = trainers::make_iql_trainer(ops, f.p, f.dm);
    trainers::Trainer& trainer = *engine;
    CHECK(trainer.env_steps() == 400);  // the ring: 50 steps x 8 environments, full
    run_training(trainer, f.p);
    CHECK(trainer.updates() == 50);

    // Another action space than the dump's: refused with a data error naming the file.
    Fixture g(ops, iql_profile({"iql.dataset=\"" + path + "\"", "env.position_levels=5"}));
    try {
        (void)trainers::make_iql_trainer(ops, g.p, g.dm);
        FAIL("expected DataError");
    } catch (const DataError& e) {
        CHECK(std::string(e.what()).find(path) != std::string::npos);
        CHECK(std::string(e.what()).find("actions") != std::string::npos);
    }
    std::filesystem::remove(path);
}
