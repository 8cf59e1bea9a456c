/* dt_train.cu — the Decision Transformer's training windows, action loss and warm-up learning
 *              rate (docs/dt.md).
 *
 * Math:        dt::gather_window, dt::action_loss_window, dt::warmup_learning_rate in math/dt.h.
 *              CPU twins in src/ops/dt/cpu.cpp.
 * Layout:      see cuda/abi/dt_train.h.
 * Launch:      one thread per window (the learning rate: one thread), grid-stride loops.
 * Determinism: the gather is exact (copies, integer Philox draws) and equals the CPU twin bit for
 *              bit; the loss sums a window's steps in order in one thread (no atomics) and equals
 *              the CPU within float rounding (expf, logf).
 * Aliasing:    outputs distinct from every other operand (checked by the ops).
 * Signatures:  cuda/abi/dt_train.h.
 */
#include "abi/dt_train.h"
#include "device_functions.cuh"

using fh::device::global_thread_index;
using fh::device::grid_thread_count;

extern "C" __global__ void dt_gather_kernel(float* __restrict__ states, float* __restrict__ rtg,
                                            int* __restrict__ actions, int* __restrict__ lengths,
                                            fh::dt::Dataset dataset, fh::dt::WindowParams params, int batch) {
    for (long long b = global_thread_index(); b < batch; b += grid_thread_count())
        fh::dt::gather_window(b, states, rtg, actions, lengths, dataset, params);
}

extern "C" __global__ void dt_action_loss_kernel(float* __restrict__ loss, float* __restrict__ correct,
                                                 float* __restrict__ d_logits, const float* __restrict__ logits,
                                                 const int* __restrict__ actions, const int* __restrict__ lengths,
                                                 int batch, int context, int num_actions) {
    for (long long b = global_thread_index(); b < batch; b += grid_thread_count())
        fh::dt::action_loss_window(static_cast<int>(b), loss, correct, d_logits, logits, actions, lengths, batch,
                                   context, num_actions);
}

extern "C" __global__ void dt_learning_rate_kernel(float* __restrict__ lr, double base, long long warmup,
                                                   fh::core::CounterValue step) {
    if (global_thread_index() == 0) lr[0] = fh::dt::warmup_learning_rate(base, warmup, step.value());
}

FH_KERNELS_dt_train(FH_CHECK_KERNEL_ABI)
