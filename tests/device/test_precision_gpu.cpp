/// @file test_precision_gpu.cpp
/// @brief [gpu] gpu.precision's linear layers on CUDA against the CPU twin on seeded random inputs:
///        bf16 (both backends round the products' operands with core::round_to_bf16) and tf32 (the
///        GPU's tensor cores round, the CPU computes FP32), each within the error model of
///        fh::test::linear_bounds_precision (support/error_model.hpp), over odd sizes, a batch
///        larger than the BF16 scratch (row chunks) and batched layers; and the fused MLP inference
///        in bf16, which sums in the CPU loop's order: bit for bit.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "device/cpu_device.hpp"
#include "support/compare.hpp"
#include "support/error_model.hpp"
#include "support/gpu.hpp"

using fh::ops::Activation;
using fh::ops::CpuDevice;
using fh::ops::Device;
using fh::ops::Precision;
using fh::test::random_floats;

namespace {

/// The shared GPU device in a precision for the scope, fp32 again after (the other [gpu] tests
/// expect it).
struct PrecisionScope {
    fh::ops::CudaDevice& gpu;
    PrecisionScope(fh::ops::CudaDevice& d, Precision p) : gpu(d) { gpu.set_precision(p); }
    ~PrecisionScope() { gpu.set_precision(Precision::fp32); }
    PrecisionScope(const PrecisionScope&) = delete;
    PrecisionScope& operator=(const PrecisionScope&) = delete;
};

struct Inputs {
    std::vector<float> X, W, b, dY;
};
Inputs inputs(int batch, int in, int out, std::uint64_t seed) {
    const std::size_t nb = static_cast<std::size_t>(batch);
    const float w = 1.f / std::sqrt(static_cast<float>(in));
    return {random_floats(nb * in, seed, -1.f, 1.f), random_floats(static_cast<std::size_t>(out) * in, seed + 1, -w, w),
            random_floats(out, seed + 2, -0.5f, 0.5f), random_floats(nb * out, seed + 3, -1.f, 1.f)};
}

struct Results {
    std::vector<float> Y, dZ, dX, dW, db, dW_acc;
};

/// Forward, backward (set), backward again (accumulate) of one layer on `ops`, from `v`.
Results run_layer(Device& ops, const Inputs& v, int batch, int in, int out, Activation act) {
    const std::size_t nb = static_cast<std::size_t>(batch);
    auto X = ops.from_host<float>(v.X), W = ops.from_host<float>(v.W), b = ops.from_host<float>(v.b);
    auto Y = ops.alloc<float>(nb * out), dY = ops.from_host<float>(v.dY), dX = ops.alloc<float>(nb * in);
    auto dW = ops.alloc<float>(static_cast<std::size_t>(out) * in), db = ops.alloc<float>(out);
    Results r;
    ops.linear_forward(Y.view(), X.cview(), W.cview(), b.cview(), batch, in, out, act);
    r.Y = ops.to_host(Y.cview());
    ops.linear_backward(dX.view(), dW.view(), db.view(), dY.view(), Y.cview(), X.cview(), W.cview(), batch, in, out,
                        act, false);
    r.dZ = ops.to_host(dY.cview());
    r.dX = ops.to_host(dX.cview());
    r.dW = ops.to_host(dW.cview());
    r.db = ops.to_host(db.cview());
    ops.upload<float>(dY.view(), v.dY);
    ops.linear_backward({}, dW.view(), db.view(), dY.view(), Y.cview(), X.cview(), W.cview(), batch, in, out, act,
                        true);
    r.dW_acc = ops.to_host(dW.cview());
    return r;
}

void check_layer(Precision precision, int batch, int in, int out, Activation act, std::uint64_t seed) {
    INFO("precision " << fh::ops::precision_name(precision) << " batch " << batch << " in " << in << " out " << out
                      << " act " << static_cast<int>(act));
    CpuDevice cpu;
    cpu.set_precision(precision);  // bf16: the same rounding; tf32: FP32 on the CPU
    auto& gpu = fh::test::gpu_ops();
    const PrecisionScope scope(gpu, precision);
    const Inputs v = inputs(batch, in, out, seed);
    const Results c = run_layer(cpu, v, batch, in, out, act);
    const Results g = run_layer(gpu, v, batch, in, out, act);
    const auto m =
        fh::test::linear_bounds_precision(v.X, v.W, v.b, v.dY, c.Y, batch, in, out, act, precision == Precision::bf16);
    FH_REQUIRE_WITHIN(g.Y, c.Y, m.Y);
    FH_REQUIRE_WITHIN(g.dZ, c.dZ, m.dZ);
    FH_REQUIRE_WITHIN(g.dX, c.dX, m.dX);
    FH_REQUIRE_WITHIN(g.dW, c.dW, m.dW);
    FH_REQUIRE_WITHIN(g.db, c.db, m.db);
    FH_REQUIRE_WITHIN(g.dW_acc, c.dW_acc, m.dW_acc);
}

}  // namespace

TEST_CASE("CUDA linear layers in bf16 and tf32 equal the CPU twin within the error model", "[gpu][nn][precision]") {
    // ReLU in tf32 is left out: the GPU's Y moves by ~1e-3 relative there, so a ReLU near 0 may
    // switch between the sides (outside the model); in bf16 Y differs by the sums' order only.
    for (Precision precision : {Precision::bf16, Precision::tf32})
        for (int batch : {1, 7, 65, 257})
            for (int in : {1, 3, 42, 129})
                for (int out : {1, 3, 42, 129})
                    for (Activation act : {Activation::none, Activation::relu, Activation::tanh})
                        if (!(precision == Precision::tf32 && act == Activation::relu))
                            check_layer(precision, batch, in, out, act, 7000u + 1000u * batch + 10u * in + out);
}

TEST_CASE("CUDA bf16 linear layers over more rows than the BF16 scratch (row chunks) equal the CPU twin",
          "[gpu][nn][precision]") {
    // 65,600 x 130 inputs exceed a region of kBf16RegionElements (8,388,608): the forward and dX
    // in two row chunks, dW summed over them.
    REQUIRE(65600LL * 130 > fh::abi::kBf16RegionElements);
    check_layer(Precision::bf16, 65600, 130, 7, Activation::relu, 99);
}

TEST_CASE("CUDA bf16 batched linear layers equal the CPU twin within the error model", "[gpu][nn][precision]") {
    // Three networks, each with its own input, forward and backward in one strided batch each;
    // network k's results against the CPU's (the same per-network arithmetic) within the layer's model.
    const int count = 3, batch = 33, in = 20, out = 12;
    const std::size_t stride = static_cast<std::size_t>(out) * in + out + 3;
    const auto w_size = static_cast<std::ptrdiff_t>(out) * in;
    std::vector<Inputs> nets;
    std::vector<float> params(stride * count, 0.f), X, dY;
    for (int k = 0; k < count; ++k) {
        nets.push_back(inputs(batch, in, out, 500u + 10u * static_cast<unsigned>(k)));
        std::copy(nets[k].W.begin(), nets[k].W.end(), params.begin() + static_cast<std::ptrdiff_t>(k * stride));
        std::copy(nets[k].b.begin(), nets[k].b.end(),
                  params.begin() + static_cast<std::ptrdiff_t>(k * stride) + w_size);
        X.insert(X.end(), nets[k].X.begin(), nets[k].X.end());
        dY.insert(dY.end(), nets[k].dY.begin(), nets[k].dY.end());
    }
    const auto run = [&](Device& ops) {
        auto p = ops.from_host<float>(params), x = ops.from_host<float>(X), dy = ops.from_host<float>(dY);
        auto y = ops.alloc<float>(dY.size()), g = ops.from_host<float>(std::vector<float>(params.size(), 0.f));
        auto dx = ops.alloc<float>(X.size());
        const std::size_t xs = static_cast<std::size_t>(batch) * in;
        ops.linear_forward_batched(y.view(), x.cview(), xs, p.cview(), stride, 0, w_size, count, batch, in, out,
                                   Activation::tanh);
        ops.linear_backward_batched(dx.view(), g.view(), dy.view(), y.cview(), x.cview(), xs, p.cview(), stride, 0,
                                    w_size, count, batch, in, out, Activation::tanh, false);
        return std::vector<std::vector<float>>{ops.to_host(y.cview()), ops.to_host(dy.cview()), ops.to_host(dx.cview()),
                                               ops.to_host(g.cview())};
    };
    CpuDevice cpu;
    cpu.set_precision(Precision::bf16);
    auto& gpu = fh::test::gpu_ops();
    const PrecisionScope scope(gpu, Precision::bf16);
    const auto c = run(cpu), g = run(gpu);
    const auto block = [](const std::vector<float>& v, std::size_t at, std::size_t n) {
        return std::vector<float>(v.begin() + static_cast<std::ptrdiff_t>(at),
                                  v.begin() + static_cast<std::ptrdiff_t>(at + n));
    };
    const std::size_t ys = static_cast<std::size_t>(batch) * out, xs = static_cast<std::size_t>(batch) * in;
    for (int k = 0; k < count; ++k) {
        INFO("network " << k);
        const std::size_t kk = static_cast<std::size_t>(k);
        const auto cy = block(c[0], kk * ys, ys);
        const auto m = fh::test::linear_bounds_precision(nets[k].X, nets[k].W, nets[k].b, nets[k].dY, cy, batch, in,
                                                         out, Activation::tanh, true);
        FH_REQUIRE_WITHIN(block(g[0], kk * ys, ys), cy, m.Y);
        FH_REQUIRE_WITHIN(block(g[1], kk * ys, ys), block(c[1], kk * ys, ys), m.dZ);
        FH_REQUIRE_WITHIN(block(g[2], kk * xs, xs), block(c[2], kk * xs, xs), m.dX);
        FH_REQUIRE_WITHIN(block(g[3], kk * stride, static_cast<std::size_t>(w_size)),
                          block(c[3], kk * stride, static_cast<std::size_t>(w_size)), m.dW);
        FH_REQUIRE_WITHIN(block(g[3], kk * stride + static_cast<std::size_t>(w_size), out),
                          block(c[3], kk * stride + static_cast<std::size_t>(w_size), out), m.db);
    }
}

TEST_CASE("CUDA fused MLP inference in bf16 equals the CPU twin's bf16 layers bit for bit", "[gpu][nn][precision]") {
    // network_mlp_infer_kernel rounds each layer's input and weights as it loads them and sums
    // by fused multiply-adds in input order: with exact BF16 products those are the CPU loop's
    // rounded additions, so with ReLU and no activation the outputs are the same bits.
    const int batch = 37, in = 19, hidden = 24, out = 5;
    fh::abi::MlpInferLayers layers{};
    layers.count = 2;
    layers.in[0] = in, layers.out[0] = hidden, layers.act[0] = Activation::relu;
    layers.in[1] = hidden, layers.out[1] = out, layers.act[1] = Activation::none;
    layers.weight[0] = 0, layers.bias[0] = hidden * in;
    layers.weight[1] = layers.bias[0] + hidden, layers.bias[1] = layers.weight[1] + out * hidden;
    const auto params = random_floats(static_cast<std::size_t>(layers.bias[1] + out), 61, -0.3f, 0.3f);
    const auto X = random_floats(static_cast<std::size_t>(batch) * in, 62);
    const auto layerwise = [&](Device& ops) {
        auto p = ops.from_host<float>(params), x = ops.from_host<float>(X);
        auto h = ops.alloc<float>(static_cast<std::size_t>(batch) * hidden), y = ops.alloc<float>(batch * out);
        const auto at = [&](long long o, int n) { return p.cview().subview(static_cast<std::size_t>(o), n); };
        ops.linear_forward(h.view(), x.cview(), at(layers.weight[0], hidden * in), at(layers.bias[0], hidden), batch,
                           in, hidden, Activation::relu);
        ops.linear_forward(y.view(), h.cview(), at(layers.weight[1], out * hidden), at(layers.bias[1], out), batch,
                           hidden, out, Activation::none);
        return ops.to_host(y.cview());
    };
    CpuDevice cpu;
    cpu.set_precision(Precision::bf16);
    const auto want = layerwise(cpu);
    auto& gpu = fh::test::gpu_ops();
    const PrecisionScope scope(gpu, Precision::bf16);
    auto p = gpu.from_host<float>(params), x = gpu.from_host<float>(X);
    auto y = gpu.alloc<float>(static_cast<std::size_t>(batch) * out);
    REQUIRE(gpu.mlp_infer(y.view(), x.cview(), p.cview(), layers, batch));
    CHECK(fh::test::same_bits(gpu.to_host(y.cview()), want));
}
