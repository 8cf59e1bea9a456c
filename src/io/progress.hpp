/// @file progress.hpp
/// @brief The live progress line on a terminal: a bar, percent, ETA, env
///        steps/s, updates/s, loss and the last validation metric, redrawn in place with '\r'
///        at most 10 times per second, ended with a newline by finish().
///
/// Enable it only when stderr is a terminal and the log format is text
/// (`Progress(total, stderr_is_terminal() && format == log::Format::text)`); disabled, every
/// call does nothing. Log lines written while the bar is shown would land on the same line:
/// call clear() before logging; the next update() redraws the bar.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

namespace fh::io {

/// isatty(STDERR_FILENO).
bool stderr_is_terminal() noexcept;

struct ProgressState {
    std::uint64_t env_steps = 0;
    std::uint64_t total_env_steps = 0;
    double env_steps_per_s = 0;
    double updates_per_s = 0;
    double loss = 0;
    std::optional<double> last_val_metric;
    std::string metric_name;
};

/// The line for `state`, at most `width` columns (the bar shrinks first, then fields are cut).
/// Example: "[########------------]  40.0% ETA 1m05s | 400k/1.00M steps | 6.1k env/s |
/// 95.0 upd/s | loss 0.0123 | val sharpe 1.234".
std::string format_progress_line(const ProgressState& state, int width);
/// "45s", "3m07s", "2h05m", "--" for unknown or unbounded.
std::string format_eta(double seconds);
/// 950, 12.3k, 4.00M, 1.20G.
std::string format_count(double v);

class Progress {
public:
    /// `out` is where the line is drawn (stderr; tests pass a file).
    Progress(std::uint64_t total_env_steps, bool enabled, std::FILE* out = stderr);
    Progress(const Progress&) = delete;
    Progress& operator=(const Progress&) = delete;
    ~Progress();  ///< finish()

    bool enabled() const noexcept { return enabled_; }
    /// Records the state and redraws when 100 ms have passed since the last draw (or when the
    /// run reached its total).
    void update(std::uint64_t env_steps, double env_steps_per_s, double updates_per_s, double loss,
                std::optional<double> last_val_metric, const std::string& metric_name);
    /// Erases the line (before a log message); the next update() draws it again.
    void clear();
    /// Draws the final state and ends the line with '\n'. Idempotent.
    void finish();

private:
    void draw();
    bool enabled_;
    std::FILE* out_;
    ProgressState state_;
    bool has_state_ = false;
    bool drawn_ = false;
    bool finished_ = false;
    std::chrono::steady_clock::time_point last_draw_{};
};

}  // namespace fh::io
