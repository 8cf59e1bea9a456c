/// @file test_dqn_learning.cpp
/// @brief Hidden ("[.learning]", run explicitly; on the GPU when one is present): a longer DQN run
///        on the planted-signal market reaches at least half of the best achievable Sharpe
///        (docs/data.md: the oracle follows the sign of the last return).
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>

#include "config/profile.hpp"
#include "data/load.hpp"
#include "data/synthetic_market.hpp"
#include "env/vec_env.hpp"
#include "ops/cpu_device.hpp"
#include "support/gpu.hpp"
#include "support/policy_eval.hpp"
#include "support/trainer_support.hpp"
#include "trainers/dqn_trainer.hpp"
#include "trainers/setup.hpp"

using namespace fh;

TEST_CASE("DQN reaches half of the planted signal's best Sharpe", "[.learning]") {
    const bool gpu = test::gpu_available();
    std::unique_ptr<ops::CpuDevice> cpu;
    ops::Device* ops = nullptr;
    if (gpu) ops = &test::gpu_ops();
    else ops = (cpu = std::make_unique<ops::CpuDevice>()).get();
    const double k = 0.3;
    const auto p = config::resolve_profile_text(R"(
[run]
trainer = "dqn"
seed = 11
log_interval = 1000000
[data]
synthetic_bars = 40000
cache_dir = ""
[instrument]
commission = 0.0
slippage_ticks = 0.0
[env]
urgency_levels = 1
[experience]
gpu_timesteps_per_episode = 200
n_step = 1
[replay_buffer]
min_replay_size = 4096
[training]
learning_rate = 5e-4
gamma = 0.9
epsilon_end = 0.02
[dqn]
hidden = [128, 128]
v_min = -5.0
v_max = 5.0
)", "learning-profile",
        gpu ? std::vector<std::string>{"data.planted_signal=0.3", "run.total_steps=4000000", "experience.gpu_n_episodes=256",
                                       "replay_buffer.buffer_size=400000", "replay_buffer.batch_size=256",
                                       "training.epsilon_decay_steps=1000000"}
            : std::vector<std::string>{"data.planted_signal=0.3", "run.total_steps=120000", "experience.gpu_n_episodes=16",
                                       "replay_buffer.buffer_size=50000", "replay_buffer.batch_size=64",
                                       "training.epsilon_decay_steps=40000"});
    const auto market = data::load_market(trainers::data_options(p));
    env::DeviceMarket dm(*ops, market);
    trainers::DqnTrainer trainer(*ops, p, dm);
    const auto t0 = std::chrono::steady_clock::now();
    test::run_training(trainer, p);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    // The greedy policy on the validation split: per-step rewards (equity change, no costs).
    const double sharpe = test::validation_sharpe(*ops, dm, trainer.env_params(),
        [&](ops::View<int> a, ops::View<const float> s, int n) { trainer.act(*ops, a, s, n); });
    const auto oracle = data::planted_oracle(market.bars, market.val, k, market.bars_per_year);
    std::printf("learning (%s): %lld env steps, %lld updates in %.1f s; validation Sharpe per bar %.4f, "
                "oracle %.4f (ratio %.2f), oracle hit rate %.3f\n",
                ops->description().c_str(), trainer.env_steps(), trainer.updates(), seconds, sharpe,
                oracle.sharpe_per_bar, sharpe / oracle.sharpe_per_bar, oracle.hit_rate);
    CHECK(sharpe >= 0.5 * oracle.sharpe_per_bar);
}
