/// @file bootstrap.cpp
#include "backtest/bootstrap.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "math/rng.h"
#include "util/errors.hpp"

namespace fh::backtest {

std::int64_t automatic_block_length(std::size_t n) {
    if (n <= 1) return 1;
    auto b = static_cast<std::int64_t>(std::ceil(std::cbrt(static_cast<double>(n))));
    while (b > 1 && static_cast<double>((b - 1) * (b - 1) * (b - 1)) >= static_cast<double>(n)) --b;  // exact for cubes
    while (static_cast<double>(b) * static_cast<double>(b) * static_cast<double>(b) < static_cast<double>(n)) ++b;
    return b;
}

void require_block_fits(std::int64_t block, std::size_t n) {
    if (block > 0 && static_cast<std::size_t>(block) > n)
        throw UsageError(
            fmt::format("eval.bootstrap_block = {} is longer than the backtest's series of {} returns: use "
                        "at most {}, or 0 (automatic: ceil(n^(1/3)))",
                        block, n, n));
}

namespace {

/// Calls visit(i) for each index of resample `resample`, in order.
template <class Visit>
void for_each_index(std::size_t n, std::int64_t block, std::uint64_t seed, std::uint32_t stream, Visit visit) {
    const double log_stay = block > 1 ? std::log(1.0 - 1.0 / static_cast<double>(block)) : 0.0;
    std::size_t done = 0;
    for (std::uint64_t j = 0; done < n; ++j) {
        const rng::U32x4 w = rng::draw(seed, rng::Purpose::bootstrap, stream, j);
        std::size_t i = rng::below(w.v[0], static_cast<std::uint32_t>(n));
        std::size_t length = 1;
        if (block > 1) {
            const double u = rng::unit_double(w.v[2], w.v[3]);
            const double extra = std::floor(std::log(1.0 - u) / log_stay);
            length += extra < static_cast<double>(n) ? static_cast<std::size_t>(extra) : n;
        }
        for (std::size_t k = 0; k < length && done < n; ++k, ++done) {
            visit(i);
            if (++i == n) i = 0;
        }
    }
}

}  // namespace

std::vector<std::size_t> bootstrap_indices(std::size_t n, std::int64_t block, std::uint64_t seed, int resample) {
    if (n == 0 || n > 0xffffffffu || block < 1)
        throw std::invalid_argument("bootstrap_indices: n in [1, 2^32), block >= 1");
    std::vector<std::size_t> out;
    out.reserve(n);
    for_each_index(n, block, seed, static_cast<std::uint32_t>(resample), [&](std::size_t i) { out.push_back(i); });
    return out;
}

double percentile(const std::vector<double>& sorted, double q) {
    if (sorted.empty()) throw std::invalid_argument("percentile: no values");
    const double h = static_cast<double>(sorted.size() - 1) * q;
    const auto f = static_cast<std::size_t>(std::floor(h));
    if (f + 1 >= sorted.size()) return sorted.back();
    return sorted[f] + (h - static_cast<double>(f)) * (sorted[f + 1] - sorted[f]);
}

double annualised_sharpe(const std::vector<double>& r, double bars_per_year) {
    if (r.size() < 2) return 0.0;
    double mean = 0;
    for (double x : r) mean += x;
    mean /= static_cast<double>(r.size());
    double ss = 0;
    for (double x : r) ss += (x - mean) * (x - mean);
    const double var = ss / static_cast<double>(r.size() - 1);
    return var > 0 ? mean / std::sqrt(var) * std::sqrt(bars_per_year) : 0.0;
}

BootstrapResult block_bootstrap(const std::vector<double>& strategy, const std::vector<double>& strategy_paired,
                                const std::vector<double>& hold_paired, double bars_per_year,
                                const BootstrapOptions& o) {
    if (strategy.size() < 2 || strategy_paired.size() < 2 || strategy_paired.size() != hold_paired.size())
        throw std::invalid_argument("block_bootstrap: at least 2 returns, paired series of equal length");
    if (o.resamples < 2 || !(o.confidence > 0 && o.confidence < 1))
        throw std::invalid_argument("block_bootstrap: resamples >= 2, confidence in (0, 1)");
    const std::size_t shortest = std::min(strategy.size(), strategy_paired.size());
    if (!o.cut_block_to_series) require_block_fits(o.block, shortest);
    BootstrapResult r;
    r.resamples = o.resamples;
    r.block_automatic = o.block == 0;
    r.seed = o.seed;
    r.confidence = o.confidence;
    r.bars = strategy.size();
    r.paired_bars = strategy_paired.size();
    r.block_cut = !r.block_automatic && static_cast<std::size_t>(o.block) > shortest;
    const std::int64_t fixed = std::min(o.block, static_cast<std::int64_t>(shortest));
    r.block = r.block_automatic ? automatic_block_length(strategy.size()) : fixed;
    const std::int64_t paired_block = r.block_automatic ? automatic_block_length(strategy_paired.size()) : fixed;
    std::vector<double> sharpe(static_cast<std::size_t>(o.resamples)), total(sharpe.size()), diff(sharpe.size());
    std::vector<double> x, y;  // one resample of a series (and of its pair)
    for (int b = 0; b < o.resamples; ++b) {
        const auto at = static_cast<std::size_t>(b);
        x.clear();
        for_each_index(strategy.size(), r.block, o.seed, static_cast<std::uint32_t>(b),
                       [&](std::size_t i) { x.push_back(strategy[i]); });
        sharpe[at] = annualised_sharpe(x, bars_per_year);
        double growth = 1;
        for (double v : x) growth *= 1 + v;
        total[at] = growth - 1;
        x.clear();
        y.clear();
        for_each_index(strategy_paired.size(), paired_block, o.seed, static_cast<std::uint32_t>(o.resamples + b),
                       [&](std::size_t i) {
                           x.push_back(strategy_paired[i]);
                           y.push_back(hold_paired[i]);
                       });
        diff[at] = annualised_sharpe(x, bars_per_year) - annualised_sharpe(y, bars_per_year);
    }
    const double lo = (1 - o.confidence) / 2, hi = 1 - lo;
    for (auto* v : {&sharpe, &total, &diff}) std::sort(v->begin(), v->end());
    r.sharpe = {percentile(sharpe, lo), percentile(sharpe, hi)};
    r.total_return = {percentile(total, lo), percentile(total, hi)};
    r.sharpe_difference = {percentile(diff, lo), percentile(diff, hi)};
    return r;
}

}  // namespace fh::backtest
