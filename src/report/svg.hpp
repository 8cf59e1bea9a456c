/// @file svg.hpp
/// @brief Inline SVG charts for the HTML reports: line charts (several series, time or numeric
///        x axis, "nice" 1-2-5 ticks, legend, optional markers and a zero line) and bar charts
///        (optionally with error bars), and the HTML pieces the pages share (escaping, notes,
///        panels). Output is well-formed XML; text is escaped.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fh::report {

/// `&`, `<`, `>`, `"` and `'` as entities: safe in element text and attribute values.
std::string xml_escape(std::string_view text);

/// The pages' paragraph of muted text (escaped) and their bordered box around `inner`.
std::string note(const std::string& text);
std::string panel(const std::string& inner);

// Every member of Series, ChartOptions and Bar has a default, so that the pages name only those
// they set (`Series{.label = "strategy", .dashed = true}`).
struct Series {
    std::string label{};
    std::vector<double> x{}, y{};  ///< same length; non-finite y values break the line
    std::string color = "#2563eb";
    bool dashed = false;
    bool fill_to_zero = false;           ///< shade the area between the line and y = 0 (drawdowns)
    std::vector<std::size_t> markers{};  ///< indices drawn as dots (e.g. the best evaluation)
    /// Optional band around the line (same length as x; empty: none), shaded in the line's
    /// colour, e.g. mean +- sd over seeds. Non-finite bounds break the band.
    std::vector<double> band_lo{}, band_hi{};
    void add(double px, double py) {
        x.push_back(px);
        y.push_back(py);
    }
};

enum class Axis { number, time, percent };  ///< time: Unix seconds shown as dates

struct ChartOptions {
    std::string title{};
    std::string x_label{}, y_label{};
    Axis x_axis = Axis::number;
    Axis y_axis = Axis::number;
    int width = 860, height = 260;
    bool zero_line = false;  ///< draw y = 0 when inside the range
    /// Number axes: a second line under each x tick (e.g. the date of a bar index); empty: none.
    std::function<std::string(double)> x_tick_sub{};
    /// Bar charts: the legend of the bars' reference lines (Bar::reference); "" = no legend.
    std::string reference_label{};
    /// Bar charts: the legend of the bars' points (Bar::points); "" = no legend.
    std::string points_label{};
};

/// A line chart; a note in place of the plot when no series has a finite point.
std::string line_chart(const std::vector<Series>& series, const ChartOptions& options);

struct Bar {
    std::string label{};
    double value = 0;
    std::optional<double> error{};  ///< +- error bar
    std::string color = "#2563eb";
    std::string title{};                ///< tooltip (SVG <title>)
    std::vector<double> points{};       ///< single values drawn as dots over the bar (e.g. each seed's)
    std::optional<double> reference{};  ///< a dashed line across the bar's slot (e.g. buy-and-hold's)
};

/// A vertical bar chart with labels under the bars (rotated when crowded); each bar's points and
/// reference line (adjacent equal references join into one line) inside the y range.
std::string bar_chart(const std::vector<Bar>& bars, const ChartOptions& options);

/// Unix seconds `t` as UTC by strftime's `format`.
std::string utc_time(double t, const char* format);

/// "1.5k", "2.0M", or the number with up to 4 significant digits.
std::string short_number(double v);

}  // namespace fh::report
