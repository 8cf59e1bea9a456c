/// @file walk_forward.hpp
/// @brief `foxhunt-train walk-forward`: K folds trained in time order, each an ordinary run
///        directory (walk_forward.fold = k), then their test blocks stitched into one out-of-sample
///        curve with its metrics, intervals and buy-and-hold's (docs/walk-forward.md).
#pragma once

#include <string>
#include <vector>

#include "config/profile.hpp"

namespace fh::run {

/// Trains the folds of `profile` (walk_forward.folds >= 2) into `<run.output_dir>/<run name>/fold-k`
/// (fold k with walk_forward.fold = k; an existing fold is skipped when finished and resumed when
/// not, so a walk-forward interrupted or killed continues where it stopped), then writes
/// walk_forward.json, stitched_equity.csv and report.html there. Returns the directory.
/// Throws UsageError (exit 2) for walk_forward.folds < 2 and folds too short (data/walk_forward.hpp).
std::string walk_forward(const config::Profile& profile, const std::vector<std::string>& overrides, bool force);

}  // namespace fh::run
