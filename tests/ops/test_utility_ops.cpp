/// @file test_utility_ops.cpp
/// @brief The utility ops (cuda/kernels/core_vector.cu): the CPU reference against the math,
///        the aliasing guard, and [gpu] the CUDA ops against the CPU twins.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "ops/cpu_device.hpp"
#include "support/compare.hpp"
#include "support/gpu.hpp"
#include "ops/dqn/ops.hpp"

using fh::ops::CpuDevice;
using fh::ops::Device;
using fh::test::random_floats;

namespace {

// Odd sizes around the 256-thread block and a multi-block one (CUB/cuVS style).
const std::vector<std::size_t> kSizes{1, 7, 65, 255, 256, 257, 4099};

struct Results {
    std::vector<float> fill, copy, saxpy, scale;
};

/// Runs every utility op on `ops` with inputs from the seed.
Results run_all(Device& ops, std::size_t n, std::uint64_t seed) {
    const auto x = random_floats(n, seed);
    const auto y = random_floats(n, seed + 1);
    Results r;
    auto a = ops.alloc<float>(n);
    auto b = ops.from_host<float>(x);

    ops.fill(a.view(), 0.37f);
    r.fill = ops.to_host(a.cview());

    ops.copy(a.view(), b.cview());
    r.copy = ops.to_host(a.cview());

    ops.upload<float>(a.view(), y);
    ops.saxpy(a.view(), -1.3f, b.cview());
    r.saxpy = ops.to_host(a.cview());

    ops.upload<float>(a.view(), y);
    ops.scale(a.view(), 0.7f);
    r.scale = ops.to_host(a.cview());

    return r;
}

}  // namespace

TEST_CASE("CPU utility ops follow their definitions", "[ops]") {
    CpuDevice ops;
    for (std::size_t n : kSizes) {
        INFO("n = " << n);
        const auto x = random_floats(n, 11 * n);
        const auto y = random_floats(n, 11 * n + 1);
        const Results r = run_all(ops, n, 11 * n);
        for (std::size_t i = 0; i < n; ++i) {
            REQUIRE(r.fill[i] == 0.37f);
            REQUIRE(r.copy[i] == x[i]);
            REQUIRE(r.saxpy[i] == std::fma(-1.3f, x[i], y[i]));
            REQUIRE(r.scale[i] == y[i] * 0.7f);
        }
    }
}

TEST_CASE("saxpy and copy refuse overlapping buffers", "[ops][aliasing]") {
    CpuDevice ops;
    auto buf = ops.from_host<float>(random_floats(64, 5));
    const auto v = buf.view();
    // The aliased form of the earlier system's bug: y *= alpha written as saxpy(y, alpha - 1, y).
    CHECK_THROWS_WITH(ops.saxpy(v, -0.5f, buf.cview()), Catch::Contains("ops::scale"));
    CHECK_THROWS_AS(ops.saxpy(v.subview(0, 32), 1.f, v.subview(16, 32)), std::invalid_argument);
    CHECK_THROWS_AS(ops.copy(v.subview(8, 16), v.subview(0, 16)), std::invalid_argument);
    // Disjoint halves of one allocation are distinct buffers and are fine.
    CHECK_NOTHROW(ops.saxpy(v.subview(0, 32), 1.f, v.subview(32, 32)));
    CHECK_NOTHROW(ops.copy(v.subview(0, 32), v.subview(32, 32)));
    // Size mismatches are errors too.
    CHECK_THROWS_AS(ops.saxpy(v.subview(0, 10), 1.f, v.subview(32, 11)), std::invalid_argument);
}

TEST_CASE("CUDA utility ops equal the CPU twins bit for bit", "[gpu][ops]") {
    CpuDevice cpu;
    auto& gpu = fh::test::gpu_ops();
    auto sizes = kSizes;
    sizes.push_back((std::size_t{1} << 24) + 4097);  // more elements than the capped grid covers
    for (std::size_t n : sizes) {
        INFO("n = " << n);
        const Results c = run_all(cpu, n, 7 * n);
        const Results g = run_all(gpu, n, 7 * n);
        FH_REQUIRE_CLOSE(g.fill, c.fill, 0.0, 0.0);
        FH_REQUIRE_CLOSE(g.copy, c.copy, 0.0, 0.0);
        FH_REQUIRE_CLOSE(g.saxpy, c.saxpy, 0.0, 0.0);
        FH_REQUIRE_CLOSE(g.scale, c.scale, 0.0, 0.0);
    }
}

TEST_CASE("CUDA saxpy refuses aliased buffers too", "[gpu][ops][aliasing]") {
    auto& gpu = fh::test::gpu_ops();
    auto buf = gpu.from_host<float>(random_floats(300, 9));
    CHECK_THROWS_AS(gpu.saxpy(buf.view(), -0.5f, buf.cview()), std::invalid_argument);
    CHECK_NOTHROW(gpu.scale(buf.view(), 0.5f));
    gpu.synchronize();
}
