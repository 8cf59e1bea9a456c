/// @file nn.h
/// @brief The training guard's scalar logic (cuda/kernels/nn_guard.cu and its CPU twin): an update
///        is applied only when every loss and the gradient norm are finite; the counters say
///        which quantity went bad first and when.
#pragma once

#include <cmath>

#include "math/host_device.h"

namespace fh::nn {

/// Device-resident guard counters, read by the host only at log intervals.
struct GuardState {
    int bad_total;           ///< updates skipped so far
    int bad_consecutive;     ///< skipped in a row (reset by a good update)
    int first_bad_quantity;  ///< -1 none; i < n_losses: losses[i]; n_losses: the gradient norm
    int applied_updates;     ///< updates applied (Adam's step counter)
    long long first_bad_update;
};

/// isfinite that compiles on both sides (device builtin; std:: on the host).
FH_HD bool finite_value(float x) {
#if defined(__CUDA_ARCH__)
    return isfinite(x);
#else
    return std::isfinite(x);
#endif
}

/// The guard's decision for one update: 1 = apply, 0 = skip. Updates the counters.
FH_HD int guard_decide(GuardState& s, const float* losses, int n_losses, float grad_norm, long long update) {
    int bad = -1;
    for (int i = 0; i < n_losses && bad < 0; ++i)
        if (!finite_value(losses[i])) bad = i;
    if (bad < 0 && !finite_value(grad_norm)) bad = n_losses;
    if (bad < 0) {
        s.bad_consecutive = 0;
        s.applied_updates += 1;
        return 1;
    }
    if (s.first_bad_quantity < 0) {
        s.first_bad_quantity = bad;
        s.first_bad_update = update;
    }
    s.bad_total += 1;
    s.bad_consecutive += 1;
    return 0;
}

}  // namespace fh::nn
