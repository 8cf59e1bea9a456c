/* data_statistics.cu — per-column moments of a row subset (the normalisation statistics of the
 * training split, docs/data.md "Normalisation") for large data.
 *
 * Math:        statistics::chunk_partial and statistics::column_total in math/statistics.h: the
 *              same fixed order as the host's data::training_stats, so the results are equal bit
 *              for bit. CPU twin: src/ops/stats/cpu.cpp.
 * Layout:      values (rows, D) row-major; rows (n) the selected row indices; partials (chunks, D).
 * Launch:      chunk sums: one block per chunk (grid.x = chunks), threads over the columns (a
 *              row's columns are adjacent: the loads of a warp are contiguous). Totals: one thread
 *              per column, any 1-D grid.
 * Determinism: every sum runs in one thread in a fixed order; no atomics; --fmad=false.
 * Aliasing:    outputs distinct from the inputs (checked by ops::column_moments).
 * Signatures:  cuda/abi/data_statistics.h.
 */
#include "abi/data_statistics.h"
#include "device_functions.cuh"

using fh::device::global_thread_index;
using fh::device::grid_thread_count;

extern "C" __global__ void column_chunk_sums_kernel(double* __restrict__ partials, const float* __restrict__ values,
                                                    const long long* __restrict__ rows, long long n, int D,
                                                    const double* __restrict__ center) {
    const long long c = blockIdx.x;
    for (int k = threadIdx.x; k < D; k += blockDim.x)
        partials[c * D + k] = fh::statistics::chunk_partial(values, rows, n, D, k, c, center);
}

extern "C" __global__ void column_totals_kernel(double* __restrict__ out, const double* __restrict__ partials,
                                                long long chunks, int D, double divisor) {
    for (long long k = global_thread_index(); k < D; k += grid_thread_count())
        out[k] = fh::statistics::column_total(partials, chunks, D, static_cast<int>(k)) / divisor;
}

FH_KERNELS_data_statistics(FH_CHECK_KERNEL_ABI)
