/// @file backtest.h
/// @brief The backtest (docs/metrics.md) for ONE segment (reset, step with its per-bar record)
///        and the metrics of a whole backtest (docs/metrics.md), compiled by nvcc
///        (cuda/kernels/backtest.cu) and by g++ (src/ops/backtest/cpu.cpp), so both
///        backends run the same arithmetic. Fills and accounting are env::step_env's: nothing
///        here duplicates them.
///
///        Exactness: the env and metrics modules are compiled with --fmad=false and host code
///        with -ffp-contract=off; sums run in one fixed order. sqrt and division are correctly
///        rounded on both sides; only pow (annual_return, hence calmar) may differ by an ulp.
#pragma once

#include <cmath>
#include <cstdint>

#include "math/env.h"
#include "math/host_device.h"

namespace fh::backtest {

/// One contiguous run of bars [start, end) evaluated from flat (end - start >= 2). Its records
/// are records[offset, offset + end - start).
struct Segment {
    int start;
    int end;
    int offset;
};

/// The evaluator's state of one segment.
struct SegmentState {
    env::EnvState env;
    int bars;      ///< records written so far (1 after the reset)
    int finished;  ///< 1 once the data end or a bankruptcy stopped the segment
};

/// What happened at one bar of a segment (the bar's close marks the equity).
struct BarRecord {
    double equity;         ///< marked at this bar's close
    double fill_price;     ///< 0 without a fill in this bar
    double commission;     ///< charged for this bar's fill
    int position;          ///< contracts held at this bar's close
    int filled_contracts;  ///< signed fill executed in this bar (0: none)
    int order_type;        ///< env::OrderType of the order executed in this bar, kNoOrder: none
    int action;            ///< the action chosen at the previous close (-1 at the first bar)
};

/// Scalars of the metrics.
struct MetricsParams {
    double multiplier;      ///< currency per point per contract
    double initial_equity;  ///< every segment starts here
    double bars_per_year;   ///< annualisation
    int num_actions;        ///< action histogram size
};

/// The metrics of docs/metrics.md (the action histogram travels separately).
struct MetricsOut {
    double total_return, annual_return, sharpe, sortino, max_drawdown, calmar;
    double win_rate, profit_factor, exposure, turnover;
    long long trades, wins, steps;
    double gross_profit, gross_loss;
};

/// Starts a segment flat at seg.start at initial equity and writes its first record.
FH_HD void reset_segment(SegmentState& st, BarRecord* records, const Segment& seg, const env::EnvParams& p) {
    st = SegmentState{};
    st.env.equity = p.initial_equity;
    st.env.peak_equity = p.initial_equity;
    st.env.t = seg.start;
    st.env.start_bar = seg.start;
    st.env.end_bar = seg.end;
    st.bars = 1;
    st.finished = seg.end - seg.start < 2 ? 1 : 0;
    BarRecord r{};
    r.equity = p.initial_equity;
    r.order_type = env::kNoOrder;
    r.action = -1;
    records[seg.offset] = r;
}

/// One step of a running segment with `action` (env::step_env) and its record. The segment
/// finishes at the last bar of its run, or when step_env reports a bankruptcy (it then stops
/// trading; its equity curve ends at that bar). The episode-length truncation of training does
/// not apply: env.steps wraps at episode_length so the time features stay in their training range.
FH_HD void step_segment(SegmentState& st, BarRecord* records, const Segment& seg, int action, const env::MarketView& m,
                        const env::EnvParams& p) {
    if (st.finished) return;
    env::StepInfo info{};
    std::uint8_t done = 0;
    (void)env::step_env(st.env, action, m, p, info, done);
    if (st.env.steps >= p.episode_length) st.env.steps = 0;
    BarRecord r{};
    r.equity = st.env.equity;
    r.fill_price = info.filled_contracts != 0 ? info.fill_price : 0.0;
    r.commission = info.commission;
    r.position = st.env.position;
    r.filled_contracts = info.filled_contracts;
    r.order_type = info.filled_contracts != 0 ? info.order_type : static_cast<int>(env::kNoOrder);
    r.action = action;
    records[seg.offset + (st.env.t - seg.start)] = r;
    st.bars += 1;
    if (done == env::kTerminated || st.env.t + 1 >= seg.end) st.finished = 1;
}

FH_HD double abs_d(double x) {
    return x < 0 ? -x : x;
}

/// A trade whose |P&L| is at most this share of its traded value (the sum of |contracts| x
/// price x multiplier + commission over its fills) is break-even: neither a win nor a loss. The
/// P&L is a sum of products, so a trade that gains exactly nothing comes out as +-1e-12 of its
/// value by rounding; the tolerance keeps that noise from counting as a win or a loss.
constexpr double kBreakEvenShare = 1e-9;

/// Closed-round-trip bookkeeping of docs/metrics.md ("trades").
struct TradeBook {
    int position;
    double avg_price;
    double pnl;    ///< P&L of the open trade so far (realized - its share of commissions)
    double value;  ///< traded value of the open trade so far (the break-even scale)
    long long trades, wins;
    double gross_profit, gross_loss;
};

FH_HD void close_trade(TradeBook& b) {
    b.trades += 1;
    const double tolerance = kBreakEvenShare * b.value;
    if (b.pnl > tolerance) {
        b.wins += 1;
        b.gross_profit += b.pnl;
    } else if (b.pnl < -tolerance) {
        b.gross_loss -= b.pnl;
    }  // else break-even: counted in trades only
    b.pnl = 0.0;
    b.value = 0.0;
}

/// A fill of d contracts at `price` with `commission` (for all |d| contracts).
FH_HD void book_fill(TradeBook& b, int d, double price, double commission, double multiplier) {
    const int q = b.position;
    const int aq = q < 0 ? -q : q, ad = d < 0 ? -d : d;
    if (q == 0 || env::sign_of(q) == env::sign_of(d)) {  // opening or adding
        if (q == 0) b.pnl = 0.0, b.value = 0.0;
        b.pnl -= commission;
        b.value += ad * price * multiplier + commission;
        b.avg_price = (b.avg_price * aq + price * ad) / (aq + ad);
        b.position = q + d;
        return;
    }
    const int closed = ad < aq ? ad : aq;
    const double closing_commission = commission * closed / ad;
    b.pnl += closed * (price - b.avg_price) * env::sign_of(q) * multiplier - closing_commission;
    b.value += closed * price * multiplier + closing_commission;
    b.position = q + d;
    if (ad >= aq) {
        close_trade(b);
        b.avg_price = 0.0;
        if (ad > aq) {  // reversed: the rest opens a new trade at the fill price
            b.pnl = -(commission - closing_commission);
            b.value = (ad - aq) * price * multiplier + (commission - closing_commission);
            b.avg_price = price;
        }
    }
}

/// Every metric of docs/metrics.md over the segments, in one fixed order. records hold
/// sum(end - start) entries; state[s].bars of segment s are valid. histogram (num_actions).
FH_HD void compute_metrics(MetricsOut& out, long long* histogram, const BarRecord* records, const SegmentState* state,
                           const Segment* segs, int n_segments, const double* close, const MetricsParams& mp) {
    for (int a = 0; a < mp.num_actions; ++a) histogram[a] = 0;
    // Pass 1: returns, compounded curve, exposure, turnover, trades.
    long long n = 0, exposed = 0;
    double sum = 0.0, growth = 1.0, peak = 1.0, max_dd = 0.0, traded = 0.0;
    TradeBook book{};
    for (int s = 0; s < n_segments; ++s) {
        const BarRecord* r = records + segs[s].offset;
        const int bars = state[s].bars;
        book.position = 0;
        book.avg_price = 0.0;
        book.pnl = 0.0;
        book.value = 0.0;
        for (int i = 1; i < bars; ++i) {
            const double ret = r[i].equity / r[i - 1].equity - 1.0;
            n += 1;
            sum += ret;
            growth = growth * (1.0 + ret);
            if (growth > peak) peak = growth;
            const double dd = (peak - growth) / peak;
            if (dd > max_dd) max_dd = dd;
            if (r[i].position != 0) exposed += 1;
            if (r[i].action >= 0 && r[i].action < mp.num_actions) histogram[r[i].action] += 1;
            if (r[i].filled_contracts != 0) {
                const int ad = r[i].filled_contracts < 0 ? -r[i].filled_contracts : r[i].filled_contracts;
                traded += ad * r[i].fill_price * mp.multiplier;
                book_fill(book, r[i].filled_contracts, r[i].fill_price, r[i].commission, mp.multiplier);
            }
        }
        if (book.position != 0) {  // still open at the segment end: closed at the last close
            const int last_bar = segs[s].start + bars - 1;
            book.pnl += book.position * (close[last_bar] - book.avg_price) * mp.multiplier;
            const int open = book.position < 0 ? -book.position : book.position;
            book.value += open * close[last_bar] * mp.multiplier;
            close_trade(book);
        }
    }
    out = MetricsOut{};
    out.steps = n;
    out.trades = book.trades;
    out.wins = book.wins;
    out.gross_profit = book.gross_profit;
    out.gross_loss = book.gross_loss;
    if (n == 0) return;
    // Pass 2: dispersion around the mean.
    const double mean = sum / n;
    double sq = 0.0, down = 0.0;
    for (int s = 0; s < n_segments; ++s) {
        const BarRecord* r = records + segs[s].offset;
        for (int i = 1; i < state[s].bars; ++i) {
            const double ret = r[i].equity / r[i - 1].equity - 1.0;
            sq += (ret - mean) * (ret - mean);
            if (ret < 0) down += ret * ret;
        }
    }
    const double std_dev = n > 1 ? sqrt(sq / (n - 1)) : 0.0;
    const double down_dev = sqrt(down / n);
    const double annual = sqrt(mp.bars_per_year);
    out.total_return = growth - 1.0;
    out.annual_return = growth > 0 ? pow(growth, mp.bars_per_year / n) - 1.0 : -1.0;
    out.sharpe = std_dev > 0 ? mean / std_dev * annual : 0.0;
    // No downside (no negative return) or no drawdown: +infinity when the strategy gained (as
    // profit_factor without a loss), 0 when it did not (all returns 0). A losing run always has
    // both a downside and a drawdown, so it can never score +infinity.
    out.sortino = down_dev > 0 ? mean / down_dev * annual : mean > 0 ? HUGE_VAL : 0.0;
    out.max_drawdown = max_dd;
    out.calmar = max_dd > 0 ? out.annual_return / max_dd : out.annual_return > 0 ? HUGE_VAL : 0.0;
    out.win_rate = book.trades > 0 ? static_cast<double>(book.wins) / book.trades : 0.0;
    out.profit_factor = book.gross_loss > 0     ? book.gross_profit / book.gross_loss
                        : book.gross_profit > 0 ? HUGE_VAL
                                                : 0.0;
    out.exposure = static_cast<double>(exposed) / n;
    out.turnover = traded / mp.initial_equity * mp.bars_per_year / n;
}

}  // namespace fh::backtest
