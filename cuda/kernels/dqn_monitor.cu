/* dqn_monitor.cu — training statistics accumulated on the device: action
 * histogram, Q mean/min/max, |TD error|, losses, gradient norm; the host reads them back once
 * per log interval (src/trainers/), never inside the hot loop.
 *
 * Math:        dqn::monitor_accumulate (abi/dqn_monitor.h); histogram counts.
 * Launch:      update: one thread (B is at most a few thousand, once per update);
 *              actions: one thread per environment, any 1-D grid.
 * Determinism: exact (sums in a fixed order; the histogram uses integer atomics, whose result
 *              does not depend on order). CPU twin: src/ops/dqn/cpu.cpp.
 * Signatures:  cuda/abi/dqn_monitor.h.
 */
#include "abi/dqn_monitor.h"
#include "device_functions.cuh"

using fh::device::global_thread_index;
using fh::device::grid_thread_count;

extern "C" __global__ void dqn_monitor_update_kernel(fh::dqn::MonitorStats* __restrict__ stats,
                                                    const float* __restrict__ losses,
                                                    const float* __restrict__ q, const int* __restrict__ actions,
                                                    const float* __restrict__ td,
                                                    const float* __restrict__ grad_norm, int num_actions,
                                                    int batch) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        fh::dqn::MonitorStats s = *stats;
        fh::dqn::monitor_accumulate(s, losses, q, actions, td, *grad_norm, num_actions, batch);
        *stats = s;
    }
}

FH_KERNELS_dqn_monitor(FH_CHECK_KERNEL_ABI)
