/* monitoring_kernel.cu — training statistics accumulated on the device (SPEC section 7): action
 * histogram, Q mean/min/max, |TD error|, losses, gradient norm; the host reads them back once
 * per log interval (src/trainers/), never inside the hot loop.
 *
 * Math:        abi::monitor_accumulate (abi/monitoring_abi.h); histogram counts.
 * Launch:      update: one thread (B is at most a few thousand, once per update);
 *              actions: one thread per environment, any 1-D grid.
 * Determinism: exact (sums in a fixed order; the histogram uses integer atomics, whose result
 *              does not depend on order). CPU twin: src/ops/cpu/cpu_dqn_ops.cpp.
 * Signatures:  cuda/abi/monitoring_abi.h.
 */
#include "abi/monitoring_abi.h"
#include "common_device_functions.cuh"

using fh::device::global_thread_index;
using fh::device::grid_thread_count;

extern "C" __global__ void monitoring_update_kernel(fh::abi::MonitorStats* __restrict__ stats,
                                                    const float* __restrict__ losses,
                                                    const float* __restrict__ q, const int* __restrict__ actions,
                                                    const float* __restrict__ td,
                                                    const float* __restrict__ grad_norm, int num_actions,
                                                    int batch) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        fh::abi::MonitorStats s = *stats;
        fh::abi::monitor_accumulate(s, losses, q, actions, td, *grad_norm, num_actions, batch);
        *stats = s;
    }
}

extern "C" __global__ void monitoring_actions_kernel(unsigned long long* __restrict__ histogram,
                                                     const int* __restrict__ actions, int num_actions,
                                                     int n) {
    for (long long e = global_thread_index(); e < n; e += grid_thread_count()) {
        const int a = actions[e];
        if (a >= 0 && a < num_actions) atomicAdd(histogram + a, 1ull);
    }
}

FH_MONITORING_KERNELS(FH_CHECK_KERNEL_ABI)
