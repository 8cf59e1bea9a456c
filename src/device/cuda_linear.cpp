/// @file cuda_linear.cpp
/// @brief The CUDA backend's linear layers (Device::linear_forward(_batched), linear_backward(_batched),
///        head_backward, mlp_infer): the products through cuBLAS and cuBLASLt and how each is chosen
///        (cuBLASLt plans cached per shape, the 128 x 64 tile preference, the narrow tanh layers' fused
///        kernel, the weight gradient's K split), the products' precision (gpu.precision: tf32 through
///        the library's math mode, bf16 through operands rounded into the lane's scratch), and the
///        kernels around the products (bias and activation, their backward and the bias gradient).
///        Device:: (src/device/device.cpp) checked sizes and that outputs are distinct from every
///        other operand before these run.
///
/// Row-major through column-major cuBLAS: a row-major (r, c) matrix is the column-major (c, r)
/// matrix, its transpose, with leading dimension c. So with Z = X W^T:
///   forward  Z^T (out, B)  = W (out, in) . X^T (in, B)
///            = Sgemm(T, N, m=out, n=B, k=in, A=W lda=in, B=X ldb=in, C=Y ldc=out)
///   dW       dW^T (in, out) = X^T (in, B) . dZ (B, out)
///            = Sgemm(N, T, m=in, n=out, k=B, A=X lda=in, B=dZ ldb=out, C=dW ldc=in)
///   dX       dX^T (in, B)  = W^T (in, out) . dZ^T (out, B)
///            = Sgemm(N, N, m=in, n=B, k=out, A=W lda=in, B=dZ ldb=out, C=dX ldc=in)
/// (tests/device/test_nn_ops.cpp compares each with the CPU reference.)
/// gpu.precision = "bf16" issues the same three products through cublasGemmEx (or cuBLASLt for
/// the forward) with A and B in BF16, rounded first into the lane's scratch (round_bf16).

#include "device/cuda_device.hpp"

#include "device/cuda/kernel_timing.hpp"
#include "device/cuda_lane.hpp"
#include "util/errors.hpp"
#include "util/log.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdint>

namespace fh::ops {

using cuda::LaunchDims;
using namespace cuda_lane;

/// A cached cuBLASLt problem: descriptors and the chosen algorithm.
struct CudaDevice::LtPlan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
    bool usable = false;
    ~LtPlan() {
        if (c) cublasLtMatrixLayoutDestroy(c);
        if (b) cublasLtMatrixLayoutDestroy(b);
        if (a) cublasLtMatrixLayoutDestroy(a);
        if (op) cublasLtMatmulDescDestroy(op);
    }
};

/// A split-K backward product's descriptors and algorithm (usable false: cublasSgemm instead).
struct CudaDevice::SplitKPlan {
    LtPlan lt;
    int splits = 1;
};

namespace {

/// The largest power of two (<= 256) dividing a pointer's address: cuBLASLt's alignment notion.
int alignment_of(const void* p) {
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    int k = 256;
    while (k > 4 && a % static_cast<std::uintptr_t>(k) != 0) k /= 2;
    return k;
}

/// cuBLASLt's first heuristic algorithm for a problem, given the device's workspace and operands
/// aligned to `align` bytes; false when the library has none.
bool first_heuristic_algorithm(cublasLtHandle_t lt, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a,
                               cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, int align,
                               cublasLtMatmulAlgo_t& algo) {
    cublasLtMatmulPreference_t pref = nullptr;
    FH_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const std::size_t ws = kWorkspaceBytes;
    const std::uint32_t al = static_cast<std::uint32_t>(align);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
        cublasLtMatmulPreferenceSetAttribute(pref, attr, &al, sizeof al);
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(lt, op, a, b, c, c, pref, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (st != CUBLAS_STATUS_SUCCESS || found < 1 || result.state != CUBLAS_STATUS_SUCCESS) return false;
    algo = result.algo;
    return true;
}

// Single FP32 forwards of 4,096 to 8,191 rows (the DQN collection step's) take 128 x 64 tiles
// without a K split: cuBLASLt's heuristic gives them 32 x 128, 64 x 64 or 64 x 256 tiles (the last
// with the K split in two), 4 to 14 % slower alone. Measured in the trainers (docs/performance-log.md,
// "The forward products' tiles"): the same rule from 2,048 rows and for strided pairs made
// dqn-full's update, iql-full's and ppo-full's collection slower, and ppo small's 8,192-row
// minibatches too, so it stops there.
constexpr long long kWideTileMinRows = 4096, kWideTileEndRows = 8192;

/// `algo` with 128 x 64 tiles and no K split, when the library takes that configuration for the
/// problem within the workspace; `algo` unchanged otherwise. Depends on the shape only, so every
/// run, lane and population agent takes the same configuration.
void prefer_128x64_tiles(cublasLtHandle_t lt, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a,
                         cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatmulAlgo_t& algo) {
    cublasLtMatmulAlgo_t wide = algo;
    const std::uint32_t tile = CUBLASLT_MATMUL_TILE_128x64, reduction = CUBLASLT_REDUCTION_SCHEME_NONE;
    const std::int32_t split = 1;
    if (cublasLtMatmulAlgoConfigSetAttribute(&wide, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile) !=
            CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulAlgoConfigSetAttribute(&wide, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &split, sizeof split) !=
            CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulAlgoConfigSetAttribute(&wide, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &reduction,
                                             sizeof reduction) != CUBLAS_STATUS_SUCCESS)
        return;
    cublasLtMatmulHeuristicResult_t check{};
    if (cublasLtMatmulAlgoCheck(lt, op, a, b, c, c, &wide, &check) == CUBLAS_STATUS_SUCCESS &&
        check.workspaceSize <= kWorkspaceBytes)
        algo = wide;
}

}  // namespace

bool CudaDevice::lt_linear_forward(float* Y, const void* X, long long x_stride, const void* W, const float* b,
                                   long long w_stride, long long b_stride, int count, int batch, int in, int out,
                                   Activation act) {
    if (act == Activation::tanh) return false;
    const Precision precision = this->precision();
    const bool bf16 = precision == Precision::bf16;
    const cudaDataType_t operand_type = bf16 ? CUDA_R_16BF : CUDA_R_32F;
    const bool bias = b != nullptr;
    const cublasLtEpilogue_t epilogue = act == Activation::relu
                                            ? (bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU)
                                            : (bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT);
    // The smallest alignment of the operands (and of the batch strides) decides the algorithms.
    int align = std::min({alignment_of(Y), alignment_of(X), alignment_of(W)});
    if (bias) align = std::min(align, alignment_of(b));
    if (count > 1) {
        const long long operand_bytes = bf16 ? 2 : 4;
        const auto bytes = [](long long n) { return alignment_of(reinterpret_cast<const void*>(n)); };
        align =
            std::min({align, bytes(w_stride * operand_bytes), bytes((x_stride == 0 ? 64 : x_stride) * operand_bytes),
                      bytes(static_cast<long long>(batch) * out * 4)});
        if (bias) align = std::min(align, bytes(b_stride * 4));
    }
    const auto key = std::make_tuple(in, out, batch, static_cast<int>(epilogue), static_cast<int>(precision), align,
                                     count, w_stride, x_stride, b_stride);
    auto& plan = lt_plans_[key];
    if (!plan) {
        plan = std::make_shared<LtPlan>();
        // Row-major Y (B, out) = X (B, in) W^T is column-major Y^T (out, B) = op(A) B with
        // A = W stored (in, out) column-major and op = transpose, B = X^T (in, B).
        const cublasComputeType_t compute =
            precision == Precision::tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
        FH_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->op, compute, CUDA_R_32F));
        const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
        FH_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
        FH_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
        FH_CUBLAS_CHECK(
            cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue));
        FH_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->a, operand_type, in, out, in));
        FH_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->b, operand_type, in, batch, in));
        FH_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->c, CUDA_R_32F, out, batch, out));
        if (count > 1) {
            const std::int32_t n = count;
            const std::int64_t sa = w_stride, sb = x_stride, sc = static_cast<std::int64_t>(batch) * out;
            for (auto [layout, stride] : {std::pair{plan->a, sa}, {plan->b, sb}, {plan->c, sc}}) {
                FH_CUBLAS_CHECK(
                    cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &n, sizeof n));
                FH_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                                 &stride, sizeof stride));
            }
            const std::int64_t sbias = b_stride;
            if (bias)
                FH_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &sbias,
                                                               sizeof sbias));
        }
        plan->usable = first_heuristic_algorithm(lt_, plan->op, plan->a, plan->b, plan->c, align, plan->algo);
        if (plan->usable && precision == Precision::fp32 && count == 1 && batch >= kWideTileMinRows &&
            batch < kWideTileEndRows)
            prefer_128x64_tiles(lt_, plan->op, plan->a, plan->b, plan->c, plan->algo);
    }
    if (!plan->usable) return false;
    if (bias)
        FH_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &b, sizeof b));
    const float one = 1.f, zero = 0.f;
    const std::string label = cuda::op_names_wanted()
                                  ? fmt::format("linear forward (lt{}) {}x{}x{}{}", bf16 ? " bf16" : "", batch, out, in,
                                                count > 1 ? fmt::format(" x{}", count) : std::string())
                                  : std::string();
    if (cuda::op_filtered(label, stream())) return true;  // bench --ablate
    const cuda::TimedRegion timed(label, stream());
    const cublasStatus_t st = cublasLtMatmul(lt_, plan->op, &one, W, plan->a, X, plan->b, &zero, Y, plan->c, Y, plan->c,
                                             &plan->algo, workspace(), kWorkspaceBytes, stream());
    if (st == CUBLAS_STATUS_SUCCESS) return true;
    if (st != CUBLAS_STATUS_NOT_SUPPORTED && st != CUBLAS_STATUS_INVALID_VALUE)
        cuda::throw_cublas_error(st, "cublasLtMatmul", __FILE__, __LINE__);
    plan->usable = false;  // this shape takes the SGEMM path from now on
    return false;
}

bool CudaDevice::narrow_linear_forward(float* Y, const float* X, long long x_stride, const float* W, const float* b,
                                       long long w_stride, int count, int batch, int in, int out, Activation act) {
    if (act != Activation::tanh || in > abi::kLinearNarrowMaxIn || count > 65535) return false;
    // The largest tile that still gives every SM of this device's share of the GPU work (a
    // population's agents share it) and leaves at most half its columns idle; the bits do not
    // depend on the tile.
    const long long sms = std::max<long long>(1, device_.sm_count / sharers_);
    const auto blocks = [&](long long tile) { return (batch + tile - 1) / tile * ((out + tile - 1) / tile) * count; };
    const auto fits = [&](long long tile) { return out > tile / 2; };
    const int tm = fits(128) && blocks(128) >= 2 * sms ? 8 : fits(64) && blocks(64) >= sms ? 4 : 2;
    const long long tile = 16LL * tm;
    const long long grid_x = (batch + tile - 1) / tile, grid_y = (out + tile - 1) / tile;
    if (grid_y > 65535) return false;
    const LaunchDims dims{
        dim3(static_cast<unsigned>(grid_x), static_cast<unsigned>(grid_y), static_cast<unsigned>(count)),
        dim3(abi::kLinearNarrowThreads),
        static_cast<std::size_t>(abi::linear_narrow_smem_bytes(static_cast<int>(tile), in))};
    const auto& kernel = tm == 8   ? kernels().network_linear_narrow_8_kernel
                         : tm == 4 ? kernels().network_linear_narrow_4_kernel
                                   : kernels().network_linear_narrow_2_kernel;
    kernel(stream(), dims, Y, X, W, b, act, batch, in, out, x_stride, w_stride);
    return true;
}

void CudaDevice::linear_forward_impl(View<float> Y, View<const float> X, View<const float> W, View<const float> b,
                                     int batch, int in, int out, Activation act) {
    if (precision() == Precision::bf16)
        return bf16_linear_forward(Y.data(), X.data(), 0, W.data(), 0, b.empty() ? nullptr : b.data(), 0, 1, batch, in,
                                   out, act);
    if (narrow_linear_forward(Y.data(), X.data(), 0, W.data(), b.empty() ? nullptr : b.data(), 0, 1, batch, in, out,
                              act))
        return;
    if (lt_linear_forward(Y.data(), X.data(), 0, W.data(), b.empty() ? nullptr : b.data(), 0, 0, 1, batch, in, out,
                          act))
        return;
    const float one = 1.f, zero = 0.f;
    const std::string label =
        cuda::op_names_wanted() ? fmt::format("linear forward (sgemm) {}x{}x{}", batch, out, in) : std::string();
    if (!cuda::op_filtered(label, stream())) {  // bench --ablate
        const cuda::TimedRegion timed(label, stream());
        FH_CUBLAS_CHECK(cublasSgemm(cublas(), CUBLAS_OP_T, CUBLAS_OP_N, out, batch, in, &one, W.data(), in, X.data(),
                                    in, &zero, Y.data(), out));
    }
    bias_act(Y.data(), b.empty() ? nullptr : b.data(), act, batch, out);
}

void CudaDevice::bias_act(float* Y, const float* b, Activation act, int batch, int out) {
    if (b == nullptr && act == Activation::none) return;
    // Y and b are distinct (checked by Device::linear_forward).
    const long long n = static_cast<long long>(batch) * out;
    const bool quads = abi::bias_act_quads(Y, b, out, n);
    kernels().network_bias_act_forward_kernel(stream(), LaunchDims::linear(static_cast<std::size_t>(quads ? n / 4 : n)),
                                              Y, b, act, batch, out);
}

void CudaDevice::linear_forward_batched_impl(View<float> Y, View<const float> X, std::size_t x_stride,
                                             View<const float> params, std::size_t param_stride, std::size_t w_offset,
                                             std::ptrdiff_t b_offset, int count, int batch, int in, int out,
                                             Activation act) {
    const float* W = params.data() + w_offset;
    const float* b = b_offset < 0 ? nullptr : params.data() + b_offset;
    if (precision() == Precision::bf16)
        return bf16_linear_forward(Y.data(), X.data(), static_cast<long long>(x_stride), W,
                                   static_cast<long long>(param_stride), b, static_cast<long long>(param_stride), count,
                                   batch, in, out, act);
    if (narrow_linear_forward(Y.data(), X.data(), static_cast<long long>(x_stride), W, b,
                              static_cast<long long>(param_stride), count, batch, in, out, act))
        return;
    if (lt_linear_forward(Y.data(), X.data(), static_cast<long long>(x_stride), W, b,
                          static_cast<long long>(param_stride), static_cast<long long>(param_stride), count, batch, in,
                          out, act))
        return;
    if (count == 1 || count > 65535) {  // one layer (linear_forward's path), or more than a grid's z
        const std::size_t ys = static_cast<std::size_t>(batch) * static_cast<std::size_t>(out);
        const std::size_t xs = static_cast<std::size_t>(batch) * static_cast<std::size_t>(in);
        for (std::size_t k = 0; k < static_cast<std::size_t>(count); ++k)
            linear_forward_impl(Y.subview(k * ys, ys), X.subview(k * x_stride, xs),
                                params.subview(k * param_stride + w_offset, static_cast<std::size_t>(out) * in),
                                b == nullptr ? View<const float>()
                                             : params.subview(k * param_stride + static_cast<std::size_t>(b_offset),
                                                              static_cast<std::size_t>(out)),
                                batch, in, out, act);
        return;
    }
    // No batched cuBLASLt algorithm, or an activation its epilogue lacks (tanh): one strided-batched
    // SGEMM for every layer, then their bias and activation in one launch (before, a product and a
    // bias launch per layer: 32 of each a rollout step for 16 PPO agents' [128, 128] networks).
    const long long ys = static_cast<long long>(batch) * out;
    const float one = 1.f, zero = 0.f;
    const std::string label = cuda::op_names_wanted()
                                  ? fmt::format("linear forward (sgemm batched) {}x{}x{} x{}", batch, out, in, count)
                                  : std::string();
    if (!cuda::op_filtered(label, stream())) {  // bench --ablate
        const cuda::TimedRegion timed(label, stream());
        FH_CUBLAS_CHECK(cublasSgemmStridedBatched(cublas(), CUBLAS_OP_T, CUBLAS_OP_N, out, batch, in, &one, W, in,
                                                  static_cast<long long>(param_stride), X.data(), in,
                                                  static_cast<long long>(x_stride), &zero, Y.data(), out, ys, count));
    }
    if (b == nullptr && act == Activation::none) return;
    // Y and the biases are distinct (checked by Device::linear_forward_batched).
    auto dims = LaunchDims::linear(static_cast<std::size_t>(out % 4 == 0 ? ys / 4 : ys));
    dims.grid.z = static_cast<unsigned>(count);
    kernels().network_bias_act_forward_batched_kernel(stream(), dims, Y.data(), b, act, batch, out,
                                                      static_cast<long long>(param_stride));
}

bool CudaDevice::mlp_infer_impl(View<float> Y, View<const float> X, View<const float> params,
                                const abi::MlpInferLayers& layers, int batch) {
    constexpr long long kMaxSmemBytes = 48 * 1024;  // without the opt-in attribute
    const long long smem = abi::mlp_infer_smem_floats(layers) * static_cast<long long>(sizeof(float));
    if (smem > kMaxSmemBytes) return false;
    const unsigned blocks = static_cast<unsigned>((batch + abi::kMlpInferRows - 1) / abi::kMlpInferRows);
    kernels().network_mlp_infer_kernel(
        stream(), LaunchDims{dim3(blocks), dim3(abi::kMlpInferThreads), static_cast<std::size_t>(smem)}, Y.data(),
        X.data(), params.data(), layers, batch, precision() == Precision::bf16 ? 1 : 0);
    return true;
}

// dZ = dY * act'(Y) in place on dY, and/or db = the column sums of dZ, in one pass over dY, for
// `count` networks (network_act_bias_grad_batched_kernel, grid.z; network k's dY and Y at
// k * net_stride, its db at k * db_stride; one network: network_act_bias_grad_kernel): row
// slices (enough blocks to fill the GPU, see kBiasGradBlocks), whose last block per column group
// adds the slices in a fixed order. The slicing depends on the shape only (not on count), so the
// sums' order, hence the bits, are the same on every run, whatever the count, and the same whether
// the activation's backward ran in this pass or in one of its own before (the kernel rounds dZ
// first). The activation alone (db null) takes the same slices for its blocks and writes no partials.
void CudaDevice::act_bias_grad(float* dY, float* db, const float* Y, Activation act, bool accumulate, int batch,
                               int out, int count, long long net_stride, long long db_stride) {
    const int column_groups = (out + 31) / 32;
    const int slices = bias_slices(batch, out);
    const int rows_per_slice = (batch + slices - 1) / slices;
    const bool partials = db != nullptr && slices > 1;
    // Every network's partials and tickets have to fit the device's buffers at once.
    if (partials &&
        (static_cast<std::size_t>(count) * static_cast<std::size_t>(slices) * static_cast<std::size_t>(out) >
             kBiasPartialFloats ||
         static_cast<std::size_t>(count) * static_cast<std::size_t>(column_groups) > kBiasTickets)) {
        for (int k = 0; k < count; ++k)
            act_bias_grad(dY + k * net_stride, db + k * db_stride, Y + k * net_stride, act, accumulate, batch, out, 1,
                          0, 0);
        return;
    }
    const LaunchDims dims{
        dim3(static_cast<unsigned>(column_groups), static_cast<unsigned>(slices), static_cast<unsigned>(count)),
        dim3(32, abi::kBiasGradRows), 0};
    float* const scratch = partials ? bias_partials() : nullptr;
    unsigned* const tickets = partials ? bias_tickets() : nullptr;
    if (count == 1)
        kernels().network_act_bias_grad_kernel(stream(), dims, dY, db, scratch, tickets, Y, act, accumulate ? 1 : 0,
                                               batch, out, rows_per_slice);
    else
        kernels().network_act_bias_grad_batched_kernel(stream(), dims, dY, db, scratch, tickets, Y, act,
                                                       accumulate ? 1 : 0, batch, out, rows_per_slice, net_stride,
                                                       db_stride);
}

// One pass over X for every network (network_{scalar,narrow}_head_backward_kernel) in the
// bias-gradient pass's slices and order for (batch, in) (with one output dZ is the separate
// passes', hence the hidden db too, bit for bit); where every network's partials do not fit the
// device's buffers, a launch per network (one network's always fit: its slices times
// (1 + out) in + out stay below 2^19).
void CudaDevice::head_backward_impl(View<float> dZ, View<float> grads, View<const float> dOut, View<const float> X,
                                    View<const float> params, std::size_t param_stride, std::size_t head_w_offset,
                                    std::ptrdiff_t head_b_offset, std::ptrdiff_t hidden_b_offset, int count, int batch,
                                    int in, int out, Activation act, bool accumulate) {
    const int column_groups = (in + 31) / 32;
    const int slices = bias_slices(batch, in);
    const std::size_t slice_floats = static_cast<std::size_t>(abi::head_backward_partial_floats(in, out));
    const std::size_t n = static_cast<std::size_t>(count), rows = static_cast<std::size_t>(batch);
    const std::size_t xs = rows * static_cast<std::size_t>(in), ds = rows * static_cast<std::size_t>(out);
    const bool fits = n * static_cast<std::size_t>(slices) * slice_floats <= kBiasPartialFloats &&
                      n * static_cast<std::size_t>(column_groups) <= kBiasTickets;
    if (slices > 1 && !fits) {
        if (count == 1) throw std::logic_error("head_backward: one network's partials exceed the buffers");
        for (std::size_t k = 0; k < n; ++k) {
            const std::size_t p0 = k * param_stride;
            head_backward_impl(dZ.subview(k * xs, xs), grads.subview(p0, grads.size() - p0), dOut.subview(k * ds, ds),
                               X.subview(k * xs, xs), params.subview(p0, params.size() - p0), 0, head_w_offset,
                               head_b_offset, hidden_b_offset, 1, batch, in, out, act, accumulate);
        }
        return;
    }
    const auto offset = [&](std::ptrdiff_t o) { return o < 0 ? nullptr : grads.data() + o; };
    const bool partials = slices > 1;
    const abi::HeadBackwardArgs a{dZ.data(),
                                  offset(hidden_b_offset),
                                  grads.data() + head_w_offset,
                                  offset(head_b_offset),
                                  partials ? bias_partials() : nullptr,
                                  partials ? bias_tickets() : nullptr,
                                  dOut.data(),
                                  X.data(),
                                  params.data() + head_w_offset,
                                  static_cast<long long>(xs),
                                  static_cast<long long>(param_stride),
                                  batch,
                                  in,
                                  out,
                                  (batch + slices - 1) / slices,
                                  accumulate ? 1 : 0,
                                  act,
                                  precision() == Precision::bf16 ? 1 : 0};
    const LaunchDims dims{
        dim3(static_cast<unsigned>(column_groups), static_cast<unsigned>(slices), static_cast<unsigned>(count)),
        dim3(32, abi::kBiasGradRows), 0};
    if (out == 1)
        kernels().network_scalar_head_backward_kernel(stream(), dims, a);
    else
        kernels().network_narrow_head_backward_kernel(stream(), dims, a);
}

// The rule (measured: docs/performance-log.md, "The weight gradient over many rows, K split"): FP32
// only (TF32 takes tensor-core kernels); at least kSplitKMinRows rows; the weight gradient's
// 64 x 64 output tiles on at most a quarter of the SMs; K (the rows) split in the largest power of
// two up to 64 whose blocks fit one wave and leave each split at least 16 rows, and only if that
// brings each split to at most 512 rows (longer splits measured slower than cublasSgemm's own
// kernel: ppo-full's 32,768 rows). The split depends on the shape and the device's SM count only,
// so every run, lane and population agent takes the same algorithm; cuBLASLt sums the partial
// products in a fixed order (run-to-run exact). The algorithm: the heuristic's first for the
// shape, then the library's FP32 algorithms in its order, the first that takes 64 x 64 tiles,
// the split and a reduction into the output type (or the compute type), with the first stages it
// accepts (`bench/algo-search-probe.cu` searched every configuration of these shapes).
const CudaDevice::SplitKPlan* CudaDevice::split_k_plan(int in, int out, int rows, int align) {
    if (precision() != Precision::fp32 || rows < kSplitKMinRows) return nullptr;
    const int m = in, n = out, k = rows;  // column-major dW (in x out) = X (in x rows) dZ^T
    const long long tiles = ((m + 63) / 64) * static_cast<long long>((n + 63) / 64);
    const long long sms = device_.sm_count;
    if (tiles * 4 > sms) return nullptr;
    auto& plan = split_k_plans_[std::make_tuple(m, n, k, align)];
    if (!plan) {
        plan = std::make_shared<SplitKPlan>();
        int splits = 1;
        while (splits < 64 && tiles * splits * 2 <= sms && k / (splits * 2) >= 16) splits *= 2;
        plan->splits = splits;
        if (splits >= 2 && (k + splits - 1) / splits <= 512) {
            LtPlan& p = plan->lt;
            FH_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
            const cublasOperation_t ta = CUBLAS_OP_N, tb = CUBLAS_OP_T;
            FH_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
            FH_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
            FH_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_32F, m, k, m));
            FH_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_32F, n, k, n));
            FH_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.c, CUDA_R_32F, m, n, m));
            // Candidates: the heuristic's first algorithm, then every FP32 algorithm in the library's order.
            std::vector<int> ids;
            {
                cublasLtMatmulAlgo_t heuristic{};
                int id = 0;
                std::size_t written = 0;
                if (first_heuristic_algorithm(lt_, p.op, p.a, p.b, p.c, align, heuristic) &&
                    cublasLtMatmulAlgoConfigGetAttribute(&heuristic, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id,
                                                         &written) == CUBLAS_STATUS_SUCCESS)
                    ids.push_back(id);
                std::array<int, 256> all{};
                int count = 0;
                if (cublasLtMatmulAlgoGetIds(lt_, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F,
                                             CUDA_R_32F, static_cast<int>(all.size()), all.data(),
                                             &count) == CUBLAS_STATUS_SUCCESS)
                    ids.insert(ids.end(), all.begin(),
                               all.begin() + std::clamp(count, 0, static_cast<int>(all.size())));
            }
            const std::uint32_t tile = CUBLASLT_MATMUL_TILE_64x64;
            const std::int32_t split = splits;
            for (const int id : ids) {
                if (p.usable) break;
                cublasLtMatmulAlgo_t algo{};
                if (cublasLtMatmulAlgoInit(lt_, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F,
                                           CUDA_R_32F, id, &algo) != CUBLAS_STATUS_SUCCESS)
                    continue;
                std::size_t size = 0;
                std::int32_t split_support = 0;
                std::uint32_t reductions = 0;
                cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT, &split_support,
                                                  sizeof split_support, &size);
                cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK, &reductions,
                                                  sizeof reductions, &size);
                const std::uint32_t reduction = (reductions & CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE) != 0
                                                    ? CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE
                                                    : CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
                if (split_support == 0 || (reductions & reduction) == 0) continue;
                std::vector<std::uint32_t> stages{CUBLASLT_MATMUL_STAGES_UNDEFINED};
                size = 0;
                cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_STAGES_IDS, nullptr, 0, &size);
                if (size >= sizeof(std::uint32_t)) {
                    stages.resize(1 + size / sizeof(std::uint32_t));
                    cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_STAGES_IDS, stages.data() + 1, size,
                                                      &size);
                }
                for (const std::uint32_t stage : stages) {
                    cublasLtMatmulAlgo_t c = algo;
                    cublasLtMatmulAlgoConfigSetAttribute(&c, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile);
                    cublasLtMatmulAlgoConfigSetAttribute(&c, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stage, sizeof stage);
                    cublasLtMatmulAlgoConfigSetAttribute(&c, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &split, sizeof split);
                    cublasLtMatmulAlgoConfigSetAttribute(&c, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &reduction,
                                                         sizeof reduction);
                    cublasLtMatmulHeuristicResult_t check{};
                    if (cublasLtMatmulAlgoCheck(lt_, p.op, p.a, p.b, p.c, p.c, &c, &check) == CUBLAS_STATUS_SUCCESS &&
                        check.workspaceSize <= kWorkspaceBytes) {
                        p.algo = c;
                        p.usable = true;
                        break;
                    }
                }
            }
            log::debug("linear dW {}x{} over {} rows: {}", in, out, rows,
                       p.usable ? fmt::format("cuBLASLt, K split in {}", splits) : std::string("cublasSgemm"));
        }
    }
    return plan->lt.usable ? plan.get() : nullptr;
}

bool CudaDevice::split_k_weight_gradient(float* dW, const float* X, const float* dZ, int in, int out, int rows,
                                         const std::string& label) {
    const SplitKPlan* plan =
        split_k_plan(in, out, rows, std::min({alignment_of(dW), alignment_of(X), alignment_of(dZ)}));
    if (plan == nullptr) return false;
    // The caller's name with the library named as issued: "linear dW (lt, split K 16) 50x512x1024".
    std::string name = label;
    if (const auto at = name.find("(sgemm)"); at != std::string::npos)
        name.replace(at, 7, fmt::format("(lt, split K {})", plan->splits));
    if (cuda::op_filtered(name, stream())) return true;  // bench --ablate
    const cuda::TimedRegion timed(name, stream());
    const float one = 1.f, zero = 0.f;
    const LtPlan& p = plan->lt;
    FH_CUBLAS_CHECK(cublasLtMatmul(lt_, p.op, &one, X, p.a, dZ, p.b, &zero, dW, p.c, dW, p.c, &p.algo, workspace(),
                                   kWorkspaceBytes, stream()));
    return true;
}

// The weight gradients of `count` networks over many rows each, where their output tiles would
// leave SMs idle (the single network's reason for split_k_weight_gradient): the rows of every
// network split in S slices, one strided batch of count x S products (network k's slice s is rows
// [s K, (s + 1) K) of its block; the networks' inputs must lie one after the other, so that every
// slice is the same stride apart) into the lane's partials, then network_split_k_reduce_kernel sums
// each network's S slices in order. S: the largest power of two up to 64 that divides the rows,
// leaves every slice at least kSplitKBatchedMinSliceRows rows, keeps count x S x in x out within
// the partials and the blocks below two waves; from the shape and the SM count only (run-to-run
// exact). The lane's partials are the bias gradient's: act_bias_grad finished with them on this
// lane before, and the next use on this lane comes after the reduce.
bool CudaDevice::split_weight_gradient_batched(float* dW, long long dw_stride, const float* X, long long x_stride,
                                               const float* dZ, int in, int out, int rows, int count, bool accumulate,
                                               const std::string& label) {
    if (precision() != Precision::fp32 || rows < kSplitKMinRows || x_stride != static_cast<long long>(rows) * in)
        return false;
    const long long tiles = ((in + 63) / 64) * static_cast<long long>((out + 63) / 64);
    const long long sms = device_.sm_count, size = static_cast<long long>(in) * out;
    // Split while the networks' 64 x 64 output tiles do not fill the SMs once (measured on the H200,
    // 16 PPO agents: [128, 128] and [256, 256] updates 5 to 20% faster than splitting only below a
    // quarter of the SMs; docs/performance.md).
    if (tiles * count > sms) return false;
    int splits = 1;
    while (splits < 64 && rows % (splits * 2) == 0 && rows / (splits * 2) >= kSplitKBatchedMinSliceRows &&
           static_cast<long long>(count) * splits * 2 * size <= static_cast<long long>(kBiasPartialFloats) &&
           tiles * count * splits < 2 * sms)
        splits *= 2;
    if (splits < 2) return false;
    std::string name = label;
    if (const auto at = name.find("(sgemm batched)"); at != std::string::npos)
        name.replace(at, 15, fmt::format("(sgemm batched, split K {})", splits));
    if (cuda::op_filtered(name, stream())) return true;  // bench --ablate
    const cuda::TimedRegion timed(name, stream());
    const int k = rows / splits;
    float* const partials = bias_partials();
    const float one = 1.f, zero = 0.f;
    FH_CUBLAS_CHECK(cublasSgemmStridedBatched(cublas(), CUBLAS_OP_N, CUBLAS_OP_T, in, out, k, &one, X, in,
                                              static_cast<long long>(k) * in, dZ, out, static_cast<long long>(k) * out,
                                              &zero, partials, in, size, count * splits));
    kernels().network_split_k_reduce_kernel(stream(), LaunchDims::linear(static_cast<std::size_t>(size * count)), dW,
                                            dw_stride, partials, static_cast<int>(size), splits, count,
                                            accumulate ? 1 : 0);
    return true;
}

void CudaDevice::linear_backward_impl(View<float> dX, View<float> dW, View<float> db, View<float> dY,
                                      View<const float> Y, View<const float> X, View<const float> W, int batch, int in,
                                      int out, Activation act, bool accumulate, BackwardPart parts) {
    const float one = 1.f, zero = 0.f;
    const bool activation = has_part(parts, BackwardPart::activation) && act != Activation::none;
    const bool weights = has_part(parts, BackwardPart::weights);
    const bool input = has_part(parts, BackwardPart::input) && !dX.empty();
    const bool sum_bias = has_part(parts, BackwardPart::bias) && !db.empty();
    if (activation || sum_bias)
        act_bias_grad(dY.data(), sum_bias ? db.data() : nullptr, Y.data(), activation ? act : Activation::none,
                      accumulate, batch, out, 1, 0, 0);
    const float* dZ = dY.data();
    if (precision() == Precision::bf16)
        return bf16_backward(input ? dX.data() : nullptr, dW.data(), dZ, X.data(), W.data(), batch, in, out, accumulate,
                             weights, input);
    if (weights) {
        const std::string label =
            cuda::op_names_wanted() ? fmt::format("linear dW (sgemm) {}x{}x{}", in, out, batch) : std::string();
        if (!(!accumulate && split_k_weight_gradient(dW.data(), X.data(), dZ, in, out, batch, label)) &&
            !cuda::op_filtered(label, stream())) {  // bench --ablate
            const cuda::TimedRegion timed(label, stream());
            FH_CUBLAS_CHECK(cublasSgemm(cublas(), CUBLAS_OP_N, CUBLAS_OP_T, in, out, batch, &one, X.data(), in, dZ, out,
                                        accumulate ? &one : &zero, dW.data(), in));
        }
    }
    if (input) {
        const std::string label =
            cuda::op_names_wanted() ? fmt::format("linear dX (sgemm) {}x{}x{}", batch, in, out) : std::string();
        if (!cuda::op_filtered(label, stream())) {  // bench --ablate
            const cuda::TimedRegion timed(label, stream());
            FH_CUBLAS_CHECK(cublasSgemm(cublas(), CUBLAS_OP_N, CUBLAS_OP_N, in, batch, out, &one, W.data(), in, dZ, out,
                                        &zero, dX.data(), in));
        }
    }
}

void CudaDevice::linear_backward_batched_impl(View<float> dX, View<float> grads, View<float> dY, View<const float> Y,
                                              View<const float> X, std::size_t x_stride, View<const float> params,
                                              std::size_t param_stride, std::size_t w_offset, std::ptrdiff_t b_offset,
                                              int count, int batch, int in, int out, Activation act, bool accumulate,
                                              BackwardPart parts) {
    if (count == 1)  // linear_backward itself
        return linear_backward_each(dX, grads, dY, Y, X, x_stride, params, param_stride, w_offset, b_offset, count,
                                    batch, in, out, act, accumulate, parts);
    const float one = 1.f, zero = 0.f;
    const bool activation = has_part(parts, BackwardPart::activation) && act != Activation::none;
    const bool weights = has_part(parts, BackwardPart::weights);
    const bool input = has_part(parts, BackwardPart::input) && !dX.empty();
    const bool sum_bias = has_part(parts, BackwardPart::bias) && b_offset >= 0;
    const long long rows = static_cast<long long>(batch) * out;  // one network's block of dY and Y
    const long long pstride = static_cast<long long>(param_stride);
    const bool bf16 = precision() == Precision::bf16;
    const long long x_blocks = x_stride == 0 ? 1 : count, xs = static_cast<long long>(batch) * in;
    const long long w_size = static_cast<long long>(out) * in;
    // bf16: one strided batch of each product where every network's operands fit the BF16 regions,
    // else linear_backward per network (its row chunks).
    if (bf16 && (x_blocks * xs > kBf16RegionElements || count * rows > kBf16RegionElements ||
                 (input && count * w_size > kBf16RegionElements)))
        return linear_backward_each(dX, grads, dY, Y, X, x_stride, params, param_stride, w_offset, b_offset, count,
                                    batch, in, out, act, accumulate, parts);
    if (activation || sum_bias)
        act_bias_grad(dY.data(), sum_bias ? grads.data() + b_offset : nullptr, Y.data(),
                      activation ? act : Activation::none, accumulate, batch, out, count, rows, pstride);
    const float* dZ = dY.data();
    if (bf16) {
        if (weights) {
            round_bf16({X.data(), xs, x_blocks, static_cast<long long>(x_stride)}, {dZ, count * rows, 1, 0});
            gemm_bf16(CUBLAS_OP_N, CUBLAS_OP_T, in, out, batch, bf16_region(0), in, x_stride == 0 ? 0 : xs,
                      bf16_region(1), out, rows, accumulate ? 1.f : 0.f, grads.data() + w_offset, in, pstride, count,
                      cuda::op_names_wanted()
                          ? fmt::format("linear dW (gemm bf16 batched) {}x{}x{} x{}", in, out, batch, count)
                          : std::string());
        }
        if (input) {  // region 1 still holds dZ when the weights' product rounded it
            round_bf16({params.data() + w_offset, w_size, count, pstride},
                       weights ? Bf16Operand{} : Bf16Operand{dZ, count * rows, 1, 0});
            gemm_bf16(CUBLAS_OP_N, CUBLAS_OP_N, in, batch, out, bf16_region(0), in, w_size, bf16_region(1), out, rows,
                      0.f, dX.data(), in, xs, count,
                      cuda::op_names_wanted()
                          ? fmt::format("linear dX (gemm bf16 batched) {}x{}x{} x{}", batch, in, out, count)
                          : std::string());
        }
        return;
    }
    if (weights) {
        const std::string label = cuda::op_names_wanted()
                                      ? fmt::format("linear dW (sgemm batched) {}x{}x{} x{}", in, out, batch, count)
                                      : std::string();
        if (!split_weight_gradient_batched(grads.data() + w_offset, pstride, X.data(), static_cast<long long>(x_stride),
                                           dZ, in, out, batch, count, accumulate, label) &&
            !cuda::op_filtered(label, stream())) {  // bench --ablate
            const cuda::TimedRegion timed(label, stream());
            FH_CUBLAS_CHECK(cublasSgemmStridedBatched(cublas(), CUBLAS_OP_N, CUBLAS_OP_T, in, out, batch, &one,
                                                      X.data(), in, static_cast<long long>(x_stride), dZ, out, rows,
                                                      accumulate ? &one : &zero, grads.data() + w_offset, in, pstride,
                                                      count));
        }
    }
    if (input) {
        const std::string label = cuda::op_names_wanted()
                                      ? fmt::format("linear dX (sgemm batched) {}x{}x{} x{}", batch, in, out, count)
                                      : std::string();
        if (!cuda::op_filtered(label, stream())) {  // bench --ablate
            const cuda::TimedRegion timed(label, stream());
            FH_CUBLAS_CHECK(cublasSgemmStridedBatched(cublas(), CUBLAS_OP_N, CUBLAS_OP_N, in, batch, out, &one,
                                                      params.data() + w_offset, in, pstride, dZ, out, rows, &zero,
                                                      dX.data(), in, static_cast<long long>(batch) * in, count));
        }
    }
}

// ---- gpu.precision = "bf16" ----------------------------------------------------------------
// Every product of a linear layer multiplies operands rounded to BF16 (core::bf16_bits, the CPU
// twin's core::round_to_bf16) and sums in FP32: cublasGemmEx / cublasGemmStridedBatchedEx (or
// cuBLASLt for the forward, with its bias and ReLU epilogue) with CUDA_R_16BF inputs, CUDA_R_32F
// outputs and CUBLAS_COMPUTE_32F. The operands are rounded on the lane's stream into the lane's
// two regions just before their product (a region is reused by the next product on the same
// stream, after this one). Row chunks (operands larger than a region) have sizes fixed by the
// shape, and the library's choice is fixed per shape (cuBLASLt's cached plan, cuBLAS's default
// algorithm with the lane's fixed workspace): the same bits on every run.

const unsigned short* CudaDevice::bf16_region(int region) const noexcept {
    return lanes_[static_cast<std::size_t>(lane_)]->bf16 + region * kBf16RegionElements;
}

void CudaDevice::require_bf16_weights(int in, int out) {
    if (static_cast<long long>(in) * out > kBf16RegionElements)
        throw UsageError(fmt::format(
            "gpu.precision = \"bf16\": a linear layer of {} x {} weights is larger than the BF16 operand scratch "
            "({} elements); use gpu.precision = \"tf32\" or \"fp32\", or a narrower layer",
            out, in, kBf16RegionElements));
}

void CudaDevice::round_bf16(const Bf16Operand& a, const Bf16Operand& b) {
    abi::RoundBf16Args args{};
    unsigned count = 0;
    long long longest = 0;
    const Bf16Operand* operands[2] = {&a, &b};
    for (int region = 0; region < 2; ++region) {
        const Bf16Operand& o = *operands[region];
        if (o.src == nullptr || o.width * o.rows == 0) continue;
        if (o.width * o.rows > kBf16RegionElements)
            throw std::logic_error("CudaDevice::round_bf16: an operand larger than its region");
        args.dst[count] = lanes_[static_cast<std::size_t>(lane_)]->bf16 + region * kBf16RegionElements;
        args.src[count] = o.src;
        args.width[count] = o.width;
        args.rows[count] = o.rows;
        args.src_pitch[count] = o.pitch;
        longest = std::max(longest, o.width * o.rows);
        ++count;
    }
    if (count == 0) return;
    LaunchDims dims = LaunchDims::linear(static_cast<std::size_t>(longest));
    dims.grid.y = count;
    kernels().network_round_bf16_kernel(stream(), dims, args);
}

void CudaDevice::gemm_bf16(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const unsigned short* A,
                           int lda, long long stride_a, const unsigned short* B, int ldb, long long stride_b,
                           float beta, float* C, int ldc, long long stride_c, int count, const std::string& label) {
    if (cuda::op_filtered(label, stream())) return;  // bench --ablate
    const cuda::TimedRegion timed(label, stream());
    const float one = 1.f;
    if (count == 1)
        FH_CUBLAS_CHECK(cublasGemmEx(cublas(), ta, tb, m, n, k, &one, A, CUDA_R_16BF, lda, B, CUDA_R_16BF, ldb, &beta,
                                     C, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    else
        FH_CUBLAS_CHECK(cublasGemmStridedBatchedEx(cublas(), ta, tb, m, n, k, &one, A, CUDA_R_16BF, lda, stride_a, B,
                                                   CUDA_R_16BF, ldb, stride_b, &beta, C, CUDA_R_32F, ldc, stride_c,
                                                   count, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void CudaDevice::bf16_linear_forward(float* Y, const float* X, long long x_stride, const float* W, long long w_stride,
                                     const float* b, long long b_stride, int count, int batch, int in, int out,
                                     Activation act) {
    const long long w_size = static_cast<long long>(out) * in, xs = static_cast<long long>(batch) * in;
    const long long ys = static_cast<long long>(batch) * out;
    if (count > 1) {
        const long long x_blocks = x_stride == 0 ? 1 : count;
        if (count * w_size <= kBf16RegionElements && x_blocks * xs <= kBf16RegionElements) {
            // Every network's weights, packed, and their inputs (one block when they share it).
            round_bf16({W, w_size, count, w_stride}, {X, xs, x_blocks, x_stride});
            const unsigned short *wb = bf16_region(0), *xb = bf16_region(1);
            const long long x_packed = x_stride == 0 ? 0 : xs;
            if (lt_linear_forward(Y, xb, x_packed, wb, b, w_size, b_stride, count, batch, in, out, act)) return;
            gemm_bf16(CUBLAS_OP_T, CUBLAS_OP_N, out, batch, in, wb, in, w_size, xb, in, x_packed, 0.f, Y, out, ys,
                      count,
                      cuda::op_names_wanted()
                          ? fmt::format("linear forward (gemm bf16 batched) {}x{}x{} x{}", batch, out, in, count)
                          : std::string());
            if (b == nullptr && act == Activation::none) return;
            auto dims = LaunchDims::linear(static_cast<std::size_t>(out % 4 == 0 ? ys / 4 : ys));
            dims.grid.z = static_cast<unsigned>(count);
            kernels().network_bias_act_forward_batched_kernel(stream(), dims, Y, b, act, batch, out, b_stride);
            return;
        }
        for (long long k = 0; k < count; ++k)  // larger than the regions: network by network
            bf16_linear_forward(Y + k * ys, X + k * x_stride, 0, W + k * w_stride, 0,
                                b == nullptr ? nullptr : b + k * b_stride, 0, 1, batch, in, out, act);
        return;
    }
    require_bf16_weights(in, out);
    const int chunk = static_cast<int>(std::min<long long>(batch, kBf16RegionElements / in));
    for (int r0 = 0; r0 < batch; r0 += chunk) {
        const int rows = std::min(chunk, batch - r0);
        // The weights once (region 0 keeps them for every chunk), each chunk's rows of X.
        round_bf16(r0 == 0 ? Bf16Operand{W, w_size, 1, 0} : Bf16Operand{},
                   {X + static_cast<long long>(r0) * in, static_cast<long long>(rows) * in, 1, 0});
        float* y = Y + static_cast<long long>(r0) * out;
        if (lt_linear_forward(y, bf16_region(1), 0, bf16_region(0), b, 0, 0, 1, rows, in, out, act)) continue;
        gemm_bf16(CUBLAS_OP_T, CUBLAS_OP_N, out, rows, in, bf16_region(0), in, 0, bf16_region(1), in, 0, 0.f, y, out, 0,
                  1,
                  cuda::op_names_wanted() ? fmt::format("linear forward (gemm bf16) {}x{}x{}", rows, out, in)
                                          : std::string());
        bias_act(y, b, act, rows, out);
    }
}

void CudaDevice::bf16_backward(float* dX, float* dW, const float* dZ, const float* X, const float* W, int batch, int in,
                               int out, bool accumulate, bool weights, bool input) {
    bool dz_rounded = false;  // region 1 holds every row of dZ
    if (weights) {
        // dW^T (in, out) = X^T dZ over row chunks, each added to the chunks before it.
        const int chunk = static_cast<int>(std::min<long long>(batch, kBf16RegionElements / std::max(in, out)));
        for (int r0 = 0; r0 < batch; r0 += chunk) {
            const int rows = std::min(chunk, batch - r0);
            round_bf16({X + static_cast<long long>(r0) * in, static_cast<long long>(rows) * in, 1, 0},
                       {dZ + static_cast<long long>(r0) * out, static_cast<long long>(rows) * out, 1, 0});
            gemm_bf16(
                CUBLAS_OP_N, CUBLAS_OP_T, in, out, rows, bf16_region(0), in, 0, bf16_region(1), out, 0,
                r0 == 0 && !accumulate ? 0.f : 1.f, dW, in, 0, 1,
                cuda::op_names_wanted() ? fmt::format("linear dW (gemm bf16) {}x{}x{}", in, out, rows) : std::string());
        }
        dz_rounded = chunk >= batch;
    }
    if (!input) return;
    require_bf16_weights(in, out);
    // dX^T (in, rows) = W^T dZ^T per row chunk (a chunk of dX's rows each).
    const int chunk = static_cast<int>(std::min<long long>(batch, kBf16RegionElements / out));
    for (int r0 = 0; r0 < batch; r0 += chunk) {
        const int rows = std::min(chunk, batch - r0);
        round_bf16(r0 == 0 ? Bf16Operand{W, static_cast<long long>(out) * in, 1, 0} : Bf16Operand{},
                   dz_rounded
                       ? Bf16Operand{}
                       : Bf16Operand{dZ + static_cast<long long>(r0) * out, static_cast<long long>(rows) * out, 1, 0});
        gemm_bf16(
            CUBLAS_OP_N, CUBLAS_OP_N, in, rows, out, bf16_region(0), in, 0, bf16_region(1), out, 0, 0.f,
            dX + static_cast<long long>(r0) * in, in, 0, 1,
            cuda::op_names_wanted() ? fmt::format("linear dX (gemm bf16) {}x{}x{}", rows, in, out) : std::string());
    }
}

}  // namespace fh::ops
