/// @file test_vec_env_gpu.cpp
/// @brief [gpu] The CUDA environment equals the CPU one step by step; and the collection
///        benchmark (hidden: run with "[.bench]").
#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <vector>

#include "env/vec_env.hpp"
#include "device/cpu_device.hpp"
#include "support/gpu.hpp"
#include "support/market_fixture.hpp"
#include "abi/env.h"

using namespace fh::env;

namespace {

template <class T>
bool bytes_equal(const std::vector<T>& a, const std::vector<T>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

}  // namespace

TEST_CASE("the CUDA environment equals the CPU environment step by step", "[gpu][env]") {
    fh::ops::CpuDevice cpu;
    auto& gpu = fh::test::gpu_ops();
    // Several contract segments, odd sizes; 15 levels x 3 urgencies like PPO.
    const auto market = fh::test::random_walk_market(20011, 23, 42, {0, 7001, 13007});
    EnvParams p = fh::test::es_params(42, 15, 7);
    p.episode_length = 300;
    p.drawdown_penalty = 0.3;
    p.bankruptcy_fraction = 0.9;  // make bankruptcies happen too
    const int n = 509;
    DeviceMarket cm(cpu, market), gm(gpu, market);
    for (Split split : {Split::train, Split::val}) {
        VecEnv ce(cpu, cm, split, p, n), ge(gpu, gm, split, p, n);
        ce.reset_all();
        ge.reset_all();
        auto ca = cpu.alloc<int>(n);
        auto ga = gpu.alloc<int>(n);
        long terminated = 0, truncated = 0, fills = 0;
        for (int step = 0; step < 3000; ++step) {
            fh::ops::run(cpu,
                         fh::ops::EnvRandomActions{ca.view(), 77, static_cast<std::uint64_t>(step), num_actions(p)});
            fh::ops::run(gpu,
                         fh::ops::EnvRandomActions{ga.view(), 77, static_cast<std::uint64_t>(step), num_actions(p)});
            ce.step(ca.cview());
            ge.step(ga.cview());
            if (step % 7 != 0 && step < 2990) continue;  // compare often, download less
            INFO("step " << step);
            REQUIRE(cpu.to_host(ca.cview()) == gpu.to_host(ga.cview()));
            const auto ci = cpu.to_host(ce.info()), gi = gpu.to_host(ge.info());
            const auto cs = cpu.to_host(ce.state()), gs = gpu.to_host(ge.state());
            for (int e = 0; e < n; ++e) {
                REQUIRE(ci[e].filled_contracts == gi[e].filled_contracts);
                REQUIRE(ci[e].fill_price == gi[e].fill_price);
                REQUIRE(ci[e].order_type == gi[e].order_type);
                // Exact: + - * / only, --fmad=false on the device, -ffp-contract=off on the host.
                REQUIRE(ci[e].equity == gi[e].equity);
                fills += ci[e].filled_contracts != 0;
            }
            // The same arithmetic gives the same bits.
            REQUIRE(bytes_equal(cs, gs));
            REQUIRE(bytes_equal(ci, gi));
            REQUIRE(cpu.to_host(ce.rewards()) == gpu.to_host(ge.rewards()));
            const auto cd = cpu.to_host(ce.done());
            REQUIRE(cd == gpu.to_host(ge.done()));
            REQUIRE(cpu.to_host(ce.states()) == gpu.to_host(ge.states()));
            REQUIRE(cpu.to_host(ce.next_states()) == gpu.to_host(ge.next_states()));
            for (auto d : cd) {
                terminated += d == kTerminated;
                truncated += d == kTruncated;
            }
        }
        CHECK(fills > 1000);
        CHECK(truncated > 0);
        CHECK(terminated > 0);
    }
}

TEST_CASE("collection throughput with random actions", "[.bench]") {
    auto run = [](fh::ops::Device& ops, int n_envs, int steps) {
        const auto market = fh::test::random_walk_market(100000, 5, 42);
        DeviceMarket dm(ops, market);
        EnvParams p = fh::test::es_params(42, 3, 1);
        p.episode_length = 1000;
        VecEnv env(ops, dm, Split::train, p, n_envs);
        env.reset_all();
        auto actions = ops.alloc<int>(static_cast<std::size_t>(n_envs));
        for (int s = 0; s < 20; ++s) {  // warm-up
            fh::ops::run(ops,
                         fh::ops::EnvRandomActions{actions.view(), 1, static_cast<std::uint64_t>(s), num_actions(p)});
            env.step(actions.cview());
        }
        ops.synchronize();
        const auto t0 = std::chrono::steady_clock::now();
        for (int s = 0; s < steps; ++s) {
            fh::ops::run(ops, fh::ops::EnvRandomActions{actions.view(), 1, static_cast<std::uint64_t>(1000 + s),
                                                        num_actions(p)});
            env.step(actions.cview());
        }
        ops.synchronize();
        const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        return static_cast<double>(n_envs) * steps / secs;
    };
    fh::ops::CpuDevice cpu;
    const double cpu_rate = run(cpu, 4096, 50);
    std::printf("collection, random actions, 4096 envs: cpu %.3g env steps/s\n", cpu_rate);
    if (fh::test::gpu_available()) {
        for (int n : {4096, 65536}) {
            const double gpu_rate = run(fh::test::gpu_ops(), n, 2000);
            std::printf("collection, random actions, %d envs: cuda %.3g env steps/s (%.0fx cpu@4096)\n", n, gpu_rate,
                        gpu_rate / cpu_rate);
        }
    }
}
