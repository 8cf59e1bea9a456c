/* nn_guard.cu — the training guard: decides on the device whether
 * an update is applied, so no host synchronisation is needed per update.
 *
 * Math:        nn::guard_decide in abi/nn_guard.h: gate = 1 if every loss and the
 *              gradient norm are finite, else 0 with the first bad quantity recorded. The Adam
 *              kernel reads the gate: a skipped update leaves the weights and the optimizer state
 *              as they were (the last good ones). The host reads GuardState at log intervals and
 *              stops the run (exit 5) after training.max_bad_updates consecutive skips.
 * Launch:      one thread.
 * Determinism: exact. CPU twin: src/ops/nn/cpu.cpp.
 * Signatures:  cuda/abi/nn_guard.h.
 */
#include "abi/nn_guard.h"
#include "device_functions.cuh"

extern "C" __global__ void training_guard_kernel(int* __restrict__ gate, fh::nn::GuardState* __restrict__ state,
                                                 const float* __restrict__ losses, int n_losses,
                                                 const float* __restrict__ grad_norm, fh::core::CounterValue update) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        fh::nn::GuardState s = *state;
        *gate = fh::nn::guard_decide(s, losses, n_losses, *grad_norm, update.value());
        *state = s;
    }
}

FH_KERNELS_nn_guard(FH_CHECK_KERNEL_ABI)
