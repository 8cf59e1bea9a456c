/// @file core_network.h
/// @brief Kernel signatures of cuda/kernels/core_network.cu: the linear layers' bias + activation,
///        their gradients, the narrow layers and heads, fused MLP inference and BF16 operands (the
///        math: math/core.h). The device runtime launches them (src/device/cuda_linear.cpp) beside
///        its cuBLAS / cuBLASLt products: the linear layers are Device's, not ops.
#pragma once

#include "math/core.h"

namespace fh::abi {

using core::Activation;

/// Whether network_bias_act_forward_kernel runs over quads of four columns: whole float4 rows
/// (out % 4 == 0, y and b 16-byte aligned) and fewer than 2^31 quads (32-bit indices).
FH_HD bool bias_act_quads(const float* y, const float* b, int out, long long total) {
    return out % 4 == 0 && reinterpret_cast<unsigned long long>(y) % 16 == 0 &&
           (b == nullptr || reinterpret_cast<unsigned long long>(b) % 16 == 0) && total / 4 <= 0x7fffffffLL;
}

// Parameter order: outputs, inputs, then sizes. Row-major matrices, shapes beside each pointer.

/// y[r, j] = act(y[r, j] + b[j]) in place. y (batch, out), b (out) or null (no bias).
/// With bias_act_quads, each thread takes four columns of a row at a time (size the grid by
/// total / 4), else one element.
using NetworkBiasActForward = void(float* __restrict__ y, const float* __restrict__ b, Activation act, int batch,
                                   int out);
/// network_bias_act_forward_kernel for `count` networks of one shape in one launch (grid.z the
/// network; a batched layer whose activation cuBLASLt cannot fuse, e.g. tanh): network z's y at
/// z * batch * out, its b at z * b_stride; each element's math is the one-network kernel's. (A
/// kernel of its own, as network_act_bias_grad_batched_kernel.)
using NetworkBiasActForwardBatched = void(float* __restrict__ y, const float* __restrict__ b, Activation act, int batch,
                                          int out, long long b_stride);
/// Linear layers with few inputs (in <= kLinearNarrowMaxIn: the observation layers), the product
/// and its bias and activation in one launch: for each of `count` layers of one shape (grid.z),
/// y[z][r, j] = act(acc + b[j]) (act(acc) when b is null) with acc = sum over k = 0 .. in - 1 in
/// order of fmaf(x[r, k], W[j, k], acc) from 0, x at z * x_stride (0: one input for all), W and
/// b at z * w_stride, y at z * batch * out. Every output's sum is that order whatever the tile,
/// so the bits depend on the operands only. Instances network_linear_narrow_{2,4,8}_kernel take
/// tiles of 16 * TM rows by 16 * TM columns (TM x TM outputs per thread): block
/// kLinearNarrowThreads, grid (ceil(batch / (16 TM)), ceil(out / (16 TM)), count), dynamic shared
/// memory linear_narrow_smem_bytes(16 TM, in). x (batch, in) per layer, W (out, in), b (out) or
/// null, y (count, batch, out).
using NetworkLinearNarrow = void(float* __restrict__ y, const float* __restrict__ x, const float* __restrict__ w,
                                 const float* __restrict__ b, Activation act, int batch, int in, int out,
                                 long long x_stride, long long w_stride);
inline constexpr int kLinearNarrowThreads = 256;
/// Inputs staged in shared memory per step of the k loop.
inline constexpr int kLinearNarrowChunk = 32;
/// The padded length of a staged row of a narrow tile of `tile` rows (or columns): its staging
/// stores hit 8 banks, and its rows stay 16-byte aligned.
FH_HD constexpr int linear_narrow_row(int tile) {
    return tile + 4;
}
/// Shared-memory buffers of a tile, each one chunk of inputs for the tile's rows and columns: two
/// for the 128-row tile (the next chunk's copies fill one while the block sums the other), one for
/// the smaller tiles, whose larger footprint with two slowed the PPO rollout step, where two
/// networks' narrow layers run beside cuBLAS's products (docs/performance.md).
FH_HD constexpr int linear_narrow_buffers(int tile) {
    return tile == 128 ? 2 : 1;
}
/// Dynamic shared memory of a network_linear_narrow_* launch with tiles of `tile` (16 TM) and `in`
/// inputs: as many buffers as chunks, up to linear_narrow_buffers(tile).
FH_HD constexpr int linear_narrow_smem_bytes(int tile, int in) {
    const int chunks = (in + kLinearNarrowChunk - 1) / kLinearNarrowChunk;
    const int buffers = chunks < linear_narrow_buffers(tile) ? chunks : linear_narrow_buffers(tile);
    return buffers * 2 * kLinearNarrowChunk * linear_narrow_row(tile) * static_cast<int>(sizeof(float));
}
/// The widest input of the tanh layers the trainers send through network_linear_narrow_*
/// (the observation layers, PPO's [64, 64] trunks): beyond it cuBLAS's products are faster.
inline constexpr int kLinearNarrowMaxIn = 64;

/// The backward of a layer's activation and bias in one pass over dY (batch, out), in place:
/// dZ = dY * act'(Y) (act none: dZ = dY), and the column sums of dZ over a slice of rows.
/// Launch: block (32, kBiasGradRows), grid (ceil(out / 32), slices); slice s covers rows
/// [s * rows_per_slice, min(batch, (s + 1) * rows_per_slice)). Each column's rows are summed per
/// thread in row order, then over the block's kBiasGradRows threads in a fixed tree. With one
/// slice the sum goes to db (+= when accumulate); with several, each block writes partials
/// (slices, out) and the last block of each group of 32 columns (counted on tickets[blockIdx.x],
/// zero before the launch and reset to zero by it) adds the slices into db: thread row t sums
/// slices t, t + kBiasGradRows, ... in order, then the fixed tree. dY, Y (batch, out); db (out)
/// or null (dZ only: any slicing, nothing else written); partials (slices, out) and tickets
/// (ceil(out / 32)) with db and several slices, else null.
using NetworkActBiasGrad = void(float* __restrict__ dy, float* __restrict__ db, float* __restrict__ partials,
                                unsigned* __restrict__ tickets, const float* __restrict__ y, Activation act,
                                int accumulate, int batch, int out, int rows_per_slice);
/// network_act_bias_grad_kernel for several networks of one shape in one launch (a batched
/// layer's, Device::linear_backward_batched): grid (ceil(out / 32), slices, networks); network z
/// has its dY and Y at z * net_stride, its db at z * db_stride, its partials at z * slices * out
/// and its tickets at z * ceil(out / 32), and is summed exactly as in a launch of its own. (A
/// kernel of its own: the per-network pointers cost the one-network kernel about 0.6 us a
/// launch on the H200.)
using NetworkActBiasGradBatched = void(float* __restrict__ dy, float* __restrict__ db, float* __restrict__ partials,
                                       unsigned* __restrict__ tickets, const float* __restrict__ y, Activation act,
                                       int accumulate, int batch, int out, int rows_per_slice, long long net_stride,
                                       long long db_stride);
inline constexpr int kBiasGradRows = 32;

/// The backward of a narrow linear output layer without activation (out outputs, 1 <= out <=
/// kHeadBackwardMaxOut: a value head, IQL's Q and policy heads; W (out, in), bias b) and,
/// through it, of the hidden layer's activation and bias below it, in one pass over the hidden
/// layer's output X (batch, in), for grid.z networks:
///   dz[r, j]  = (sum_h dout[r, h] * W[h, j]) * act'(X[r, j])   the head's dX, then the activation's backward
///   hidden_db[j] = sum_r dz[r, j]                  network_act_bias_grad_kernel's slices and order
///   head_dw[h, j] = sum_r dout[r, h] * X[r, j]     (fused multiply-adds in row order per thread)
///   head_db[h]    = sum_r dout[r, h]
/// (db, dw: += when accumulate.) out == 1: network_scalar_head_backward_kernel, whose dz is
/// the rounded product dout[r] * w[j] (the bits of the two layers' separate passes); out > 1:
/// network_narrow_head_backward_kernel, whose dz sums h = 0, 1, ... by fused multiply-adds from 0
/// (not cuBLAS's order). Launch: block (32, kBiasGradRows), grid (ceil(in / 32), slices,
/// networks), the slices of network_act_bias_grad_kernel for (batch, in); each thread sums its
/// rows in order, then the block's rows in bias_rows_tree's fixed tree; with several slices each
/// block writes its sums to partials (slice s at s * head_backward_partial_floats(in, out):
/// hidden db (in), head dw (out, in), head db (out)) and the last block of a group of 32 columns
/// (tickets, zero before and after) adds the slices in order. The column group 0 blocks also sum
/// dout (head db). Network z: x, dz at z * x_stride, dout at z * batch * out, w, head_dw,
/// head_db, hidden_db at z * param_stride, partials at z * slices * head_backward_partial_floats,
/// tickets at z * ceil(in / 32). round_bf16 (gpu.precision = "bf16"): the two products' operands
/// (dout, X and W) are each rounded by core::round_to_bf16 before they multiply, as the CPU twin
/// rounds them; the activation's derivative reads X itself and head_db sums dout itself.
struct HeadBackwardArgs {
    float* dz;
    float* hidden_db;  // null: the hidden layer has no bias
    float* head_dw;
    float* head_db;     // null: the head has no bias
    float* partials;    // null with one slice
    unsigned* tickets;  // null with one slice
    const float* dout;
    const float* x;
    const float* w;
    long long x_stride, param_stride;
    int batch, in, out, rows_per_slice, accumulate;
    Activation act;
    int round_bf16;
};
using NetworkHeadBackward = void(HeadBackwardArgs args);
/// The widest head network_narrow_head_backward_kernel takes (its per-thread sums and shared rows).
inline constexpr int kHeadBackwardMaxOut = 16;
/// dout rows network_narrow_head_backward_kernel stages in shared memory at a time (4 per thread row).
inline constexpr int kHeadBackwardStagedRows = 4 * kBiasGradRows;
/// Block sums network_narrow_head_backward_kernel reduces in one tree (its out + 2 sums in
/// groups of this many: one barrier per level for a group).
inline constexpr int kHeadBackwardTreeSums = 6;
/// Partial floats a slice of the head-backward kernels leaves: the hidden layer's db (in), the
/// head's dw (out x in) and the head's db (out).
FH_HD constexpr long long head_backward_partial_floats(int in, int out) {
    return (1LL + out) * in + out;
}

/// The weight gradients of `count` networks whose rows were split in `splits` slices (a strided
/// batch of count x splits products into partials, network k's slice s at (k splits + s) size):
/// dw[k dw_stride + j] = (accumulate ? dw[...] : 0) + sum over s in order of the partials' element
/// j, for j < size. Any grid (grid-stride over count x size elements).
using NetworkSplitKReduce = void(float* __restrict__ dw, long long dw_stride, const float* __restrict__ partials,
                                 int size, int splits, int count, int accumulate);

/// A small MLP's layers for network_mlp_infer_kernel: layer l maps in[l] to out[l] features
/// (in[l + 1] == out[l]) with weights W (out, in) at params + weight[l] and bias (out) at
/// params + bias[l] (bias[l] < 0: none), then act[l]. max_weights: the largest in * out;
/// max_width: the largest of in[0] and every out.
inline constexpr int kMlpInferMaxLayers = 6;
struct MlpInferLayers {
    int count;
    int in[kMlpInferMaxLayers];
    int out[kMlpInferMaxLayers];
    Activation act[kMlpInferMaxLayers];
    long long weight[kMlpInferMaxLayers];
    long long bias[kMlpInferMaxLayers];
    int max_weights;
    int max_width;
};
/// Rows per block and threads per block of network_mlp_infer_kernel.
inline constexpr int kMlpInferRows = 8;
inline constexpr int kMlpInferThreads = 256;
/// Floats of dynamic shared memory network_mlp_infer_kernel needs: one layer's weights
/// (transposed) and bias, and two activation tiles of kMlpInferRows rows.
constexpr long long mlp_infer_smem_floats(const MlpInferLayers& l) {
    return static_cast<long long>(l.max_weights) + l.max_width + 2LL * kMlpInferRows * l.max_width;
}

/// Inference through a whole small MLP in one launch (nothing kept for backward): y (batch,
/// out[count - 1]) from x (batch, in[0]). Block b runs rows [b * kMlpInferRows, ...) through
/// every layer with the activations in shared memory, staging each layer's weights there in
/// turn. Each output is acc = sum over k in order of fmaf(a[k], W[j, k], acc) from 0, then
/// act(acc + b[j]). round_bf16 (gpu.precision = "bf16"): every layer's input a[k] and weights
/// W[j, k] rounded by core::round_to_bf16 first (the products' operands, as the CPU twin and the
/// cuBLAS path round them). Launch: grid ceil(batch / kMlpInferRows), block kMlpInferThreads,
/// dynamic shared memory mlp_infer_smem_floats(layers) floats.
using NetworkMlpInfer = void(float* __restrict__ y, const float* __restrict__ x, const float* __restrict__ params,
                             MlpInferLayers layers, int batch, int round_bf16);

/// The operands of gpu.precision = "bf16"'s matrix products, rounded into BF16 scratch in one
/// launch (CudaDevice's linear layers): for each of the grid's y pairs p (< kRoundBf16Max), rows
/// rows[p] of width[p] floats, row r at src[p] + r * src_pitch[p], become dst[p] + r * width[p]
/// (packed) as core::bf16_bits (round to nearest even). Any grid.x (grid-stride over each pair's
/// rows x width elements). No dst may overlap a src or the other dst.
inline constexpr int kRoundBf16Max = 2;
/// BF16 elements of each of a stream's two operand regions (CudaDevice's BF16 scratch).
inline constexpr long long kBf16RegionElements = 8LL << 20;
/// Streams with BF16 scratch at most (CudaDevice: its own and kSideLanes side lanes).
inline constexpr int kBf16ScratchStreams = 6;
struct RoundBf16Args {
    unsigned short* dst[kRoundBf16Max];
    const float* src[kRoundBf16Max];
    long long width[kRoundBf16Max];
    long long rows[kRoundBf16Max];
    long long src_pitch[kRoundBf16Max];
};
using NetworkRoundBf16 = void(RoundBf16Args args);

}  // namespace fh::abi

#define FH_KERNELS_core_network(FH_KERNEL)                                                         \
    FH_KERNEL(core_network, network_bias_act_forward_kernel, NetworkBiasActForward)                \
    FH_KERNEL(core_network, network_bias_act_forward_batched_kernel, NetworkBiasActForwardBatched) \
    FH_KERNEL(core_network, network_linear_narrow_2_kernel, NetworkLinearNarrow)                   \
    FH_KERNEL(core_network, network_linear_narrow_4_kernel, NetworkLinearNarrow)                   \
    FH_KERNEL(core_network, network_linear_narrow_8_kernel, NetworkLinearNarrow)                   \
    FH_KERNEL(core_network, network_act_bias_grad_kernel, NetworkActBiasGrad)                      \
    FH_KERNEL(core_network, network_act_bias_grad_batched_kernel, NetworkActBiasGradBatched)       \
    FH_KERNEL(core_network, network_scalar_head_backward_kernel, NetworkHeadBackward)              \
    FH_KERNEL(core_network, network_narrow_head_backward_kernel, NetworkHeadBackward)              \
    FH_KERNEL(core_network, network_split_k_reduce_kernel, NetworkSplitKReduce)                    \
    FH_KERNEL(core_network, network_mlp_infer_kernel, NetworkMlpInfer)                             \
    FH_KERNEL(core_network, network_round_bf16_kernel, NetworkRoundBf16)
