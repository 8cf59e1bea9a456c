/// @file supervised_forecast.h
/// @brief The supervised forecaster's batch gather and loss (math in math/supervised.h) and their
///        kernels in cuda/kernels/supervised_forecast.cu. CPU twins: src/ops/supervised/cpu.cpp.
#pragma once

#include "abi/view.h"
#include "math/supervised.h"

namespace fh::ops {

/// Where SupervisedGather reads: sample i is row index[i] (index empty: row i) of `rows`
/// (n_rows, stride), its first `cols` floats; its label labels[i] (labels may be empty when no
/// labels are gathered). n_samples = index.size() (or n_rows).
struct GatherSource {
    View<const float> rows;
    int stride = 0, cols = 0;
    View<const int> index;
    View<const float> labels;
};

/// The gather's source as supervised::gather_row reads it (null pointers for empty views).
FH_HD supervised::RowSource row_source(const GatherSource& s) {
    const std::size_t n_samples = s.index.empty() ? s.rows.size() / static_cast<std::size_t>(s.stride) : s.index.size();
    return {s.rows.data(),
            s.index.empty() ? nullptr : s.index.data(),
            s.labels.empty() ? nullptr : s.labels.data(),
            static_cast<long long>(n_samples),
            s.stride,
            s.cols};
}

/// A batch of x.size() / cols rows, one thread per row (supervised::gather_row): x (batch, cols) =
/// the samples' features, y (batch) = their labels (y empty: none). Samples uniform over
/// [0, n_samples) with Philox(seed, supervised_sample, row, update) when params.random, else
/// first, first + 1, ... (all within [0, n_samples)). The index values are the caller's (rows of
/// `rows`, checked where they are built). Exact, equal on both backends.
struct SupervisedGather {
    View<float> x, y;
    GatherSource source;
    supervised::GatherParams params;
};

/// The forecaster's loss per row (supervised::loss_row): loss (B) and, unless d_pred is empty,
/// d_pred (B) = the gradient of the batch-mean loss. pred, labels (B); target a supervised::Target.
struct SupervisedLoss {
    View<float> loss, d_pred;
    View<const float> pred, labels;
    int target;
};

}  // namespace fh::ops

#define FH_KERNELS_supervised_forecast(FH_KERNEL)                                           \
    FH_KERNEL(supervised_forecast, supervised_gather_kernel, Op<fh::ops::SupervisedGather>) \
    FH_KERNEL(supervised_forecast, supervised_loss_kernel, Op<fh::ops::SupervisedLoss>)

#ifndef __CUDACC__
#include "ops/op_begin.hpp"

inline void check(const SupervisedGather& a) {
    const auto& [x, y, s, params] = a;
    const char* op = "supervised_gather";
    detail::require(s.stride >= 1 && s.cols >= 1 && s.cols <= s.stride, op,
                    "need 1 <= cols <= stride (got cols {}, stride {})", s.cols, s.stride);
    detail::require(!x.empty() && x.size() % static_cast<std::size_t>(s.cols) == 0, op,
                    "x has {} floats, not a positive multiple of cols = {}", x.size(), s.cols);
    detail::require(!s.rows.empty() && s.rows.size() % static_cast<std::size_t>(s.stride) == 0, op,
                    "rows has {} floats, not a positive multiple of stride = {}", s.rows.size(), s.stride);
    const std::size_t batch = x.size() / static_cast<std::size_t>(s.cols);
    detail::checked_int_size(x.size(), op);
    const std::size_t n_samples = static_cast<std::size_t>(row_source(s).n_samples);
    if (!y.empty()) detail::require_size(y.size(), batch, op, "y");
    if (!y.empty() || !s.labels.empty()) detail::require_size(s.labels.size(), n_samples, op, "labels");
    detail::require(params.random || (params.first >= 0 && static_cast<std::size_t>(params.first) + batch <= n_samples),
                    op, "sequential samples [{}, {}) exceed the {} samples", params.first,
                    params.first + static_cast<long long>(batch), n_samples);
    detail::require_distinct(op, {FH_RANGES(x, y), FH_RANGES_OF(s, rows, index, labels)});
}
FH_LAUNCH(SupervisedGather) {
    gpu.kernels().supervised_gather_kernel(
        gpu.stream(), LaunchDims::linear(a.x.size() / static_cast<std::size_t>(a.source.cols), 128), a);
}

inline void check(const SupervisedLoss& a) {
    const auto& [loss, d_pred, pred, labels, target] = a;
    const char* op = "supervised_loss";
    detail::require(!pred.empty(), op, "empty batch (pred is empty)");
    detail::require(target == supervised::kReturn || target == supervised::kDirection, op, "unknown target {}", target);
    detail::checked_int_size(pred.size(), op);
    detail::require_size(loss.size(), pred.size(), op, "loss");
    if (!d_pred.empty()) detail::require_size(d_pred.size(), pred.size(), op, "d_pred");
    detail::require_size(labels.size(), pred.size(), op, "labels");
    detail::require_distinct(op, {FH_RANGES(loss, d_pred, pred, labels)});
}
FH_LAUNCH_KERNEL(SupervisedLoss, supervised_loss_kernel, LaunchDims::linear(a.pred.size(), 128));

#include "ops/op_end.hpp"
#endif
