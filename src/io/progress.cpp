/// @file progress.cpp
#include "io/progress.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace fh::io {

namespace {
constexpr auto kMinRedraw = std::chrono::milliseconds(100);
constexpr int kDefaultWidth = 120;

int terminal_width(std::FILE* out) {
    winsize ws{};
    if (::ioctl(::fileno(out), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
    return kDefaultWidth;
}
}  // namespace

bool stderr_is_terminal() noexcept {
    return ::isatty(STDERR_FILENO) == 1;
}

std::string format_eta(double seconds) {
    if (!std::isfinite(seconds) || seconds < 0 || seconds > 1e8) return "--";
    const auto s = static_cast<long long>(std::llround(seconds));
    if (s < 60) return fmt::format("{}s", s);
    if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
    return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
}

std::string format_count(double v) {
    if (!std::isfinite(v)) return "--";
    const double a = std::fabs(v);
    if (a < 1e3) return fmt::format("{:.{}f}", v, a == std::floor(a) ? 0 : 1);
    if (a < 1e6) return fmt::format("{:.{}f}k", v / 1e3, a < 1e4 ? 2 : a < 1e5 ? 1 : 0);
    if (a < 1e9) return fmt::format("{:.{}f}M", v / 1e6, a < 1e7 ? 2 : a < 1e8 ? 1 : 0);
    return fmt::format("{:.2f}G", v / 1e9);
}

std::string format_progress_line(const ProgressState& st, int width) {
    const double frac =
        st.total_env_steps > 0
            ? std::clamp(static_cast<double>(st.env_steps) / static_cast<double>(st.total_env_steps), 0.0, 1.0)
            : 0.0;
    const double remaining =
        st.total_env_steps > st.env_steps ? static_cast<double>(st.total_env_steps - st.env_steps) : 0.0;
    const double eta = remaining == 0 ? 0.0 : st.env_steps_per_s > 0 ? remaining / st.env_steps_per_s : -1.0;

    std::vector<std::string> fields = {
        fmt::format("{:5.1f}% ETA {}", 100.0 * frac, format_eta(eta)),
        fmt::format("{}/{} steps", format_count(static_cast<double>(st.env_steps)),
                    format_count(static_cast<double>(st.total_env_steps))),
        fmt::format("{} env/s", format_count(st.env_steps_per_s)),
        fmt::format("{} upd/s", format_count(st.updates_per_s)),
        std::isfinite(st.loss) ? fmt::format("loss {:.4g}", st.loss) : std::string("loss nan")};
    if (st.last_val_metric)
        fields.push_back(
            fmt::format("val {} {:.4g}", st.metric_name.empty() ? "metric" : st.metric_name, *st.last_val_metric));

    const std::string text = fmt::format("{}", fmt::join(fields, " | "));

    // Bar of 10..30 cells when there is room, none otherwise; then cut to the width.
    const int room = width - 1 - static_cast<int>(text.size()) - 3;  // "[" + "] "
    const int cells = std::min(30, room);
    std::string line;
    if (cells >= 10) {
        const int full = static_cast<int>(std::floor(frac * cells));
        line.reserve(static_cast<std::size_t>(cells) + 3 + text.size());
        line += '[';
        line.append(static_cast<std::size_t>(full), '#');
        line.append(static_cast<std::size_t>(cells - full), '-');
        line += "] ";
    }
    line += text;
    const auto limit = static_cast<std::size_t>(std::max(width - 1, 1));  // never wrap
    if (line.size() > limit) line.resize(limit);
    return line;
}

Progress::Progress(std::uint64_t total_env_steps, bool enabled, std::FILE* out) : enabled_(enabled), out_(out) {
    state_.total_env_steps = total_env_steps;
}

Progress::~Progress() {
    finish();
}

void Progress::update(std::uint64_t env_steps, double env_steps_per_s, double updates_per_s, double loss,
                      std::optional<double> last_val_metric, const std::string& metric_name) {
    if (!enabled_ || finished_) return;
    state_ = {env_steps, state_.total_env_steps, env_steps_per_s, updates_per_s, loss, last_val_metric, metric_name};
    has_state_ = true;
    const auto now = std::chrono::steady_clock::now();
    if (drawn_ && now - last_draw_ < kMinRedraw && env_steps < state_.total_env_steps) return;
    last_draw_ = now;
    draw();
}

void Progress::draw() {
    const std::string line = format_progress_line(state_, terminal_width(out_));
    // '\r' to the line start, the line, then erase what a longer previous line left.
    std::fprintf(out_, "\r%s\x1b[K", line.c_str());
    std::fflush(out_);
    drawn_ = true;
}

void Progress::clear() {
    if (!enabled_ || !drawn_ || finished_) return;
    std::fputs("\r\x1b[K", out_);
    std::fflush(out_);
    drawn_ = false;
}

void Progress::finish() {
    if (!enabled_ || finished_) return;
    finished_ = true;
    if (!has_state_) return;
    draw();
    std::fputc('\n', out_);
    std::fflush(out_);
}

}  // namespace fh::io
