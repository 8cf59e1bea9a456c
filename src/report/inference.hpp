/// @file inference.hpp
/// @brief What `compare` and `report` say about luck (docs/metrics.md): the deflated Sharpe ratio of
///        the best of a set of runs, and the HTML of a backtest's confidence intervals and PSRs.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "io/json.hpp"
#include "report/runs.hpp"

namespace fh::report {

/// The deflated Sharpe ratio of the run with the highest per-bar test Sharpe ratio among the runs
/// that have one (summary.json test.inference), given their number and the sample variance of
/// their per-bar Sharpe ratios.
struct DeflatedBest {
    std::size_t trials = 0;
    std::string best_run;            ///< its path
    double best_sharpe_per_bar = 0;  ///< the best run's per-bar test Sharpe
    double sd_sharpe_per_bar = 0;    ///< sample sd of the trials' per-bar Sharpe ratios
    double expected_max_z = 0;       ///< expected maximum of `trials` standard normals
    double sr0 = 0;                  ///< sd * expected_max_z: the best of that many tries of noise
    std::optional<double> dsr;       ///< PSR(sr0) of the best run
    double threshold = 0.95;         ///< the best run's eval.confidence
    bool distinguishable = false;    ///< dsr >= threshold
    std::string text;                ///< one sentence saying so
};
/// Empty with fewer than 2 runs that have a test inference.
std::optional<DeflatedBest> deflated_best(const std::vector<RunRecord>& runs);
io::json::Value deflated_value(const DeflatedBest& d);
/// A JSON object's text (to_json's) with the member "deflated_sharpe" appended (null when empty).
std::string with_deflated(const std::string& json_text, const std::optional<DeflatedBest>& d);

/// One backtest's intervals and PSRs as HTML (interval bars with a zero line, and sentences
/// saying whether each interval excludes zero), from an object holding "strategy",
/// "buy_and_hold" and "inference" (summary.json's test or validation, eval.json, walk_forward.json's
/// stitched); a note when it has no inference.
std::string inference_html(const io::json::Value& backtest, const std::string& split_label);

/// One line in words: the Sharpe interval, the difference's against buy-and-hold and whether each
/// excludes zero, and the PSRs ("" without an inference).
std::string inference_sentence(const io::json::Value& backtest);

/// For a walk-forward directory (walk_forward.json), a paragraph on the stitched out-of-sample
/// curve: its return, Sharpe and interval against buy-and-hold's, in words; "" otherwise.
std::string walk_forward_markdown(const std::string& dir);

}  // namespace fh::report
