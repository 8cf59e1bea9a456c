/// @file test_trainers_gpu_cpu.cpp
/// @brief The DQN, PPO and IQL trainers on the GPU against the same trainers on the CPU reference
///        backend, over a few updates from the same seed: the weights part by a small fraction of
///        how far they moved, Adam's moments by a small fraction of their norm, the logged losses
///        by 1% ([gpu]: runs only where a CUDA device is present).
///
/// Error model. Every random draw is a counter-based function of the seed, so both backends
/// sample the same integers (replay indices, the dataset's batches, exploration); the
/// environments are bit-equal twins (tests/env). The products and reductions sum in another
/// order on the GPU (cuBLAS, warp reductions): a relative ~1e-6 per product
/// (fh::test::reordered_sums). Adam turns a gradient into a step of about the learning rate
/// whatever its rounding, except where the gradient is near zero, so the runs' difference is
/// judged against the weights' movement over the run (fh::test::movement_fraction), not element
/// by element. Where an action is chosen from network outputs (DQN's greedy action, PPO's sampled
/// one), a choice within rounding of a tie or of a sampling boundary may differ and change one
/// environment's later transitions; a few updates keep that rare. Bounds: 1% of the movement for
/// the weights (DQN, IQL), 5% for PPO (its sampled actions), Adam's m 1% (5%) and v 2% (10%) of
/// their norms (squares: twice the gradients' relative error).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "config/profile.hpp"
#include "data/load.hpp"
#include "env/vec_env.hpp"
#include "device/cpu_device.hpp"
#include "support/compare.hpp"
#include "support/gpu.hpp"
#include "support/trainer_support.hpp"
#include "trainers/dqn/engine.hpp"
#include "trainers/setup.hpp"

using namespace fh;

namespace {

struct Bounds {
    double weights, m, v;
};

/// Trains run.trainer's trainer (make_trainer) from profile `p` on both backends for `iterations` iterations and checks
/// the parting against `b`.
void gpu_against_cpu(const config::Profile& p, int iterations, Bounds b) {
    ops::CpuDevice cpu;
    auto& gpu = test::gpu_ops();
    const auto market = data::load_market(trainers::data_options(p));
    env::DeviceMarket dm_cpu(cpu, market), dm_gpu(gpu, market);
    const auto cpu_owner = trainers::make_trainer(cpu, p, dm_cpu), gpu_owner = trainers::make_trainer(gpu, p, dm_gpu);
    trainers::Trainer &on_cpu = *cpu_owner, &on_gpu = *gpu_owner;
    const auto start = test::as_floats(test::tensor_bytes(cpu, on_cpu, "params/online"));
    CHECK(test::same_bits(start, test::as_floats(test::tensor_bytes(gpu, on_gpu, "params/online"))));
    for (int k = 0; k < iterations; ++k) {
        on_cpu.iterate();
        on_gpu.iterate();
    }
    REQUIRE(on_cpu.updates() > 0);
    REQUIRE(on_gpu.updates() == on_cpu.updates());
    const auto got = [&](const char* name) { return test::as_floats(test::tensor_bytes(gpu, on_gpu, name)); };
    const auto ref = [&](const char* name) { return test::as_floats(test::tensor_bytes(cpu, on_cpu, name)); };
    const double weights = test::movement_fraction(got("params/online"), ref("params/online"), start);
    const double m = test::relative_l2(got("adam/m"), ref("adam/m"));
    const double v = test::relative_l2(got("adam/v"), ref("adam/v"));
    const auto lg = on_gpu.read_log(1.0), lc = on_cpu.read_log(1.0);
    WARN(p.run.trainer << " GPU against CPU after " << on_cpu.updates() << " updates: weights part by " << weights
                       << " of their movement; Adam's m by " << m << ", v by " << v << " of their norm; loss "
                       << lg.loss << " against " << lc.loss);
    CHECK(weights <= b.weights);
    CHECK(m <= b.m);
    CHECK(v <= b.v);
    CHECK(test::close_value(lg.loss, lc.loss, test::Tol{0, 1e-2}, test::Nan::differ));
}

config::Profile small(const char* trainer, std::vector<std::string> overrides) {
    overrides.insert(overrides.begin(),
                     {std::string("run.trainer=\"") + trainer + "\"", "run.seed=13", "data.synthetic_bars=3000",
                      "data.cache_dir=\"\"", "run.log_interval=1000000"});
    return config::resolve_profile_text("", "gpu-cpu-profile", overrides);
}

}  // namespace

TEST_CASE("the DQN trainer on the GPU against the CPU over 40 updates", "[gpu][trainers][dqn]") {
    // 8 iterations fill min_replay_size (8 environments x 8 steps), then one update per iteration.
    gpu_against_cpu(small("dqn", {"experience.gpu_n_episodes=8", "experience.gpu_timesteps_per_episode=40",
                                  "replay_buffer.buffer_size=256", "replay_buffer.min_replay_size=64",
                                  "replay_buffer.batch_size=32", "dqn.hidden=[32, 32]"}),
                    48, {0.01, 0.01, 0.02});
}

TEST_CASE("the PPO trainer on the GPU against the CPU over 3 rollouts", "[gpu][trainers][ppo]") {
    gpu_against_cpu(small("ppo", {"experience.gpu_n_episodes=16", "experience.gpu_timesteps_per_episode=32",
                                  "ppo.hidden=[32, 32]", "ppo.epochs=2", "ppo.minibatches=2"}),
                    3, {0.05, 0.05, 0.1});
}

TEST_CASE("the IQL trainer on the GPU against the CPU over 40 updates", "[gpu][trainers][iql]") {
    gpu_against_cpu(small("iql", {"experience.gpu_n_episodes=8", "experience.gpu_timesteps_per_episode=50",
                                  "replay_buffer.batch_size=32", "iql.hidden=[32, 32]", "iql.dataset_size=1000"}),
                    40, {0.01, 0.01, 0.02});
}
