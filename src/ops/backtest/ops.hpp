/// @file ops.hpp
/// @brief The backtest op family: segments evaluated in lock-step from flat, their observations and
///        the metrics of the records (the math: math/backtest.h; docs/metrics.md).
///
/// Each op checks its arguments here, once, then runs its CPU twin (cpu_twin::, plain loops over
/// the shared math, src/ops/backtest/cpu.cpp) or its CUDA twin (cuda_twin::, the kernels of
/// cuda/kernels/backtest.cu, launched by src/ops/backtest/cuda.cpp).
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <stdexcept>

#include "math/backtest.h"
#include "math/env.h"
#include "ops/device.hpp"

namespace fh::ops {

namespace cpu_twin {
void backtest_reset(View<backtest::SegmentState> state, View<backtest::BarRecord> records,
                    View<const backtest::Segment> segments, const env::EnvParams& params);
void backtest_step(View<backtest::SegmentState> state, View<backtest::BarRecord> records,
                   View<const backtest::Segment> segments, View<const int> actions, const env::MarketView& market,
                   const env::EnvParams& params);
void backtest_gather(View<float> states, View<const backtest::SegmentState> state, const env::MarketView& market,
                     const env::EnvParams& params);
void backtest_metrics(View<backtest::MetricsOut> out, View<long long> histogram,
                      View<const backtest::BarRecord> records, View<const backtest::SegmentState> state,
                      View<const backtest::Segment> segments, const env::MarketView& market,
                      const backtest::MetricsParams& params);
}  // namespace cpu_twin

namespace cuda_twin {
void backtest_reset(CudaDevice& device, View<backtest::SegmentState> state, View<backtest::BarRecord> records,
                    View<const backtest::Segment> segments, const env::EnvParams& params);
void backtest_step(CudaDevice& device, View<backtest::SegmentState> state, View<backtest::BarRecord> records,
                   View<const backtest::Segment> segments, View<const int> actions, const env::MarketView& market,
                   const env::EnvParams& params);
void backtest_gather(CudaDevice& device, View<float> states, View<const backtest::SegmentState> state,
                     const env::MarketView& market, const env::EnvParams& params);
void backtest_metrics(CudaDevice& device, View<backtest::MetricsOut> out, View<long long> histogram,
                      View<const backtest::BarRecord> records, View<const backtest::SegmentState> state,
                      View<const backtest::Segment> segments, const env::MarketView& market,
                      const backtest::MetricsParams& params);
}  // namespace cuda_twin

namespace detail {
inline void check_backtest_params(const env::EnvParams& p) {
    if (p.position_levels < 1 || p.position_levels % 2 == 0 || p.urgency_levels < 1 || p.urgency_levels > 3 ||
        p.state_dim != p.market_dim + env::kPortfolioFeatures || p.episode_length < 1 || p.max_contracts < 1 ||
        !(p.initial_equity > 0))
        throw std::invalid_argument(
            "ops::backtest: invalid environment parameters (levels, "
            "state_dim, episode_length, max_contracts or initial_equity)");
}
}  // namespace detail

/// Starts every segment flat at its first bar and writes its first record.
inline void backtest_reset(Device& device, View<backtest::SegmentState> state, View<backtest::BarRecord> records,
                           View<const backtest::Segment> segments, const env::EnvParams& params) {
    detail::check_backtest_params(params);
    detail::require_same_size(segments.size(), state.size(), "backtest_reset (segments)");
    detail::checked_int_size(state.size(), "backtest_reset");
    detail::checked_int_size(records.size(), "backtest_reset (records)");
    detail::require_distinct("backtest_reset", {detail::range("state", state), detail::range("records", records),
                                                detail::range("segments", segments)});
    if (!state.empty()) {
        if (CudaDevice* cuda = device.cuda()) return cuda_twin::backtest_reset(*cuda, state, records, segments, params);
        cpu_twin::backtest_reset(state, records, segments, params);
    }
}

/// One step of every running segment with actions (n_segments); finished ones idle.
inline void backtest_step(Device& device, View<backtest::SegmentState> state, View<backtest::BarRecord> records,
                          View<const backtest::Segment> segments, View<const int> actions,
                          const env::MarketView& market, const env::EnvParams& params) {
    detail::check_backtest_params(params);
    detail::require_same_size(segments.size(), state.size(), "backtest_step (segments)");
    detail::require_same_size(actions.size(), state.size(), "backtest_step (actions)");
    detail::checked_int_size(state.size(), "backtest_step");
    detail::require_distinct("backtest_step", {detail::range("state", state), detail::range("records", records),
                                               detail::range("segments", segments), detail::range("actions", actions)});
    if (market.n_bars < 2) throw std::invalid_argument("ops::backtest_step: the market has < 2 bars");
    if (!state.empty()) {
        if (CudaDevice* cuda = device.cuda())
            return cuda_twin::backtest_step(*cuda, state, records, segments, actions, market, params);
        cpu_twin::backtest_step(state, records, segments, actions, market, params);
    }
}

/// states (n_segments * state_dim) = [features of bar t | portfolio features] per segment.
inline void backtest_gather(Device& device, View<float> states, View<const backtest::SegmentState> state,
                            const env::MarketView& market, const env::EnvParams& params) {
    detail::check_backtest_params(params);
    detail::require_same_size(states.size(), state.size() * static_cast<std::size_t>(params.state_dim),
                              "backtest_gather");
    detail::checked_int_size(states.size(), "backtest_gather");
    detail::require_distinct("backtest_gather", {detail::range("states", states), detail::range("state", state)});
    if (!state.empty()) {
        if (CudaDevice* cuda = device.cuda()) return cuda_twin::backtest_gather(*cuda, states, state, market, params);
        cpu_twin::backtest_gather(states, state, market, params);
    }
}

/// out (1) and histogram (num_actions) = the metrics of the records (fixed order, double).
inline void backtest_metrics(Device& device, View<backtest::MetricsOut> out, View<long long> histogram,
                             View<const backtest::BarRecord> records, View<const backtest::SegmentState> state,
                             View<const backtest::Segment> segments, const env::MarketView& market,
                             const backtest::MetricsParams& params) {
    detail::require_same_size(out.size(), 1, "backtest_metrics (out)");
    detail::require_same_size(histogram.size(),
                              static_cast<std::size_t>(params.num_actions < 0 ? 0 : params.num_actions),
                              "backtest_metrics (histogram)");
    detail::require_same_size(segments.size(), state.size(), "backtest_metrics (segments)");
    detail::checked_int_size(records.size(), "backtest_metrics");
    if (params.num_actions < 1 || !(params.initial_equity > 0) || !(params.bars_per_year > 0))
        throw std::invalid_argument(
            fmt::format("ops::backtest_metrics: num_actions ({}), initial_equity "
                        "and bars_per_year ({}) must be positive",
                        params.num_actions, params.bars_per_year));
    detail::require_distinct("backtest_metrics", {detail::range("out", out), detail::range("histogram", histogram),
                                                  detail::range("records", records), detail::range("state", state),
                                                  detail::range("segments", segments)});
    if (CudaDevice* cuda = device.cuda())
        return cuda_twin::backtest_metrics(*cuda, out, histogram, records, state, segments, market, params);
    cpu_twin::backtest_metrics(out, histogram, records, state, segments, market, params);
}

}  // namespace fh::ops
