/// @file monitoring_abi.h
/// @brief Signatures of cuda/monitoring_kernel.cu: training statistics accumulated on the device
///        and read back once per log interval.
#pragma once

#include "abi/host_device.h"

namespace fh::abi {

/// Sums since the last read-back.
struct MonitorStats {
    double loss_sum[2];      ///< batch-mean C51 and MSE losses, summed over updates
    double q_sum;            ///< Q(s, a) of sampled transitions, summed
    double td_abs_sum;       ///< |TD error| of the expected Q, summed
    double grad_norm_sum;    ///< pre-clipping gradient norm, summed over updates
    float q_min, q_max;
    float grad_norm_max;
    int updates;
    long long samples;
};

/// One update's contribution, in a fixed order (shared by the kernel and the CPU twin).
FH_HD void monitor_accumulate(MonitorStats& s, const float* losses, const float* q, const int* actions,
                              const float* td, float grad_norm, int num_actions, int batch) {
    s.loss_sum[0] += losses[0];
    s.loss_sum[1] += losses[1];
    s.grad_norm_sum += grad_norm;
    if (s.updates == 0 || grad_norm > s.grad_norm_max) s.grad_norm_max = grad_norm;
    for (int b = 0; b < batch; ++b) {
        const float qa = q[static_cast<long long>(b) * num_actions + actions[b]];
        s.q_sum += qa;
        s.td_abs_sum += td[b] < 0 ? -td[b] : td[b];
        if ((s.updates == 0 && b == 0) || qa < s.q_min) s.q_min = qa;
        if ((s.updates == 0 && b == 0) || qa > s.q_max) s.q_max = qa;
    }
    s.samples += batch;
    s.updates += 1;
}

/// Accumulates one update: losses (2) batch means, q (B, A) with actions (B), td (B), grad_norm.
/// One thread; a fixed summation order (deterministic).
using MonitorUpdate = void(MonitorStats* __restrict__ stats, const float* __restrict__ losses,
                           const float* __restrict__ q, const int* __restrict__ actions,
                           const float* __restrict__ td, const float* __restrict__ grad_norm,
                           int num_actions, int batch);

/// histogram[a] += number of e < n with actions[e] == a (integer atomics: exact).
using MonitorActions = void(unsigned long long* __restrict__ histogram, const int* __restrict__ actions,
                            int num_actions, int n);

}  // namespace fh::abi

#define FH_MONITORING_KERNELS(FH_KERNEL)                                   \
    FH_KERNEL(monitoring_kernel, monitoring_update_kernel, MonitorUpdate)  \
    FH_KERNEL(monitoring_kernel, monitoring_actions_kernel, MonitorActions)
