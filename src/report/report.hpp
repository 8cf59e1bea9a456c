/// @file report.hpp
/// @brief `foxhunt-train report`: one self-contained HTML file per run (inline CSS and SVG, no
///        script, nothing fetched: a Content-Security-Policy forbids every load), and for a sweep
///        directory a comparison page linking each run's report. docs/sweeps.md shows a page.
#pragma once

#include <string>

namespace fh::report {

/// The page of a run directory (summary.json, eval.jsonl, metrics.jsonl, backtest/*.csv,
/// config.toml) or of an `eval --output` directory (eval.json, equity.csv, trades.csv,
/// config.toml). Sections whose files are missing say so instead of failing.
std::string run_report_html(const std::string& dir);

/// The page of a sweep directory: the settings ranked by mean validation metric over seeds
/// (best marked), a chart of it with the spread, and every run with a link to
/// `<run>/report.html`.
/// Links are relative to `links_from` (the page's folder; "" = `dir`).
std::string sweep_report_html(const std::string& dir, const std::string& links_from = "");

/// The page of a walk-forward directory (walk_forward.json, stitched_equity.csv, fold-k/): the
/// stitched out-of-sample curve with buy-and-hold and the folds marked, its intervals, the folds'
/// table linking each fold's report, and the deflated Sharpe ratio of the best fold.
std::string walk_forward_report_html(const std::string& dir);

/// Writes the report of `path` (a run, eval output, sweep or walk-forward directory) to `output`, default
/// `<path>/report.html`; for a sweep, every run's report.html too. Returns the page's path.
/// Throws UsageError (exit 2) when `path` is none of these.
std::string write_report(const std::string& path, const std::string& output);

}  // namespace fh::report
