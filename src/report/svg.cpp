/// @file svg.cpp
#include "report/svg.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <limits>

namespace fh::report {

namespace {

constexpr int kLeft = 70, kRight = 18, kTop = 34, kBottom = 42;

struct Range {
    double lo = std::numeric_limits<double>::infinity();
    double hi = -std::numeric_limits<double>::infinity();
    void add(double v) {
        if (!std::isfinite(v)) return;
        lo = std::min(lo, v);
        hi = std::max(hi, v);
    }
    bool empty() const { return !(lo <= hi); }
    void widen(double pad) {
        lo -= pad;
        hi += pad;
    }
};

double nice_step(double span, int target) {
    if (!(span > 0)) return 1;
    const double raw = span / target;
    const double mag = std::pow(10.0, std::floor(std::log10(raw)));
    const double f = raw / mag;
    const double nice = f <= 1 ? 1 : f <= 2 ? 2 : f <= 2.5 ? 2.5 : f <= 5 ? 5 : 10;
    return nice * mag;
}

std::string fmt_coord(double v) {
    return fmt::format("{:.1f}", v);
}

std::string tick_label(double v, Axis axis, double step) {
    if (axis == Axis::time) return utc_time(v, step < 86400 ? "%m-%d %H:%M" : "%Y-%m-%d");
    if (axis == Axis::percent) {
        const double p = std::abs(v) < std::abs(step) * 1e-6 ? 0.0 : v * 100;  // never "-0%"
        return std::abs(step * 100) >= 1 ? fmt::format("{:.0f}%", p) : fmt::format("{:.1f}%", p);
    }
    return short_number(std::abs(v) < step * 1e-6 ? 0.0 : v);
}

struct Ticks {
    std::vector<double> at;
    double step = 1;
};

Ticks number_ticks(double lo, double hi, int target) {
    Ticks t;
    t.step = nice_step(hi - lo, target);
    for (double v = std::ceil(lo / t.step - 1e-9) * t.step; v <= hi + t.step * 1e-9; v += t.step) t.at.push_back(v);
    return t;
}

Ticks time_ticks(double lo, double hi) {
    static const double steps[] = {60,         300,         900,         3600,        3 * 3600,     6 * 3600,
                                   12 * 3600,  86400,       2 * 86400,   7 * 86400,   14 * 86400,   30 * 86400,
                                   91 * 86400, 182 * 86400, 365 * 86400, 730 * 86400, 1825 * 86400, 3650 * 86400};
    Ticks t;  // the first step giving at most 6 ticks, else the largest
    t.step = *std::find_if(std::begin(steps), std::end(steps) - 1, [&](double s) { return (hi - lo) / s <= 6; });
    for (double v = std::ceil(lo / t.step) * t.step; v <= hi; v += t.step) t.at.push_back(v);
    return t;
}

/// At most ~2 points per horizontal pixel: per bucket of indices, the first, the minimum, the
/// maximum and the last point, in index order (the line's shape survives).
std::vector<std::size_t> thin(const std::vector<double>& y, std::size_t buckets) {
    std::vector<std::size_t> keep;
    const std::size_t n = y.size();
    if (n <= buckets * 4) {
        keep.resize(n);
        for (std::size_t i = 0; i < n; ++i) keep[i] = i;
        return keep;
    }
    for (std::size_t b = 0; b < buckets; ++b) {
        const std::size_t s = n * b / buckets, e = n * (b + 1) / buckets;
        if (s >= e) continue;
        std::size_t mn = s, mx = s;
        for (std::size_t i = s; i < e; ++i) {
            if (!std::isfinite(y[i])) {
                keep.push_back(i);  // keep the break
                continue;
            }
            if (!std::isfinite(y[mn]) || y[i] < y[mn]) mn = i;
            if (!std::isfinite(y[mx]) || y[i] > y[mx]) mx = i;
        }
        keep.insert(keep.end(), {s, mn, mx, e - 1});
    }
    std::sort(keep.begin(), keep.end());
    keep.erase(std::unique(keep.begin(), keep.end()), keep.end());
    return keep;
}

/// The chart's <svg> (`height` tall: a bar chart's grows with rotated labels) and its title.
std::string frame_open(const ChartOptions& o, int height) {
    return fmt::format(
        R"(<svg class="chart" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" aria-label="{t}">)"
        R"(<text class="ct" x="{l}" y="18">{t}</text>)",
        fmt::arg("w", o.width), fmt::arg("h", height), fmt::arg("t", xml_escape(o.title)), fmt::arg("l", kLeft));
}

std::string empty_note(const ChartOptions& o) {
    return frame_open(o, o.height) +
           fmt::format(R"(<text class="note" x="{}" y="{}" text-anchor="middle">no data</text></svg>)", o.width / 2,
                       o.height / 2);
}

/// A tick's label at (x, y) (numbers or their text), anchored "middle" or "end".
template <class Y>
std::string tick_text(const std::string& x, const Y& y, const char* anchor, const std::string& label) {
    return fmt::format(R"(<text class="tick" x="{}" y="{}" text-anchor="{}">{}</text>)", x, y, anchor,
                       xml_escape(label));
}

/// The y axis' grid lines and tick labels across a plot `pw` wide (`Y` maps a value to pixels).
template <class MapY>
std::string y_grid(const Range& yr, double pw, Axis axis, MapY Y) {
    std::string svg;
    const Ticks yt = number_ticks(yr.lo, yr.hi, 5);
    for (double v : yt.at) {
        svg += fmt::format(R"(<line class="grid" x1="{0}" y1="{1}" x2="{2}" y2="{1}"/>)", kLeft, fmt_coord(Y(v)),
                           kLeft + pw);
        svg += tick_text(std::to_string(kLeft - 6), fmt_coord(Y(v) + 4), "end", tick_label(v, axis, yt.step));
    }
    return svg;
}

std::string zero_line(double y, double pw) {
    return fmt::format(R"(<line class="zero" x1="{}" y1="{}" x2="{}" y2="{}"/>)", kLeft, fmt_coord(y), kLeft + pw,
                       fmt_coord(y));
}

std::string y_label(const ChartOptions& o, double ph) {
    if (o.y_label.empty()) return "";
    return fmt::format(
        R"~(<text class="axis" x="14" y="{}" text-anchor="middle" transform="rotate(-90 14 {})">{}</text>)~",
        fmt_coord(kTop + ph / 2), fmt_coord(kTop + ph / 2), xml_escape(o.y_label));
}

std::string legend_text(double x, const std::string& label) {
    return fmt::format(R"(<text class="legend" x="{}" y="26">{}</text>)", fmt_coord(x), xml_escape(label));
}

/// A line's key in a legend whose next key ends at `lx`; moves `lx` to its start.
std::string legend_line(double& lx, const std::string& label, const std::string& color, bool dashed) {
    lx -= 34 + 7.2 * static_cast<double>(label.size());
    return fmt::format(R"(<line x1="{}" y1="22" x2="{}" y2="22" stroke="{}" stroke-width="2.5"{}/>)", fmt_coord(lx),
                       fmt_coord(lx + 16), color, dashed ? R"( stroke-dasharray="5 3")" : "") +
           legend_text(lx + 20, label);
}

}  // namespace

std::string xml_escape(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    static constexpr std::string_view specials = "&<>\"'", entities[] = {"&amp;", "&lt;", "&gt;", "&quot;", "&#39;"};
    for (char c : s) {
        if (const auto k = specials.find(c); k != std::string_view::npos)
            out += entities[k];
        else if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r')
            out += ' ';  // XML 1.0 allows no control characters but tab, LF and CR
        else
            out += c;
    }
    return out;
}

std::string note(const std::string& text) {
    return "<p class=\"note\">" + xml_escape(text) + "</p>\n";
}

std::string panel(const std::string& inner) {
    return "<div class=\"panel\">" + inner + "</div>\n";
}

std::string utc_time(double t, const char* format) {
    const std::time_t tt = static_cast<std::time_t>(t);
    std::tm tm{};
    gmtime_r(&tt, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, format, &tm);
    return buf;
}

std::string short_number(double v) {
    const double a = std::abs(v);
    if (a >= 1e9) return fmt::format("{:.3g}G", v / 1e9);
    if (a >= 1e6) return fmt::format("{:.3g}M", v / 1e6);
    if (a >= 1e4) return fmt::format("{:.3g}k", v / 1e3);
    return fmt::format("{:.4g}", v);
}

std::string line_chart(const std::vector<Series>& series, const ChartOptions& o) {
    Range xr, yr;
    for (const auto& s : series)
        for (std::size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
            if (!std::isfinite(s.y[i]) || !std::isfinite(s.x[i])) continue;
            xr.add(s.x[i]);
            yr.add(s.y[i]);
            if (s.fill_to_zero) yr.add(0);
            if (i < s.band_lo.size() && i < s.band_hi.size()) {
                yr.add(s.band_lo[i]);
                yr.add(s.band_hi[i]);
            }
        }
    if (xr.empty() || yr.empty()) return empty_note(o);
    if (o.zero_line) yr.add(0);
    if (xr.hi == xr.lo) xr.widen(1);
    if (yr.hi == yr.lo) yr.widen(yr.hi == 0 ? 1 : std::abs(yr.hi) * 0.05);
    const double ypad = (yr.hi - yr.lo) * 0.06;
    const bool from_zero = yr.lo == 0 || yr.hi == 0;  // drawdown-like: keep 0 on the edge
    if (!(from_zero && yr.hi == 0)) yr.hi += ypad;
    if (!(from_zero && yr.lo == 0)) yr.lo -= ypad;
    const bool sub_ticks = o.x_tick_sub && o.x_axis != Axis::time;
    const double pw = o.width - kLeft - kRight, ph = o.height - kTop - kBottom - (sub_ticks ? 14 : 0);
    auto X = [&](double x) { return kLeft + (x - xr.lo) / (xr.hi - xr.lo) * pw; };
    auto Y = [&](double y) { return kTop + (yr.hi - y) / (yr.hi - yr.lo) * ph; };

    std::string svg = frame_open(o, o.height) + y_grid(yr, pw, o.y_axis, Y);
    const Ticks xt = o.x_axis == Axis::time ? time_ticks(xr.lo, xr.hi) : number_ticks(xr.lo, xr.hi, 6);
    for (double v : xt.at) {
        const std::string px = fmt_coord(X(v));
        svg += fmt::format(R"(<line class="grid" x1="{0}" y1="{1}" x2="{0}" y2="{2}"/>)", px, kTop, kTop + ph);
        svg += tick_text(px, kTop + ph + 16, "middle", tick_label(v, o.x_axis, xt.step));
        if (sub_ticks) svg += tick_text(px, kTop + ph + 29, "middle", o.x_tick_sub(v));
    }
    svg += fmt::format(R"(<rect class="plot" x="{}" y="{}" width="{}" height="{}"/>)", kLeft, kTop, pw, ph);
    if (o.zero_line && yr.lo < 0 && yr.hi > 0) svg += zero_line(Y(0), pw);
    if (!o.x_label.empty())
        svg += fmt::format(R"(<text class="axis" x="{}" y="{}" text-anchor="middle">{}</text>)", kLeft + pw / 2,
                           o.height - 6, xml_escape(o.x_label));
    svg += y_label(o, ph);

    // Bands first (under every line): one polygon per run of finite bounds.
    for (const auto& s : series) {
        const std::size_t n = std::min({s.x.size(), s.band_lo.size(), s.band_hi.size()});
        for (std::size_t b = 0; b < n;) {
            const auto ok = [&](std::size_t i) {
                return std::isfinite(s.x[i]) && std::isfinite(s.band_lo[i]) && std::isfinite(s.band_hi[i]);
            };
            if (!ok(b)) {
                ++b;
                continue;
            }
            std::size_t e = b;
            while (e < n && ok(e)) ++e;
            std::string d;
            for (std::size_t i = b; i < e; ++i)
                d += fmt::format("{}{:.1f} {:.1f}", i == b ? 'M' : 'L', X(s.x[i]), Y(s.band_hi[i]));
            for (std::size_t i = e; i-- > b;) d += fmt::format("L{:.1f} {:.1f}", X(s.x[i]), Y(s.band_lo[i]));
            svg +=
                fmt::format(R"(<path class="band" d="{}Z" fill="{}" fill-opacity="0.14" stroke="none"/>)", d, s.color);
            b = e;
        }
    }
    // Series.
    for (const auto& s : series) {
        const std::size_t n = std::min(s.x.size(), s.y.size());
        const auto keep = thin(std::vector<double>(s.y.begin(), s.y.begin() + static_cast<std::ptrdiff_t>(n)),
                               static_cast<std::size_t>(pw));
        std::string d, area;
        bool open = false;
        double first_x = 0, last_x = 0;
        for (std::size_t i : keep) {
            if (!std::isfinite(s.y[i]) || !std::isfinite(s.x[i])) {
                if (open && s.fill_to_zero) area += fmt::format("L{} {}Z", fmt_coord(X(last_x)), fmt_coord(Y(0)));
                open = false;
                continue;
            }
            const std::string pt = fmt_coord(X(s.x[i])) + " " + fmt_coord(Y(s.y[i]));
            if (!open) {
                first_x = s.x[i];
                d += "M" + pt;
                if (s.fill_to_zero) area += fmt::format("M{} {}L", fmt_coord(X(first_x)), fmt_coord(Y(0))) + pt;
            } else {
                d += "L" + pt;
                if (s.fill_to_zero) area += "L" + pt;
            }
            last_x = s.x[i];
            open = true;
        }
        if (open && s.fill_to_zero) area += fmt::format("L{} {}Z", fmt_coord(X(last_x)), fmt_coord(Y(0)));
        if (!area.empty())
            svg += fmt::format(R"(<path d="{}" fill="{}" fill-opacity="0.15" stroke="none"/>)", area, s.color);
        if (!d.empty())
            svg += fmt::format(R"(<path d="{}" fill="none" stroke="{}" stroke-width="1.6"{}/>)", d, s.color,
                               s.dashed ? R"( stroke-dasharray="5 4")" : "");
        for (std::size_t m : s.markers)
            if (m < n && std::isfinite(s.y[m]) && std::isfinite(s.x[m]))
                svg += fmt::format(R"(<circle cx="{}" cy="{}" r="4.5" fill="{}" stroke="#fff" stroke-width="1.5"/>)",
                                   fmt_coord(X(s.x[m])), fmt_coord(Y(s.y[m])), s.color);
    }
    // Legend, right-aligned above the plot.
    double lx = kLeft + pw;
    for (auto it = series.rbegin(); it != series.rend(); ++it)
        if (!it->label.empty()) svg += legend_line(lx, it->label, it->color, it->dashed);
    return svg + "</svg>";
}

std::string bar_chart(const std::vector<Bar>& bars, const ChartOptions& o) {
    if (bars.empty()) return empty_note(o);
    Range yr;
    yr.add(0);
    for (const auto& b : bars) {
        yr.add(b.value + (b.error ? *b.error : 0));
        yr.add(b.value - (b.error ? *b.error : 0));
        for (double p : b.points) yr.add(p);
        if (b.reference) yr.add(*b.reference);
    }
    if (yr.hi == yr.lo) yr.hi = yr.lo + 1;
    const double span = yr.hi - yr.lo;
    if (yr.hi > 0) yr.hi += span * 0.08;
    if (yr.lo < 0) yr.lo -= span * 0.08;
    const bool rotate = bars.size() > 12 || std::any_of(bars.begin(), bars.end(), [&](const Bar& b) {
                            return static_cast<double>(b.label.size()) * 6.5 >
                                   (o.width - kLeft - kRight) / static_cast<double>(bars.size());
                        });
    const int bottom = rotate ? 96 : kBottom;
    const int height = o.height + (rotate ? bottom - kBottom : 0);
    const double pw = o.width - kLeft - kRight, ph = height - kTop - bottom;
    auto Y = [&](double y) { return kTop + (yr.hi - y) / (yr.hi - yr.lo) * ph; };
    std::string svg = frame_open(o, height) + y_grid(yr, pw, o.y_axis, Y);
    svg += fmt::format(R"(<rect class="plot" x="{}" y="{}" width="{}" height="{}"/>)", kLeft, kTop, pw, ph);
    const double slot = pw / static_cast<double>(bars.size());
    const double bw = std::max(2.0, std::min(48.0, slot * 0.7));
    for (std::size_t i = 0; i < bars.size(); ++i) {
        const auto& b = bars[i];
        const double cx = kLeft + slot * (static_cast<double>(i) + 0.5);
        const double y0 = Y(0), y1 = Y(b.value);
        svg += fmt::format(R"(<rect x="{}" y="{}" width="{}" height="{}" fill="{}" rx="2"><title>{}</title></rect>)",
                           fmt_coord(cx - bw / 2), fmt_coord(std::min(y0, y1)), fmt_coord(bw),
                           fmt_coord(std::max(0.5, std::abs(y1 - y0))), b.color,
                           xml_escape(b.title.empty() ? b.label + ": " + short_number(b.value) : b.title));
        if (b.error) {
            const double ya = Y(b.value - *b.error), yb = Y(b.value + *b.error);
            svg += fmt::format(R"(<path d="M{x} {a}L{x} {b}M{l} {a}L{r} {a}M{l} {b}L{r} {b}" class="err"/>)",
                               fmt::arg("x", fmt_coord(cx)), fmt::arg("a", fmt_coord(ya)), fmt::arg("b", fmt_coord(yb)),
                               fmt::arg("l", fmt_coord(cx - bw / 4)), fmt::arg("r", fmt_coord(cx + bw / 4)));
        }
        for (std::size_t k = 0; k < b.points.size(); ++k) {  // spread sideways so equal values stay visible
            if (!std::isfinite(b.points[k])) continue;
            const double dx = b.points.size() < 2
                                  ? 0.0
                                  : (static_cast<double>(k) / static_cast<double>(b.points.size() - 1) - 0.5) *
                                        std::min(bw * 0.6, 24.0);
            svg += fmt::format(
                R"(<circle class="pt" cx="{}" cy="{}" r="3" fill="#111827" fill-opacity="0.75" stroke="#fff" stroke-width="0.8"/>)",
                fmt_coord(cx + dx), fmt_coord(Y(b.points[k])));
        }
        if (b.reference && std::isfinite(*b.reference))
            svg += fmt::format(
                R"(<line class="ref" x1="{}" y1="{y}" x2="{}" y2="{y}" stroke="#d97706" stroke-width="2" stroke-dasharray="6 4"/>)",
                fmt_coord(cx - slot / 2), fmt_coord(cx + slot / 2), fmt::arg("y", fmt_coord(Y(*b.reference))));
        const double ty = kTop + ph + 14;
        if (rotate)
            svg += fmt::format(
                R"~(<text class="tick" x="{x}" y="{y}" text-anchor="end" transform="rotate(-40 {x} {y})">{t}</text>)~",
                fmt::arg("x", fmt_coord(cx)), fmt::arg("y", fmt_coord(ty)), fmt::arg("t", xml_escape(b.label)));
        else
            svg += tick_text(fmt_coord(cx), fmt_coord(ty), "middle", b.label);
    }
    if (yr.lo < 0) svg += zero_line(Y(0), pw);
    svg += y_label(o, ph);
    // Legend of the points and reference lines, right-aligned above the plot.
    double lx = kLeft + pw;
    if (!o.reference_label.empty()) svg += legend_line(lx, o.reference_label, "#d97706", true);
    if (!o.points_label.empty()) {
        lx -= 26 + 7.2 * static_cast<double>(o.points_label.size());
        svg += fmt::format(R"(<circle cx="{}" cy="22" r="3" fill="#111827" fill-opacity="0.75"/>)", fmt_coord(lx + 6));
        svg += legend_text(lx + 14, o.points_label);
    }
    return svg + "</svg>";
}

}  // namespace fh::report
