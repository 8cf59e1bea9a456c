/// @file test_nn_ops_gpu.cpp
/// @brief [gpu] The CUDA network ops (cuBLAS SGEMMs + cuda/kernels/core_network.cu, core_optim.cu) against their CPU
///        twins on seeded random inputs (never zeros) over odd sizes. Each bound comes from the
///        error models of support/error_model.hpp, computed from the test's inputs: cuBLAS sums
///        in another order than the CPU loops (the reordered-sum model, per element from |X| |W|),
///        nvcc contracts into FMAs, and the device tanh is within 2 ulp. TF32 is off.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <string>
#include <limits>
#include <vector>

#include "device/cuda/kernel_timing.hpp"
#include "device/cpu_device.hpp"
#include "support/adam_target.hpp"
#include "support/compare.hpp"
#include "support/error_model.hpp"
#include "support/gpu.hpp"
#include "abi/core_optim.h"
#include "abi/core_vector.h"
#include "abi/nn_guard.h"

using fh::ops::Activation;
using fh::ops::AdamParams;
using fh::ops::CpuDevice;
using fh::ops::Device;
using fh::ops::View;
using fh::test::random_floats;

namespace {

struct LinearResults {
    std::vector<float> Y, dZ, dX, dW, db, dW_acc, db_acc;
};

/// v[at, at + n).
std::vector<float> part(const std::vector<float>& v, std::size_t at, std::size_t n) {
    return std::vector<float>(v.begin() + static_cast<std::ptrdiff_t>(at),
                              v.begin() + static_cast<std::ptrdiff_t>(at + n));
}

/// run_linear's inputs: X (batch, in), W (out, in), b (out), dY (batch, out).
struct LinearInputs {
    std::vector<float> X, W, b, dY;
};
LinearInputs linear_inputs(int batch, int in, int out, std::uint64_t seed) {
    const std::size_t nb = static_cast<std::size_t>(batch);
    const float w = 1.f / std::sqrt(static_cast<float>(in));
    return {random_floats(nb * in, seed, -1.f, 1.f), random_floats(static_cast<std::size_t>(out) * in, seed + 1, -w, w),
            random_floats(out, seed + 2, -0.5f, 0.5f), random_floats(nb * out, seed + 3, -1.f, 1.f)};
}

/// The model's bounds of run_linear's results (fh::test::linear_bounds), from its inputs and the
/// CPU's Y.
fh::test::LinearBounds linear_model(const LinearResults& cpu, int batch, int in, int out, Activation act,
                                    std::uint64_t seed) {
    const LinearInputs v = linear_inputs(batch, in, out, seed);
    return fh::test::linear_bounds(v.X, v.W, v.b, v.dY, cpu.Y, batch, in, out, act);
}

/// Forward, backward (set), backward again (accumulate) of one layer on `ops`; `in_parts`: the
/// backward as its four parts issued one by one (fh::ops::BackwardPart).
LinearResults run_linear(Device& ops, int batch, int in, int out, Activation act, std::uint64_t seed,
                         bool in_parts = false) {
    const std::size_t nb = static_cast<std::size_t>(batch);
    const LinearInputs v = linear_inputs(batch, in, out, seed);
    auto X = ops.from_host<float>(v.X);
    auto W = ops.from_host<float>(v.W);
    auto b = ops.from_host<float>(v.b);
    const auto dY0 = v.dY;
    auto Y = ops.alloc<float>(nb * out);
    auto dY = ops.from_host<float>(dY0);
    auto dX = ops.alloc<float>(nb * in);
    auto dW = ops.from_host<float>(random_floats(static_cast<std::size_t>(out) * in, seed + 4));
    auto db = ops.from_host<float>(random_floats(out, seed + 5));

    LinearResults r;
    ops.linear_forward(Y.view(), X.cview(), W.cview(), b.cview(), batch, in, out, act);
    r.Y = ops.to_host(Y.cview());
    using fh::ops::BackwardPart;
    const auto backward = [&](View<float> dx, bool accumulate) {
        for (BackwardPart part : in_parts ? std::vector<BackwardPart>{BackwardPart::activation, BackwardPart::bias,
                                                                      BackwardPart::weights, BackwardPart::input}
                                          : std::vector<BackwardPart>{BackwardPart::all})
            ops.linear_backward(dx, dW.view(), db.view(), dY.view(), Y.cview(), X.cview(), W.cview(), batch, in, out,
                                act, accumulate, part);
    };
    backward(dX.view(), false);
    r.dZ = ops.to_host(dY.cview());
    r.dX = ops.to_host(dX.cview());
    r.dW = ops.to_host(dW.cview());
    r.db = ops.to_host(db.cview());
    ops.upload<float>(dY.view(), dY0);
    backward({}, true);
    r.dW_acc = ops.to_host(dW.cview());
    r.db_acc = ops.to_host(db.cview());
    return r;
}

}  // namespace

TEST_CASE("CUDA linear forward/backward equal the CPU twins", "[gpu][nn]") {
    CpuDevice cpu;
    auto& gpu = fh::test::gpu_ops();
    REQUIRE(gpu.precision() == fh::ops::Precision::fp32);
    for (int batch : {1, 7, 65, 257})
        for (int in : {1, 3, 42, 129})
            for (int out : {1, 3, 42, 129})
                for (Activation act : {Activation::none, Activation::relu, Activation::tanh}) {
                    INFO("batch " << batch << " in " << in << " out " << out << " act " << static_cast<int>(act));
                    const std::uint64_t seed = 1000u * batch + 10u * in + out;
                    const LinearResults c = run_linear(cpu, batch, in, out, act, seed);
                    const LinearResults g = run_linear(gpu, batch, in, out, act, seed);
                    // Reordered sums of `in` + 1 (forward), `batch` (dW, db) or `out` (dX) terms, per
                    // element from their magnitudes, the forward's bound carried into dZ and on.
                    const auto m = linear_model(c, batch, in, out, act, seed);
                    FH_REQUIRE_WITHIN(g.Y, c.Y, m.Y);
                    FH_REQUIRE_WITHIN(g.dZ, c.dZ, m.dZ);
                    FH_REQUIRE_WITHIN(g.dX, c.dX, m.dX);
                    FH_REQUIRE_WITHIN(g.dW, c.dW, m.dW);
                    FH_REQUIRE_WITHIN(g.db, c.db, m.db);
                    FH_REQUIRE_WITHIN(g.dW_acc, c.dW_acc, m.dW_acc);
                    FH_REQUIRE_WITHIN(g.db_acc, c.db_acc, m.db_acc);
                }
}

TEST_CASE("CUDA linear forward over 4,096 to 8,191 rows (128 x 64 tiles, no K split) equals the CPU twin",
          "[gpu][nn]") {
    // CudaDevice::lt_linear_forward's wide-tile rule: the DQN collection step's three products at
    // 4,096 environments, odd shapes inside the range, and its edges (4,095 and 8,192 rows keep
    // the heuristic's algorithm), with each epilogue (none, bias, bias + ReLU, ReLU alone).
    CpuDevice cpu;
    auto& gpu = fh::test::gpu_ops();
    REQUIRE(gpu.precision() == fh::ops::Precision::fp32);
    struct Shape {
        int batch, in, out;
        Activation act;
        bool bias;
    };
    for (const Shape sh : {Shape{4096, 256, 510, Activation::none, true}, Shape{4096, 256, 256, Activation::relu, true},
                           Shape{4096, 50, 256, Activation::relu, true}, Shape{6001, 67, 129, Activation::relu, false},
                           Shape{8191, 42, 45, Activation::none, false}, Shape{4095, 50, 256, Activation::relu, true},
                           Shape{8192, 129, 33, Activation::none, true}}) {
        INFO("batch " << sh.batch << " in " << sh.in << " out " << sh.out << " bias " << sh.bias);
        const std::size_t rows = static_cast<std::size_t>(sh.batch), in = static_cast<std::size_t>(sh.in),
                          out = static_cast<std::size_t>(sh.out);
        const float w = 1.f / std::sqrt(static_cast<float>(sh.in));
        const auto x = random_floats(rows * in, 71u + rows, -1.f, 1.f);
        const auto wt = random_floats(out * in, 72u + rows, -w, w);
        const auto bias = random_floats(out, 73u + rows, -0.5f, 0.5f);
        const auto run = [&](Device& ops) {
            auto X = ops.from_host<float>(x);
            auto W = ops.from_host<float>(wt);
            auto b = ops.from_host<float>(bias);
            auto Y = ops.alloc<float>(rows * out);
            ops.linear_forward(Y.view(), X.cview(), W.cview(), sh.bias ? b.cview() : View<const float>(), sh.batch,
                               sh.in, sh.out, sh.act);
            return ops.to_host(Y.cview());
        };
        const std::vector<float> want = run(cpu), got = run(gpu);
        // Reordered sums of `in` (+ 1) terms, per element from |X| |W| (+ |b|).
        FH_REQUIRE_WITHIN(got, want,
                          fh::test::linear_forward_bound(x, wt, sh.bias ? bias : std::vector<float>{}, want, sh.batch,
                                                         sh.in, sh.out, sh.act));
        CHECK(run(gpu) == got);  // run to run exact
    }
}

TEST_CASE("CUDA linear backward issued in its four parts equals it in one, bit for bit", "[gpu][nn]") {
    auto& gpu = fh::test::gpu_ops();
    for (int batch : {1, 257, 4096})
        for (Activation act : {Activation::none, Activation::relu, Activation::tanh}) {
            INFO("batch " << batch << " act " << static_cast<int>(act));
            const LinearResults a = run_linear(gpu, batch, 50, 256, act, 5u + static_cast<unsigned>(batch), false);
            const LinearResults b = run_linear(gpu, batch, 50, 256, act, 5u + static_cast<unsigned>(batch), true);
            CHECK(a.dZ == b.dZ);
            CHECK(a.dX == b.dX);
            CHECK(a.dW == b.dW);
            CHECK(a.db == b.db);
            CHECK(a.dW_acc == b.dW_acc);
            CHECK(a.db_acc == b.db_acc);
        }
}

TEST_CASE("CUDA weight gradients with the rows split (few output tiles, many rows): near the CPU, run-to-run exact",
          "[gpu][nn]") {
    CpuDevice cpu;
    auto& gpu = fh::test::gpu_ops();
    // dqn-full's input layer and head (1,024 rows), ppo small's layers (8,192 rows), a layer whose
    // rows per split would stay long (cublasSgemm), the DQN update's 256 rows (too few) and an
    // output that fills the GPU's tiles (cublasSgemm).
    struct Shape {
        int batch, in, out;
    };
    for (const Shape sh : {Shape{1024, 50, 512}, Shape{1024, 256, 510}, Shape{8192, 64, 45}, Shape{16384, 64, 512},
                           Shape{256, 50, 256}, Shape{1024, 512, 512}})
        for (Activation act : {Activation::none, Activation::relu}) {
            INFO("batch " << sh.batch << " in " << sh.in << " out " << sh.out << " act " << static_cast<int>(act));
            const std::uint64_t seed = 31u + static_cast<unsigned>(sh.batch + sh.in + sh.out);
            const LinearResults c = run_linear(cpu, sh.batch, sh.in, sh.out, act, seed);
            fh::cuda::set_kernel_timing(true);
            (void)fh::cuda::collect_kernel_times();
            const LinearResults g = run_linear(gpu, sh.batch, sh.in, sh.out, act, seed);
            const auto times = fh::cuda::collect_kernel_times();
            fh::cuda::set_kernel_timing(false);
            // The rule (CudaDevice::split_k_weight_gradient): 1,024 rows or more, 64 x 64 tiles on at
            // most a quarter of the SMs, at least two splits of 16 rows or more in one wave (at
            // most 64), each split at most 512 rows; the accumulating dW keeps cublasSgemm.
            int sms = 0;
            REQUIRE(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0) == cudaSuccess);
            const long long tiles = ((sh.in + 63) / 64) * static_cast<long long>((sh.out + 63) / 64);
            int splits = 1;
            while (splits < 64 && tiles * splits * 2 <= sms && sh.batch / (splits * 2) >= 16) splits *= 2;
            const bool split =
                sh.batch >= 1024 && tiles * 4 <= sms && splits >= 2 && (sh.batch + splits - 1) / splits <= 512;
            std::vector<std::string> dw;  // "linear dW (lt, split K 16) 50x512x1024", then the accumulating one
            for (const auto& t : times)
                if (t.name.rfind("linear dW", 0) == 0) dw.push_back(t.name);
            REQUIRE(dw.size() == (split ? 2u : 1u));
            CHECK((dw.front().find("split K " + std::to_string(splits) + ")") != std::string::npos) == split);
            // Reordered sums of `out` (dX) and `batch` terms (dW: split or not, any order).
            const auto m = linear_model(c, sh.batch, sh.in, sh.out, act, seed);
            FH_REQUIRE_WITHIN(g.dX, c.dX, m.dX);
            FH_REQUIRE_WITHIN(g.dW, c.dW, m.dW);
            FH_REQUIRE_WITHIN(g.dW_acc, c.dW_acc, m.dW_acc);
            const LinearResults again = run_linear(gpu, sh.batch, sh.in, sh.out, act, seed);
            CHECK(again.dX == g.dX);
            CHECK(again.dW == g.dW);
            CHECK(again.dW_acc == g.dW_acc);
        }
}

TEST_CASE("CUDA linear backward over many rows (the bias gradient's row slices) equals the CPU twin", "[gpu][nn]") {
    CpuDevice cpu;
    auto& gpu = fh::test::gpu_ops();
    // 1 to 128 slices, one or several groups of 32 columns; each backward runs twice (set, then
    // accumulate), so a slice ticket left non-zero by the first would spoil the second.
    for (int batch : {300, 513, 2049, 5000, 32768, 70001})
        for (int out : {45, 129})
            for (Activation act : {Activation::none, Activation::relu, Activation::tanh}) {
                INFO("batch " << batch << " out " << out << " act " << static_cast<int>(act));
                const std::uint64_t seed = 77u + static_cast<unsigned>(batch) + static_cast<unsigned>(out);
                const LinearResults c = run_linear(cpu, batch, 3, out, act, seed);
                const LinearResults g = run_linear(gpu, batch, 3, out, act, seed);
                // db: a reordered sum of `batch` terms (the row slices' order), dZ's bound carried.
                const auto m = linear_model(c, batch, 3, out, act, seed);
                FH_REQUIRE_WITHIN(g.dZ, c.dZ, m.dZ);
                FH_REQUIRE_WITHIN(g.db, c.db, m.db);
                FH_REQUIRE_WITHIN(g.db_acc, c.db_acc, m.db_acc);
                const LinearResults again = run_linear(gpu, batch, 3, out, act, seed);  // run to run: the same bits
                CHECK(again.db == g.db);
                CHECK(again.db_acc == g.db_acc);
            }
}

// Shapes: in 29 (tanh: the narrow kernel), in 100 (tanh: a strided-batched SGEMM and the batched
// bias and activation kernel), with rows of whole float4s or not and an odd network stride (some
// networks' biases unaligned).
TEST_CASE("linear_forward_batched equals one linear_forward per network, on both backends", "[gpu][nn]") {
    CpuDevice cpu;
    auto& gpu = fh::test::gpu_ops();
    struct Shape {
        int in, out;
        std::size_t P;
    };
    for (const Shape shape : {Shape{29, 65, 8192}, Shape{100, 65, 8192}, Shape{100, 68, 8193}})
        for (int count : {1, 2, 5})
            for (bool shared_input : {false, true})
                for (bool bias : {true, false})
                    for (Activation act : {Activation::none, Activation::relu, Activation::tanh}) {
                        const int batch = 37, in = shape.in, out = shape.out;
                        const std::size_t P = shape.P, w_off = 64, b_off = 7000;
                        INFO("in " << in << " out " << out << " P " << P << " count " << count << " shared "
                                   << shared_input << " bias " << bias << " act " << static_cast<int>(act));
                        const auto params = random_floats(P * count, 5u + static_cast<unsigned>(count), -0.3f, 0.3f);
                        const std::size_t xs = shared_input ? 0 : static_cast<std::size_t>(batch) * in;
                        const auto X = random_floats((count - 1) * xs + static_cast<std::size_t>(batch) * in, 9);
                        auto run = [&](Device& ops) {
                            auto p = ops.from_host<float>(params);
                            auto x = ops.from_host<float>(X);
                            auto y = ops.alloc<float>(static_cast<std::size_t>(count * batch * out));
                            ops.linear_forward_batched(y.view(), x.cview(), xs, p.cview(), P, w_off,
                                                       bias ? static_cast<std::ptrdiff_t>(b_off) : -1, count, batch, in,
                                                       out, act);
                            return ops.to_host(y.cview());
                        };
                        const auto c = run(cpu), g = run(gpu);
                        // The CPU batched op equals one linear_forward per network exactly.
                        for (int k = 0; k < count; ++k) {
                            auto p = cpu.from_host<float>(params);
                            auto x = cpu.from_host<float>(X);
                            auto y = cpu.alloc<float>(static_cast<std::size_t>(batch * out));
                            cpu.linear_forward(y.view(),
                                               x.cview().subview(k * xs, static_cast<std::size_t>(batch) * in),
                                               p.cview().subview(k * P + w_off, static_cast<std::size_t>(out) * in),
                                               bias ? p.cview().subview(k * P + b_off, out) : View<const float>(),
                                               batch, in, out, act);
                            const auto one = cpu.to_host(y.cview());
                            REQUIRE(std::vector<float>(c.begin() + k * batch * out,
                                                       c.begin() + (k + 1) * batch * out) == one);
                        }
                        // Each network's reordered sums of `in` (+ 1) terms, per element from |X| |W|.
                        fh::test::Bounds bound;
                        for (int k = 0; k < count; ++k) {
                            const std::size_t nb = static_cast<std::size_t>(batch), no = static_cast<std::size_t>(out);
                            const auto b = fh::test::linear_forward_bound(
                                part(X, k * xs, nb * in), part(params, k * P + w_off, no * in),
                                bias ? part(params, k * P + b_off, no) : std::vector<float>{},
                                part(c, k * nb * no, nb * no), batch, in, out, act);
                            bound.insert(bound.end(), b.begin(), b.end());
                        }
                        FH_REQUIRE_WITHIN(g, c, bound);
                        REQUIRE(run(gpu) == g);  // reproducible
                    }
}

namespace {

/// linear_backward_batched over `count` networks (W, b at k * P + offsets in a params buffer, dW,
/// db at the same offsets in a grads buffer set to random values first), run twice (set, then
/// accumulate on the same dY); or, with `per_network`, linear_backward on each network's blocks.
/// Returns dZ, dX and grads after the first run, then the grads after the second.
struct BatchedBackward {
    std::vector<float> dZ, dX, grads, grads_acc;
};
constexpr std::size_t kBatchedP = 8192, kBatchedW = 128, kBatchedB = 7000;  // params per network, W's and b's offsets

/// run_backward_batched's inputs: params, grads (before), X, Y, dY.
struct BatchedInputs {
    std::vector<float> params, grads, X, Y, dY;
};
BatchedInputs batched_inputs(int count, int batch, int in, int out, Activation act, bool shared_input) {
    const std::size_t nb = static_cast<std::size_t>(batch), n = static_cast<std::size_t>(count);
    const std::size_t xs = shared_input ? 0 : nb * in, ys = nb * out;
    const std::uint64_t seed = 31u * count + 7u * batch + in + out;
    return {random_floats(kBatchedP * n, seed, -0.3f, 0.3f), random_floats(kBatchedP * n, seed + 1),
            random_floats((n - 1) * xs + nb * in, seed + 2, -1.f, 1.f),
            random_floats(n * ys, seed + 3, act == Activation::tanh ? -0.9f : 0.f, 0.9f),
            random_floats(n * ys, seed + 4, -1.f, 1.f)};
}

/// The model's bounds of run_backward_batched's results: each network's linear_backward_bounds
/// (Y, X and dY are inputs: exact), the gradients' other floats untouched (0).
struct BatchedBounds {
    fh::test::Bounds dZ, dX, grads, grads_acc;
};
BatchedBounds batched_model(int count, int batch, int in, int out, Activation act, bool bias, bool shared_input) {
    const BatchedInputs v = batched_inputs(count, batch, in, out, act, shared_input);
    const std::size_t nb = static_cast<std::size_t>(batch), no = static_cast<std::size_t>(out);
    const std::size_t xs = shared_input ? 0 : nb * in, ys = nb * no, wsz = no * in;
    fh::test::Bounds dZ, dX, grads(v.params.size(), 0.0), acc(v.params.size(), 0.0);
    for (std::size_t k = 0; k < static_cast<std::size_t>(count); ++k) {
        const auto b =
            fh::test::linear_backward_bounds(part(v.X, k * xs, nb * in), part(v.params, k * kBatchedP + kBatchedW, wsz),
                                             part(v.dY, k * ys, ys), part(v.Y, k * ys, ys), batch, in, out, act);
        dZ.insert(dZ.end(), b.dZ_bound.begin(), b.dZ_bound.end());
        dX.insert(dX.end(), b.dX.begin(), b.dX.end());
        const auto dw2 = fh::test::accumulated(b.dW, b.dW_terms, batch),
                   db2 = fh::test::accumulated(b.db, b.db_terms, batch);
        for (std::size_t i = 0; i < wsz; ++i) {
            grads[k * kBatchedP + kBatchedW + i] = b.dW[i];
            acc[k * kBatchedP + kBatchedW + i] = dw2[i];
        }
        if (bias)
            for (std::size_t i = 0; i < no; ++i) {
                grads[k * kBatchedP + kBatchedB + i] = b.db[i];
                acc[k * kBatchedP + kBatchedB + i] = db2[i];
            }
    }
    return {dZ, dX, grads, acc};
}
BatchedBackward run_backward_batched(Device& ops, int count, int batch, int in, int out, Activation act, bool bias,
                                     bool shared_input, bool per_network, bool in_parts = false) {
    using fh::ops::BackwardPart;
    const std::size_t P = kBatchedP, w_off = kBatchedW, b_off = kBatchedB;
    const std::size_t nb = static_cast<std::size_t>(batch), n = static_cast<std::size_t>(count);
    const std::size_t xs = shared_input ? 0 : nb * in, ys = nb * out, wsz = static_cast<std::size_t>(out) * in;
    const BatchedInputs v = batched_inputs(count, batch, in, out, act, shared_input);
    auto params = ops.from_host<float>(v.params);
    auto grads = ops.from_host<float>(v.grads);
    auto X = ops.from_host<float>(v.X);
    auto Y = ops.from_host<float>(v.Y);
    const auto dY0 = v.dY;
    auto dY = ops.from_host<float>(dY0);
    auto dX = ops.alloc<float>(n * nb * in);
    const auto backward = [&](View<float> dx, bool accumulate) {
        for (BackwardPart part : in_parts ? std::vector<BackwardPart>{BackwardPart::activation, BackwardPart::bias,
                                                                      BackwardPart::weights, BackwardPart::input}
                                          : std::vector<BackwardPart>{BackwardPart::all}) {
            if (!per_network) {
                ops.linear_backward_batched(dx, grads.view(), dY.view(), Y.cview(), X.cview(), xs, params.cview(), P,
                                            w_off, bias ? static_cast<std::ptrdiff_t>(b_off) : -1, count, batch, in,
                                            out, act, accumulate, part);
                continue;
            }
            for (std::size_t k = 0; k < n; ++k)
                ops.linear_backward(dx.empty() ? View<float>() : dx.subview(k * nb * in, nb * in),
                                    grads.view().subview(k * P + w_off, wsz),
                                    bias ? grads.view().subview(k * P + b_off, out) : View<float>(),
                                    dY.view().subview(k * ys, ys), Y.cview().subview(k * ys, ys),
                                    X.cview().subview(k * xs, nb * in), params.cview().subview(k * P + w_off, wsz),
                                    batch, in, out, act, accumulate, part);
        }
    };
    BatchedBackward r;
    backward(dX.view(), false);
    r.dZ = ops.to_host(dY.cview());
    r.dX = ops.to_host(dX.cview());
    r.grads = ops.to_host(grads.cview());
    ops.upload<float>(dY.view(), dY0);
    backward({}, true);
    r.grads_acc = ops.to_host(grads.cview());
    return r;
}

}  // namespace

TEST_CASE("linear_backward_batched equals one linear_backward per network, on both backends", "[gpu][nn]") {
    CpuDevice cpu;
    auto& gpu = fh::test::gpu_ops();
    // 300 and 2049 rows: the bias gradient's row slices (2 and 8), each network with its own
    // partials and tickets.
    for (int count : {1, 2, 5})
        for (int batch : {37, 300, 2049})
            for (bool shared_input : {false, true})
                for (bool bias : {true, false})
                    for (Activation act : {Activation::none, Activation::relu, Activation::tanh}) {
                        const int in = 29, out = 65;
                        INFO("count " << count << " batch " << batch << " shared " << shared_input << " bias " << bias
                                      << " act " << static_cast<int>(act));
                        const auto c = run_backward_batched(cpu, count, batch, in, out, act, bias, shared_input, false);
                        const auto c1 = run_backward_batched(cpu, count, batch, in, out, act, bias, shared_input, true);
                        CHECK(c.dZ == c1.dZ);  // the CPU's batched op is the single op per network
                        CHECK(c.dX == c1.dX);
                        CHECK(c.grads == c1.grads);
                        CHECK(c.grads_acc == c1.grads_acc);
                        const auto g = run_backward_batched(gpu, count, batch, in, out, act, bias, shared_input, false);
                        const auto g1 = run_backward_batched(gpu, count, batch, in, out, act, bias, shared_input, true);
                        const auto gp =
                            run_backward_batched(gpu, count, batch, in, out, act, bias, shared_input, false, true);
                        // One launch for every network's dZ and db: the single op's bits.
                        CHECK(g.dZ == g1.dZ);
                        if (bias)
                            for (int k = 0; k < count; ++k) {
                                const auto at = [&](const std::vector<float>& v) {
                                    const auto first = v.begin() + static_cast<std::ptrdiff_t>(8192 * k + 7000);
                                    return std::vector<float>(first, first + out);
                                };
                                CHECK(at(g.grads) == at(g1.grads));
                                CHECK(at(g.grads_acc) == at(g1.grads_acc));
                            }
                        // Its parts issued one by one: the same bits as all at once.
                        CHECK(gp.dZ == g.dZ);
                        CHECK(gp.dX == g.dX);
                        CHECK(gp.grads == g.grads);
                        CHECK(gp.grads_acc == g.grads_acc);
                        // Each network's reordered sums of `out` (dX) and `batch` (dW, db) terms; dZ
                        // from the same Y (an input): tanh's roundings only; other floats untouched.
                        const auto m = batched_model(count, batch, in, out, act, bias, shared_input);
                        FH_REQUIRE_WITHIN(g.dZ, c.dZ, m.dZ);
                        FH_REQUIRE_WITHIN(g.dX, c.dX, m.dX);
                        FH_REQUIRE_WITHIN(g.grads, c.grads, m.grads);
                        FH_REQUIRE_WITHIN(g.grads_acc, c.grads_acc, m.grads_acc);
                    }
}

// Many rows per network: the weight gradients with the rows split across slices (one strided batch
// of every network's slices, then each network's sum in slice order; separate inputs only) and one
// product per network where the inputs are shared; each within rounding of the CPU's, run to run
// the same bits.
TEST_CASE("linear_backward_batched over many rows: split weight gradients within rounding of the CPU, reproducible",
          "[gpu][nn]") {
    CpuDevice cpu;
    auto& gpu = fh::test::gpu_ops();
    for (int count : {2, 5})
        for (bool shared_input : {false, true}) {
            const int batch = 4096, in = 29, out = 65;
            INFO("count " << count << " shared " << shared_input);
            const auto c =
                run_backward_batched(cpu, count, batch, in, out, Activation::tanh, true, shared_input, false);
            const auto g =
                run_backward_batched(gpu, count, batch, in, out, Activation::tanh, true, shared_input, false);
            const auto again =
                run_backward_batched(gpu, count, batch, in, out, Activation::tanh, true, shared_input, false);
            CHECK(again.grads == g.grads);
            CHECK(again.grads_acc == g.grads_acc);
            // Reordered sums of `out` (dX) and `batch` terms (the split dW in any order).
            const auto m = batched_model(count, batch, in, out, Activation::tanh, true, shared_input);
            FH_REQUIRE_WITHIN(g.dX, c.dX, m.dX);
            FH_REQUIRE_WITHIN(g.grads, c.grads, m.grads);
            FH_REQUIRE_WITHIN(g.grads_acc, c.grads_acc, m.grads_acc);
        }
}

namespace {

struct HeadResults {
    std::vector<float> dZ, grads, grads_acc;
};

/// A network's parameter floats in run_head's layout: the head's W (out, in) at 0, its b at
/// out * in, the hidden b at out * in + out, then 8 unused.
std::size_t head_stride(int in, int out) {
    return static_cast<std::size_t>(out + 1) * static_cast<std::size_t>(in) + static_cast<std::size_t>(out) + 8;
}

/// A narrow head (in -> out, no activation) on a hidden layer with `act` whose output is X, for
/// `count` networks: its backward through the hidden layer's activation and bias, set and then
/// accumulated, with Device::head_backward (`fused`) or as linear_backward of the head then the
/// hidden layer's activation and bias parts, network by network (parameters: head_stride).
HeadResults run_head(Device& ops, int count, int batch, int in, int out, Activation act, bool fused,
                     std::uint64_t seed) {
    using fh::ops::BackwardPart;
    const std::size_t n = static_cast<std::size_t>(count), rows = static_cast<std::size_t>(batch);
    const std::size_t xs = rows * static_cast<std::size_t>(in), stride = head_stride(in, out);
    const std::size_t wi = static_cast<std::size_t>(in), wo = static_cast<std::size_t>(out), ds = rows * wo;
    auto X = ops.from_host<float>(random_floats(n * xs, seed, -1.f, 1.f));
    auto params = ops.from_host<float>(random_floats(n * stride, seed + 1, -0.3f, 0.3f));
    const auto dOut0 = random_floats(n * ds, seed + 2, -1.f, 1.f);
    auto dOut = ops.from_host<float>(dOut0);
    auto grads = ops.from_host<float>(random_floats(n * stride, seed + 3));
    auto dZ = ops.alloc<float>(n * xs);
    // Operands the composed form's calls do not read (no activation in the head; the hidden
    // layer's activation and bias parts only, as a layer of one input): distinct buffers.
    auto head_y = ops.alloc<float>(ds), hidden_x = ops.alloc<float>(rows), hidden_w = ops.alloc<float>(wi);
    auto hidden_dw = ops.alloc<float>(wi);
    const auto backward = [&](bool accumulate) {
        if (fused) {
            ops.head_backward(dZ.view(), grads.view(), dOut.cview(), X.cview(), params.cview(), stride, 0,
                              static_cast<std::ptrdiff_t>(wo * wi), static_cast<std::ptrdiff_t>(wo * wi + wo), count,
                              batch, in, out, act, accumulate);
            return;
        }
        for (std::size_t k = 0; k < n; ++k) {
            const auto g = grads.view().subview(k * stride, stride);
            const auto dz = dZ.view().subview(k * xs, xs);
            const auto x = X.cview().subview(k * xs, xs);
            const auto d = dOut.view().subview(k * ds, ds);
            ops.linear_backward(dz, g.subview(0, wo * wi), g.subview(wo * wi, wo), d, head_y.cview(), x,
                                params.cview().subview(k * stride, wo * wi), batch, in, out, Activation::none,
                                accumulate);
            ops.linear_backward({}, hidden_dw.view(), g.subview(wo * wi + wo, wi), dz, x, hidden_x.cview(),
                                hidden_w.cview(), batch, 1, in, act, accumulate,
                                BackwardPart::activation | BackwardPart::bias);
        }
    };
    HeadResults r;
    backward(false);
    r.dZ = ops.to_host(dZ.cview());
    r.grads = ops.to_host(grads.cview());
    ops.upload<float>(dOut.view(), dOut0);
    backward(true);
    r.grads_acc = ops.to_host(grads.cview());
    return r;
}

/// The model's bounds of run_head's results, network by network: the head's linear_backward_bounds
/// (no activation: dZ is dOut; dX a reordered sum of `out` terms), then the hidden layer's
/// activation (its output X an input: exact) and bias (`batch` terms) on that dX and its bound.
/// The 8 unused floats of each network: untouched (0).
struct HeadBounds {
    fh::test::Bounds dZ, grads, grads_acc;
};
HeadBounds head_model(int count, int batch, int in, int out, Activation act, std::uint64_t seed) {
    const std::size_t n = static_cast<std::size_t>(count), rows = static_cast<std::size_t>(batch);
    const std::size_t wi = static_cast<std::size_t>(in), wo = static_cast<std::size_t>(out);
    const std::size_t xs = rows * wi, stride = head_stride(in, out), ds = rows * wo;
    const auto X = random_floats(n * xs, seed, -1.f, 1.f);
    const auto params = random_floats(n * stride, seed + 1, -0.3f, 0.3f);
    const auto dOut = random_floats(n * ds, seed + 2, -1.f, 1.f);
    HeadBounds m;
    m.grads.assign(n * stride, 0.0);
    m.grads_acc.assign(n * stride, 0.0);
    for (std::size_t k = 0; k < n; ++k) {
        const auto x = part(X, k * xs, xs), w = part(params, k * stride, wo * wi), d = part(dOut, k * ds, ds);
        const auto head = fh::test::linear_backward_bounds(x, w, d, d, batch, in, out, Activation::none);
        std::vector<float> dx(xs);  // the CPU's dX (dZ W in ops::ref's order): the hidden layer's dY
        fh::ops::ref::input_backward<float>(dx.data(), d.data(), w.data(), batch, in, out);
        const auto hidden = fh::test::linear_backward_bounds({}, {}, dx, x, batch, 1, in, act, {}, head.dX);
        m.dZ.insert(m.dZ.end(), hidden.dZ_bound.begin(), hidden.dZ_bound.end());
        const auto put = [&](std::size_t at, const fh::test::Bounds& set, const std::vector<double>& terms) {
            const auto acc = fh::test::accumulated(set, terms, batch);
            for (std::size_t i = 0; i < set.size(); ++i) {
                m.grads[k * stride + at + i] = set[i];
                m.grads_acc[k * stride + at + i] = acc[i];
            }
        };
        put(0, head.dW, head.dW_terms);
        put(wo * wi, head.db, head.db_terms);
        put(wo * wi + wo, hidden.db, hidden.db_terms);
    }
    return m;
}

/// head_model in gpu.precision = "bf16": the head's two products multiply operands rounded to
/// BF16 on both sides (the same values, exact products), so their sums' bounds are the FP32
/// model's on the rounded dOut, X and W; the head's db and the hidden layer's activation (X
/// itself) and bias read the unrounded values.
HeadBounds head_model_bf16(int count, int batch, int in, int out, Activation act, std::uint64_t seed) {
    const std::size_t n = static_cast<std::size_t>(count), rows = static_cast<std::size_t>(batch);
    const std::size_t wi = static_cast<std::size_t>(in), wo = static_cast<std::size_t>(out);
    const std::size_t xs = rows * wi, stride = head_stride(in, out), ds = rows * wo;
    const auto rounded = [](std::vector<float> v) {
        for (float& x : v) x = fh::core::round_to_bf16(x);
        return v;
    };
    const auto X = random_floats(n * xs, seed, -1.f, 1.f);
    const auto params = random_floats(n * stride, seed + 1, -0.3f, 0.3f);
    const auto dOut = random_floats(n * ds, seed + 2, -1.f, 1.f);
    HeadBounds m;
    m.grads.assign(n * stride, 0.0);
    m.grads_acc.assign(n * stride, 0.0);
    for (std::size_t k = 0; k < n; ++k) {
        const auto x = part(X, k * xs, xs), w = part(params, k * stride, wo * wi), d = part(dOut, k * ds, ds);
        const auto rx = rounded(x), rw = rounded(w), rd = rounded(d);
        const auto head = fh::test::linear_backward_bounds(rx, rw, rd, rd, batch, in, out, Activation::none);
        const auto head_b = fh::test::linear_backward_bounds({}, {}, d, d, batch, in, out, Activation::none);
        std::vector<float> dx(xs);  // the CPU's dX (rounded dZ W in ops::ref's order): the hidden layer's dY
        fh::ops::ref::input_backward<float>(dx.data(), rd.data(), rw.data(), batch, in, out);
        const auto hidden = fh::test::linear_backward_bounds({}, {}, dx, x, batch, 1, in, act, {}, head.dX);
        m.dZ.insert(m.dZ.end(), hidden.dZ_bound.begin(), hidden.dZ_bound.end());
        const auto put = [&](std::size_t at, const fh::test::Bounds& set, const std::vector<double>& terms) {
            const auto acc = fh::test::accumulated(set, terms, batch);
            for (std::size_t i = 0; i < set.size(); ++i) {
                m.grads[k * stride + at + i] = set[i];
                m.grads_acc[k * stride + at + i] = acc[i];
            }
        };
        put(0, head.dW, head.dW_terms);
        put(wo * wi, head_b.db, head_b.db_terms);
        put(wo * wi + wo, hidden.db, hidden.db_terms);
    }
    return m;
}

/// Network k's floats [from, from + size) of a gradient buffer laid out as run_head's.
std::vector<float> slices_of(const std::vector<float>& v, int count, std::size_t stride, std::size_t from,
                             std::size_t size) {
    std::vector<float> out;
    for (std::size_t k = 0; k < static_cast<std::size_t>(count); ++k)
        out.insert(out.end(), v.begin() + static_cast<std::ptrdiff_t>(k * stride + from),
                   v.begin() + static_cast<std::ptrdiff_t>(k * stride + from + size));
    return out;
}

}  // namespace

TEST_CASE("head_backward is the head's linear_backward then the hidden activation and bias (CPU, exact)", "[nn]") {
    CpuDevice cpu;
    for (int count : {1, 3})
        for (int batch : {1, 37, 300})
            for (int in : {1, 45, 64})
                for (int out : {1, 9, fh::abi::kHeadBackwardMaxOut})
                    for (Activation act : {Activation::none, Activation::relu, Activation::tanh}) {
                        INFO("count " << count << " batch " << batch << " in " << in << " out " << out << " act "
                                      << static_cast<int>(act));
                        const std::uint64_t seed = 31u * static_cast<unsigned>(batch + in + count + out);
                        const auto f = run_head(cpu, count, batch, in, out, act, true, seed);
                        const auto c = run_head(cpu, count, batch, in, out, act, false, seed);
                        CHECK(f.dZ == c.dZ);
                        CHECK(f.grads == c.grads);
                        CHECK(f.grads_acc == c.grads_acc);
                    }
    // Its checks: sizes, a stride that does not cover a network, aliased outputs, a head too wide.
    auto buf = cpu.alloc<float>(4096);
    const auto v = buf.view();
    const auto c = buf.cview();
    CHECK_THROWS_WITH(cpu.head_backward(v.subview(0, 40), v.subview(100, 30), c.subview(200, 4), c.subview(300, 40),
                                        c.subview(400, 30), 30, 0, 10, 11, 1, 4, 11, 1, Activation::tanh, false),
                      Catch::Contains("dZ (count, batch, in)"));
    CHECK_THROWS_WITH(cpu.head_backward(v.subview(0, 80), v.subview(100, 50), c.subview(200, 8), c.subview(300, 80),
                                        c.subview(400, 50), 15, 0, 10, 11, 2, 4, 10, 1, Activation::tanh, false),
                      Catch::Contains("param_stride"));
    CHECK_THROWS_WITH(cpu.head_backward(v.subview(0, 40), v.subview(30, 30), c.subview(200, 4), c.subview(300, 40),
                                        c.subview(400, 30), 30, 0, 10, 11, 1, 4, 10, 1, Activation::tanh, false),
                      Catch::Contains("overlap"));
    CHECK_THROWS_WITH(cpu.head_backward(v.subview(0, 40), v.subview(100, 50), c.subview(200, 4), c.subview(300, 40),
                                        c.subview(400, 50), 50, 0, 30, 33, 1, 4, 10, 3, Activation::tanh, false),
                      Catch::Contains("dOut (count, batch, out)"));
    const int wide = fh::abi::kHeadBackwardMaxOut + 1;
    CHECK_THROWS_WITH(
        cpu.head_backward(v.subview(0, 40), v.subview(100, 200), c.subview(300, 4 * wide), c.subview(400, 40),
                          c.subview(500, 200), 200, 0, 10 * wide, 11 * wide, 1, 4, 10, wide, Activation::tanh, false),
        Catch::Contains("kHeadBackwardMaxOut"));
}

TEST_CASE("CUDA head_backward: one output the two passes' dZ and hidden db bit for bit, any width near the CPU",
          "[gpu][nn]") {
    CpuDevice cpu;
    auto& gpu = fh::test::gpu_ops();
    // 1 to 128 row slices; one or several groups of 32 columns; each run twice (set, then
    // accumulate), so a ticket left non-zero would spoil the second. Widths: a value head (its
    // own kernel), IQL's nine-action heads, the widest and the narrowest of the other kernel.
    for (int out : {1, 2, 9, fh::abi::kHeadBackwardMaxOut})
        for (int count : {1, 3})
            for (int batch : {1, 37, 300, 2049, 32768})
                for (int in : {1, 45, 512})
                    for (Activation act : {Activation::none, Activation::relu, Activation::tanh}) {
                        if (count > 1 && static_cast<long long>(batch) * in > (1 << 22)) continue;
                        if (out > 1 && out < 9 && act == Activation::tanh) continue;  // the kernel's paths: enough
                        INFO("out " << out << " count " << count << " batch " << batch << " in " << in << " act "
                                    << static_cast<int>(act));
                        const std::uint64_t seed = 53u * static_cast<unsigned>(batch + in + count + out);
                        const auto g = run_head(gpu, count, batch, in, out, act, true, seed);
                        const auto c = run_head(cpu, count, batch, in, out, act, true, seed);
                        const std::size_t wi = static_cast<std::size_t>(in), wo = static_cast<std::size_t>(out);
                        const std::size_t stride = head_stride(in, out);
                        if (out == 1) {  // the rounded product of the separate passes: their bits
                            const auto g2 = run_head(gpu, count, batch, in, out, act, false, seed);
                            CHECK(g.dZ == g2.dZ);
                            CHECK(slices_of(g.grads, count, stride, wo * wi + wo, wi) ==
                                  slices_of(g2.grads, count, stride, wo * wi + wo, wi));
                            CHECK(slices_of(g.grads_acc, count, stride, wo * wi + wo, wi) ==
                                  slices_of(g2.grads_acc, count, stride, wo * wi + wo, wi));
                        }
                        const auto again = run_head(gpu, count, batch, in, out, act, true, seed);  // run to run
                        CHECK(again.dZ == g.dZ);
                        CHECK(again.grads == g.grads);
                        CHECK(again.grads_acc == g.grads_acc);
                        // The head's dX: `out` terms; its dW, db and the hidden db: `batch` terms.
                        const auto m = head_model(count, batch, in, out, act, seed);
                        FH_REQUIRE_WITHIN(g.dZ, c.dZ, m.dZ);
                        FH_REQUIRE_WITHIN(g.grads, c.grads, m.grads);
                        FH_REQUIRE_WITHIN(g.grads_acc, c.grads_acc, m.grads_acc);
                    }
}

TEST_CASE("CUDA head_backward in bf16: the CPU twin's rounded operands, within the model; run-to-run exact",
          "[gpu][nn][precision]") {
    // The head kernels round dOut, X and W as they load them (HeadBackwardArgs::round_bf16); the
    // CPU twin rounds the same tensors. The shared device goes back to fp32 afterwards.
    CpuDevice cpu;
    cpu.set_precision(fh::ops::Precision::bf16);
    auto& gpu = fh::test::gpu_ops();
    struct Fp32Again {
        fh::ops::CudaDevice& d;
        ~Fp32Again() { d.set_precision(fh::ops::Precision::fp32); }
    } again_fp32{gpu};
    gpu.set_precision(fh::ops::Precision::bf16);
    for (int out : {1, 9, fh::abi::kHeadBackwardMaxOut})
        for (int count : {1, 3})
            for (int batch : {37, 2049})
                for (int in : {45, 512})
                    for (Activation act : {Activation::none, Activation::relu, Activation::tanh}) {
                        INFO("out " << out << " count " << count << " batch " << batch << " in " << in << " act "
                                    << static_cast<int>(act));
                        const std::uint64_t seed = 71u * static_cast<unsigned>(batch + in + count + out);
                        const auto g = run_head(gpu, count, batch, in, out, act, true, seed);
                        const auto c = run_head(cpu, count, batch, in, out, act, true, seed);
                        const auto again = run_head(gpu, count, batch, in, out, act, true, seed);
                        CHECK(again.dZ == g.dZ);
                        CHECK(again.grads == g.grads);
                        const auto m = head_model_bf16(count, batch, in, out, act, seed);
                        FH_REQUIRE_WITHIN(g.dZ, c.dZ, m.dZ);
                        FH_REQUIRE_WITHIN(g.grads, c.grads, m.grads);
                        FH_REQUIRE_WITHIN(g.grads_acc, c.grads_acc, m.grads_acc);
                    }
}

TEST_CASE("CUDA bias + activation pass: four columns at a time equals one at a time, bit for bit", "[gpu][nn]") {
    // A layer with one input: each product is one rounded multiplication, the same whatever the
    // GEMM's algorithm, so the rest of Y's arithmetic is the pass's own. Y's start decides the path: 16-byte
    // aligned with out % 4 == 0 takes quads (abi::bias_act_quads), one float further one element
    // at a time.
    auto& gpu = fh::test::gpu_ops();
    CpuDevice cpu;
    for (int out : {512, 45, 4, 1})
        for (int batch : {1, 3, 1000}) {
            for (Activation act : {Activation::tanh, Activation::relu})
                for (bool bias : {true, false}) {
                    INFO("out " << out << " batch " << batch << " tanh " << (act == Activation::tanh) << " bias "
                                << bias);
                    const std::size_t n = static_cast<std::size_t>(batch) * static_cast<std::size_t>(out);
                    const auto xh = random_floats(static_cast<std::size_t>(batch),
                                                  300 + static_cast<std::uint64_t>(out), -3.f, 3.f);
                    const auto wh = random_floats(static_cast<std::size_t>(out),
                                                  500 + static_cast<std::uint64_t>(batch), -2.f, 2.f);
                    const auto bh =
                        random_floats(static_cast<std::size_t>(out), 400 + static_cast<std::uint64_t>(batch));
                    auto run = [&](Device& ops, std::size_t shift) {
                        auto x = ops.from_host<float>(xh), w = ops.from_host<float>(wh), b = ops.from_host<float>(bh);
                        auto y = ops.alloc<float>(n + 4);
                        const auto yv = y.view().subview(shift, n);
                        ops.linear_forward(yv, x.cview(), w.cview(), bias ? b.cview() : View<const float>(), batch, 1,
                                           out, act);
                        return ops.to_host(View<const float>(yv));
                    };
                    const auto quads = run(gpu, 0), singles = run(gpu, 1);
                    CHECK(quads == singles);
                    // The CPU twin: equal up to tanh's last bits (and the bias's sum of 2 terms, which
                    // the device may fuse).
                    const auto c = run(cpu, 0);
                    if (act == Activation::tanh)
                        FH_REQUIRE_WITHIN(quads, c,
                                          fh::test::linear_forward_bound(xh, wh, bias ? bh : std::vector<float>{}, c,
                                                                         batch, 1, out, act));
                    else
                        CHECK(quads == c);
                }
        }
}

TEST_CASE("CUDA narrow tanh layers (network_linear_narrow_*): the in-order fmaf sum, each network as alone",
          "[gpu][nn]") {
    // tanh layers of at most kLinearNarrowMaxIn inputs take one fused launch whose every output is
    // acc = fmaf(x[k], W[j, k], acc) over k in order, then tanh(acc + b[j]) (cuda/abi/core_network.h).
    // The shapes pick each of the three tiles (the host's choice depends on the blocks a tile
    // gives), with partial tiles and chunks of the k loop. Checked against that sum on the CPU
    // (up to tanh's last bits), bit for bit against network_mlp_infer_kernel (the same order
    // and the device's tanh) where one layer fits it, and, batched, each network against a
    // launch of its own.
    auto& gpu = fh::test::gpu_ops();
    struct Shape {
        int count, batch, in, out;
        bool shared_input;
    };
    for (const Shape sh : {Shape{1, 1, 1, 1, false}, Shape{1, 5, 50, 9, false}, Shape{1, 33, 64, 3, false},
                           Shape{1, 130, 33, 130, false}, Shape{1, 2048, 50, 512, false},
                           Shape{1, 4099, 50, 256, false}, Shape{1, 32773, 50, 256, false},
                           Shape{2, 512, 50, 256, false}, Shape{3, 77, 64, 45, true}, Shape{3, 300, 7, 66, false}})
        for (bool bias : {true, false}) {
            INFO("count " << sh.count << " batch " << sh.batch << " in " << sh.in << " out " << sh.out << " bias "
                          << bias);
            REQUIRE(sh.in <= fh::abi::kLinearNarrowMaxIn);
            const std::size_t n = static_cast<std::size_t>(sh.count), rows = static_cast<std::size_t>(sh.batch);
            const std::size_t in = static_cast<std::size_t>(sh.in), out = static_cast<std::size_t>(sh.out);
            const std::size_t P = out * in + out + 3;  // W, then b, then a gap: odd network strides
            const std::size_t xs = sh.shared_input ? 0 : rows * in;
            const auto params = random_floats(P * n, 17u + in, -0.4f, 0.4f);
            const auto X = random_floats((n - 1) * xs + rows * in, 23u + rows, -1.f, 1.f);
            auto p = gpu.from_host<float>(params);
            auto x = gpu.from_host<float>(X);
            auto y = gpu.alloc<float>(n * rows * out);
            const auto one_network = [&](std::size_t z, View<float> dst) {
                gpu.linear_forward(dst, x.cview().subview(z * xs, rows * in), p.cview().subview(z * P, out * in),
                                   bias ? p.cview().subview(z * P + out * in, out) : View<const float>(), sh.batch,
                                   sh.in, sh.out, Activation::tanh);
            };
            const auto run = [&] {
                if (sh.count == 1)
                    one_network(0, y.view());
                else
                    gpu.linear_forward_batched(y.view(), x.cview(), xs, p.cview(), P, 0,
                                               bias ? static_cast<std::ptrdiff_t>(out * in) : -1, sh.count, sh.batch,
                                               sh.in, sh.out, Activation::tanh);
                return gpu.to_host(y.cview());
            };
            const auto got = run();
            // A population's agent (the GPU shared by 16) may take another tile: the same bits. The
            // shared test device goes back to one sharer whatever happens.
            const auto shared = [&] {
                gpu.cuda()->set_gpu_sharers(16);
                const struct Restore {
                    fh::ops::CudaDevice* d;
                    ~Restore() { d->set_gpu_sharers(1); }
                } restore{gpu.cuda()};
                return run();
            }();
            REQUIRE(shared == got);
            std::vector<float> want(got.size());
            for (std::size_t z = 0; z < n; ++z)
                for (std::size_t r = 0; r < rows; ++r)
                    for (std::size_t j = 0; j < out; ++j) {
                        const float* xr = X.data() + z * xs + r * in;
                        const float* wj = params.data() + z * P + j * in;
                        float acc = 0.f;
                        for (std::size_t k = 0; k < in; ++k) acc = std::fma(xr[k], wj[k], acc);
                        if (bias) acc += params[z * P + out * in + j];
                        want[(z * rows + r) * out + j] = std::tanh(acc);
                    }
            // The same sum in the same order: only tanhf differs, within 2 ulp on each side (8 u).
            FH_REQUIRE_CLOSE(got, want, 0, fh::test::ulps(8).rtol);
            auto alone = gpu.alloc<float>(rows * out);
            for (std::size_t z = 0; z < n; ++z) {
                const std::vector<float> mine(got.begin() + static_cast<std::ptrdiff_t>(z * rows * out),
                                              got.begin() + static_cast<std::ptrdiff_t>((z + 1) * rows * out));
                if (n > 1) {
                    one_network(z, alone.view());
                    REQUIRE(gpu.to_host(alone.cview()) == mine);
                }
                fh::abi::MlpInferLayers layer{};
                layer.count = 1;
                layer.in[0] = sh.in;
                layer.out[0] = sh.out;
                layer.act[0] = Activation::tanh;
                layer.weight[0] = static_cast<long long>(z * P);
                layer.bias[0] = bias ? static_cast<long long>(z * P + out * in) : -1;
                if (gpu.mlp_infer(alone.view(), x.cview().subview(z * xs, rows * in), p.cview(), layer, sh.batch))
                    REQUIRE(gpu.to_host(alone.cview()) == mine);
                else
                    CHECK(out * in > 8192);  // one layer's weights beyond the inference kernel's shared memory
            }
        }
}

TEST_CASE("CUDA linear_forward without bias and activation is the bare SGEMM", "[gpu][nn]") {
    CpuDevice cpu;
    auto& gpu = fh::test::gpu_ops();
    // Wider than kLinearNarrowMaxIn: the product's own path, not the fused narrow kernel.
    const int batch = 5, in = fh::abi::kLinearNarrowMaxIn + 3, out = 4;
    const auto X = random_floats(batch * in, 1), W = random_floats(out * in, 2);
    std::vector<float> results[2];
    Device* backends[2] = {&cpu, &gpu};
    for (int k = 0; k < 2; ++k) {
        Device& ops = *backends[k];
        auto Xb = ops.from_host<float>(X), Wb = ops.from_host<float>(W);
        auto Y = ops.alloc<float>(batch * out);
        ops.linear_forward(Y.view(), Xb.cview(), Wb.cview(), {}, batch, in, out, Activation::none);
        results[k] = ops.to_host(Y.cview());
    }
    // A reordered sum of `in` terms, per element from |X| |W|.
    FH_REQUIRE_WITHIN(results[1], results[0],
                      fh::test::linear_forward_bound(X, W, {}, results[0], batch, in, out, Activation::none));
}

TEST_CASE("CUDA global_norm equals the CPU twin and is run-to-run exact", "[gpu][nn]") {
    CpuDevice cpu;
    auto& gpu = fh::test::gpu_ops();
    auto scratch = gpu.alloc<float>(fh::ops::global_norm_scratch_size());
    auto cscratch = cpu.alloc<float>(fh::ops::global_norm_scratch_size());
    auto out = gpu.alloc<float>(1);
    auto cout_ = cpu.alloc<float>(1);
    for (std::size_t n : {std::size_t{1}, std::size_t{7}, std::size_t{65}, std::size_t{4099},
                          (std::size_t{1} << 20) + 3, (std::size_t{1} << 24) + 4097}) {
        INFO("n = " << n);
        const auto x = random_floats(n, n + 11);
        auto xg = gpu.from_host<float>(x);
        auto xc = cpu.from_host<float>(x);
        fh::ops::run(gpu, fh::ops::GlobalNorm{out.view(), xg.cview(), scratch.view()});
        const float first = gpu.to_host(out.cview())[0];
        fh::ops::run(gpu, fh::ops::GlobalNorm{out.view(), xg.cview(), scratch.view()});
        const float second = gpu.to_host(out.cview())[0];
        fh::ops::run(cpu, fh::ops::GlobalNorm{cout_.view(), xc.cview(), cscratch.view()});
        const float ref = cpu.to_host(cout_.cview())[0];
        CHECK(first == second);
        // Both sum the squares in double; the GPU rounds its block partials to float (u of the
        // sum of positive terms: u / 2 of the norm), then each side rounds the norm (u each).
        FH_CHECK_CLOSE(std::vector<float>{first}, std::vector<float>{ref}, 0, fh::test::ulps(3).rtol);
    }
}

TEST_CASE("CUDA norm_and_guard equals global_norm, training_guard and saxpy, bit for bit", "[gpu][nn][guard]") {
    // One launch (the last block finishing after an integer ticket) against the separate ops on
    // the GPU, and within rounding of the CPU twin; called repeatedly (the ticket returns to zero)
    // with finite and non-finite losses and gradients. stats holds the losses and the norm, as the
    // trainers' current statistics do: [loss 0, loss 1, norm, other].
    CpuDevice cpu;
    auto& gpu = fh::test::gpu_ops();
    const float nan = std::numeric_limits<float>::quiet_NaN();
    struct Side {
        fh::ops::Buffer<float> stats, accum, scratch;
        fh::ops::Buffer<int> gate;
        fh::ops::Buffer<fh::nn::GuardState> state;
    };
    auto side = [&](Device& ops) {
        Side d{ops.alloc<float>(4), ops.from_host<float>(std::vector<float>{0.5f, -1.f, 2.f, 0.25f}),
               ops.alloc<float>(fh::ops::norm_guard_scratch_size()), ops.alloc<int>(1),
               ops.from_host<fh::nn::GuardState>(std::vector<fh::nn::GuardState>{{0, 0, -1, 0, 0}})};
        fh::ops::run(ops, fh::ops::Fill{d.scratch.view(), 0.f});
        return d;
    };
    Side fused = side(gpu), apart = side(gpu), host = side(cpu);
    auto apart_scratch = gpu.alloc<float>(fh::ops::global_norm_scratch_size());
    long long update = 0;
    for (std::size_t n : {std::size_t{1}, std::size_t{4099}, (std::size_t{1} << 20) + 3})
        for (int bad : {0, 1, 2}) {  // finite; a NaN loss; a NaN gradient
            INFO("n = " << n << " bad = " << bad);
            auto x = random_floats(n, n + 5);
            if (bad == 2) x[n / 2] = nan;
            const std::vector<float> stats{bad == 1 ? nan : 1.5f, 0.75f, 0.f, static_cast<float>(n)};
            ++update;
            auto xg = gpu.from_host<float>(x);
            auto xc = cpu.from_host<float>(x);
            for (Side* d : {&fused, &apart}) gpu.upload<float>(d->stats.view(), stats);
            cpu.upload<float>(host.stats.view(), stats);
            auto run_fused = [&](Device& ops, Side& d, View<const float> xs) {
                const auto st = d.stats.cview();
                fh::ops::run(ops,
                             fh::ops::NormAndGuard{d.stats.view().subview(2, 1), d.scratch.view(), xs, d.gate.view(),
                                                   d.state.view(), st.subview(0, 2), update, d.accum.view(), st});
            };
            run_fused(gpu, fused, xg.cview());
            run_fused(cpu, host, xc.cview());
            fh::ops::run(gpu, fh::ops::GlobalNorm{apart.stats.view().subview(2, 1), xg.cview(), apart_scratch.view()});
            fh::ops::run(
                gpu, fh::ops::TrainingGuard{apart.gate.view(), apart.state.view(), apart.stats.cview().subview(0, 2),
                                            apart.stats.cview().subview(2, 1), update});
            fh::ops::run(gpu, fh::ops::Saxpy{apart.accum.view(), 1.0f, apart.stats.cview()});
            const auto fs = gpu.to_host(fused.stats.cview()), as = gpu.to_host(apart.stats.cview());
            const auto hs = cpu.to_host(host.stats.cview());
            CHECK(std::memcmp(fs.data(), as.data(), fs.size() * sizeof(float)) == 0);  // NaN norms too
            const auto fa = gpu.to_host(fused.accum.cview()), aa = gpu.to_host(apart.accum.cview());
            CHECK(std::memcmp(fa.data(), aa.data(), fa.size() * sizeof(float)) == 0);
            CHECK(gpu.to_host(fused.gate.cview()) == gpu.to_host(apart.gate.cview()));
            CHECK(gpu.to_host(fused.gate.cview()) == cpu.to_host(host.gate.cview()));
            CHECK(gpu.to_host(fused.gate.cview())[0] == (bad == 0 ? 1 : 0));
            const auto fg = gpu.to_host(fused.state.cview())[0], ag = gpu.to_host(apart.state.cview())[0];
            CHECK(std::memcmp(&fg, &ag, sizeof fg) == 0);
            // global_norm's model: 2.5 u of the norm.
            if (bad != 2)
                FH_CHECK_CLOSE(std::vector<float>{fs[2]}, std::vector<float>{hs[2]}, 0, fh::test::ulps(3).rtol);
            CHECK(gpu.to_host(fused.scratch.cview())[fh::ops::norm_guard_scratch_size() - 1] == 0.f);  // the ticket
        }
    const auto g = gpu.to_host(fused.state.cview())[0];
    CHECK(g.bad_total == 6);
    CHECK(g.first_bad_update == 2);
    CHECK(g.first_bad_quantity == 0);  // a loss went bad first
}

TEST_CASE("CUDA Adam equals the CPU twin bit for bit; clipping and the gate on the device", "[gpu][nn]") {
    CpuDevice cpu;
    auto& gpu = fh::test::gpu_ops();
    // Every product and sum of the Adam element is rounded on its own on both backends
    // (core::mul_rn, add_rn), so the two agree exactly: one element a thread (below
    // kAdamVectorMinElements) and four (from it, with a tail of 3), the update number and
    // learning rate from the host or from device memory (with a soft target: a captured update).
    const std::size_t by4 = fh::abi::kAdamVectorMinElements;
    for (std::size_t n : {std::size_t{1}, std::size_t{7}, std::size_t{65}, std::size_t{4099}, by4 - 1, by4 + 3}) {
        for (float clip : {0.f, 1.f}) {
            for (int gate_value : {0, 1}) {
                for (bool from_device : {false, true}) {
                    INFO("n = " << n << " clip " << clip << " gate " << gate_value << " from device " << from_device);
                    std::vector<float> out[2][4];
                    // The clipped update depends on the norm: give both backends the same value so
                    // that Adam itself is what is compared (global_norm has its own test).
                    const auto grads = random_floats(n, 4);
                    double sq = 0;
                    for (float x : grads) sq += static_cast<double>(x) * x;
                    const std::vector<float> norm_h{static_cast<float>(std::sqrt(sq))};
                    Device* backends[2] = {&cpu, &gpu};
                    for (int k = 0; k < 2; ++k) {
                        Device& ops = *backends[k];
                        auto P = ops.from_host<float>(random_floats(n, 1));
                        auto M = ops.from_host<float>(random_floats(n, 2, -0.1f, 0.1f));
                        auto V = ops.from_host<float>(random_floats(n, 3, 0.01f, 0.1f));
                        auto T = ops.from_host<float>(random_floats(n, 5));
                        auto G = ops.from_host<float>(grads);
                        auto norm = ops.from_host<float>(norm_h);
                        auto gate = ops.from_host<int>(std::vector<int>{gate_value});
                        auto step = ops.from_host<long long>(std::vector<long long>{123457});
                        auto lr = ops.from_host<float>(std::vector<float>{7e-4f});
                        AdamParams hp;
                        hp.lr = 3e-3f;
                        hp.clip_norm = clip;
                        hp.weight_decay = 0.01f;
                        hp.step = 5;
                        if (from_device)
                            fh::ops::run(ops, fh::ops::AdamStep{P.view(), M.view(), V.view(), G.cview(), norm.cview(),
                                                                gate.cview(), fh::ops::counter_value(step.cview()), hp,
                                                                lr.cview(), fh::ops::SoftTarget::of(T.view(), 0.01)});
                        else
                            fh::ops::run(ops, fh::ops::AdamStep{P.view(), M.view(), V.view(), G.cview(), norm.cview(),
                                                                gate.cview(), hp.step, hp});
                        out[k][0] = ops.to_host(P.cview());
                        out[k][1] = ops.to_host(M.cview());
                        out[k][2] = ops.to_host(V.cview());
                        out[k][3] = ops.to_host(T.cview());
                    }
                    for (int a = 0; a < 4; ++a) CHECK(out[1][a] == out[0][a]);
                    if (gate_value == 0) {
                        CHECK(out[1][0] == random_floats(n, 1));
                        CHECK(out[1][1] == random_floats(n, 2, -0.1f, 0.1f));
                        CHECK(out[1][2] == random_floats(n, 3, 0.01f, 0.1f));
                    } else {
                        CHECK(out[1][0] != random_floats(n, 1));
                    }
                    CHECK((out[1][3] != random_floats(n, 5)) == from_device);  // only the soft target moves it
                }
            }
        }
    }
}

TEST_CASE("CUDA Adam four elements a thread (aligned arrays) equals one at a time (unaligned), bit for bit",
          "[gpu][nn]") {
    auto& gpu = fh::test::gpu_ops();
    // The same values at float offset 0 (16-byte aligned: float4 loads, then the tail) and at
    // offset 1 (not aligned: one element at a time); sizes with every tail length, and more
    // elements than the capped grid covers. (Fewer than kAdamVectorMinElements: one at a time.)
    const std::size_t least = fh::abi::kAdamVectorMinElements;
    for (std::size_t n : {least, least + 1, least + 2, least + 3, (std::size_t{1} << 26) + 5})
        for (bool with_target : {false, true}) {
            INFO("n = " << n << " target " << with_target);
            std::vector<float> out[2][4];
            for (std::size_t offset : {std::size_t{0}, std::size_t{1}}) {
                const auto at = [&](std::uint64_t seed, float lo, float hi) {
                    auto b = gpu.alloc<float>(n + 1);
                    gpu.upload<float>(b.view().subview(offset, n), random_floats(n, seed, lo, hi));
                    return b;
                };
                auto P = at(1, -2.f, 2.f), M = at(2, -0.1f, 0.1f), V = at(3, 0.01f, 0.1f), G = at(4, -2.f, 2.f);
                auto T = at(5, -2.f, 2.f);
                const auto part = [&](fh::ops::Buffer<float>& b) { return b.view().subview(offset, n); };
                auto norm = gpu.from_host<float>(std::vector<float>{3.f});
                AdamParams hp;
                hp.lr = 3e-3f;
                hp.clip_norm = 1.f;
                hp.weight_decay = 0.01f;
                fh::ops::run(gpu, fh::ops::AdamStep{
                                      part(P),
                                      part(M),
                                      part(V),
                                      part(G),
                                      norm.cview(),
                                      {},
                                      fh::ops::CounterValue(5),
                                      hp,
                                      {},
                                      with_target ? fh::ops::SoftTarget::of(part(T), 0.05) : fh::ops::SoftTarget{}});
                const std::size_t k = offset;
                out[k][0] = gpu.to_host(View<const float>(part(P)));
                out[k][1] = gpu.to_host(View<const float>(part(M)));
                out[k][2] = gpu.to_host(View<const float>(part(V)));
                out[k][3] = gpu.to_host(View<const float>(part(T)));
            }
            for (int a = 0; a < 4; ++a) CHECK(out[0][a] == out[1][a]);
            CHECK(out[0][0] != random_floats(n, 1, -2.f, 2.f));
        }
}

TEST_CASE("CUDA Adam with a soft target equals Adam then scale and saxpy (bit for bit) and the CPU twin", "[gpu][nn]") {
    CpuDevice cpu;
    auto& gpu = fh::test::gpu_ops();
    for (std::size_t n : {std::size_t{1}, std::size_t{4099}, std::size_t{fh::abi::kAdamVectorMinElements} + 3})
        for (int gate : {0, 1}) {
            INFO("n = " << n << " gate " << gate);
            const auto fused = fh::test::adam_with_target(gpu, n, gate, true);
            const auto apart = fh::test::adam_with_target(gpu, n, gate, false);
            CHECK(fused.params == apart.params);
            CHECK(fused.m == apart.m);
            CHECK(fused.v == apart.v);
            CHECK(fused.target == apart.target);
            const auto c = fh::test::adam_with_target(cpu, n, gate, true);
            CHECK(fused.params == c.params);
            CHECK(fused.m == c.m);
            CHECK(fused.v == c.v);
            CHECK(fused.target == c.target);
        }
}
