/* nn_attention.cu — feature-group attention (docs/dqn.md, "Feature attention"): the softmax over
 * the groups' scores and the scaling of each group's columns, and its backward to the scores.
 *
 * Math:        attention::forward_row and attention::backward_row in math/attention.h. CPU twins
 *              in src/ops/nn/cpu.cpp.
 * Layout:      rows row-major: x, x_out, d_x_out (rows, D); scores, alpha, d_scores (rows, G).
 * Launch:      one thread per row, any 1-D grid (grid-stride loop); G <= 16 and D are small.
 * Determinism: run-to-run exact (one thread per row, fixed order). The softmax's exp may differ
 *              from the host's by an ulp: equal to the CPU twin within rounding.
 * Aliasing:    outputs distinct from the inputs (checked by the ops).
 * Signatures:  cuda/abi/nn_attention.h.
 */
#include "abi/nn_attention.h"
#include "device_functions.cuh"

using fh::device::global_thread_index;
using fh::device::grid_thread_count;

extern "C" __global__ void group_attention_forward_kernel(float* __restrict__ x_out, float* __restrict__ alpha,
                                                          const float* __restrict__ x, const float* __restrict__ scores,
                                                          fh::attention::Groups groups, int D, int rows, int x_rows) {
    const int G = groups.count;
    for (long long r = global_thread_index(); r < rows; r += grid_thread_count())
        fh::attention::forward_row(x_out + r * D, alpha + r * G, x + (r % x_rows) * D, scores + r * G, groups);
}

extern "C" __global__ void group_attention_backward_kernel(float* __restrict__ d_scores,
                                                           const float* __restrict__ d_x_out,
                                                           const float* __restrict__ x, const float* __restrict__ alpha,
                                                           fh::attention::Groups groups, int D, int rows) {
    const int G = groups.count;
    for (long long r = global_thread_index(); r < rows; r += grid_thread_count())
        fh::attention::backward_row(d_scores + r * G, d_x_out + r * D, x + r * D, alpha + r * G, groups);
}

FH_KERNELS_nn_attention(FH_CHECK_KERNEL_ABI)
