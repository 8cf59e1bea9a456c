/// @file dqn_monitor.h
/// @brief Kernel signature of cuda/kernels/dqn_monitor.cu: DQN training statistics accumulated on
///        the device and read back once per log interval (math: cuda/math/dqn.h).
#pragma once

#include "math/dqn.h"

namespace fh::abi {

using dqn::MonitorStats;

/// Accumulates one update: losses (2) batch means, q (B, A) with actions (B), td (B), grad_norm.
/// One thread; a fixed summation order (deterministic).
using DqnMonitorUpdate = void(MonitorStats* __restrict__ stats, const float* __restrict__ losses,
                           const float* __restrict__ q, const int* __restrict__ actions,
                           const float* __restrict__ td, const float* __restrict__ grad_norm,
                           int num_actions, int batch);

}  // namespace fh::abi

#define FH_KERNELS_dqn_monitor(FH_KERNEL)                                   \
    FH_KERNEL(dqn_monitor, dqn_monitor_update_kernel, DqnMonitorUpdate)
