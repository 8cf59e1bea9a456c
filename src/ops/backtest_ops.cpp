/// @file backtest_ops.cpp
/// @brief Argument checks of the backtest ops (both backends), then the backend's _impl.
#include <fmt/format.h>

#include "ops/checks.hpp"
#include "ops/ops.hpp"

namespace fh::ops {

namespace {

void check_backtest_params(const env::EnvParams& p) {
    if (p.position_levels < 1 || p.position_levels % 2 == 0 || p.urgency_levels < 1 ||
        p.urgency_levels > 3 || p.state_dim != p.market_dim + env::kPortfolioFeatures ||
        p.episode_length < 1 || p.max_contracts < 1 || !(p.initial_equity > 0))
        throw std::invalid_argument("ops::backtest: invalid environment parameters (levels, "
                                    "state_dim, episode_length, max_contracts or initial_equity)");
}

}  // namespace

void Ops::backtest_reset(View<backtest::SegmentState> state, View<backtest::BarRecord> records,
                         View<const backtest::Segment> segments, const env::EnvParams& params) {
    check_backtest_params(params);
    require_same_size(segments.size(), state.size(), "backtest_reset (segments)");
    checked_int_size(state.size(), "backtest_reset");
    checked_int_size(records.size(), "backtest_reset (records)");
    detail::require_distinct("backtest_reset", {detail::range("state", state), detail::range("records", records),
                                                detail::range("segments", segments)});
    if (!state.empty()) backtest_reset_impl(state, records, segments, params);
}

void Ops::backtest_step(View<backtest::SegmentState> state, View<backtest::BarRecord> records,
                        View<const backtest::Segment> segments, View<const int> actions,
                        const env::MarketView& market, const env::EnvParams& params) {
    check_backtest_params(params);
    require_same_size(segments.size(), state.size(), "backtest_step (segments)");
    require_same_size(actions.size(), state.size(), "backtest_step (actions)");
    checked_int_size(state.size(), "backtest_step");
    detail::require_distinct("backtest_step", {detail::range("state", state), detail::range("records", records),
                                               detail::range("segments", segments), detail::range("actions", actions)});
    if (market.n_bars < 2) throw std::invalid_argument("ops::backtest_step: the market has < 2 bars");
    if (!state.empty()) backtest_step_impl(state, records, segments, actions, market, params);
}

void Ops::backtest_gather(View<float> states, View<const backtest::SegmentState> state,
                          const env::MarketView& market, const env::EnvParams& params) {
    check_backtest_params(params);
    require_same_size(states.size(), state.size() * static_cast<std::size_t>(params.state_dim),
                      "backtest_gather");
    checked_int_size(states.size(), "backtest_gather");
    detail::require_distinct("backtest_gather", {detail::range("states", states), detail::range("state", state)});
    if (!state.empty()) backtest_gather_impl(states, state, market, params);
}

void Ops::backtest_metrics(View<backtest::MetricsOut> out, View<long long> histogram,
                           View<const backtest::BarRecord> records,
                           View<const backtest::SegmentState> state,
                           View<const backtest::Segment> segments, const env::MarketView& market,
                           const backtest::MetricsParams& params) {
    require_same_size(out.size(), 1, "backtest_metrics (out)");
    require_same_size(histogram.size(), static_cast<std::size_t>(params.num_actions < 0 ? 0 : params.num_actions),
                      "backtest_metrics (histogram)");
    require_same_size(segments.size(), state.size(), "backtest_metrics (segments)");
    checked_int_size(records.size(), "backtest_metrics");
    if (params.num_actions < 1 || !(params.initial_equity > 0) || !(params.bars_per_year > 0))
        throw std::invalid_argument(fmt::format("ops::backtest_metrics: num_actions ({}), initial_equity "
                                                "and bars_per_year ({}) must be positive",
                                                params.num_actions, params.bars_per_year));
    detail::require_distinct("backtest_metrics", {detail::range("out", out), detail::range("histogram", histogram),
                                                  detail::range("records", records), detail::range("state", state),
                                                  detail::range("segments", segments)});
    backtest_metrics_impl(out, histogram, records, state, segments, market, params);
}

}  // namespace fh::ops
