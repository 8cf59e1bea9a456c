/* supervised_signal.cu — the signal adapter: a forecast to one of the environment's actions
 * (docs/supervised.md, "The signal adapter").
 *
 * Math:        supervised::signal_action in math/supervised.h: the score (the prediction, or
 *              2 sigmoid(logit) - 1), the size (fixed or by magnitude, optionally divided by the
 *              volatility ratio of the state's rv_32 feature), the entry / exit thresholds against
 *              the position held (the state's position feature), and the order type. CPU twin in
 *              src/ops/supervised/cpu.cpp.
 * Layout:      predictions, actions (n); states (n, state_dim) row-major (market features first,
 *              then the portfolio features); calibration (kCalibrationFloats).
 * Launch:      one thread per row, any 1-D grid (grid-stride loop).
 * Determinism: run-to-run exact. supervised.target = "return": equal to the CPU twin bit for bit
 *              (compiled with --fmad=false, no reductions, no transcendental functions);
 *              "direction": the score's expf may differ from the host's by an ulp, so an action
 *              can differ only where a score lies within an ulp of a threshold or size step.
 * Aliasing:    actions is distinct from the inputs (checked by ops::SupervisedSignal's check).
 * Signatures:  cuda/abi/supervised_signal.h.
 */
#include "abi/supervised_signal.h"
#include "device_functions.cuh"

using fh::device::global_thread_index;
using fh::device::grid_thread_count;

extern "C" __global__ void supervised_signal_kernel(fh::ops::SupervisedSignal a) {
    const auto D = static_cast<long long>(a.params.state_dim);
    for (long long i = global_thread_index(); i < static_cast<long long>(a.actions.size()); i += grid_thread_count())
        a.actions[i] = fh::supervised::signal_action(a.predictions[i], a.states + i * D, a.calibration, a.params);
}

FH_KERNELS_supervised_signal(FH_CHECK_KERNEL_ABI)
