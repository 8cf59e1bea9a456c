/// @file env.h
/// @brief The futures trading environment (docs/environment.md) for ONE environment: action decoding,
///        fills, commission, mark-to-market accounting, reward, termination, reset and the
///        portfolio features. Compiled by nvcc (cuda/kernels/env.cu, one thread per env)
///        and by g++ (src/ops/env/cpu.cpp, a loop over envs), so both backends run the same arithmetic.
///        docs/environment.md states the rules with a worked example.
///
///        Bit-identical results on both backends: all accounting is in double, the kernel module
///        is compiled with --fmad=false and host code with -ffp-contract=off (no fused
///        multiply-adds on either side), and random draws come from math/rng.h.
#pragma once

#include <cstdint>

#include "math/rng.h"
#include "math/host_device.h"

namespace fh::env {

/// Floats per environment in the portfolio buffer (a layout constant; the first
/// kPortfolioFeatures are the observation's portfolio features, the rest are reserved).
constexpr int PORTFOLIO_STRIDE = 20;
/// Portfolio features in the observation (position, unrealized P&L, equity change, drawdown,
/// time in position, fees paid, time left, last fill).
constexpr int kPortfolioFeatures = 8;

/// Scalars of the environment, from the profile's [instrument], [env] and [experience] tables.
/// Passed to kernels by value.
struct EnvParams {
    double multiplier;           ///< currency per point per contract
    double tick_size;            ///< price increment
    double commission;           ///< per contract per side
    double slippage_ticks;       ///< market orders fill this many ticks against the trader
    double initial_equity;       ///< equity at every episode start
    double reward_scale;         ///< reward = equity change / initial_equity * reward_scale - ...
    double drawdown_penalty;     ///< ... - drawdown_penalty * increase of drawdown (fraction)
    double bankruptcy_fraction;  ///< episode terminates when equity < this * initial_equity
    double limit_offset_ticks;   ///< urgency 1: passive limit this many ticks from the close
    double limit_atr_mult;       ///< urgency 2: far limit this many ATRs from the close
    std::uint64_t seed;          ///< run seed (episode starts)
    int max_contracts;           ///< |target position| at the extreme level
    int position_levels;         ///< L, odd: targets -(L-1)/2 .. +(L-1)/2 scaled to max_contracts
    int urgency_levels;          ///< 1..3: market, passive limit, far limit
    int episode_length;          ///< gpu_timesteps_per_episode
    int market_dim;              ///< market features per bar
    int state_dim;               ///< market_dim + kPortfolioFeatures
};

/// Device-resident market of one split. Pointers to device memory on CUDA, host memory on CPU.
struct MarketView {
    const double* open;     ///< (n_bars)
    const double* high;     ///< (n_bars)
    const double* low;      ///< (n_bars)
    const double* close;    ///< (n_bars)
    const double* atr;      ///< (n_bars) ATR(14) in price units
    const float* features;  ///< (n_bars, market_dim) normalised
    const int* starts;      ///< (n_starts) bars where an episode may start
    const int* ends;        ///< (n_starts) exclusive end of the bars usable from that start
    int n_starts;
    int n_bars;
};

/// The state of one environment. Accounting in double.
struct EnvState {
    double equity;           ///< marked to market at close(t)
    double peak_equity;      ///< high-water mark of this episode
    double avg_entry_price;  ///< average price of the open position (0 when flat)
    double realized_pnl;     ///< realized P&L of this episode
    double fees;             ///< commission paid in this episode
    double last_fill_price;  ///< price of the last fill (0 before the first)
    int t;                   ///< the bar whose close the agent sees
    int end_bar;             ///< exclusive end of the bars usable in this episode
    int start_bar;           ///< bar the episode started at
    int steps;               ///< steps taken in this episode
    int position;            ///< contracts held, signed
    int bars_in_position;    ///< bars since the position was opened (0 when flat)
    int last_fill_side;      ///< +1 bought, -1 sold, 0 no fill on the last step
    std::uint32_t episode;   ///< episodes started by this environment (its RNG counter)
};

/// Order types as recorded in StepInfo.
enum OrderType : int { kNoOrder = -1, kMarket = 0, kPassiveLimit = 1, kFarLimit = 2 };

/// Done flags written by a step.
enum DoneFlag : std::uint8_t {
    kRunning = 0,
    kTerminated = 1,  ///< bankrupt: a true terminal state (no bootstrapping)
    kTruncated = 2,   ///< episode length reached or no next bar: bootstrapping continues
};

/// What happened in one step (for tests, trade logs and the backtest).
struct StepInfo {
    double fill_price;     ///< 0 without a fill
    double commission;     ///< charged this step
    double equity;         ///< after the step, marked at close(t+1)
    int filled_contracts;  ///< signed; 0 when no order or not filled
    int order_type;        ///< OrderType of the order sent (kNoOrder when target == position)
    int bar;               ///< the bar the order executed in (t+1)
    int target_position;   ///< the position the action asked for
};

FH_HD int sign_of(int x) {
    return (x > 0) - (x < 0);
}

/// Target contracts of a position level: k = level - (L-1)/2 scaled so that the extreme levels
/// hold max_contracts, rounded half away from zero (exact integer arithmetic).
FH_HD int target_contracts(int level, const EnvParams& p) {
    const int half = (p.position_levels - 1) / 2;
    if (half == 0) return 0;
    const int k = level - half;
    const int num = 2 * k * p.max_contracts;
    const int den = 2 * half;
    return (num + sign_of(num) * half) / den;
}

/// Starts episode number s.episode of environment `env`: a start bar drawn uniformly from the
/// split's valid starts, flat, at initial equity.
FH_HD void reset_env(EnvState& s, int env, const MarketView& m, const EnvParams& p) {
    const rng::U32x4 r = rng::draw(p.seed, rng::Purpose::episode_start, static_cast<std::uint32_t>(env), s.episode);
    const int i = static_cast<int>(rng::below(r.v[0], static_cast<std::uint32_t>(m.n_starts)));
    const std::uint32_t next_episode = s.episode + 1;
    s = EnvState{};
    s.equity = p.initial_equity;
    s.peak_equity = p.initial_equity;
    s.t = m.starts[i];
    s.start_bar = m.starts[i];
    s.end_bar = m.ends[i];
    s.episode = next_episode;
}

/// Column c of an observation at bar t: the bar's market features (features (n_bars,
/// market_dim)), then the portfolio row's values (portfolio[c - market_dim]). The layout of every
/// state the environments, the DQN step and PPO's rebuilt terminal observations write.
FH_HD float observation_value(const float* features, int t, int market_dim, const float* portfolio, int c) {
    return c < market_dim ? features[static_cast<long long>(t) * market_dim + c] : portfolio[c - market_dim];
}

/// Writes the kPortfolioFeatures observation features of s into row[0..8) and zeroes the rest
/// of the PORTFOLIO_STRIDE row, with close_t = close(s.t) (read only for an open position).
/// Money is in percent of initial equity.
FH_HD void portfolio_features_at(const EnvState& s, double close_t, const EnvParams& p, float* row) {
    const double unrealized = s.position == 0 ? 0.0 : s.position * (close_t - s.avg_entry_price) * p.multiplier;
    const double pct = 100.0 / p.initial_equity;
    const double drawdown = (s.peak_equity - s.equity) / s.peak_equity;
    row[0] = static_cast<float>(static_cast<double>(s.position) / p.max_contracts);
    row[1] = static_cast<float>(unrealized * pct);
    row[2] = static_cast<float>((s.equity - p.initial_equity) * pct);
    row[3] = static_cast<float>(drawdown * 100.0);
    row[4] = static_cast<float>(static_cast<double>(s.bars_in_position) / p.episode_length);
    row[5] = static_cast<float>(s.fees * pct);
    row[6] = static_cast<float>(static_cast<double>(p.episode_length - s.steps) / p.episode_length);
    row[7] = static_cast<float>(s.last_fill_side);
    for (int k = kPortfolioFeatures; k < PORTFOLIO_STRIDE; ++k) row[k] = 0.0f;
}
/// portfolio_features_at with close(s.t) read from the market.
FH_HD void portfolio_features(const EnvState& s, const MarketView& m, const EnvParams& p, float* row) {
    portfolio_features_at(s, s.position == 0 ? 0.0 : m.close[s.t], p, row);
}

/// The prices one step reads: close(t0), bar t0 + 1's open, high, low and close, ATR(t0). Loaded
/// ahead of the step by a kernel that wants them in flight with its other reads.
struct StepPrices {
    double c0, o1, h1, l1, c1, atr0;
};
FH_HD StepPrices step_prices(const MarketView& m, int t0) {
    return StepPrices{m.close[t0], m.open[t0 + 1], m.high[t0 + 1], m.low[t0 + 1], m.close[t0 + 1], m.atr[t0]};
}

/// One step: the agent saw close(t) and chose `action` = level * urgency_levels + urgency; the
/// order executes during bar t+1 (rules in docs/environment.md). Updates s, writes `info`,
/// returns the reward and sets `done` to a DoneFlag. `bar` = step_prices(market, s.t).
FH_HD float step_env_at(EnvState& s, int action, const StepPrices& bar, const EnvParams& p, StepInfo& info,
                        std::uint8_t& done) {
    const int level = action / p.urgency_levels;
    const int urgency = action % p.urgency_levels;
    const int target = target_contracts(level, p);
    const int q = s.position;
    const int delta = target - q;
    const int t0 = s.t;
    const int t1 = t0 + 1;
    const double c0 = bar.c0;
    const double o1 = bar.o1, h1 = bar.h1, l1 = bar.l1, c1 = bar.c1;

    // ---- the order and its fill -----------------------------------------------------------
    bool filled = false;
    double price = 0.0;
    info.order_type = kNoOrder;
    if (delta != 0) {
        info.order_type = urgency;
        if (urgency == kMarket) {
            price = o1 + sign_of(delta) * (p.slippage_ticks * p.tick_size);
            filled = true;
        } else {
            const double offset =
                urgency == kPassiveLimit ? p.limit_offset_ticks * p.tick_size : p.limit_atr_mult * bar.atr0;
            if (delta > 0) {  // buy limit below the close: fills if the bar trades down to it
                const double limit = c0 - offset;
                if (l1 <= limit) {
                    filled = true;
                    price = limit < o1 ? limit : o1;  // a gap down through the limit fills at the open
                }
            } else {  // sell limit above the close
                const double limit = c0 + offset;
                if (h1 >= limit) {
                    filled = true;
                    price = limit > o1 ? limit : o1;
                }
            }
        }
    }
    const int fill_qty = filled ? delta : 0;
    const double commission = filled ? (delta < 0 ? -delta : delta) * p.commission : 0.0;

    // ---- mark to market at close(t+1) -----------------------------------------------------
    // The held position earns c1 - c0; the filled contracts earn c1 - fill price.
    const double pnl = (q * (c1 - c0) + fill_qty * (c1 - price)) * p.multiplier;
    const double equity0 = s.equity;
    const double drawdown0 = (s.peak_equity - equity0) / s.peak_equity;
    s.equity = equity0 + pnl - commission;
    if (s.equity > s.peak_equity) s.peak_equity = s.equity;
    const double drawdown1 = (s.peak_equity - s.equity) / s.peak_equity;

    // ---- position bookkeeping (realized P&L against the average entry price) ---------------
    if (filled) {
        const int new_q = q + delta;
        if (q == 0 || sign_of(q) == sign_of(delta)) {  // opening or adding
            const int aq = q < 0 ? -q : q, ad = delta < 0 ? -delta : delta;
            s.avg_entry_price = (s.avg_entry_price * aq + price * ad) / (aq + ad);
        } else {  // reducing, closing or reversing
            const int aq = q < 0 ? -q : q, ad = delta < 0 ? -delta : delta;
            const int closed = ad < aq ? ad : aq;
            s.realized_pnl += closed * (price - s.avg_entry_price) * sign_of(q) * p.multiplier;
            if (new_q == 0)
                s.avg_entry_price = 0.0;
            else if (ad > aq)
                s.avg_entry_price = price;  // reversed: the rest opens at the fill
        }
        s.fees += commission;
        s.last_fill_price = price;
        s.bars_in_position = new_q == 0 ? 0 : (q == 0 || sign_of(q) != sign_of(new_q)) ? 1 : s.bars_in_position + 1;
        s.position = new_q;
    } else if (q != 0) {
        s.bars_in_position += 1;
    }
    s.last_fill_side = filled ? sign_of(delta) : 0;
    s.t = t1;
    s.steps += 1;

    // ---- termination ----------------------------------------------------------------------
    if (s.equity < p.bankruptcy_fraction * p.initial_equity)
        done = kTerminated;
    else if (s.steps >= p.episode_length || t1 + 1 >= s.end_bar)
        done = kTruncated;
    else
        done = kRunning;

    info.fill_price = price;
    info.commission = commission;
    info.equity = s.equity;
    info.filled_contracts = fill_qty;
    info.bar = t1;
    info.target_position = target;

    const double increase = drawdown1 > drawdown0 ? drawdown1 - drawdown0 : 0.0;
    const double reward = (s.equity - equity0) / p.initial_equity * p.reward_scale - p.drawdown_penalty * increase;
    return static_cast<float>(reward);
}
/// step_env_at with the step's prices read from the market.
FH_HD float step_env(EnvState& s, int action, const MarketView& m, const EnvParams& p, StepInfo& info,
                     std::uint8_t& done) {
    return step_env_at(s, action, step_prices(m, s.t), p, info, done);
}

/// A uniformly random action for environment `env` at global step `step`.
FH_HD int random_action(std::uint64_t seed, int env, std::uint64_t step, int num_actions) {
    const rng::U32x4 r = rng::draw(seed, rng::Purpose::random_action, static_cast<std::uint32_t>(env), step);
    return static_cast<int>(rng::below(r.v[0], static_cast<std::uint32_t>(num_actions)));
}

}  // namespace fh::env
