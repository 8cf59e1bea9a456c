/// @file market_fixture.hpp
/// @brief Small hand-made or random-walk markets for environment tests (independent of the data
///        layer's loaders, so env tests pin only the environment).
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "math/env.h"
#include "data/market_data.hpp"
#include "env/vec_env.hpp"

namespace fh::test {

struct Bar {
    double open, high, low, close;
};

/// A MarketData over `bars` with `market_dim` features per bar (feature c of bar t = t + c/100,
/// so a gathered row names its bar), constant ATR, no warm-up, everything in the train split.
inline data::MarketData make_market(const std::vector<Bar>& bars, int market_dim = 3, double atr = 2.0) {
    data::MarketData m;
    for (std::size_t t = 0; t < bars.size(); ++t) {
        m.bars.time.push_back(1'600'000'000 + static_cast<std::int64_t>(t) * 300);
        m.bars.open.push_back(bars[t].open);
        m.bars.high.push_back(bars[t].high);
        m.bars.low.push_back(bars[t].low);
        m.bars.close.push_back(bars[t].close);
        m.bars.volume.push_back(0.0);
        for (int c = 0; c < market_dim; ++c) m.features.push_back(static_cast<float>(t) + c / 100.0f);
        m.atr.push_back(atr);
    }
    m.bars.segment_names = {"test"};
    m.market_dim = market_dim;
    m.train = {0, bars.size()};
    m.val = {bars.size(), bars.size()};
    m.test = {bars.size(), bars.size()};
    m.source = "test";
    return m;
}

/// A seeded random walk with consistent OHLC (low <= open, close <= high), optional segments.
inline data::MarketData random_walk_market(std::size_t n, std::uint64_t seed, int market_dim = 42,
                                           std::vector<std::size_t> segment_starts = {0}) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> step(0.0, 1.0);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    std::vector<Bar> bars;
    double price = 4000.0;
    for (std::size_t t = 0; t < n; ++t) {
        const double open = price + step(rng) * 0.5;
        const double close = open + step(rng) * 2.0;
        const double high = std::max(open, close) + u(rng) * 1.5;
        const double low = std::min(open, close) - u(rng) * 1.5;
        bars.push_back({open, high, low, close});
        price = close;
    }
    data::MarketData m = make_market(bars, market_dim, 3.0);
    std::normal_distribution<float> f(0.f, 1.f);
    for (auto& x : m.features) x = f(rng);
    for (std::size_t t = 0; t < n; ++t) m.atr[t] = 1.0 + u(rng) * 4.0;
    m.bars.segment_starts = segment_starts;
    m.bars.segment_names.assign(segment_starts.size(), "segment");
    m.train = {0, n * 6 / 10};
    m.val = {n * 6 / 10, n * 8 / 10};
    m.test = {n * 8 / 10, n};
    m.warmup_bars = 5;
    return m;
}

/// E-mini-like parameters: $50 a point, 0.25 tick, $2 a side, 1 tick slippage.
inline env::EnvParams es_params(int market_dim, int position_levels = 3, int max_contracts = 2) {
    env::EnvParams p{};
    p.multiplier = 50.0;
    p.tick_size = 0.25;
    p.commission = 2.0;
    p.slippage_ticks = 1.0;
    p.initial_equity = 100000.0;
    p.reward_scale = 1.0;
    p.drawdown_penalty = 0.0;
    p.bankruptcy_fraction = 0.5;
    p.limit_offset_ticks = 2.0;
    p.limit_atr_mult = 0.5;
    p.seed = 1234;
    p.max_contracts = max_contracts;
    p.position_levels = position_levels;
    p.urgency_levels = 3;
    p.episode_length = 50;
    p.market_dim = market_dim;
    p.state_dim = market_dim + env::kPortfolioFeatures;
    return p;
}

/// A small random-walk market on a device with E-mini-like parameters and short episodes (20
/// bars), for tests that step environments.
struct SmallMarket {
    data::MarketData market;
    std::unique_ptr<env::DeviceMarket> device_market;
    env::EnvParams params;
};
inline SmallMarket small_market(ops::Device& ops) {
    SmallMarket f;
    f.market = random_walk_market(2000, 31, 6);
    f.device_market = std::make_unique<env::DeviceMarket>(ops, f.market);
    f.params = es_params(6, 5, 3);
    f.params.episode_length = 20;
    return f;
}

}  // namespace fh::test
