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

extern "C" __global__ void group_attention_forward_kernel(fh::ops::GroupAttentionForward a) {
    const int G = a.groups.count, D = a.groups.begin[G];
    for (long long r = global_thread_index(); r < a.rows; r += grid_thread_count())
        fh::attention::forward_row(a.x_out + r * D, a.alpha + r * G, a.x + (r % a.x_rows) * D, a.scores + r * G,
                                   a.groups);
}

extern "C" __global__ void group_attention_backward_kernel(fh::ops::GroupAttentionBackward a) {
    const int G = a.groups.count, D = a.groups.begin[G];
    for (long long r = global_thread_index(); r < a.rows; r += grid_thread_count())
        fh::attention::backward_row(a.d_scores + r * G, a.d_x_out + r * D, a.x + r * D, a.alpha + r * G, a.groups);
}

FH_KERNELS_nn_attention(FH_CHECK_KERNEL_ABI)
