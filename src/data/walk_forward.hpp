/// @file walk_forward.hpp
/// @brief The folds of a walk-forward (rolling-origin) evaluation (docs/walk-forward.md): where
///        each fold's training window, validation block and test block lie, the refusals of folds
///        too short to train or trade, and cutting the data to one fold.
#pragma once

#include <cstddef>
#include <vector>

#include "data/market_data.hpp"
#include "data/splits.hpp"

namespace fh::data {

struct Fold {
    SplitRange train, val, test;
};

/// The K folds over n bars: the ordinary splits' boundaries [0, a) train, [a, b) validation,
/// [b, c) test (make_splits); the test span [b, c) cut into K blocks t_k = b + (c - b) k / K;
/// fold k tests on [t_k, t_{k+1}), validates on the (b - a) bars before t_k, and trains on the bars
/// before that: from bar 0 (expanding), or the a bars just before (sliding). Fold 0 has the
/// ordinary train and validation splits. The test blocks never overlap and cover [b, c).
std::vector<Fold> walk_forward_folds(std::size_t n, const SplitFractions& fractions, int folds, bool sliding);

/// Refuses (UsageError, exit 2, naming the key) folds that leave a test or validation block
/// shorter than the feature warm-up plus 2 bars (a decision and its execution past it), or a
/// training window shorter than the warm-up plus one episode.
void check_walk_forward_folds(const std::vector<Fold>& folds, std::size_t warmup, std::size_t episode_length,
                              int folds_key_value);

/// Cuts md (bars, features of `dim` per bar, ATR) after bar `end` (the bars after a fold's test
/// block are dropped: nothing of the fold can see them).
void truncate_bars(MarketData& md, std::vector<float>& features, int dim, std::size_t end);

}  // namespace fh::data
