/// @file test_iql_ppo_learning.cpp
/// @brief Hidden ("[.learning]", run explicitly; on the GPU when one is present): the IQL and PPO
///        rows of docs/learning.md's learning table. Five seeds each on the planted-signal market
///        (no costs), the test Sharpe of the validation-selected weights against the oracle's;
///        IQL also against the behaviour policy that collected its dataset.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "config/profile.hpp"
#include "data/load.hpp"
#include "data/synthetic_market.hpp"
#include "env/vec_env.hpp"
#include "device/cpu_device.hpp"
#include "abi/iql_behaviour.h"
#include "support/gpu.hpp"
#include "support/learning_table.hpp"
#include "support/policy_eval.hpp"
#include "trainers/iql/engine.hpp"
#include "trainers/ppo/engine.hpp"
#include "trainers/setup.hpp"

using namespace fh;

namespace {

/// The planted market of the DQN variants' table (k = 0.3, 40,000 bars, no costs, one urgency);
/// the trainers' texts set the rest.
const std::vector<std::string> kPlantedMarket{"data.planted_signal=0.3",       "data.synthetic_bars=40000",
                                              "data.cache_dir=\"\"",           "instrument.commission=0.0",
                                              "instrument.slippage_ticks=0.0", "env.urgency_levels=1"};

constexpr const char* kIqlSettings = R"(
[run]
trainer = "iql"
log_interval = 1000000000
[experience]
gpu_n_episodes = 256
gpu_timesteps_per_episode = 200
[replay_buffer]
batch_size = 256
[training]
learning_rate = 3e-4
gamma = 0.9
tau = 0.005
[iql]
hidden = [128, 128]
dataset = "behaviour"
)";

constexpr const char* kPpoSettings = R"(
[run]
trainer = "ppo"
log_interval = 1000000000
[env]
position_levels = 15
[experience]
gpu_n_episodes = 256
gpu_timesteps_per_episode = 128
[training]
learning_rate = 1e-3
gamma = 0.9
grad_clip_norm = 0.5
[ppo]
hidden = [64, 64]
epochs = 4
minibatches = 8
entropy_coef = 0.003
diversity_coef = 0.0
lr_schedule = "constant"
)";

config::Profile table_profile(const char* settings, int seed, long long steps, std::vector<std::string> overrides) {
    std::vector<std::string> o = kPlantedMarket;
    o.push_back("run.seed=" + std::to_string(seed));
    o.push_back("run.total_steps=" + std::to_string(steps));
    o.insert(o.end(), overrides.begin(), overrides.end());
    for (auto& e : test::learning_extra_overrides()) o.push_back(e);
    return config::resolve_profile_text(settings, "learning-table", o);
}

ops::Device& learning_device(std::unique_ptr<ops::CpuDevice>& cpu) {
    if (test::gpu_available()) return test::gpu_ops();
    cpu = std::make_unique<ops::CpuDevice>();
    return *cpu;
}

}  // namespace

TEST_CASE(
    "IQL from the behaviour dataset on the planted signal: five seeds, test Sharpe of the "
    "validation-selected weights against the oracle's and the behaviour policy's (the docs/learning.md table)",
    "[.learning]") {
    std::unique_ptr<ops::CpuDevice> cpu;
    ops::Device& ops = learning_device(cpu);
    const bool gpu = test::gpu_available();
    // Progress counts gradient updates; the dataset is 4,000 steps of 256 environments.
    const long long updates = test::learning_steps(gpu ? 60000 : 3000);
    const std::vector<std::string> sizes =
        gpu ? std::vector<std::string>{"iql.dataset_size=1024000"}
            : std::vector<std::string>{"iql.dataset_size=64000", "experience.gpu_n_episodes=32", "iql.hidden=[64, 64]",
                                       "replay_buffer.batch_size=64"};
    std::printf(
        "| IQL seed | test / oracle | behaviour test / oracle | peak val / oracle | final val / oracle | "
        "final action entropy | seconds |\n|---|---|---|---|---|---|---|\n");
    std::vector<double> ratios;
    for (int seed = 1; seed <= 5; ++seed) {
        const auto p = table_profile(kIqlSettings, seed, updates, sizes);
        const test::ProfilePrecision precision(ops, p);
        const auto market = data::load_market(trainers::data_options(p));
        env::DeviceMarket dm(ops, market);
        const auto engine = trainers::make_iql_trainer(ops, p, dm);
        trainers::Trainer& trainer = *engine;
        const auto r =
            test::train_selecting_on_validation(ops, dm, market, p.data.planted_signal, trainer, updates, updates / 20);
        // The behaviour policy that collected the dataset, on the same test episodes: environment
        // e is trader e % 4 (random, momentum, reversion, trend) as in the collection.
        const auto bp = trainers::behaviour_params(trainer.env_params(), static_cast<std::uint64_t>(p.run.seed));
        long long step = 0;
        const double behaviour = test::validation_sharpe(
            ops, dm, trainer.env_params(),
            [&](ops::View<int> a, ops::View<const float> s, int) {
                ops::run(ops, ops::BehaviourActions{a, s, bp, static_cast<std::uint64_t>(step++)});
            },
            64, 1000, env::Split::test);
        const double test_oracle =
            data::planted_oracle(market.bars, market.test, p.data.planted_signal, market.bars_per_year).sharpe_per_bar;
        std::printf("| %d | %.3f | %.3f | %.3f | %.3f | %.3f | %.1f |\n", seed, r.test_ratio, behaviour / test_oracle,
                    r.peak_ratio, r.final_ratio, r.final_entropy, r.seconds);
        std::fflush(stdout);
        CHECK(r.test_ratio >= behaviour / test_oracle);  // never below the data's own policy
        ratios.push_back(r.test_ratio);
    }
    std::printf("| median | %.3f | | | | | |\n", test::median(ratios));
    CHECK(test::median(ratios) >= 0.8);
}

TEST_CASE(
    "PPO on the planted signal: five seeds, test Sharpe of the validation-selected weights against the "
    "oracle's (the docs/learning.md table)",
    "[.learning]") {
    std::unique_ptr<ops::CpuDevice> cpu;
    ops::Device& ops = learning_device(cpu);
    const bool gpu = test::gpu_available();
    const long long steps = test::learning_steps(gpu ? 6000000 : 100000);
    const std::vector<std::string> sizes =
        gpu ? std::vector<std::string>{}
            : std::vector<std::string>{"experience.gpu_n_episodes=16", "experience.gpu_timesteps_per_episode=64",
                                       "ppo.minibatches=4"};
    std::printf(
        "| PPO seed | test / oracle | peak val / oracle | final val / oracle | final action entropy | seconds |\n"
        "|---|---|---|---|---|---|\n");
    std::vector<double> ratios;
    for (int seed = 1; seed <= 5; ++seed) {
        const auto p = table_profile(kPpoSettings, seed, steps, sizes);
        const test::ProfilePrecision precision(ops, p);
        const auto market = data::load_market(trainers::data_options(p));
        env::DeviceMarket dm(ops, market);
        const auto engine = trainers::make_ppo_trainer(ops, p, dm);
        trainers::Trainer& trainer = *engine;
        const auto r =
            test::train_selecting_on_validation(ops, dm, market, p.data.planted_signal, trainer, steps, steps / 20);
        std::printf("| %d | %.3f | %.3f | %.3f | %.3f | %.1f |\n", seed, r.test_ratio, r.peak_ratio, r.final_ratio,
                    r.final_entropy, r.seconds);
        std::fflush(stdout);
        ratios.push_back(r.test_ratio);
    }
    std::printf("| median | %.3f | | | | |\n", test::median(ratios));
    CHECK(test::median(ratios) >= 0.9);
}
