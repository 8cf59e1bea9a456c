/// @file test_registry.cpp
/// @brief The trainer registry (src/trainers/registry.hpp) and the profile's table of trainers
///        (config/trainer_profiles.hpp) are one table: every entry of one has its entry in the
///        other, and what the profile's entry says a trainer can do (a validation loss, a replay
///        memory) is what its engine does; the entries' own hooks (the evaluation goal, the rules
///        that need the data) reach the trainer they belong to and no other.
#include <catch2/catch.hpp>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "config/profile.hpp"
#include "config/trainer_profiles.hpp"
#include "data/load.hpp"
#include "device/cpu_device.hpp"
#include "env/vec_env.hpp"
#include "trainers/registry.hpp"
#include "trainers/run_checks.hpp"
#include "trainers/setup.hpp"
#include "trainers/trainer.hpp"
#include "util/errors.hpp"

using namespace fh;

namespace {

config::Profile smoketest(std::string_view trainer, std::vector<std::string> overrides = {}) {
    overrides.emplace_back("run.device=\"cpu\"");
    return config::resolve_profile_file(config::locate_profile(std::string(trainer) + "-smoketest"), overrides);
}

}  // namespace

TEST_CASE("registry: every trainer's entry is the profile table's entry of the same name, in the same order",
          "[trainers]") {
    const auto kinds = trainers::trainer_kinds();
    const auto profiles = config::trainer_profiles();
    REQUIRE(kinds.size() == profiles.size());
    for (std::size_t i = 0; i < kinds.size(); ++i) {
        INFO("trainer " << kinds[i].name);
        CHECK(kinds[i].name == profiles[i].name);
        CHECK(&kinds[i].profile() == &profiles[i]);
    }
}

TEST_CASE("registry: what the profile's entry says a trainer can do is what its engine does", "[trainers]") {
    for (const auto& kind : trainers::trainer_kinds()) {
        INFO("trainer " << kind.name);
        const auto p = smoketest(kind.name);
        ops::CpuDevice ops;
        const auto market = data::load_market(trainers::data_options(p));
        const env::DeviceMarket dm(ops, market);
        const auto trainer = kind.make(ops, p, dm);
        trainer->iterate();
        // early_stopping.metric = "val_loss" is allowed exactly where the trainer has a validation loss
        CHECK(trainer->validation_loss().has_value() == kind.profile().validation_loss);
        // replay_buffer.save_dump is allowed exactly where the trainer keeps a replay memory
        if (kind.profile().replay_memory)
            CHECK(trainer->replay_dump().pushed_steps > 0);
        else
            CHECK_THROWS_AS(trainer->replay_dump(), std::logic_error);
    }
}

TEST_CASE("registry: the evaluation goal and the rules that need the data reach their trainer only", "[trainers]") {
    for (const auto& kind : trainers::trainer_kinds()) {
        INFO("trainer " << kind.name);
        // eval --set dqn.her_eval_goal is honoured for a policy trained with HER goals, and only then
        const auto her = smoketest(kind.name, {"dqn.her=true", "dqn.her_eval_goal=0.5"});
        const auto goal = kind.eval_goal ? kind.eval_goal(her) : std::nullopt;
        CHECK(goal.has_value() == (kind.name == "dqn"));
        if (goal) CHECK(*goal == 0.5f);
        CHECK_FALSE((kind.eval_goal && kind.eval_goal(smoketest(kind.name))));

        // A supervised.horizon longer than the training split: the forecaster has no training sample
        // (DataError, exit 3, before anything is allocated); the other trainers do not read the key.
        const auto p = smoketest(kind.name, {"supervised.horizon=4096", "data.synthetic_bars=5000"});
        const auto market = data::load_market(trainers::data_options(p));
        std::string message;
        int code = 0;
        try {
            trainers::check_run(p, market, {});
        } catch (const Error& e) {
            message = e.what();
            code = static_cast<int>(e.code());
        }
        INFO(message);
        if (kind.name == "supervised") {
            CHECK(code == 3);
            CHECK(message.find("has no bar with supervised.horizon = 4096 bars after it") != std::string::npos);
        } else {
            CHECK(code == 0);
        }
    }
}
