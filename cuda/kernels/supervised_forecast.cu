/* supervised_forecast.cu — the supervised forecaster's batch gather and loss (docs/supervised.md).
 *
 * Math:        supervised::gather_row and supervised::loss_row in math/supervised.h. Gather: batch
 *              row b holds sample i (uniform, Philox(seed, supervised_sample, b, update), or
 *              first + b), i.e. row index[i] of the features and label labels[i]. Loss: return:
 *              (p - y)^2, d = 2 (p - y) / B; direction: binary cross-entropy of the logit p,
 *              d = (sigmoid(p) - y) / B. CPU twins in src/ops/supervised/cpu.cpp.
 * Layout:      rows (n_rows, stride) row-major, of which the first cols floats are copied;
 *              x (batch, cols); y, pred, labels, loss, d_pred (batch).
 * Launch:      one thread per batch row, any 1-D grid (grid-stride loop).
 * Determinism: the gather is exact (copies and integer arithmetic) and equals the CPU twin bit for
 *              bit; the loss is run-to-run exact (no reductions, no atomics) and equals the CPU
 *              within float rounding (expf, log1pf).
 * Aliasing:    outputs are distinct from every other operand (checked by the ops' checks,
 *              cuda/abi/supervised_forecast.h).
 * Signatures:  cuda/abi/supervised_forecast.h.
 */
#include "abi/supervised_forecast.h"
#include "device_functions.cuh"

using fh::device::global_thread_index;
using fh::device::grid_thread_count;

extern "C" __global__ void supervised_gather_kernel(fh::ops::SupervisedGather a) {
    const fh::supervised::RowSource source = fh::ops::row_source(a.source);
    const auto batch = static_cast<long long>(a.x.size() / static_cast<std::size_t>(source.cols));
    for (long long b = global_thread_index(); b < batch; b += grid_thread_count())
        fh::supervised::gather_row(b, a.x, a.y, source, a.params);
}

extern "C" __global__ void supervised_loss_kernel(fh::ops::SupervisedLoss a) {
    const auto batch = static_cast<long long>(a.pred.size());
    const float scale = 1.0f / static_cast<float>(batch);
    for (long long b = global_thread_index(); b < batch; b += grid_thread_count())
        fh::supervised::loss_row(b, a.loss, a.d_pred, a.pred, a.labels, a.target, scale);
}

FH_KERNELS_supervised_forecast(FH_CHECK_KERNEL_ABI)
