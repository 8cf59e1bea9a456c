/// @file test_utility_ops.cpp
/// @brief The core vector ops (cuda/abi/core_vector.h, CPU twins in src/ops/core/cpu.cpp) and
///        Adam at a device step: the CPU twins against the math, the aliasing checks, and [gpu]
///        the CUDA launches against the CPU twins; then the device runtime's host reads and
///        stream-ordered memory.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

#include "device/cpu_device.hpp"
#include "support/compare.hpp"
#include "support/error_model.hpp"
#include "support/gpu.hpp"
#include "abi/dqn_step.h"
#include "device/host_read.hpp"
#include "abi/core_optim.h"
#include "abi/core_vector.h"

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

    fh::ops::run(ops, fh::ops::Fill{a.view(), 0.37f});
    r.fill = ops.to_host(a.cview());

    fh::ops::run(ops, fh::ops::Copy{a.view(), b.cview()});
    r.copy = ops.to_host(a.cview());

    ops.upload<float>(a.view(), y);
    fh::ops::run(ops, fh::ops::Saxpy{a.view(), -1.3f, b.cview()});
    r.saxpy = ops.to_host(a.cview());

    ops.upload<float>(a.view(), y);
    fh::ops::run(ops, fh::ops::Scale{a.view(), 0.7f});
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
    // The aliased form of in-place scaling, y *= alpha written as saxpy(y, alpha - 1, y): refused,
    // with the error naming ops::Scale.
    CHECK_THROWS_WITH(fh::ops::run(ops, fh::ops::Saxpy{v, -0.5f, buf.cview()}), Catch::Contains("ops::Scale"));
    CHECK_THROWS_AS(fh::ops::run(ops, fh::ops::Saxpy{v.subview(0, 32), 1.f, v.subview(16, 32)}), std::invalid_argument);
    CHECK_THROWS_AS(fh::ops::run(ops, fh::ops::Copy{v.subview(8, 16), v.subview(0, 16)}), std::invalid_argument);
    // Disjoint halves of one allocation are distinct buffers and are fine.
    CHECK_NOTHROW(fh::ops::run(ops, fh::ops::Saxpy{v.subview(0, 32), 1.f, v.subview(32, 32)}));
    CHECK_NOTHROW(fh::ops::run(ops, fh::ops::Copy{v.subview(0, 32), v.subview(32, 32)}));
    // Size mismatches are errors too.
    CHECK_THROWS_AS(fh::ops::run(ops, fh::ops::Saxpy{v.subview(0, 10), 1.f, v.subview(32, 11)}), std::invalid_argument);
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

namespace {

/// copy_group's results on `ops`: a float copy into a destination at an odd offset, a byte copy
/// of odd length from an unaligned source (the kernel's byte path), an int copy and an empty pair,
/// in one group; destinations start as a fill pattern, so bytes outside the copies must survive.
struct GroupResults {
    std::vector<float> floats;
    std::vector<std::uint8_t> bytes;
    std::vector<int> ints;
};
GroupResults run_copy_group(Device& ops, std::size_t n, std::uint64_t seed) {
    const auto xf = random_floats(n, seed);
    std::vector<std::uint8_t> xb(n + 3);
    std::vector<int> xi(n);
    for (std::size_t i = 0; i < xb.size(); ++i) xb[i] = static_cast<std::uint8_t>((i * 37 + seed) % 251);
    for (std::size_t i = 0; i < n; ++i) xi[i] = static_cast<int>(i * 7919 + seed) - 1000;
    auto sf = ops.from_host<float>(xf);
    auto sb = ops.from_host<std::uint8_t>(xb);
    auto si = ops.from_host<int>(xi);
    auto df = ops.from_host<float>(std::vector<float>(n + 2, -9.f));
    auto db = ops.from_host<std::uint8_t>(std::vector<std::uint8_t>(n + 2, 0xAB));
    auto di = ops.from_host<int>(std::vector<int>(n, 5));
    fh::ops::run(ops, fh::ops::CopyGroup{{{df.view().subview(1, n), sf.cview()},
                                          {db.view().subview(2, n), sb.cview().subview(1, n)},
                                          {di.view().subview(0, 0), si.cview().subview(0, 0)},
                                          {di.view(), si.cview()}}});
    return {ops.to_host(df.cview()), ops.to_host(db.cview()), ops.to_host(di.cview())};
}

}  // namespace

TEST_CASE("copy_group copies each pair, any element type, and nothing else", "[ops]") {
    CpuDevice ops;
    for (std::size_t n : kSizes) {
        INFO("n = " << n);
        const auto r = run_copy_group(ops, n, n);
        const auto xf = random_floats(n, n);
        REQUIRE(r.floats.front() == -9.f);
        REQUIRE(r.floats.back() == -9.f);
        for (std::size_t i = 0; i < n; ++i) REQUIRE(r.floats[i + 1] == xf[i]);
        REQUIRE(r.bytes[0] == 0xAB);
        REQUIRE(r.bytes[1] == 0xAB);
        for (std::size_t i = 0; i < n; ++i)
            REQUIRE(r.bytes[i + 2] == static_cast<std::uint8_t>(((i + 1) * 37 + n) % 251));
        for (std::size_t i = 0; i < n; ++i) REQUIRE(r.ints[i] == static_cast<int>(i * 7919 + n) - 1000);
    }
}

TEST_CASE("copy_group refuses overlaps, size mismatches and too many pairs", "[ops][aliasing]") {
    CpuDevice ops;
    auto buf = ops.from_host<float>(random_floats(64, 5));
    const auto v = buf.view();
    const auto c = buf.cview();
    // A dst overlapping its own src, another pair's src, or another pair's dst.
    CHECK_THROWS_WITH(fh::ops::run(ops, fh::ops::CopyGroup{{{v.subview(0, 8), c.subview(4, 8)}}}),
                      Catch::Contains("copy 0's dst overlaps copy 0's src"));
    CHECK_THROWS_WITH(fh::ops::run(ops, fh::ops::CopyGroup{{{v.subview(0, 8), c.subview(16, 8)},
                                                            {v.subview(32, 8), c.subview(2, 8)}}}),
                      Catch::Contains("copy 0's dst overlaps copy 1's src"));
    CHECK_THROWS_WITH(fh::ops::run(ops, fh::ops::CopyGroup{{{v.subview(0, 8), c.subview(16, 8)},
                                                            {v.subview(4, 8), c.subview(32, 8)}}}),
                      Catch::Contains("write the same bytes"));
    // Reading one source twice is fine.
    CHECK_NOTHROW(fh::ops::run(
        ops, fh::ops::CopyGroup{{{v.subview(0, 8), c.subview(16, 8)}, {v.subview(8, 8), c.subview(16, 8)}}}));
    CHECK_THROWS_WITH(fh::ops::run(ops, fh::ops::CopyGroup{{{v.subview(0, 8), c.subview(16, 9)}}}),
                      Catch::Contains("8 elements to 9 from"));
    const fh::ops::CopyPair p{v.subview(0, 1), c.subview(40, 1)};
    CHECK_THROWS_WITH(fh::ops::run(ops, fh::ops::CopyGroup{{p, p, p, p, p, p, p, p, p}}), Catch::Contains("at most 8"));
}

TEST_CASE("CUDA copy_group equals the CPU twin", "[gpu][ops]") {
    CpuDevice cpu;
    auto& gpu = fh::test::gpu_ops();
    auto sizes = kSizes;
    sizes.push_back((std::size_t{1} << 24) + 4097);  // more words than the capped grid covers
    for (std::size_t n : sizes) {
        INFO("n = " << n);
        const auto c = run_copy_group(cpu, n, n);
        const auto g = run_copy_group(gpu, n, n);
        REQUIRE(g.floats == c.floats);
        REQUIRE(g.bytes == c.bytes);
        REQUIRE(g.ints == c.ints);
    }
}

namespace {

/// The means of `segments` equal segments of x in one call, then each segment's mean in a call of
/// its own (the second half of the result).
std::vector<float> segment_means(Device& ops, const std::vector<float>& x, std::size_t segments) {
    auto in = ops.from_host<float>(x);
    auto all = ops.alloc<float>(segments), one = ops.alloc<float>(segments);
    fh::ops::run(ops, fh::ops::Mean{all.view(), in.cview()});
    const std::size_t n = x.size() / segments;
    for (std::size_t s = 0; s < segments; ++s)
        fh::ops::run(ops, fh::ops::Mean{one.view().subview(s, 1), in.cview().subview(s * n, n)});
    auto out = ops.to_host(all.cview());
    for (float v : ops.to_host(one.cview())) out.push_back(v);
    return out;
}

}  // namespace

TEST_CASE("mean: each of equal segments, as its own call would; sizes that do not split are refused", "[ops]") {
    CpuDevice ops;
    for (std::size_t segments : {1, 5}) {
        const auto x = random_floats(segments * 3001, 61 + segments);
        const auto m = segment_means(ops, x, segments);
        for (std::size_t s = 0; s < segments; ++s) {
            double sum = 0;
            for (std::size_t i = 0; i < 3001; ++i) sum += x[s * 3001 + i];
            REQUIRE(m[s] == static_cast<float>(sum / 3001));
            REQUIRE(m[segments + s] == m[s]);
        }
    }
    auto x = ops.from_host<float>(random_floats(10, 3));
    auto out = ops.alloc<float>(3);
    CHECK_THROWS_WITH(fh::ops::run(ops, fh::ops::Mean{out.view(), x.cview()}),
                      Catch::Contains("do not split into 3 equal segments"));
    CHECK_THROWS_AS(fh::ops::run(ops, fh::ops::Mean{out.view().subview(0, 0), x.cview()}), std::invalid_argument);
}

TEST_CASE("the agents' norm and Adam refuse buffers that do not split into their agents", "[ops]") {
    CpuDevice ops;
    auto x = ops.alloc<float>(10);
    const auto guard = [&](int agents, fh::ops::View<const float> g) {
        return fh::ops::NormAndGuardAgents{agents, g, {}, {}, {}, {}, 1, 1, {}};
    };
    const auto adam = [&](int agents, fh::ops::View<float> p) {
        return fh::ops::AdamStepAgents{agents, p, {}, {}, {}, {}, {}, {}, {}, {}};
    };
    CHECK_THROWS_WITH(fh::ops::run(ops, guard(3, x.cview())),
                      "ops::norm_and_guard_agents: 10 gradients do not split into 3 agents");
    CHECK_THROWS_WITH(fh::ops::run(ops, guard(0, x.cview())),
                      "ops::norm_and_guard_agents: 10 gradients do not split into 0 agents");
    CHECK_THROWS_WITH(fh::ops::run(ops, guard(2, x.cview().subview(0, 0))),
                      "ops::norm_and_guard_agents: 0 gradients do not split into 2 agents");
    CHECK_THROWS_WITH(fh::ops::run(ops, adam(4, x.view())),
                      "ops::adam_step_agents: 10 parameters do not split into 4 agents");
    CHECK_THROWS_WITH(fh::ops::run(ops, adam(-1, x.view())),
                      "ops::adam_step_agents: 10 parameters do not split into -1 agents");
    // A size that splits passes this check and fails a later one (the empty scratch).
    CHECK_THROWS_WITH(fh::ops::run(ops, guard(2, x.cview())), !Catch::Contains("do not split"));
}

TEST_CASE("CUDA mean of equal segments: each as its own launch would, bit for bit; near the CPU twin", "[gpu][ops]") {
    CpuDevice cpu;
    auto& gpu = fh::test::gpu_ops();
    for (std::size_t segments : {1, 5, 64}) {
        for (std::size_t n : {1, 255, 32768}) {
            INFO("segments " << segments << " n " << n);
            const auto x = random_floats(segments * n, 71 + segments + n);
            const auto g = segment_means(gpu, x, segments), c = segment_means(cpu, x, segments);
            for (std::size_t s = 0; s < segments; ++s) REQUIRE(g[segments + s] == g[s]);
            // Each segment's mean: the CPU sums in double, the kernel in float (mean_bound).
            fh::test::Bounds bound(2 * segments);
            for (std::size_t s = 0; s < 2 * segments; ++s)
                bound[s] = fh::test::mean_bound(
                    std::vector<float>(x.begin() + static_cast<std::ptrdiff_t>(s % segments * n),
                                       x.begin() + static_cast<std::ptrdiff_t>((s % segments + 1) * n)));
            FH_REQUIRE_WITHIN(g, c, bound);
        }
    }
}

namespace {

/// `agents` counters starting at 0, 1, 2, ... each incremented three times (one launch each), then
/// copy_every of agents slices of n floats at periods 3 and 2: agent a's slice is copied from src
/// when 3 + a is a multiple of 3, then from `other` when it is even.
std::vector<float> counted_ops(Device& ops, std::size_t n, std::vector<long long>& counter_after,
                               std::size_t agents = 1) {
    std::vector<long long> start(agents);
    for (std::size_t a = 0; a < agents; ++a) start[a] = static_cast<long long>(a);
    auto counter = ops.from_host<long long>(start);
    for (int i = 0; i < 3; ++i) fh::ops::run(ops, fh::ops::Increment{counter.view()});
    counter_after = ops.to_host(counter.cview());
    auto dst = ops.from_host<float>(random_floats(agents * n, 31));
    auto src = ops.from_host<float>(random_floats(agents * n, 32));
    auto other = ops.from_host<float>(random_floats(agents * n, 33));
    fh::ops::run(ops, fh::ops::CopyEvery{dst.view(), src.cview(), counter.cview(), 3});
    fh::ops::run(ops, fh::ops::CopyEvery{dst.view(), other.cview(), counter.cview(), 2});
    return ops.to_host(dst.cview());
}

/// One Adam step at the update number held in device memory (counter step / 10, scale 10,
/// offset step % 10); lr_from: the learning rate from device memory too.
std::vector<float> adam_at_device_step(Device& ops, std::size_t n, long long step, bool lr_from = false) {
    auto P = ops.from_host<float>(random_floats(n, 41));
    auto M = ops.from_host<float>(random_floats(n, 42, -0.1f, 0.1f));
    auto V = ops.from_host<float>(random_floats(n, 43, 0.01f, 0.1f));
    auto G = ops.from_host<float>(random_floats(n, 44));
    auto norm = ops.from_host<float>(std::vector<float>{2.5f});
    auto s = ops.from_host<long long>(std::vector<long long>{step / 10});
    auto lr = ops.from_host<float>(std::vector<float>{3e-3f});
    fh::ops::AdamParams hp;
    hp.lr = lr_from ? 1.f : 3e-3f;  // with lr_from, device memory's 3e-3 wins
    hp.clip_norm = 1.f;
    hp.step = 999;  // not used: the step comes from device memory
    fh::ops::run(ops, fh::ops::AdamStep{P.view(),
                                        M.view(),
                                        V.view(),
                                        G.cview(),
                                        norm.cview(),
                                        {},
                                        fh::ops::counter_value(s.cview(), 10, step % 10),
                                        hp,
                                        lr_from ? lr.cview() : fh::ops::View<const float>()});
    auto out = ops.to_host(P.cview());
    for (float x : ops.to_host(M.cview())) out.push_back(x);
    for (float x : ops.to_host(V.cview())) out.push_back(x);
    return out;
}

}  // namespace

TEST_CASE("increment and copy_every: an update number in device memory decides the copy", "[ops]") {
    CpuDevice ops;
    for (std::size_t n : kSizes) {
        INFO("n = " << n);
        std::vector<long long> counter;
        const auto dst = counted_ops(ops, n, counter);
        CHECK(counter == std::vector<long long>{3});
        CHECK(dst == random_floats(n, 32));  // period 3 copied at 3; period 2 did not
        // Three agents at 3, 4, 5: agent 0 copies src, agent 1 `other`, agent 2 neither.
        const auto three = counted_ops(ops, n, counter, 3);
        CHECK(counter == std::vector<long long>{3, 4, 5});
        const auto slice = [n](const std::vector<float>& v, std::size_t a) {
            return std::vector<float>(v.begin() + static_cast<std::ptrdiff_t>(a * n),
                                      v.begin() + static_cast<std::ptrdiff_t>((a + 1) * n));
        };
        CHECK(slice(three, 0) == slice(random_floats(3 * n, 32), 0));
        CHECK(slice(three, 1) == slice(random_floats(3 * n, 33), 1));
        CHECK(slice(three, 2) == slice(random_floats(3 * n, 31), 2));
    }
    auto buf = ops.from_host<float>(random_floats(64, 5));
    auto counter = ops.from_host<long long>(std::vector<long long>{4});
    CHECK_THROWS_AS(fh::ops::run(ops, fh::ops::CopyEvery{buf.view().subview(0, 32), buf.cview().subview(16, 32),
                                                         counter.cview(), 2}),
                    std::invalid_argument);
    CHECK_THROWS_AS(fh::ops::run(ops, fh::ops::CopyEvery{buf.view().subview(0, 32), buf.cview().subview(32, 32),
                                                         counter.cview(), 0}),
                    std::invalid_argument);
    CHECK_THROWS_AS(fh::ops::run(ops, fh::ops::Increment{fh::ops::View<long long>()}), std::invalid_argument);
    auto counters = ops.from_host<long long>(std::vector<long long>{0, 0, 0});  // 32 floats are no 3 slices
    CHECK_THROWS_AS(fh::ops::run(ops, fh::ops::CopyEvery{buf.view().subview(0, 32), buf.cview().subview(32, 32),
                                                         counters.cview(), 2}),
                    std::invalid_argument);
    fh::ops::run(ops, fh::ops::CopyEvery{buf.view().subview(0, 32), buf.cview().subview(32, 32), counter.cview(), 2});
    const auto after = ops.to_host(buf.cview());
    CHECK(std::vector<float>(after.begin(), after.begin() + 32) == std::vector<float>(after.begin() + 32, after.end()));
}

TEST_CASE("Adam at an update number in device memory uses core::at_step's bias corrections", "[ops]") {
    CpuDevice ops;
    const std::size_t n = 257;
    for (long long step : {1LL, 2LL, 37LL, 100000LL}) {
        INFO("step " << step);
        const auto got = adam_at_device_step(ops, n, step);
        CHECK(adam_at_device_step(ops, n, step, true) == got);
        auto p = random_floats(n, 41), m = random_floats(n, 42, -0.1f, 0.1f), v = random_floats(n, 43, 0.01f, 0.1f);
        const auto g = random_floats(n, 44);
        fh::core::AdamConstants c{3e-3f, 0.9f, 0.999f, 1e-8f, 1.f, 0.f, 0.f, 0.f};
        c = fh::core::at_step(c, step);
        // The corrections agree with 1 - beta^step to float rounding.
        CHECK(c.bias_correction1 ==
              Approx(1.0 - std::pow(static_cast<double>(0.9f), static_cast<double>(step))).epsilon(1e-6));
        CHECK(c.bias_correction2 ==
              Approx(1.0 - std::pow(static_cast<double>(0.999f), static_cast<double>(step))).epsilon(1e-6));
        const float scale = fh::core::clip_scale(2.5f, 1.f);
        for (std::size_t i = 0; i < n; ++i) fh::core::adam_element(p[i], m[i], v[i], g[i], scale, c);
        std::vector<float> want = p;
        want.insert(want.end(), m.begin(), m.end());
        want.insert(want.end(), v.begin(), v.end());
        CHECK(got == want);
    }
}

TEST_CASE("CUDA increment, copy_every and Adam at a device step equal the CPU twins", "[gpu][ops]") {
    CpuDevice cpu;
    auto& gpu = fh::test::gpu_ops();
    for (std::size_t n : kSizes) {
        INFO("n = " << n);
        std::vector<long long> cc, gc;
        const auto c = counted_ops(cpu, n, cc);
        const auto g = counted_ops(gpu, n, gc);
        CHECK(gc == cc);
        FH_REQUIRE_CLOSE(g, c, 0.0, 0.0);
        for (std::size_t agents : {3u, 70u}) {
            INFO(agents << " agents");
            const auto c3 = counted_ops(cpu, n, cc, agents);
            const auto g3 = counted_ops(gpu, n, gc, agents);
            CHECK(gc == cc);
            FH_REQUIRE_CLOSE(g3, c3, 0.0, 0.0);
        }
        for (long long step : {1LL, 37LL, 100000LL}) {
            INFO("step " << step);
            // Exact: the bias corrections by repeated squaring in double (core::power, the same
            // multiplications on both), the Adam element's products and sums rounded one by one.
            FH_REQUIRE_CLOSE(adam_at_device_step(gpu, n, step), adam_at_device_step(cpu, n, step), 0, 0);
            FH_REQUIRE_CLOSE(adam_at_device_step(gpu, n, step, true), adam_at_device_step(cpu, n, step), 0, 0);
        }
    }
}

TEST_CASE("CUDA saxpy refuses aliased buffers too", "[gpu][ops][aliasing]") {
    auto& gpu = fh::test::gpu_ops();
    auto buf = gpu.from_host<float>(random_floats(300, 9));
    CHECK_THROWS_AS(fh::ops::run(gpu, fh::ops::Saxpy{buf.view(), -0.5f, buf.cview()}), std::invalid_argument);
    CHECK_NOTHROW(fh::ops::run(gpu, fh::ops::Scale{buf.view(), 0.5f}));
    gpu.synchronize();
}

// HostRead returns the values at start(): ops issued after it (here a fill of the source) do not
// change what wait() returns, on either backend.
static void check_host_read(fh::ops::Device& ops) {
    auto src = ops.from_host<float>(std::vector<float>{1.5f, -2.f, 3.f});
    fh::ops::HostRead<float> read(ops, 3);
    CHECK_THROWS_AS(read.wait(), std::logic_error);  // nothing started
    CHECK_THROWS_AS(read.start(src.cview().subview(0, 2)), std::invalid_argument);
    read.start(src.cview());
    fh::ops::run(ops, fh::ops::Fill{src.view(), 7.f});
    CHECK(read.wait() == std::vector<float>{1.5f, -2.f, 3.f});
    read.start(src.cview());
    CHECK(read.wait() == std::vector<float>{7.f, 7.f, 7.f});
}

TEST_CASE("HostRead returns the values at start (CPU)", "[ops]") {
    fh::ops::CpuDevice ops;
    check_host_read(ops);
}

TEST_CASE("HostRead returns the values at start (GPU)", "[gpu][ops]") {
    check_host_read(fh::test::gpu_ops());
}

// Device memory comes from the stream-ordered pool (its free waits for no other agent's work):
// buffers freed and allocated again between ops, one allocated inside a branch of
// run_concurrently and read after the join, and two devices (a population's agents) freeing
// while the other has work queued all keep their values; an allocation inside a captured
// sequence, which would become a node of the graph, is refused and the device goes on.
TEST_CASE("CUDA memory is freed in stream order and refused inside a captured sequence", "[gpu][ops]") {
    auto& a = fh::test::gpu_ops();
    fh::ops::CudaDevice b(0, fh::ops::CudaDevice::kAgentSideLanes);
    const auto x = random_floats(4099, 31);
    auto big = a.from_host<float>(x);
    for (int round = 0; round < 20; ++round) {
        for (int k = 0; k < 8; ++k) fh::ops::run(a, fh::ops::Scale{big.view(), 1.0f});  // work queued on a
        auto t = b.from_host<float>(random_floats(1000 + round, 40 + round));
        fh::ops::run(b, fh::ops::Scale{t.view(), 2.0f});
        const auto expected = random_floats(1000 + round, 40 + round);
        const auto got = b.to_host(t.cview());
        for (std::size_t i = 0; i < got.size(); ++i) REQUIRE(got[i] == expected[i] * 2.0f);
    }  // each round's t freed on b while a may still run
    CHECK(a.to_host(big.cview()) == x);

    std::optional<fh::ops::Buffer<float>> made_in_branch;
    auto other = a.alloc<float>(300);
    a.run_concurrently(
        [&] {
            made_in_branch = a.alloc<float>(300);
            fh::ops::run(a, fh::ops::Fill{made_in_branch->view(), 1.5f});
        },
        [&] {
            fh::ops::run(a, fh::ops::Fill{other.view(), -2.f});
        });
    CHECK(a.to_host(made_in_branch->cview()) == std::vector<float>(300, 1.5f));
    CHECK(a.to_host(other.cview()) == std::vector<float>(300, -2.f));

    fh::ops::OpSequence seq;
    CHECK_THROWS_AS(a.run_sequence(seq, [&] { (void)a.alloc<float>(16); }), std::logic_error);
    auto after = a.alloc<float>(16);
    fh::ops::run(a, fh::ops::Fill{after.view(), 3.f});
    CHECK(a.to_host(after.cview()) == std::vector<float>(16, 3.f));
}
