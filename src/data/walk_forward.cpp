/// @file walk_forward.cpp
#include "data/walk_forward.hpp"

#include <fmt/format.h>

#include <stdexcept>

#include "util/errors.hpp"

namespace fh::data {

std::vector<Fold> walk_forward_folds(std::size_t n, const SplitFractions& f, int folds, bool sliding) {
    if (folds < 2) throw std::invalid_argument("walk_forward_folds: at least 2 folds");
    MarketData md;
    md.bars.close.resize(n);  // make_splits reads the bar count only
    make_splits(md, f);
    const std::size_t a = md.train.end, b = md.val.end, c = md.test.end;
    const std::size_t val = b - a, span = c - b;
    std::vector<Fold> out;
    for (int k = 0; k < folds; ++k) {
        const std::size_t begin = b + span * static_cast<std::size_t>(k) / static_cast<std::size_t>(folds);
        const std::size_t end = b + span * static_cast<std::size_t>(k + 1) / static_cast<std::size_t>(folds);
        out.push_back(Fold{
            .train = {sliding ? begin - val - a : 0, begin - val}, .val = {begin - val, begin}, .test = {begin, end}});
    }
    return out;
}

void check_walk_forward_folds(const std::vector<Fold>& folds, std::size_t warmup, std::size_t episode_length, int k) {
    for (std::size_t i = 0; i < folds.size(); ++i) {
        const Fold& f = folds[i];
        if (f.test.size() < warmup + 2)
            throw UsageError(fmt::format(
                "walk_forward.folds = {} leaves fold {} a test block of {} bars [{}, {}), shorter than the feature "
                "warm-up ({} bars) plus 2: use fewer folds, a larger data.test_fraction or more data",
                k, i, f.test.size(), f.test.begin, f.test.end, warmup));
        if (f.val.size() < warmup + 2)
            throw UsageError(fmt::format(
                "data.val_fraction leaves the walk-forward's folds a validation block of {} bars, shorter than the "
                "feature warm-up ({} bars) plus 2: raise data.val_fraction or use more data",
                f.val.size(), warmup));
        if (f.train.size() < warmup + episode_length)
            throw UsageError(fmt::format(
                "data.train_fraction leaves fold {} of walk_forward.folds = {} a training window of {} bars [{}, {}), "
                "shorter than the feature warm-up ({} bars) plus one episode "
                "(experience.gpu_timesteps_per_episode = {}): raise data.train_fraction or use more data",
                i, k, f.train.size(), f.train.begin, f.train.end, warmup, episode_length));
    }
}

void truncate_bars(MarketData& md, std::vector<float>& features, int dim, std::size_t end) {
    BarSeries& b = md.bars;
    if (end >= b.size()) return;
    for (auto* v : {&b.open, &b.high, &b.low, &b.close, &b.volume})
        if (v->size() > end) v->resize(end);
    b.time.resize(end);
    std::size_t keep = 0;
    while (keep < b.segment_starts.size() && b.segment_starts[keep] < end) ++keep;
    b.segment_starts.resize(keep);
    if (b.segment_names.size() > keep) b.segment_names.resize(keep);
    if (md.atr.size() > end) md.atr.resize(end);
    features.resize(end * static_cast<std::size_t>(dim));
}

}  // namespace fh::data
