/// @file test_precision_trainers.cpp
/// @brief gpu.precision in training: on the CPU a short bf16 run of each of DQN, PPO and IQL is
///        deterministic (the same bits twice) and differs from fp32 (the rounding reaches the
///        weights); [gpu] every precision is bit-reproducible on the GPU (two runs of the same
///        profile and seed, the same final state, every state tensor).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "config/profile.hpp"
#include "data/load.hpp"
#include "env/vec_env.hpp"
#include "device/cpu_device.hpp"
#include "support/gpu.hpp"
#include "support/trainer_support.hpp"
#include "trainers/setup.hpp"

using namespace fh;

namespace {

/// The trainers' small runs (test_trainers_gpu_cpu.cpp's shapes).
config::Profile small(const std::string& trainer) {
    std::vector<std::string> o = {"run.trainer=\"" + trainer + "\"", "run.seed=13", "data.synthetic_bars=3000",
                                  "data.cache_dir=\"\"", "run.log_interval=1000000"};
    if (trainer == "dqn")
        o.insert(o.end(), {"experience.gpu_n_episodes=8", "experience.gpu_timesteps_per_episode=40",
                           "replay_buffer.buffer_size=256", "replay_buffer.min_replay_size=64",
                           "replay_buffer.batch_size=32", "dqn.hidden=[32, 32]"});
    else if (trainer == "ppo")
        o.insert(o.end(), {"experience.gpu_n_episodes=16", "experience.gpu_timesteps_per_episode=32",
                           "ppo.hidden=[32, 32]", "ppo.epochs=2", "ppo.minibatches=2"});
    else
        o.insert(o.end(), {"experience.gpu_n_episodes=8", "experience.gpu_timesteps_per_episode=50",
                           "replay_buffer.batch_size=32", "iql.hidden=[32, 32]", "iql.dataset_size=1000"});
    return config::resolve_profile_text("", "precision-profile", o);
}
int iterations(const std::string& trainer) {
    return trainer == "ppo" ? 3 : trainer == "dqn" ? 24 : 20;
}

/// `iterations` iterations of the profile's trainer on `ops` in `precision`: every state tensor.
std::vector<std::vector<std::byte>> train(ops::Device& ops, const config::Profile& p, ops::Precision precision,
                                          int iterations) {
    ops.set_precision(precision);
    const auto market = data::load_market(trainers::data_options(p));
    env::DeviceMarket dm(ops, market);
    auto owner = trainers::make_trainer(ops, p, dm);
    for (int k = 0; k < iterations; ++k) owner->iterate();
    REQUIRE(owner->updates() > 0);
    auto state = test::snapshot(ops, *owner);
    ops.set_precision(ops::Precision::fp32);
    return state;
}

}  // namespace

TEST_CASE("bf16 training on the CPU is deterministic and differs from fp32", "[trainers][precision]") {
    for (const std::string trainer : {"dqn", "ppo", "iql"}) {
        INFO(trainer);
        const auto p = small(trainer);
        ops::CpuDevice cpu;
        const auto a = train(cpu, p, ops::Precision::bf16, iterations(trainer));
        const auto b = train(cpu, p, ops::Precision::bf16, iterations(trainer));
        const auto f = train(cpu, p, ops::Precision::fp32, iterations(trainer));
        CHECK(a == b);
        CHECK(a != f);
        // tf32 computes FP32 on the CPU backend (documented): the fp32 bits.
        CHECK(train(cpu, p, ops::Precision::tf32, iterations(trainer)) == f);
    }
}

TEST_CASE("GPU training is bit-reproducible in every precision", "[gpu][trainers][precision]") {
    auto& gpu = test::gpu_ops();
    for (const std::string trainer : {"dqn", "ppo", "iql"})
        for (ops::Precision precision : {ops::Precision::fp32, ops::Precision::tf32, ops::Precision::bf16}) {
            INFO(trainer << " " << ops::precision_name(precision));
            const auto p = small(trainer);
            const auto a = train(gpu, p, precision, iterations(trainer));
            const auto b = train(gpu, p, precision, iterations(trainer));
            CHECK(a == b);
            // bf16's rounding reaches the weights (tf32 may not: cuBLAS may take FP32 kernels for
            // these small shapes, and the narrow tanh layers stay FP32).
            if (precision == ops::Precision::bf16) CHECK(a != train(gpu, p, ops::Precision::fp32, iterations(trainer)));
        }
}
