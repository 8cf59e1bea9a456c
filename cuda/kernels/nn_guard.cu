/* nn_guard.cu — the training guard: decides on the device whether
 * an update is applied, so no host synchronisation is needed per update.
 *
 * Math:        nn::guard_decide in math/nn.h: gate = 1 if every loss and the
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

extern "C" __global__ void training_guard_kernel(fh::ops::TrainingGuard a) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        fh::nn::GuardState s = *a.state.data();
        *a.gate.data() =
            fh::nn::guard_decide(s, a.losses, static_cast<int>(a.losses.size()), *a.grad_norm.data(), a.update.value());
        *a.state.data() = s;
    }
}

FH_KERNELS_nn_guard(FH_CHECK_KERNEL_ABI)
