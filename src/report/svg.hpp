/// @file svg.hpp
/// @brief Inline SVG charts for the HTML reports: line charts (several series, time or numeric
///        x axis, "nice" 1-2-5 ticks, legend, optional markers and a zero line) and bar charts
///        (optionally with error bars). Output is well-formed XML; text is escaped.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fh::report {

/// `&`, `<`, `>`, `"` and `'` as entities: safe in element text and attribute values.
std::string xml_escape(std::string_view text);

struct Series {
    std::string label;
    std::vector<double> x, y;  ///< same length; non-finite y values break the line
    std::string color = "#2563eb";
    bool dashed = false;
    bool fill_to_zero = false;  ///< shade the area between the line and y = 0 (drawdowns)
    std::vector<std::size_t> markers;  ///< indices drawn as dots (e.g. the best evaluation)
};

enum class Axis { number, time, percent };  ///< time: Unix seconds shown as dates

struct ChartOptions {
    std::string title;
    std::string x_label, y_label;
    Axis x_axis = Axis::number;
    Axis y_axis = Axis::number;
    int width = 860, height = 260;
    bool zero_line = false;  ///< draw y = 0 when inside the range
};

/// A line chart; a note in place of the plot when no series has a finite point.
std::string line_chart(const std::vector<Series>& series, const ChartOptions& options);

struct Bar {
    std::string label;
    double value = 0;
    std::optional<double> error;  ///< +- error bar
    std::string color = "#2563eb";
    std::string title;            ///< tooltip (SVG <title>)
};

/// A vertical bar chart with labels under the bars (rotated when crowded).
std::string bar_chart(const std::vector<Bar>& bars, const ChartOptions& options);

/// "1.5k", "2.0M", or the number with up to 4 significant digits.
std::string short_number(double v);

}  // namespace fh::report
