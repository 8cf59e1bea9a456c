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

/// Writes the report of `path` (a run, eval output or sweep directory) to `output`, default
/// `<path>/report.html`; for a sweep, every run's report.html too. Returns the page's path.
/// Throws UsageError (exit 2) when `path` is none of these.
std::string write_report(const std::string& path, const std::string& output);

}  // namespace fh::report
