/// @file audit.hpp
/// @brief The look-ahead audit (`foxhunt-train audit`, docs/look-ahead-audit.md): at several cuts
///        (random ones and the split and contract boundaries), every bar after the cut is
///        replaced and the data pipeline (features, normalisation statistics) and the policy's
///        greedy decisions are recomputed through the code paths a run uses (data::load_market,
///        backtest::backtest); whatever changed at or before the cut used a later bar.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/profile.hpp"
#include "data/market_data.hpp"
#include "backtest/backtest.hpp"
#include "io/json.hpp"

namespace fh::run {

/// The command line's choices of cuts.
struct AuditOptions {
    int random_cuts = 5;         ///< --cuts
    std::uint64_t cut_seed = 1;  ///< --cut-seed: the random cuts and the replacement bars
};

/// A feature column whose value at a bar at or before the cut changed ("atr": the ATR(14) the
/// environment prices limit orders with, column -1).
struct FeatureChange {
    std::string feature;
    int column = 0;
    std::size_t bars_changed = 0;  ///< bars at or before the cut where it changed
    std::size_t first_bar = 0;
    double before = 0, after = 0;  ///< its value at first_bar, then and with the bars replaced
};

/// A feature whose normalisation statistics changed although every replaced bar lies after the
/// training split.
struct StatisticChange {
    std::string feature;
    int column = 0;
    double mean_before = 0, mean_after = 0, stddev_before = 0, stddev_after = 0;
};

/// Decisions at or before the cut that changed.
struct DecisionChange {
    std::size_t bars_changed = 0;
    std::size_t first_bar = 0;
    int before = 0, after = 0;  ///< the action chosen at first_bar's close (-1: none)
};

struct AuditCut {
    std::size_t bar = 0;  ///< the last bar kept: every later bar is replaced
    std::string kind;     ///< "random", "last training bar", "last validation bar", "end of contract <file>"
    std::vector<FeatureChange> features;
    bool statistics_checked = false;  ///< the cut is at or after the training split's last bar
    std::vector<StatisticChange> statistics;
    std::size_t decisions_checked = 0;  ///< decisions at or before the cut compared
    std::optional<DecisionChange> decisions;
    bool clean() const noexcept { return features.empty() && statistics.empty() && !decisions; }
};

struct AuditReport {
    std::string source;      ///< the run directory or checkpoint, or "profile <name>"
    std::string checkpoint;  ///< the checkpoint audited ("" for a profile's initial policy)
    std::string trainer, data, device;
    std::size_t bars = 0, warmup = 0;
    data::SplitRange train, val, test;
    std::vector<std::string> feature_names;
    std::vector<std::int64_t> time;  ///< the bars' timestamps (the findings' times)
    AuditOptions options;
    std::vector<AuditCut> cuts;
    bool clean() const noexcept;
};

/// The audit of a run directory's policy (checkpoints/best.safetensors, else last) or of a
/// checkpoint file, on its profile's data with `overrides` (eval's keys only: run::checkpoint_profile),
/// normalised with the checkpoint's statistics as `eval` does.
AuditReport audit_checkpoint(const std::string& source, const std::vector<std::string>& overrides,
                             const AuditOptions& options);

/// The audit of a profile's policy as its trainer initialises it (no run needed), on the profile's
/// data normalised with its training split's statistics. `force` as train's (the instrument check).
AuditReport audit_profile(const config::Profile& profile, const std::string& name, bool force,
                          const AuditOptions& options);

/// The findings as text, one line per cut and a verdict.
std::string audit_text(const AuditReport& report);
/// The findings as one JSON object (docs/look-ahead-audit.md).
io::json::Value audit_value(const AuditReport& report);

// ---- the audit's parts (tested one by one) ----------------------------------------------

/// The cuts of `md`: the split boundaries (the last training and validation bars), up to 8 contract
/// boundaries (the last bar of a contract before the next), and `random_cuts` bars drawn
/// uniformly from [warm-up, bars - 2] with Philox(cut_seed, Purpose::audit, stream 0, counter k).
/// Sorted, each once (kinds joined with ", ").
std::vector<std::pair<std::size_t, std::string>> audit_cuts(const data::MarketData& md, const AuditOptions& options);

/// Replaces every bar after `cut`: new prices around the old ones (a random level shift of up
/// to 3 typical returns, open and close redrawn inside the range, high and low pushed out),
/// volumes rescaled, and the timestamps moved later by one to two median spacings (still strictly
/// increasing). Draws from Philox(seed, Purpose::audit, stream 1 + cut, counter 2 bar (+1)).
void replace_bars_after(data::BarSeries& bars, std::size_t cut, std::uint64_t seed);

/// The decision at each bar of a backtest over every bar (-1 where none was taken): the action
/// chosen at bar t's close is the record of bar t + 1 (backtest::BarRecord::action).
std::vector<int> backtest_decisions(const backtest::BacktestReport& report, std::size_t n_bars);

/// The decisions at bars <= cut that differ, if any; `checked` receives how many were compared.
std::optional<DecisionChange> compare_decisions(const std::vector<int>& before, const std::vector<int>& after,
                                                std::size_t cut, std::size_t* checked = nullptr);

}  // namespace fh::run
