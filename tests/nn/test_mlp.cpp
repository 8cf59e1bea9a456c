/// @file test_mlp.cpp
/// @brief ParamLayout offsets, init_params (deterministic, bounds, zero biases) and Mlp forward /
///        backward on the CPU backend against the double reference; [gpu] Mlp GPU vs CPU.
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <tuple>
#include <utility>
#include <vector>

#include "nn/init.hpp"
#include "nn/mlp.hpp"
#include "nn/param_layout.hpp"
#include "device/linear_reference.hpp"
#include "device/cpu_device.hpp"
#include "support/compare.hpp"
#include "support/error_model.hpp"
#include "support/gpu.hpp"

using fh::nn::InitSpec;
using fh::nn::Mlp;
using fh::nn::MlpConfig;
using fh::nn::ParamLayout;
using fh::ops::Activation;
using fh::ops::CpuDevice;

TEST_CASE("ParamLayout places aligned, named slices in one buffer", "[nn]") {
    ParamLayout layout;
    CHECK(layout.total() == 0);
    CHECK(layout.add("a", 5) == 0);
    CHECK(layout.add("b", 1, InitSpec{InitSpec::Kind::uniform_fan_in, 4, 1.f}) == 1);
    CHECK(layout.add("c", 64) == 2);
    CHECK(layout.slice(0).offset == 0);
    CHECK(layout.slice(1).offset == 32);
    CHECK(layout.slice(2).offset == 64);
    CHECK(layout.total() == 128);
    CHECK(layout.find("c").size == 64);
    CHECK_THROWS_WITH(layout.find("zz"), Catch::Contains("known: a, b, c"));
    CHECK_THROWS(layout.add("a", 3));                                                    // duplicate
    CHECK_THROWS(layout.add("d", 0));                                                    // empty
    CHECK_THROWS(layout.add("e", 3, InitSpec{InitSpec::Kind::uniform_fan_in, 0, 1.f}));  // fan_in 0
    CHECK(layout.total() == 128);

    CpuDevice ops;
    auto buf = fh::nn::alloc_zeroed(ops, layout);
    REQUIRE(buf.size() == 128);
    for (float x : ops.to_host(buf.cview())) REQUIRE(x == 0.f);
    CHECK(layout.view(buf.view(), 1).data() == buf.view().data() + 32);
    auto small = ops.alloc<float>(100);
    CHECK_THROWS_WITH(layout.view(small.view(), 0), Catch::Contains("alloc_zeroed"));
}

TEST_CASE("init_params is deterministic, bounded, zero on biases and padding", "[nn]") {
    ParamLayout layout;
    const Mlp net(layout, "q", MlpConfig{{42, 129, 3}, Activation::relu, Activation::none, 0.5f});
    const auto a = fh::nn::initial_params(layout, 1234);
    const auto b = fh::nn::initial_params(layout, 1234);
    const auto c = fh::nn::initial_params(layout, 1235);
    REQUIRE(a.size() == layout.total());
    CHECK(a == b);
    CHECK(a != c);

    std::vector<bool> covered(a.size(), false);
    for (const auto& s : layout.slices()) {
        INFO("slice " << s.name);
        double lo = 0, hi = 0, sum = 0;
        for (std::size_t k = 0; k < s.size; ++k) {
            const float x = a[s.offset + k];
            covered[s.offset + k] = true;
            lo = std::min<double>(lo, x);
            hi = std::max<double>(hi, x);
            sum += x;
        }
        if (s.init.kind == InitSpec::Kind::zeros) {
            CHECK(lo == 0.0);
            CHECK(hi == 0.0);
            continue;
        }
        const double bound = s.init.bound();
        CHECK(-lo <= static_cast<float>(bound));
        CHECK(hi <= static_cast<float>(bound));
        CHECK(hi > 0.9 * bound);  // uniform over the whole range
        CHECK(-lo > 0.9 * bound);
        CHECK(std::abs(sum / static_cast<double>(s.size)) < 0.1 * bound);
    }
    for (std::size_t i = 0; i < a.size(); ++i)
        if (!covered[i]) REQUIRE(a[i] == 0.f);  // padding

    // The documented bounds: He-uniform for the ReLU layer, scaled LeCun for the linear output.
    CHECK(layout.find("q.l0.w").init.bound() == Approx(std::sqrt(6.0 / 42)).epsilon(1e-6));
    CHECK(layout.find("q.l1.w").init.bound() == Approx(0.5 * std::sqrt(3.0 / 129)).epsilon(1e-6));

    CpuDevice ops;
    auto params = fh::nn::alloc_zeroed(ops, layout);
    fh::nn::init_params(ops, params.view(), layout, 1234);
    CHECK(ops.to_host(params.cview()) == a);
}

namespace {

/// The MLP {sizes} in double with the reference, loss = sum of squared outputs; returns the
/// outputs and (in *grads, laid out like the parameters) dL/dparams, and dL/dX.
struct DoubleRun {
    std::vector<double> out, grads, dX;
};
DoubleRun run_double(const Mlp& net, std::size_t total, const std::vector<float>& params, const std::vector<float>& Xf,
                     int batch) {
    const std::vector<double> P(params.begin(), params.end());
    std::vector<std::vector<double>> acts;
    std::vector<double> x(Xf.begin(), Xf.end());
    for (const auto& L : net.layers()) {
        std::vector<double> y(static_cast<std::size_t>(batch) * L.out);
        fh::ops::ref::linear_forward(y.data(), (acts.empty() ? x : acts.back()).data(), P.data() + L.weight.offset,
                                     P.data() + L.bias.offset, batch, L.in, L.out, L.act);
        acts.push_back(std::move(y));
    }
    DoubleRun r;
    r.out = acts.back();
    r.grads.assign(total, 0.0);
    std::vector<double> dy(r.out.size());
    for (std::size_t i = 0; i < dy.size(); ++i) dy[i] = 2 * r.out[i];
    for (std::size_t l = net.layers().size(); l-- > 0;) {
        const auto& L = net.layers()[l];
        std::vector<double> dx(static_cast<std::size_t>(batch) * L.in);
        fh::ops::ref::linear_backward(dx.data(), r.grads.data() + L.weight.offset, r.grads.data() + L.bias.offset,
                                      dy.data(), acts[l].data(), (l == 0 ? x : acts[l - 1]).data(),
                                      P.data() + L.weight.offset, batch, L.in, L.out, L.act, false);
        dy = std::move(dx);
    }
    r.dX = dy;
    return r;
}

struct OpsRun {
    std::vector<float> out, grads, grads_twice, dX;
};
OpsRun run_ops(fh::ops::Device& ops, const Mlp& net, const ParamLayout& layout, const std::vector<float>& params_h,
               const std::vector<float>& Xh, int batch, int max_batch) {
    auto params = ops.from_host<float>(params_h);
    auto X = ops.from_host<float>(Xh);
    auto grads = fh::nn::alloc_zeroed(ops, layout);
    auto dX = ops.alloc<float>(Xh.size());
    auto ws = net.make_workspace(ops, max_batch);
    OpsRun r;
    for (int pass = 0; pass < 2; ++pass) {
        const auto out = net.forward(ops, params.cview(), X.cview(), batch, ws);
        r.out = ops.to_host(out);
        std::vector<float> d(r.out.size());
        for (std::size_t i = 0; i < d.size(); ++i) d[i] = 2 * r.out[i];
        auto dOut = ops.from_host<float>(d);
        net.backward(ops, params.cview(), grads.view(), dOut.view(), dX.view(), batch, ws, pass == 1);
        (pass == 0 ? r.grads : r.grads_twice) = ops.to_host(grads.cview());
    }
    r.dX = ops.to_host(dX.cview());
    return r;
}

}  // namespace

TEST_CASE("Mlp forward/backward on the CPU match the double reference; accumulate adds", "[nn]") {
    // Widths up to abi::kHeadBackwardMaxOut without an output activation: a narrow head
    // (Device::head_backward; 1: a value head).
    for (auto [hidden, output, width] :
         {std::tuple{Activation::relu, Activation::none, 3}, std::tuple{Activation::tanh, Activation::tanh, 3},
          std::tuple{Activation::tanh, Activation::none, 1}}) {
        INFO("hidden " << static_cast<int>(hidden) << " output " << static_cast<int>(output) << " width " << width);
        ParamLayout layout;
        const Mlp net(layout, "net", MlpConfig{{5, 7, 6, width}, hidden, output});
        CHECK(net.in_dim() == 5);
        CHECK(net.out_dim() == width);
        CHECK(net.layers().size() == 3);
        auto params = fh::nn::initial_params(layout, 7);
        // Non-zero biases so that they matter.
        for (const auto& L : net.layers())
            for (std::size_t k = 0; k < L.bias.size; ++k) params[L.bias.offset + k] = 0.05f * static_cast<float>(k + 1);
        const int batch = 4;
        const auto X = fh::test::random_floats(batch * 5, 3, -1.f, 1.f);
        CpuDevice ops;
        const OpsRun got = run_ops(ops, net, layout, params, X, batch, 9);
        const DoubleRun want = run_double(net, layout.total(), params, X, batch);
        // The [gpu] tests' error model (fh::test::mlp_bounds) bounds two float sides; one side
        // against the double reference stays within half of it.
        const auto m = fh::test::mlp_bounds(net.layers(), params, X, batch);
        CHECK(m.out == got.out);  // the model's chain in float is the CPU twin's
        FH_REQUIRE_WITHIN(got.out, want.out, fh::test::times(m.out_bound, 0.5));
        FH_REQUIRE_WITHIN(got.grads, want.grads, fh::test::times(m.grads, 0.5));
        FH_REQUIRE_WITHIN(got.dX, want.dX, fh::test::times(m.dX, 0.5));
        std::vector<double> twice(want.grads.size());
        for (std::size_t i = 0; i < twice.size(); ++i) twice[i] = 2 * want.grads[i];
        FH_REQUIRE_WITHIN(got.grads_twice, twice, fh::test::times(m.grads_twice, 0.5));
    }
}

TEST_CASE("Mlp checks batch against its workspace", "[nn]") {
    ParamLayout layout;
    const Mlp net(layout, "n", MlpConfig{{3, 4, 2}});
    CpuDevice ops;
    auto params = fh::nn::alloc_zeroed(ops, layout);
    auto X = ops.from_host<float>(fh::test::random_floats(3 * 8, 1));
    auto ws = net.make_workspace(ops, 4);
    CHECK_THROWS_WITH(net.forward(ops, params.cview(), X.cview(), 8, ws), Catch::Contains("max_batch"));
    auto dOut = ops.alloc<float>(2 * 2);
    CHECK_THROWS(net.backward(ops, params.cview(), params.view(), dOut.view(), {}, 2, ws, false));
    CHECK_THROWS(Mlp(layout, "bad", MlpConfig{{3}}));
    CHECK_THROWS(Mlp(layout, "n", MlpConfig{{3, 2}}));  // names already registered
}

namespace {

/// The overlapped backward (up to Mlp::kChainedBackwardMaxRows rows each layer's weight gradients
/// beside the chain below, beyond each layer's dW beside its dX) against the backward in series
/// on one device: outputs, gradients (set and accumulated) and dX, bit for bit.
void check_overlapped_backward(fh::ops::Device& ops) {
    // The second and third shapes end in narrow heads (Device::head_backward: a value head, nine
    // actions).
    for (const auto& [widths, hidden] : {std::pair{std::vector<int>{50, 256, 129, 510}, Activation::relu},
                                         std::pair{std::vector<int>{50, 256, 129, 1}, Activation::tanh},
                                         std::pair{std::vector<int>{50, 256, 129, 9}, Activation::relu}}) {
        ParamLayout layout;
        Mlp net(layout, "net", MlpConfig{widths, hidden, Activation::none});
        const auto params = fh::nn::initial_params(layout, 7);
        for (int batch : {1, 256, 1031}) {
            INFO("batch " << batch << " out " << widths.back());
            const auto X = fh::test::random_floats(static_cast<std::size_t>(batch) * 50, 3u + batch, -1.f, 1.f);
            net.set_overlap_backward(false);
            const OpsRun series = run_ops(ops, net, layout, params, X, batch, 1031);
            net.set_overlap_backward(true);
            const OpsRun overlapped = run_ops(ops, net, layout, params, X, batch, 1031);
            CHECK(overlapped.out == series.out);
            CHECK(overlapped.grads == series.grads);
            CHECK(overlapped.grads_twice == series.grads_twice);
            CHECK(overlapped.dX == series.dX);
        }
    }
}

}  // namespace

TEST_CASE("Mlp's overlapped backward equals its backward in series (CPU, exact)", "[nn]") {
    CpuDevice cpu;
    check_overlapped_backward(cpu);
}

TEST_CASE("CUDA Mlp's overlapped backward equals its backward in series, bit for bit", "[gpu][nn]") {
    check_overlapped_backward(fh::test::gpu_ops());
}

TEST_CASE("CUDA Mlp equals the CPU Mlp within tolerance", "[gpu][nn]") {
    // 7 and 1: narrow heads (Device::head_backward; 1: a value head), 17: one wider than those.
    for (int width : {7, 1, fh::abi::kHeadBackwardMaxOut + 1}) {
        ParamLayout layout;
        const Mlp net(layout, "net", MlpConfig{{42, 129, 65, width}, Activation::relu, Activation::none});
        const auto params = fh::nn::initial_params(layout, 99);
        for (int batch : {1, 7, 65, 257, 2049}) {
            INFO("batch " << batch << " width " << width);
            const auto X = fh::test::random_floats(static_cast<std::size_t>(batch) * 42, batch, -1.f, 1.f);
            CpuDevice cpu;
            const OpsRun c = run_ops(cpu, net, layout, params, X, batch, 2049);
            const OpsRun g = run_ops(fh::test::gpu_ops(), net, layout, params, X, batch, 2049);
            // The chain of reordered sums, layer by layer (fh::test::mlp_bounds): each layer's
            // sums per element from their magnitudes, with the bounds of its inputs carried.
            const auto m = fh::test::mlp_bounds(net.layers(), params, X, batch);
            REQUIRE(m.out == c.out);  // the model's CPU chain is the CPU twin's
            FH_REQUIRE_WITHIN(g.out, c.out, m.out_bound);
            FH_REQUIRE_WITHIN(g.grads, c.grads, m.grads);
            FH_REQUIRE_WITHIN(g.grads_twice, c.grads_twice, m.grads_twice);
            FH_REQUIRE_WITHIN(g.dX, c.dX, m.dX);
        }
    }
}

namespace {

/// Twin networks "a" and "b" of one shape, registered one after the other. Returns, for both
/// networks: outputs, every gradient and dX, computed network by network ([0]), as one
/// forward_batched pass with backward(network 0) and backward(network 1) ([1]), and as that pass
/// with one backward_batched ([2]). `shared_input`: both read X, else each its own block of X.
/// `overlap`: Mlp::set_overlap_backward.
struct TwinRun {
    std::vector<float> out, grads, dX;
};
std::array<TwinRun, 3> run_twins(fh::ops::Device& ops, int batch, bool shared_input = true, bool overlap = false,
                                 int width = 4) {
    ParamLayout layout;
    Mlp a(layout, "a", MlpConfig{{6, 9, 5, width}, Activation::relu, Activation::none});
    Mlp b(layout, "b", MlpConfig{{6, 9, 5, width}, Activation::relu, Activation::none});
    a.set_overlap_backward(overlap);
    b.set_overlap_backward(overlap);
    const std::size_t stride = b.layers().front().weight.offset - a.layers().front().weight.offset;
    const auto params_h = fh::nn::initial_params(layout, 17);
    auto params = ops.from_host<float>(params_h);
    const std::size_t n_out = static_cast<std::size_t>(batch) * static_cast<std::size_t>(width),
                      n_in = static_cast<std::size_t>(batch) * 6;
    const std::size_t x_stride = shared_input ? 0 : n_in;
    auto X = ops.from_host<float>(fh::test::random_floats(n_in + x_stride, 5, -1.f, 1.f));
    const auto dout_a = fh::test::random_floats(n_out, 6), dout_b = fh::test::random_floats(n_out, 7);

    std::array<TwinRun, 3> r;
    {
        auto grads = fh::nn::alloc_zeroed(ops, layout);
        auto wa = a.make_workspace(ops, batch), wb = b.make_workspace(ops, batch);
        auto da = ops.from_host<float>(dout_a), db = ops.from_host<float>(dout_b);
        auto dxa = ops.alloc<float>(n_in), dxb = ops.alloc<float>(n_in);
        r[0].out = ops.to_host(a.forward(ops, params.cview(), X.cview().subview(0, n_in), batch, wa));
        for (float v : ops.to_host(b.forward(ops, params.cview(), X.cview().subview(x_stride, n_in), batch, wb)))
            r[0].out.push_back(v);
        a.backward(ops, params.cview(), grads.view(), da.view(), dxa.view(), batch, wa, false);
        b.backward(ops, params.cview(), grads.view(), db.view(), dxb.view(), batch, wb, false);
        r[0].grads = ops.to_host(grads.cview());
        r[0].dX = ops.to_host(dxa.cview());
        for (float v : ops.to_host(dxb.cview())) r[0].dX.push_back(v);
    }
    {
        auto grads = fh::nn::alloc_zeroed(ops, layout);
        auto ws = a.make_workspace(ops, 2 * batch);
        auto da = ops.from_host<float>(dout_a), db = ops.from_host<float>(dout_b);
        auto dxa = ops.alloc<float>(n_in), dxb = ops.alloc<float>(n_in);
        r[1].out = ops.to_host(a.forward_batched(ops, params.cview(), stride, X.cview(), x_stride, batch, 2, ws));
        a.backward(ops, params.cview(), grads.view(), da.view(), dxa.view(), batch, ws, false, 0);
        a.backward(ops, params.cview(), grads.view(), db.view(), dxb.view(), batch, ws, false, 1);
        CHECK_THROWS_AS(a.backward(ops, params.cview(), grads.view(), db.view(), {}, batch, ws, false, 2),
                        std::invalid_argument);
        r[1].grads = ops.to_host(grads.cview());
        r[1].dX = ops.to_host(dxa.cview());
        for (float v : ops.to_host(dxb.cview())) r[1].dX.push_back(v);
    }
    {
        auto grads = fh::nn::alloc_zeroed(ops, layout);
        auto ws = a.make_workspace(ops, 2 * batch);
        CHECK_THROWS_AS(a.backward_batched(ops, params.cview(), grads.view(), {}, {}, ws, false),
                        std::invalid_argument);
        std::vector<float> dout = dout_a;
        dout.insert(dout.end(), dout_b.begin(), dout_b.end());
        auto d = ops.from_host<float>(dout);
        auto dx = ops.alloc<float>(2 * n_in);
        r[2].out = ops.to_host(a.forward_batched(ops, params.cview(), stride, X.cview(), x_stride, batch, 2, ws));
        a.backward_batched(ops, params.cview(), grads.view(), d.view(), dx.view(), ws, false);
        r[2].grads = ops.to_host(grads.cview());
        r[2].dX = ops.to_host(dx.cview());
    }
    return r;
}

/// The model's bounds of run_twins's results (fh::test::mlp_bounds of each network on its X and
/// dOut, both exact inputs).
struct TwinBounds {
    fh::test::Bounds out, grads, dX;
};
TwinBounds twins_model(int batch, bool shared_input, int width) {
    ParamLayout layout;
    Mlp a(layout, "a", MlpConfig{{6, 9, 5, width}, Activation::relu, Activation::none});
    Mlp b(layout, "b", MlpConfig{{6, 9, 5, width}, Activation::relu, Activation::none});
    const auto params = fh::nn::initial_params(layout, 17);
    const std::size_t n_out = static_cast<std::size_t>(batch) * static_cast<std::size_t>(width),
                      n_in = static_cast<std::size_t>(batch) * 6;
    const std::size_t x_stride = shared_input ? 0 : n_in;
    const auto X = fh::test::random_floats(n_in + x_stride, 5, -1.f, 1.f);
    const std::vector<float> xa(X.begin(), X.begin() + static_cast<std::ptrdiff_t>(n_in)),
        xb(X.begin() + static_cast<std::ptrdiff_t>(x_stride), X.begin() + static_cast<std::ptrdiff_t>(x_stride + n_in));
    const auto ma = fh::test::mlp_bounds(a.layers(), params, xa, batch, fh::test::random_floats(n_out, 6));
    const auto mb = fh::test::mlp_bounds(b.layers(), params, xb, batch, fh::test::random_floats(n_out, 7));
    TwinBounds r{ma.out_bound, fh::test::plus(ma.grads, mb.grads), ma.dX};
    r.out.insert(r.out.end(), mb.out_bound.begin(), mb.out_bound.end());
    r.dX.insert(r.dX.end(), mb.dX.begin(), mb.dX.end());
    return r;
}

}  // namespace

TEST_CASE("Mlp backward of network k of a batched forward equals that network on its own (CPU, exact)", "[nn]") {
    CpuDevice ops;
    for (int batch : {1, 5, 33})
        for (bool shared : {true, false})
            for (bool overlap : {false, true})
                for (int width :
                     {4, 1, fh::abi::kHeadBackwardMaxOut + 1}) {  // narrow heads (1: a value head), a wide one
                    INFO("batch " << batch << " shared input " << shared << " overlap " << overlap << " width "
                                  << width);
                    const auto r = run_twins(ops, batch, shared, overlap, width);
                    for (int i : {1, 2}) {
                        INFO((i == 1 ? "backward per network" : "backward_batched"));
                        CHECK(r[i].out == r[0].out);
                        CHECK(r[i].grads == r[0].grads);
                        CHECK(r[i].dX == r[0].dX);
                    }
                }
}

TEST_CASE("CUDA Mlp backward of the networks of a batched forward equals the CPU", "[gpu][nn]") {
    CpuDevice cpu;
    for (int batch : {1, 5, 257, 1031})
        for (bool shared : {true, false})
            for (bool overlap : {false, true})
                for (int width :
                     {4, 1, fh::abi::kHeadBackwardMaxOut + 1}) {  // narrow heads (1: a value head), a wide one
                    INFO("batch " << batch << " shared input " << shared << " overlap " << overlap << " width "
                                  << width);
                    const auto c = run_twins(cpu, batch, shared, overlap, width);
                    const auto g = run_twins(fh::test::gpu_ops(), batch, shared, overlap, width);
                    // Each network's chain of reordered sums (fh::test::mlp_bounds).
                    const auto m = twins_model(batch, shared, width);
                    for (int i : {0, 1, 2}) {
                        INFO("run " << i);
                        FH_REQUIRE_WITHIN(g[i].out, c[0].out, m.out);
                        FH_REQUIRE_WITHIN(g[i].grads, c[0].grads, m.grads);
                        FH_REQUIRE_WITHIN(g[i].dX, c[0].dX, m.dX);
                    }
                }
}

TEST_CASE("Mlp infer on the CPU is forward (no fused path), and mlp_infer checks its layers", "[nn]") {
    ParamLayout layout;
    const Mlp net(layout, "net", MlpConfig::stack(11, {16, 16}, 5, Activation::tanh));
    CpuDevice ops;
    const auto params = ops.from_host<float>(fh::nn::initial_params(layout, 3));
    const auto X = ops.from_host<float>(fh::test::random_floats(9 * 11, 4, -1.f, 1.f));
    auto ws_f = net.make_workspace(ops, 9), ws_i = net.make_workspace(ops, 9);
    CHECK(ops.to_host(net.infer(ops, params.cview(), X.cview(), 9, ws_i)) ==
          ops.to_host(net.forward(ops, params.cview(), X.cview(), 9, ws_f)));

    // The op's checks hold on every backend (the CPU then reports "no fused path").
    auto Y = ops.alloc<float>(9 * 5);
    fh::abi::MlpInferLayers spec{};
    spec.count = 2;
    spec.in[0] = 11, spec.out[0] = 16, spec.in[1] = 16, spec.out[1] = 5;
    spec.weight[0] = 0, spec.bias[0] = -1, spec.weight[1] = 0, spec.bias[1] = -1;
    CHECK_FALSE(ops.mlp_infer(Y.view(), X.cview(), params.cview(), spec, 9));
    spec.in[1] = 15;  // not the previous layer's out
    CHECK_THROWS_WITH(ops.mlp_infer(Y.view(), X.cview(), params.cview(), spec, 9), Catch::Contains("previous layer"));
    spec.in[1] = 16;
    spec.weight[1] = static_cast<long long>(layout.total());  // outside params
    CHECK_THROWS_WITH(ops.mlp_infer(Y.view(), X.cview(), params.cview(), spec, 9), Catch::Contains("outside params"));
    spec.weight[1] = 0;
    spec.count = fh::abi::kMlpInferMaxLayers + 1;
    CHECK_THROWS(ops.mlp_infer(Y.view(), X.cview(), params.cview(), spec, 9));
}

TEST_CASE("CUDA Mlp infer (one fused launch) equals the CPU forward within tolerance; too large falls back",
          "[gpu][nn]") {
    struct Shape {
        std::vector<int> sizes;
        Activation act;
        bool fused;  // whether the GPU takes the fused path (48 KB of shared memory)
    };
    const std::vector<Shape> shapes{{{50, 64, 64, 45}, Activation::tanh, true},  // PPO's small actor
                                    {{50, 64, 64, 1}, Activation::tanh, true},   // and critic
                                    {{7, 33, 3}, Activation::relu, true},
                                    {{42, 129, 65, 7}, Activation::relu, true},
                                    {{5, 9, 9, 9, 9, 9, 2}, Activation::tanh, true},  // kMlpInferMaxLayers
                                    {{50, 256, 256, 9}, Activation::relu, false}};    // 256 KB of weights
    auto& gpu = fh::test::gpu_ops();
    for (const auto& sh : shapes) {
        ParamLayout layout;
        MlpConfig config{sh.sizes, sh.act, Activation::none};
        const Mlp net(layout, "net", config);
        const auto params_h = fh::nn::initial_params(layout, 21);
        const int in = sh.sizes.front(), out = sh.sizes.back();
        for (int batch : {1, 7, 8, 9, 257, 512}) {
            INFO("sizes[0] " << in << ", layers " << sh.sizes.size() - 1 << ", batch " << batch);
            const auto X_h = fh::test::random_floats(static_cast<std::size_t>(batch) * in, batch, -2.f, 2.f);
            CpuDevice cpu;
            auto cpu_params = cpu.from_host<float>(params_h);
            auto cpu_X = cpu.from_host<float>(X_h);
            auto cpu_ws = net.make_workspace(cpu, batch);
            const auto expected = cpu.to_host(net.forward(cpu, cpu_params.cview(), cpu_X.cview(), batch, cpu_ws));

            auto params = gpu.from_host<float>(params_h);
            auto X = gpu.from_host<float>(X_h);
            auto ws = net.make_workspace(gpu, batch);
            const auto got = gpu.to_host(net.infer(gpu, params.cview(), X.cview(), batch, ws));
            // The forward's chain of reordered sums (fh::test::mlp_bounds), in the fused kernel's order.
            FH_REQUIRE_WITHIN(got, expected, fh::test::mlp_bounds(net.layers(), params_h, X_h, batch).out_bound);
            // Fused: nothing kept for backward; the layer-by-layer fallback keeps its activations.
            auto dOut = gpu.alloc<float>(static_cast<std::size_t>(batch) * out);
            auto grads = fh::nn::alloc_zeroed(gpu, layout);
            if (sh.fused)
                CHECK_THROWS(net.backward(gpu, params.cview(), grads.view(), dOut.view(), {}, batch, ws, false));
            else
                CHECK_NOTHROW(net.backward(gpu, params.cview(), grads.view(), dOut.view(), {}, batch, ws, false));
            // The kernel directly: the same bits run to run.
            auto Y = gpu.alloc<float>(static_cast<std::size_t>(batch) * out);
            fh::abi::MlpInferLayers spec{};
            spec.count = static_cast<int>(net.layers().size());
            for (std::size_t l = 0; l < net.layers().size(); ++l) {
                const auto& L = net.layers()[l];
                spec.in[l] = L.in, spec.out[l] = L.out, spec.act[l] = L.act;
                spec.weight[l] = static_cast<long long>(L.weight.offset);
                spec.bias[l] = static_cast<long long>(L.bias.offset);
            }
            CHECK(gpu.mlp_infer(Y.view(), X.cview(), params.cview(), spec, batch) == sh.fused);
            if (sh.fused) CHECK(gpu.to_host(Y.cview()) == got);
        }
    }
}
