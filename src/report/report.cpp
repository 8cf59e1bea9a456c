/// @file report.cpp
#include "report/report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <map>
#include <numeric>
#include <string_view>

#include "backtest/backtest.hpp"
#include "io/atomic_file.hpp"
#include "io/json.hpp"
#include "report/inference.hpp"
#include "report/runs.hpp"
#include "report/svg.hpp"
#include "util/errors.hpp"
#include "util/log.hpp"

namespace fh::report {

namespace fs = std::filesystem;
namespace json = io::json;

namespace {

constexpr const char* kStrategyColor = "#2563eb";
constexpr const char* kHoldColor = "#d97706";
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr const char* kPalette[] = {"#2563eb", "#dc2626", "#059669", "#7c3aed", "#d97706",
                                    "#0891b2", "#db2777", "#65a30d", "#4b5563", "#9333ea"};

constexpr const char* kCss = R"(
:root{--fg:#1f2937;--muted:#6b7280;--line:#e5e7eb;--bg:#f8fafc;--card:#fff;--blue:#2563eb;--amber:#d97706}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);font:14px/1.45 -apple-system,"Segoe UI",Roboto,"DejaVu Sans",Helvetica,Arial,sans-serif}
main{max-width:1100px;margin:0 auto;padding:24px 20px 48px}
h1{font-size:22px;margin:0 0 4px;word-break:break-all}
h2{font-size:16px;margin:28px 0 10px;padding-bottom:4px;border-bottom:1px solid var(--line)}
.sub{color:var(--muted);margin:0 0 16px}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;font-weight:600;background:#e0e7ff;color:#3730a3}
.badge.completed,.badge.early_stopped,.badge.stopped{background:#dcfce7;color:#166534}
.badge.interrupted{background:#fef3c7;color:#92400e}
.badge.diverged{background:#fee2e2;color:#991b1b}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(180px,1fr));gap:10px}
.card{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:10px 12px}
.card .k{color:var(--muted);font-size:12px}
.card .v{font-size:20px;font-weight:600;white-space:nowrap}
.card .c{color:var(--muted);font-size:12px}
.good{color:#15803d}.bad{color:#b91c1c}
.panel{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:8px;margin:0 0 12px;overflow-x:auto}
.grid2{display:grid;grid-template-columns:1fr 1fr;gap:12px}
.grid2 .panel{margin:0}
svg.chart{display:block;width:100%;height:auto}
svg .ct{font-size:13px;font-weight:600;fill:#111827}
svg .tick{font-size:11px;fill:#6b7280}
svg .axis{font-size:11px;fill:#374151}
svg .legend{font-size:12px;fill:#374151}
svg .note{font-size:13px;fill:#9ca3af}
svg .grid{stroke:#eef0f3;stroke-width:1}
svg .plot{fill:none;stroke:#d1d5db;stroke-width:1}
svg .zero{stroke:#9ca3af;stroke-width:1;stroke-dasharray:3 3}
svg .err{stroke:#111827;stroke-width:1.2;fill:none}
.keys{font-size:12px;color:#374151;padding:2px 8px 4px 70px}
.keys .key{display:inline-block;margin-right:14px;white-space:nowrap}
.keys .sw{display:inline-block;width:14px;height:4px;margin-right:5px;vertical-align:middle;border-radius:2px}
table{border-collapse:collapse;width:100%;font-size:12.5px;background:var(--card)}
th,td{padding:4px 6px;border-bottom:1px solid var(--line);text-align:left;white-space:nowrap}
th{background:#f1f5f9;font-weight:600;white-space:normal;vertical-align:bottom;overflow-wrap:break-word}
td.name{white-space:normal;overflow-wrap:break-word;min-width:120px;font-size:12px}
td.n{text-align:right;font-variant-numeric:tabular-nums}
td .sd{display:block;color:var(--muted);font-size:11px;font-weight:400}
table.runs{font-size:12px}
table.runs td,table.runs th{padding:3px 4px}
tr.best td{background:#ecfdf5;font-weight:600}
.ann,.card .v.ann,td.n.ann{color:#a1a1aa}
.note{color:var(--muted);font-size:13px}
pre{background:#0f172a;color:#e2e8f0;padding:12px;border-radius:8px;overflow-x:auto;font-size:12px;line-height:1.4;white-space:pre-wrap;overflow-wrap:anywhere}
a{color:var(--blue)}
footer{margin-top:32px;color:var(--muted);font-size:12px}
)";

std::string page(const std::string& title, const std::string& body) {
    return "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n"
           "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
           "img-src data:\"/>\n"
           "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>\n<title>" +
           xml_escape(title) + "</title>\n<style>" + kCss + "</style>\n</head>\n<body>\n<main>\n" + body +
           "<footer>foxhunt-train report: one self-contained file (inline SVG, no scripts, nothing loaded from the "
           "network).</footer>\n</main>\n</body>\n</html>\n";
}

double parse_time(const std::string& iso) {
    std::tm tm{};
    if (std::sscanf(iso.c_str(), "%d-%d-%dT%d:%d:%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min,
                    &tm.tm_sec) != 6)
        return kNaN;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return static_cast<double>(timegm(&tm));
}

double to_number(const std::string& s) {
    if (s.empty()) return kNaN;
    try {
        std::size_t used = 0;
        const double v = std::stod(s, &used);
        return used == s.size() ? v : kNaN;
    } catch (const std::exception&) {
        return kNaN;
    }
}

std::string pct(std::optional<double> v, int decimals = 2) {
    return v ? fmt::format("{:.{}f}%", *v * 100, decimals) : "-";
}
std::string num(std::optional<double> v, int decimals = 3) {
    return v ? fmt::format("{:.{}f}", *v, decimals) : "-";
}
std::string integer(std::optional<double> v) {
    return v ? fmt::format("{}", std::llround(*v)) : "-";
}

const json::Value& member_or_null(const json::Value& v, const char* key) {
    static const json::Value null;
    const json::Value* m = v.is_object() ? v.find(key) : nullptr;
    return m != nullptr ? *m : null;
}

/// `p` absolute, without `.` and `..`.
fs::path normal(const fs::path& p) {
    return fs::absolute(p).lexically_normal();
}

/// A page's heading: its name, then a badge (`badge_class`: its extra classes, " "-led), what it
/// is (HTML) and where.
std::string heading(const std::string& name, const std::string& badge, const std::string& badge_class,
                    const std::string& what, const fs::path& where) {
    return "<h1>" + xml_escape(name) + "</h1>\n" +
           fmt::format("<p class=\"sub\"><span class=\"badge{}\">{}</span> &#160; {} &#160;·&#160; {}</p>\n",
                       badge_class, badge, what, xml_escape(normal(where).string()));
}

/// A setting of the run's config.toml ("section.key"), `otherwise` when it has none.
std::string setting_or(const std::map<std::string, std::string>& settings, const std::string& key,
                       const std::string& otherwise = "") {
    const auto it = settings.find(key);
    return it == settings.end() ? otherwise : it->second;
}

/// The strings of the JSON array `a` joined with `sep` ("" when it is no array).
std::string joined(const json::Value* a, const char* sep) {
    std::string out;
    if (a != nullptr && a->is_array())
        for (const auto& x : a->as_array())
            if (x.is_string()) out += (out.empty() ? "" : sep) + x.as_string();
    return out;
}

/// The backtest metric a validation metric is ("val_sharpe": "sharpe", "val_return": "total_return").
std::string metric_field(const std::string& metric) {
    const std::string field = metric.substr(metric.find('_') + 1);
    return field == "return" ? "total_return" : field;
}

/// The metrics scaled to a year by `bars_per_year` (docs/metrics.md).
bool is_annualised(std::string_view metric) {
    return metric == "annual_return" || metric == "sharpe" || metric == "sortino" || metric == "calmar" ||
           metric == "turnover";
}

/// How long a split's backtest was against the year its annualised metrics are scaled to: the
/// bars it decided on (its action histogram's sum: one action per executed decision) and the
/// run's bars per year. Annualised figures of a split shorter than a quarter of a year
/// extrapolate too short a sample (a 5,000% annual return from a few good days): the report
/// greys them and says why.
struct Span {
    std::optional<double> bars, per_year;
    bool is_short() const { return bars && per_year && *per_year > 0 && *bars < *per_year / 4; }
};

/// The run's bars per year: summary.json's (or eval.json's) `bars_per_year`, else config.toml's
/// `instrument.bars_per_year` when set (0 = inferred, unknown here).
std::optional<double> bars_per_year_of(const json::Value& summary, const std::map<std::string, std::string>& settings) {
    if (const auto v = number_at(summary, "bars_per_year"); v && *v > 0) return v;
    if (const double v = to_number(setting_or(settings, "instrument.bars_per_year")); v > 0) return v;
    return std::nullopt;
}

/// The sum of the numbers of a JSON array (an action histogram).
double sum(const json::Value& a) {
    double n = 0;
    for (const auto& c : a.as_array())
        if (c.is_number()) n += c.as_double();
    return n;
}

/// The span of the backtest whose metrics are at `prefix` ("test.strategy", "strategy").
Span span_of(const json::Value& summary, const std::string& prefix, std::optional<double> per_year) {
    const auto* h = member_at(summary, prefix + ".action_histogram");
    return {h != nullptr && h->is_array() ? std::optional<double>(sum(*h)) : std::nullopt, per_year};
}

/// The note under greyed annualised figures of the short splits (their names and spans).
std::string short_split_note(const std::vector<std::pair<std::string, Span>>& splits) {
    std::string which;
    for (std::size_t i = 0; i < splits.size(); ++i)
        which += fmt::format("{}{} split ({} bars)",
                             i == 0                   ? ""
                             : i + 1 == splits.size() ? " and the "
                                                      : ", the ",
                             splits[i].first, std::llround(splits[i].second.bars.value_or(0)));
    return note(fmt::format(
        "Greyed: the annualised figures (annual return, Sharpe, Sortino, Calmar, turnover) of the {}. "
        "{} under a quarter of the {} bars per year they are scaled to: a short sample extrapolated "
        "to a year, not an estimate of a year's result.",
        which, splits.size() == 1 ? "It is" : "Each is", short_number(splits[0].second.per_year.value_or(0))));
}

/// The equity and drawdown charts of one equity.csv (strategy and buy-and-hold).
std::string equity_section(const fs::path& csv_path, const std::string& split) {
    if (!is_file(csv_path))
        return note(fmt::format("No {} backtest ({} is missing).", split, csv_path.filename().string()));
    const Csv csv = read_csv(csv_path.string());
    const int ct = csv.column("time"), ce = csv.column("equity"), ch = csv.column("buy_and_hold_equity"),
              cs = csv.column("segment"), cb = csv.column("bar");
    if (ct < 0 || ce < 0) return note(csv_path.string() + " has no time/equity columns.");
    // x: the bar index (trading bars, so nights, weekends and holidays take no room), each tick
    // with its bar's date; the time itself for a file without a bar column.
    std::map<double, double> time_of_bar;
    Series eq{.label = "strategy", .color = kStrategyColor};
    Series hold{.label = "buy-and-hold", .color = kHoldColor, .dashed = true};
    Series dd = eq, hdd = hold;
    dd.fill_to_zero = true;
    std::string segment;
    double peak = 0, hpeak = 0;
    for (const auto& row : csv.rows) {
        if (static_cast<int>(row.size()) <= std::max({ct, ce, ch, cs, cb})) continue;
        const double time = parse_time(row[static_cast<std::size_t>(ct)]);
        const double t = cb >= 0 ? to_number(row[static_cast<std::size_t>(cb)]) : time;
        if (cb >= 0 && std::isfinite(t) && std::isfinite(time)) time_of_bar[t] = time;
        const double e = to_number(row[static_cast<std::size_t>(ce)]);
        const double h = ch >= 0 ? to_number(row[static_cast<std::size_t>(ch)]) : kNaN;
        const std::string seg = cs >= 0 ? row[static_cast<std::size_t>(cs)] : "0";
        if (seg != segment) {  // a new segment starts flat: break the lines
            if (!segment.empty())
                for (Series* s : {&eq, &hold, &dd, &hdd}) s->add(t, kNaN);
            segment = seg;
            peak = e;
            hpeak = h;
        }
        peak = std::max(peak, e);
        if (std::isfinite(h)) hpeak = std::isfinite(hpeak) ? std::max(hpeak, h) : h;
        eq.add(t, e);
        hold.add(t, h);
        dd.add(t, peak > 0 ? -(peak - e) / peak : kNaN);
        hdd.add(t, std::isfinite(h) && hpeak > 0 ? -(hpeak - h) / hpeak : kNaN);
    }
    ChartOptions o{.title = fmt::format("{} split: equity", split),
                   .y_label = "equity",
                   .x_axis = cb >= 0 ? Axis::number : Axis::time,
                   .height = cb >= 0 ? 290 : 260};
    if (cb >= 0) {
        const bool days =
            !time_of_bar.empty() && time_of_bar.rbegin()->second - time_of_bar.begin()->second > 2 * 86400.0;
        o.x_label = "bar (trading bars only; the bar's date under each tick)";
        o.x_tick_sub = [time_of_bar, days](double bar) -> std::string {
            auto it = time_of_bar.lower_bound(bar);
            if (it == time_of_bar.end()) {
                if (time_of_bar.empty()) return "";
                it = std::prev(it);
            }
            return utc_time(it->second, days ? "%Y-%m-%d" : "%m-%d %H:%M");
        };
    }
    std::string out = panel(line_chart({eq, hold}, o));
    o.title = fmt::format("{} split: drawdown from the running peak", split);
    o.y_label = "";
    o.y_axis = Axis::percent;
    o.height = cb >= 0 ? 230 : 200;
    out += panel(line_chart({dd, hdd}, o));
    if (ch < 0) out += note(csv_path.string() + " has no buy_and_hold_equity column (written by an older version).");
    return out;
}

std::string card(const std::string& key, const std::string& value, const std::string& comment,
                 const std::string& cls = "") {
    return fmt::format(
        "<div class=\"card\"><div class=\"k\">{}</div><div class=\"v{}\">{}</div><div class=\"c\">{}</div></div>",
        xml_escape(key), cls.empty() ? "" : " " + cls, xml_escape(value), xml_escape(comment));
}

std::string good_bad(std::optional<double> a, std::optional<double> b) {
    if (!a || !b) return "";
    return *a > *b ? "good" : *a < *b ? "bad" : "";
}

/// Action labels from the profile: "+1 market" (target contracts, order type as trades.csv names it);
/// none where the profile does not describe `n` actions.
std::vector<std::string> action_labels(const std::map<std::string, std::string>& s, std::size_t n) {
    std::vector<std::string> out;
    const auto get = [&](const char* k) { return std::atoll(setting_or(s, k, "0").c_str()); };
    const long long L = get("env.position_levels"), U = get("env.urgency_levels"), M = get("instrument.max_contracts");
    if (L < 3 || U < 1 || U > 3 || static_cast<long long>(n) != L * U || M < 1) return out;
    for (std::size_t a = 0; a < n; ++a) {
        const long long i = static_cast<long long>(a) / U, u = static_cast<long long>(a) % U;
        const long long half = (L - 1) / 2, k = i - half;
        const long long target =
            static_cast<long long>(std::llround(static_cast<double>(k * M) / static_cast<double>(half)));
        out.push_back(
            fmt::format("{}{} {}", target > 0 ? "+" : "", target, backtest::order_type_name(static_cast<int>(u))));
    }
    return out;
}

std::string histogram_chart(const json::Value* hist, const std::vector<std::string>& labels_from,
                            const std::string& title) {
    if (hist == nullptr || !hist->is_array() || hist->as_array().empty()) return note("No action histogram.");
    std::vector<Bar> bars;
    const double total = sum(*hist);
    const auto& a = hist->as_array();
    for (std::size_t i = 0; i < a.size(); ++i) {
        const double count = a[i].is_number() ? a[i].as_double() : 0;
        const std::string label = i < labels_from.size() ? labels_from[i] : fmt::format("a{}", i);
        bars.push_back({.label = label,
                        .value = total > 0 ? count / total : 0,
                        .color = kStrategyColor,
                        .title = fmt::format("action {} ({}): {} bars, {:.1f}%", i, label, std::llround(count),
                                             total > 0 ? 100 * count / total : 0.0)});
    }
    return panel(bar_chart(bars, {.title = title, .y_axis = Axis::percent, .height = 230}));
}

/// A column of the trade statistics: its heading, the dotted prefix of its metrics
/// ("test.strategy"), its split's name and span.
struct MetricsColumn {
    std::string heading, prefix, split;
    Span span;
};

/// The trade statistics; the annualised figures of a short split are greyed, with a note.
std::string metrics_table(const json::Value& summary_like, const std::vector<MetricsColumn>& columns) {
    struct Row {
        const char* key;
        const char* label;
        int kind;  // 0 percent, 1 ratio, 2 integer
    };
    static const Row rows[] = {{"total_return", "total return", 0},
                               {"annual_return", "annual return", 0},
                               {"sharpe", "Sharpe (annualised)", 1},
                               {"sortino", "Sortino (annualised)", 1},
                               {"max_drawdown", "max drawdown", 0},
                               {"calmar", "Calmar (annualised)", 1},
                               {"trades", "trades", 2},
                               {"win_rate", "win rate", 0},
                               {"profit_factor", "profit factor", 1},
                               {"exposure", "exposure", 0},
                               {"turnover", "turnover (per year)", 1}};
    std::string out = "<table><tr><th>metric</th>";
    for (const auto& c : columns) out += "<th>" + xml_escape(c.heading) + "</th>";
    out += "</tr>";
    for (const auto& r : rows) {
        out += "<tr><td>" + std::string(r.label) + "</td>";
        for (const auto& c : columns) {
            const auto v = number_at(summary_like, c.prefix + "." + r.key);
            const bool grey = is_annualised(r.key) && c.span.is_short();
            out += std::string(grey ? "<td class=\"n ann\" title=\"annualised from a short split (see the note)\">"
                                    : "<td class=\"n\">") +
                   xml_escape(r.kind == 0   ? pct(v)
                              : r.kind == 1 ? num(v, 3)
                                            : integer(v)) +
                   "</td>";
        }
        out += "</tr>";
    }
    out += "</table>\n";
    std::vector<std::pair<std::string, Span>> shorts;  // one note for the short splits
    for (const auto& c : columns)
        if (c.span.is_short() &&
            std::none_of(shorts.begin(), shorts.end(), [&](auto& s) { return s.first == c.split; }))
            shorts.emplace_back(c.split, c.span);
    if (!shorts.empty()) out += short_split_note(shorts);
    return out;
}

std::string fills_table(const fs::path& trades_csv) {
    if (!is_file(trades_csv)) return note("No trades.csv.");
    const Csv csv = read_csv(trades_csv.string());
    const int side = csv.column("side"), contracts = csv.column("contracts"), type = csv.column("order_type"),
              commission = csv.column("commission");
    if (side < 0 || contracts < 0 || type < 0 || commission < 0)
        return note(trades_csv.string() + ": unexpected columns");
    long long buys = 0, sells = 0, qty = 0;
    double fees = 0;
    std::map<std::string, long long> by_type;
    for (const auto& r : csv.rows) {
        if (static_cast<int>(r.size()) <= std::max({side, contracts, type, commission})) continue;
        (r[static_cast<std::size_t>(side)] == "buy" ? buys : sells) += 1;
        qty += std::llround(std::max(0.0, to_number(r[static_cast<std::size_t>(contracts)])));
        const double f = to_number(r[static_cast<std::size_t>(commission)]);
        if (std::isfinite(f)) fees += f;
        by_type[r[static_cast<std::size_t>(type)]] += 1;
    }
    std::string out =
        "<table><tr><th>fills</th><th>buys</th><th>sells</th><th>contracts traded</th><th>commission</th>";
    for (const auto& [t, n] : by_type) out += "<th>" + xml_escape(t) + " fills</th>";
    out +=
        fmt::format(R"(</tr><tr><td class="n">{}</td><td class="n">{}</td><td class="n">{}</td><td class="n">{}</td>)"
                    R"(<td class="n">{:.2f}</td>)",
                    buys + sells, buys, sells, qty, fees);
    for (const auto& [t, n] : by_type) out += fmt::format("<td class=\"n\">{}</td>", n);
    return out + "</tr></table>\n";
}

/// Validation metric over training (eval.jsonl): the strategy's with the best marked, and
/// buy-and-hold's on the same split.
std::string validation_chart(const fs::path& eval_jsonl, const std::string& metric) {
    const auto lines = read_jsonl(eval_jsonl.string());
    if (lines.empty()) return note("No validation backtests (eval.jsonl is missing or empty; run.eval_interval = 0?).");
    const std::string field = metric_field(metric);
    Series s{.label = metric, .color = kStrategyColor};
    Series h{.label = "buy-and-hold " + field, .color = kHoldColor, .dashed = true};
    std::string unit = "env steps";
    double best = -std::numeric_limits<double>::infinity();
    std::size_t best_i = 0;
    for (const auto& l : lines) {
        std::optional<double> x = number_at(l, "env_steps");
        if (!x) {
            x = number_at(l, "updates");
            unit = "updates";
        }
        const auto v = number_at(l, "value");
        if (!x) continue;
        s.add(*x, v.value_or(kNaN));
        h.add(*x, number_at(l, "buy_and_hold." + field).value_or(kNaN));
        if (v && *v > best) {
            best = *v;
            best_i = s.x.size() - 1;
        }
    }
    if (std::isfinite(best)) s.markers.push_back(best_i);
    return panel(line_chart(
        {s, h},
        {.title = fmt::format("validation {} over training (dot: best)", field), .x_label = unit, .zero_line = true}));
}

/// Small multiples of metrics.jsonl: q/* together, every other numeric field alone. Left out,
/// and named in a note: the terms the profile turns off (CQL with dqn.cql_alpha = 0, whose
/// loss is still logged) and the fields that are 0 on every line (curiosity off, no skipped
/// update, a head's loss that is not in use).
std::string training_charts(const fs::path& metrics_jsonl, const std::map<std::string, std::string>& settings) {
    const auto lines = read_jsonl(metrics_jsonl.string());  // objects only
    if (lines.empty()) return note("No training metrics (metrics.jsonl is missing or empty).");
    const auto last_steps = number_at(lines.back(), "env_steps");
    const std::string xkey =
        number_at(lines.front(), "env_steps") && last_steps && *last_steps > 0 ? "env_steps" : "updates";
    std::vector<std::string> fields;
    for (const auto& l : lines)
        for (const auto& [k, v] : l.as_object()) {
            if (!v.is_number() || k == "step" || k == "env_steps" || k == "updates" || k.rfind("perf/", 0) == 0)
                continue;
            if (std::find(fields.begin(), fields.end(), k) == fields.end()) fields.push_back(k);
        }
    std::vector<std::string> zero, off;
    std::erase_if(fields, [&](const std::string& f) {
        if (f == "losses/cql" && to_number(setting_or(settings, "dqn.cql_alpha")) == 0) {
            off.push_back(f + ": CQL off (dqn.cql_alpha = 0)");
            return true;
        }
        const bool all_zero = std::all_of(lines.begin(), lines.end(), [&](const json::Value& l) {
            const json::Value* v = l.find(f);
            return v == nullptr || !v->is_number() || v->as_double() == 0;
        });
        if (all_zero) zero.push_back(f);
        return all_zero;
    });
    std::vector<std::pair<std::string, std::vector<Series>>> charts;  // title, series
    std::vector<Series> q;
    for (const auto& f : fields) {
        Series s{.label = f.substr(f.find('/') + 1), .color = kPalette[0]};
        for (const auto& l : lines) {
            const auto x = number_at(l, xkey);
            const json::Value* v = l.is_object() ? l.find(f) : nullptr;
            if (x) s.add(*x, v != nullptr && v->is_number() ? v->as_double() : kNaN);
        }
        if (f.rfind("q/", 0) == 0) {
            s.color = kPalette[q.size() % std::size(kPalette)];
            q.push_back(std::move(s));
        } else {
            charts.push_back({f, {std::move(s)}});
        }
    }
    if (!q.empty()) charts.insert(charts.begin(), {"q (mean, min, max)", std::move(q)});
    std::string out = "<div class=\"grid2\">";
    for (auto& [title, series] : charts) {
        if (series.size() == 1) series[0].label = "";
        out += panel(line_chart(
            series,
            {.title = title, .x_label = xkey == "env_steps" ? "env steps" : "updates", .width = 440, .height = 210}));
    }
    out += "</div>\n";
    if (!off.empty() || !zero.empty())
        out += note(fmt::format("Not drawn: {}{}{}.", fmt::join(off, "; "), !off.empty() && !zero.empty() ? "; " : "",
                                zero.empty() ? "" : fmt::format("{} (0 on every line)", fmt::join(zero, ", "))));
    return out;
}

/// A population's agent: where it stands in the population.json of its parent directory.
struct PopulationAgent {
    long long index = 0;  ///< 0-based
    std::size_t agents = 0;
    std::string record;  ///< population.json's path
};

std::optional<PopulationAgent> population_agent(const fs::path& dir, const std::string& name) {
    const fs::path record = fs::absolute(dir).lexically_normal().parent_path() / "population.json";
    if (!is_file(record)) return std::nullopt;
    try {
        const auto v = read_json(record.string(), 16u << 20, 16u << 20);
        const auto* agents = member_at(v, "agents");
        if (agents == nullptr || !agents->is_array()) return std::nullopt;
        const auto& a = agents->as_array();
        for (std::size_t i = 0; i < a.size(); ++i) {
            const auto* run = member_at(a[i], "run");
            if (run == nullptr || !run->is_string() || run->as_string() != name) continue;
            const auto index = number_at(a[i], "index");
            return PopulationAgent{index ? std::llround(*index) : static_cast<long long>(i), a.size(), record.string()};
        }
    } catch (const std::exception& e) {
        log::warn("report: {}: {}; the run's population is not shown", record.string(), e.what());
    }
    return std::nullopt;
}

/// The run's facts from summary.json (or eval.json: the checkpoint and split, and the trainer and
/// seed of the profile it stores where eval.json does not say).
std::string facts_table(const json::Value& s, const std::optional<PopulationAgent>& population,
                        const std::map<std::string, std::string>& settings, bool eval_layout) {
    std::vector<std::pair<std::string, std::string>> rows;
    auto text_at = [&](const char* k) -> std::string {
        const json::Value* v = member_at(s, k);
        if (v == nullptr || v->is_null()) return "-";
        if (v->is_string()) return v->as_string();
        if (v->is_integer()) return fmt::format("{}", v->as_i64());
        if (v->is_number()) return fmt::format("{:.6g}", v->as_double());
        return json::serialize(*v);
    };
    const auto or_setting = [&](std::string v, const char* key) {
        return v == "-" && eval_layout ? setting_or(settings, key, v) : v;
    };
    if (eval_layout) {  // eval.json: the policy and what it scored
        rows.emplace_back("checkpoint", text_at("checkpoint"));
        if (const auto* bars = s.find("bars"); bars != nullptr && bars->is_object())
            rows.emplace_back("bars scored",
                              fmt::format("{} ({} .. {}, after each segment's warm-up)", text_at("split"),
                                          integer(number_at(*bars, "from")), integer(number_at(*bars, "to"))));
        else
            rows.emplace_back("split", text_at("split"));
    }
    rows.emplace_back("trainer", or_setting(text_at("trainer"), "run.trainer"));
    rows.emplace_back("device", text_at("device"));
    rows.emplace_back("seed", or_setting(text_at("seed"), "run.seed"));
    const auto* overrides = member_at(s, "overrides");
    rows.emplace_back("overrides", overrides != nullptr && overrides->is_array() && !overrides->as_array().empty()
                                       ? joined(overrides, "  ")
                                       : "-");
    if (const auto* d = member_at(s, "data"); d != nullptr && d->is_object())
        rows.emplace_back("data", fmt::format("{} ({} bars, xxh64 {})", string_at(*d, "source", "-"),
                                              integer(number_at(*d, "bars")), string_at(*d, "xxh64", "-")));
    else if (d != nullptr && d->is_string())
        rows.emplace_back("data", d->as_string());
    const json::Value* inferred = member_at(s, "bars_per_year_inferred");
    const bool known = inferred != nullptr && inferred->kind() == json::Value::Kind::boolean;
    rows.emplace_back("bars per year", text_at("bars_per_year") + (!known                ? ""
                                                                   : inferred->as_bool() ? " (inferred from the data)"
                                                                                         : " (from the profile)"));
    rows.emplace_back("env steps", text_at("env_steps"));
    rows.emplace_back("updates", text_at("updates"));
    if (population) {
        rows.emplace_back("population",
                          fmt::format("trained in a population: agent {} (agents 0-{}), all in one process ({})",
                                      population->index, population->agents - 1, population->record));
        // The agents take turns on shared workers: an agent's wall_seconds runs from the
        // population's start to its own end, and its time alone is not measured.
        const auto wall = number_at(s, "wall_seconds");
        rows.emplace_back(
            "wall time (s)",
            wall ? fmt::format("{:.4g}, its even share of the population's {:.4g} s (the {} agents trained "
                               "together from the population's start to this agent's end)",
                               *wall / static_cast<double>(population->agents), *wall, population->agents)
                 : "-");
    } else {
        rows.emplace_back("wall time (s)", text_at("wall_seconds"));
    }
    const std::string rate = text_at("env_steps_per_s");
    rows.emplace_back("env steps/s", rate + (population && rate != "-" ? " (while the agents took turns)" : ""));
    std::string out = "<table>";
    for (const auto& [k, v] : rows) {
        if (v == "-" && (k == "env steps/s" || k == "updates" || eval_layout)) continue;
        out += "<tr><th>" + xml_escape(k) + "</th><td>" + xml_escape(v) + "</td></tr>";
    }
    return out + "</table>\n";
}

/// A link to `href` around `html` (escaped text, or markup).
std::string link(const std::string& href, const std::string& html) {
    return "<a href=\"" + xml_escape(href) + "\">" + html + "</a>";
}

/// A relative path as a URL path: each segment percent-encoded (RFC 3986) but for the
/// unreserved characters and the sub-delimiters a run's name is made of (`=`, `,`, ...), so that
/// `%`, `#`, `?`, spaces, `:` (a scheme) and bytes outside ASCII reach the file they name.
std::string url_path(const std::string& path) {
    static constexpr std::string_view keep = "-._~!$&'()*+,;=@/";
    std::string out;
    for (const char ch : path) {
        const auto c = static_cast<unsigned char>(ch);
        if (std::isalnum(c) != 0 && c < 0x80)
            out += ch;
        else if (keep.find(ch) != std::string_view::npos)
            out += ch;
        else
            out += fmt::format("%{:02X}", c);
    }
    return out;
}

/// The URL of the report of the run directory `run` relative to `from` (`run` itself where it has
/// no path relative to it).
std::string report_url(const std::string& run, const fs::path& from) {
    const std::string rel =
        fs::absolute(run).lexically_normal().lexically_relative(fs::absolute(from).lexically_normal()).generic_string();
    return url_path((rel.empty() ? run : rel) + "/report.html");
}

/// Text with a line-break opportunity (<wbr/>) after each of `after`'s characters: tables wrap
/// a run's name at its commas and a column's name at its dots, never inside a token.
std::string breakable(const std::string& text, std::string_view after) {
    std::string out;
    for (const char c : text) {
        out += xml_escape(std::string_view(&c, 1));
        if (after.find(c) != std::string_view::npos) out += "<wbr/>";
    }
    return out;
}

/// A table as HTML: an ungrouped table links each run's name to its report; a grouped one
/// links each seed's run after the setting. A number's sd goes under it (narrow columns);
/// the columns in `greyed` (annualised from a short split) are grey.
std::string html_table(const Table& t, const fs::path& base, const std::vector<std::string>& greyed = {}) {
    const auto href = [&](const std::string& run) { return report_url(run, base); };
    const auto runs_col = std::find(t.columns.begin(), t.columns.end(), "runs") - t.columns.begin();
    std::string out = "<table class=\"runs\"><tr>";
    for (std::size_t j = 0; j < t.columns.size(); ++j) {
        if (t.grouped && static_cast<long>(j) == runs_col) out += "<th>reports</th>";
        out += "<th>" + breakable(t.columns[j], "._") + "</th>";
    }
    out += "</tr>";
    for (std::size_t i = 0; i < t.rows.size(); ++i) {
        out += static_cast<int>(i) == t.best_row ? "<tr class=\"best\">" : "<tr>";
        for (std::size_t j = 0; j < t.rows[i].size(); ++j) {
            const Cell& c = t.rows[i][j];
            if (t.grouped && static_cast<long>(j) == runs_col) {
                out += "<td>";
                for (std::size_t k = 0; k < t.row_runs[i].size(); ++k) {
                    if (k > 0) out += ' ';
                    out += link(href(t.row_runs[i][k]), fmt::format("#{}", k + 1));
                }
                out += "</td>";
            }
            if (!c.is_number) {
                const std::string text = breakable(c.text, ",");
                out += "<td class=\"name\">" +
                       (!t.grouped && t.columns[j] == "run" ? link(href(t.row_runs[i].at(0)), text) : text) + "</td>";
                continue;
            }
            const bool grey = std::find(greyed.begin(), greyed.end(), t.columns[j]) != greyed.end();
            Cell mean = c;
            mean.sd.reset();
            const std::string text =
                c.number && c.sd && c.is_integer ? fmt::format("{:.1f}", *c.number) : cell_text(mean, 3);
            out += std::string(grey ? "<td class=\"n ann\">" : "<td class=\"n\">") + xml_escape(text);
            if (c.number && c.sd)
                out += fmt::format("<span class=\"sd\">± {:.{}f}</span>", *c.sd, c.is_integer ? 1 : 3);
            out += "</td>";
        }
        out += "</tr>";
    }
    return out + "</table>\n";
}

/// Orders two settings' values as the swept key's values: numerically where both are numbers,
/// else as text.
bool value_less(const std::string& a, const std::string& b) {
    const double x = to_number(a), y = to_number(b);
    if (std::isfinite(x) && std::isfinite(y)) return x < y;
    if (std::isfinite(x) != std::isfinite(y)) return std::isfinite(x);  // numbers first
    return a < b;
}

/// A bar of the sweep page: a setting (every seed's run) or, where the runs differ by their seed
/// alone (a population of seeds), one run.
struct SweepBar {
    std::string label{};  ///< "#2 learning_rate=0.001" (the rank, then the setting)
    std::vector<const RunRecord*> runs{};
    std::optional<double> metric{}, metric_sd{}, test_sharpe{}, test_sharpe_sd{};
    bool best = false;
    std::string color{};
};

/// The validation metric over training of `runs` (eval.jsonl): the mean over the runs at each
/// step some run evaluated at, with mean +- sd as the band where two or more runs have it.
Series validation_mean(const std::vector<const RunRecord*>& runs, std::string color, std::string& unit) {
    std::map<double, std::vector<double>> at;
    for (const auto* r : runs)
        for (const auto& l : read_jsonl((fs::path(r->path) / "eval.jsonl").string())) {
            std::optional<double> x = number_at(l, "env_steps");
            if (!x) {
                x = number_at(l, "updates");
                if (x) unit = "updates";
            }
            const auto v = number_at(l, "value");
            if (x && v) at[*x].push_back(*v);
        }
    Series s{.color = std::move(color)};
    for (const auto& [x, vs] : at) {
        const Stat st = stat(vs);
        s.add(x, *st.mean);
        s.band_lo.push_back(*st.mean - st.sd.value_or(kNaN));
        s.band_hi.push_back(*st.mean + st.sd.value_or(kNaN));
    }
    return s;
}

/// A search's record (run.search, docs/sweeps.md "Searching") in population.json `v`: the lineage
/// (each agent a line at its index, each copy a dashed line from the agent copied, at its step) and
/// each searched key's trajectory per agent, from the agents' lineage.jsonl; "" when it records no search.
std::string search_section(const fs::path& dir, const json::Value& v) {
    const auto* search = member_at(v, "search");
    const auto* agents = member_at(v, "agents");
    if (search == nullptr || !search->is_object() || agents == nullptr || !agents->is_array()) return "";
    const std::string method = string_at(*search, "method", "?");
    std::string out = "<h2>Search</h2>\n";
    if (method == "halving")
        out += note(fmt::format(
            "run.search = \"halving\": rungs at {} x {}^k progress units of each agent's own training; at each the "
            "agents that rank below the top 1/{} of all that reached it stop and their slots start new points, "
            "{} in all (each agent's lineage.jsonl; population.json's \"ranking\": by the last rung reached, then "
            "the metric there).",
            integer(number_at(*search, "interval")), integer(number_at(*search, "eta")),
            integer(number_at(*search, "eta")), integer(number_at(*search, "max_points"))));
    else
        out += note(fmt::format(
            "run.search = \"{}\": every {} progress units the bottom {} of the agents ranked on their validation "
            "metric copy an agent of the top as many, then perturb or draw again the keys of their search space "
            "(each agent's lineage.jsonl).",
            method, integer(number_at(*search, "interval")), pct(number_at(*search, "fraction"))));
    std::vector<Series> lineage;
    std::map<std::string, std::vector<Series>> keys;  // key -> one series per agent
    std::string copies;
    std::string unit = "env_steps";
    std::size_t i = 0;
    for (const auto& a : agents->as_array()) {
        const auto* run = member_at(a, "run");
        const auto index = number_at(a, "index");
        if (run == nullptr || !run->is_string() || !index) continue;
        const std::string color = kPalette[i++ % std::size(kPalette)];
        Series line{.label = fmt::format("agent {}", *index), .color = color};
        std::map<std::string, Series> own;
        for (const auto& l : read_jsonl((dir / run->as_string() / "lineage.jsonl").string())) {
            if (l.find("updates") != nullptr) unit = "updates";
            const auto at = number_at(l, unit);
            if (!at) continue;
            line.add(*at, *index);
            if (const auto from = number_at(l, "copied")) {
                line.markers.push_back(line.x.size() - 1);
                // No legend entry of its own (the table below lists the copies).
                lineage.push_back({.x = {*at, *at}, .y = {*from, *index}, .color = color, .dashed = true});
                copies += fmt::format(
                    R"(<tr><td class="n">{}</td><td class="n">{}</td><td class="n">{}</td><td class="n">{}</td>)"
                    R"(<td class="n">{}</td><td class="name">{}</td></tr>)",
                    integer(at), integer(index), integer(from), num(number_at(l, "metric"), 3),
                    num(number_at(l, "copied_metric"), 3),
                    xml_escape(l.find("keys") ? json::serialize(*l.find("keys")) : ""));
            }
            if (const auto* k = l.find("keys"); k != nullptr && k->is_object())
                for (const auto& [name, value] : k->as_object()) {
                    if (!value.is_number()) continue;
                    Series& s = own[name];
                    s.label = line.label;
                    s.color = color;
                    if (!s.x.empty()) s.add(*at, s.y.back());  // a step: the value holds until the next line
                    s.add(*at, value.as_double());
                }
        }
        lineage.insert(lineage.begin(), std::move(line));
        for (auto& [name, s] : own) keys[name].push_back(std::move(s));
    }
    out += panel(line_chart(
        lineage,
        {.title = "Lineage: each agent at its index; a dashed line from the agent it copied, a dot where it did",
         .x_label = unit,
         .y_label = "agent"}));
    for (auto& [name, series] : keys)
        out += panel(
            line_chart(series, {.title = name + " of each agent over training", .x_label = unit, .y_label = name}));
    if (!copies.empty())
        out += panel("<table class=\"runs\"><tr><th>" + unit +
                     "</th><th>agent</th><th>copied</th><th>its metric</th><th>copied's metric</th><th>its keys "
                     "after</th></tr>" +
                     copies + "</table>\n");
    return out;
}

/// The agents of a population directory's population.json as a table (index, seed, run linked
/// to its report, status, overrides), then its search (search_section).
std::string population_section(const fs::path& dir, const fs::path& link_base) {
    const fs::path record = dir / "population.json";
    const std::string heading = "<h2>Agents</h2>\n";
    json::Value v;
    try {
        v = read_json(record.string(), 16u << 20, 16u << 20);
    } catch (const std::exception& e) {
        log::warn("report: {}: {}; its agents are not listed", record.string(), e.what());
        return heading + panel(note(fmt::format("{} does not parse: {}", record.string(), e.what())));
    }
    const auto* agents = member_at(v, "agents");
    if (agents == nullptr || !agents->is_array()) return heading + panel(note(record.string() + " lists no agents."));
    std::string out =
        "<table class=\"runs\"><tr><th>agent</th><th>seed</th><th>run</th><th>status</th><th>its overrides</th>"
        "<th>best</th><th>test return</th><th>test Sharpe</th></tr>";
    for (const auto& a : agents->as_array()) {
        if (!a.is_object()) continue;
        const std::string run = string_at(a, "run");
        const bool has_run = !run.empty() && is_run_directory((dir / run).string());
        out += fmt::format(
            R"(<tr><td class="n">{}</td><td class="n">{}</td><td class="name">{}</td><td>{}</td>)"
            R"(<td class="name">{}</td><td class="n">{}</td><td class="n">{}</td><td class="n">{}</td></tr>)",
            integer(number_at(a, "index")), integer(number_at(a, "seed")),
            has_run ? link(report_url((dir / run).string(), link_base), breakable(run, ",")) : breakable(run, ","),
            xml_escape(string_at(a, "status")), breakable(joined(a.find("overrides"), ", "), ","),
            num(number_at(a, "best.value"), 3), pct(number_at(a, "test.strategy.total_return")),
            num(number_at(a, "test.strategy.sharpe"), 3));
    }
    return heading + panel(out + "</table>\n") + search_section(dir, v);
}

}  // namespace

std::string run_report_html(const std::string& dir_text) {
    const fs::path dir(dir_text);
    const bool eval_layout = is_file(dir / "eval.json");
    const fs::path full = normal(dir);
    const std::string name =
        full.filename().empty() ? full.parent_path().filename().string() : full.filename().string();
    const fs::path summary_path = dir / (eval_layout ? "eval.json" : "summary.json");
    json::Value summary;
    std::string problem;
    if (is_file(summary_path)) {
        try {
            summary = read_json(summary_path.string(), 16u << 20);
        } catch (const std::exception& e) {
            problem = fmt::format("{} does not parse: {}", summary_path.string(), e.what());
        }
    } else {
        problem = summary_path.filename().string() + " is missing (the run is still going, or was killed).";
    }
    const auto settings =
        is_run_directory(dir_text) ? read_run(dir_text).settings : std::map<std::string, std::string>{};
    const std::string trainer = setting_or(settings, "run.trainer");
    std::string metric = setting_or(settings, "early_stopping.metric");
    if (metric.empty()) metric = "val_sharpe";
    // eval.json has {strategy, buy_and_hold} at the top and its CSVs beside it; summary.json
    // under "test", the CSVs in backtest/.
    const std::string test = eval_layout ? "" : "test.";
    const fs::path backtest = eval_layout ? dir : dir / "backtest";
    const std::string status = string_at(summary, "status", eval_layout ? "eval" : "unknown");
    const std::string split_key = string_at(summary, "split", "test");
    const std::string split = split_key == "val" ? "validation" : split_key == "test" ? "test" : "evaluated";
    const auto per_year = bars_per_year_of(summary, settings);
    const Span test_span = span_of(summary, test + "strategy", per_year);
    const Span val_span = span_of(summary, "validation.strategy", per_year);
    const bool metric_greyed = is_annualised(metric_field(metric)) && val_span.is_short();
    const auto population = eval_layout ? std::nullopt : population_agent(dir, name);

    std::string b =
        heading(name, xml_escape(status), " " + xml_escape(status),
                xml_escape((eval_layout       ? "eval of a checkpoint"
                            : trainer.empty() ? "run"
                                              : trainer) +
                           (population ? fmt::format(", agent {} of a population of {} (agents 0-{})",
                                                     population->index, population->agents, population->agents - 1)
                                       : "")),
                dir);
    if (!problem.empty()) b += note(problem);

    const auto at = [&](const char* k) { return number_at(summary, test + k); };
    const auto ret = at("strategy.total_return"), hret = at("buy_and_hold.total_return");
    const auto sh = at("strategy.sharpe"), hsh = at("buy_and_hold.sharpe");
    const auto dd = at("strategy.max_drawdown"), hdd = at("buy_and_hold.max_drawdown");
    b += "<div class=\"cards\">";
    b += card(split + " return", pct(ret), "buy-and-hold " + pct(hret), good_bad(ret, hret));
    b += test_span.is_short()
             ? card(split + " Sharpe (annualised)", num(sh, 2),
                    fmt::format("from {} bars only, greyed (see the trade statistics); buy-and-hold {}",
                                std::llround(*test_span.bars), num(hsh, 2)),
                    "ann")
             : card(split + " Sharpe", num(sh, 2), "buy-and-hold " + num(hsh, 2), good_bad(sh, hsh));
    b += card("max drawdown", pct(dd), "buy-and-hold " + pct(hdd), good_bad(hdd, dd));
    b += card("trades", integer(at("strategy.trades")), "win rate " + pct(at("strategy.win_rate"), 0));
    if (!eval_layout) {
        const auto best = number_at(summary, "best.value");
        const auto step = number_at(summary, "best.env_steps") ? number_at(summary, "best.env_steps")
                                                               : number_at(summary, "best.updates");
        b += card("best " + metric, num(best, 3),
                  (step ? "at step " + short_number(*step) : std::string("no validation")) +
                      (metric_greyed ? ", annualised from a short split" : ""),
                  metric_greyed ? "ann" : "");
    }
    b += "</div>\n";

    const char* heading = split == "test"         ? "Test split"
                          : split == "validation" ? "Validation split"
                                                  : "Evaluated bars";
    b += "<h2>" + xml_escape(heading) + "</h2>\n";
    b += equity_section(backtest / "equity.csv", split);
    b += inference_html(eval_layout ? summary : member_or_null(summary, "test"), split);  // intervals, PSRs
    if (!eval_layout) {
        b += "<h2>Validation split</h2>\n";
        b += note("The same weights as the test backtest (the best validation weights), one sequential pass.");
        b += equity_section(backtest / "val_equity.csv", "validation");
        b += inference_html(member_or_null(summary, "validation"), "validation");
        b += "<h2>Validation over training</h2>\n";
        b += validation_chart(dir / "eval.jsonl", metric);
        if (metric_greyed)
            b +=
                note(fmt::format("{} is annualised from a validation split of {} bars, under a quarter of the {} bars "
                                 "per year: compare its values with each other, not with a year's figures.",
                                 metric, std::llround(*val_span.bars), short_number(*val_span.per_year)));
        b += "<h2>Training</h2>\n";
        b += training_charts(dir / "metrics.jsonl", settings);
    }
    b += "<h2>Actions</h2>\n";
    const json::Value* hist = member_at(summary, test + "strategy.action_histogram");
    const std::size_t n_actions = hist != nullptr && hist->is_array() ? hist->as_array().size() : 0;
    b += histogram_chart(hist, action_labels(settings, n_actions),
                         fmt::format("actions taken on the {} split (target contracts, order type)", split));

    b += "<h2>Trade statistics</h2>\n";
    std::vector<MetricsColumn> cols{{split + ": strategy", test + "strategy", split, test_span},
                                    {split + ": buy-and-hold", test + "buy_and_hold", split, test_span}};
    if (!eval_layout && !member_or_null(summary, "validation").is_null()) {
        cols.push_back({"validation (best): strategy", "validation.strategy", "validation", val_span});
        cols.push_back({"validation: buy-and-hold", "validation.buy_and_hold", "validation", val_span});
    }
    b += panel(metrics_table(summary, cols));
    b += panel(fills_table(backtest / "trades.csv"));

    b += "<h2>Run</h2>\n";
    b += panel(facts_table(summary, population, settings, eval_layout));
    b += "<h2>Resolved profile</h2>\n";
    if (is_file(dir / "config.toml"))
        b += "<pre>" + xml_escape(read_text((dir / "config.toml").string())) + "</pre>\n";
    else
        b += note("config.toml is missing.");
    return page(name + " — foxhunt-train report", b);
}

std::string sweep_report_html(const std::string& dir, const std::string& links_from) {
    const auto runs = collect_runs({dir});
    const Table grouped = seed_table(runs);
    const Table all = run_table(runs);
    const fs::path base(dir);
    const fs::path link_base = links_from.empty() ? base : fs::path(links_from);
    const bool population = is_file(base / "population.json");
    std::map<std::string, const RunRecord*> by_path;
    for (const auto& r : runs) by_path[r.path] = &r;
    const auto col_of = [&](const std::string& c) {  // a column of the grouped table
        return static_cast<std::size_t>(std::find(grouped.columns.begin(), grouped.columns.end(), c) -
                                        grouped.columns.begin());
    };
    // The swept keys: the grouped table's columns between its rank and "runs".
    const std::size_t first_key = 1, last_key = col_of("runs");
    const bool swept = last_key > first_key;
    const bool per_run = !swept && runs.size() > 1;  // only the seed differs: a bar per run

    const std::string name = normal(base).filename().string();
    std::string b = heading(name.empty() ? dir : name, population ? "population" : "sweep", "",
                            fmt::format("{} {}, {} setting{}", runs.size(), population ? "agents" : "runs",
                                        grouped.rows.size(), grouped.rows.size() == 1 ? "" : "s"),
                            base);
    // Annualised figures of short splits (any run's) are greyed, with a note.
    std::optional<Span> short_test, short_val;
    for (const auto& r : runs) {
        const auto per_year = bars_per_year_of(r.summary, r.settings);
        if (const Span sp = span_of(r.summary, "test.strategy", per_year); sp.is_short() && !short_test)
            short_test = sp;
        if (const Span sp = span_of(r.summary, "validation.strategy", per_year); sp.is_short() && !short_val)
            short_val = sp;
    }
    const std::string field = grouped.metric.substr(grouped.metric.find('_') + 1);  // "sharpe"
    const bool metric_greyed = short_val && is_annualised(field);
    std::size_t finished = 0;
    for (const auto& r : runs)
        finished += r.status == "completed" || r.status == "early_stopped" || r.status == "stopped";
    b += "<div class=\"cards\">";
    b += card(population ? "agents finished" : "runs finished", fmt::format("{}/{}", finished, runs.size()),
              "completed, early stopped or stopped by a search");
    if (grouped.best_row >= 0) {  // seed_table's columns include the metric's and test_sharpe
        const auto& best = grouped.rows[static_cast<std::size_t>(grouped.best_row)];
        b += card((swept ? "best mean " : "mean ") + grouped.metric, cell_text(best[col_of(grouped.metric)], 2),
                  "± sd over seeds", metric_greyed ? "ann" : "");
        b += card(swept ? "its test Sharpe" : "test Sharpe", cell_text(best[col_of("test_sharpe")], 2),
                  "mean ± sd over seeds", short_test ? "ann" : "");
    }
    b += "</div>\n";
    if (const std::string s = seed_spread_sentence(grouped.seed_spread); !s.empty()) b += note(s);
    for (const auto& d : grouped.duplicates) b += note(duplicate_sentence(d));

    std::vector<std::string> greyed;
    if (short_test) greyed = {"test_sharpe", "bh_sharpe"};
    if (metric_greyed) greyed.push_back(grouped.metric);

    // The bars: settings in the swept keys' order (or runs by seed), each seed's value a dot,
    // buy-and-hold's test Sharpe the reference line of the test chart.
    std::vector<SweepBar> items;
    if (per_run) {
        std::vector<const RunRecord*> ordered;
        for (const auto& r : runs) ordered.push_back(&r);
        std::stable_sort(ordered.begin(), ordered.end(),
                         [](const RunRecord* a, const RunRecord* c) { return a->seed < c->seed; });
        for (const auto* r : ordered) {
            const std::size_t rank =
                static_cast<std::size_t>(std::find_if(all.row_runs.begin(), all.row_runs.end(),
                                                      [&](const auto& p) { return p.at(0) == r->path; }) -
                                         all.row_runs.begin());
            items.push_back({.label = fmt::format("#{} seed={}", rank + 1, r->seed),
                             .runs = {r},
                             .metric = r->best_val,
                             .test_sharpe = r->test_sharpe,
                             .best = static_cast<int>(rank) == all.best_row});
        }
    } else {
        std::vector<std::size_t> order(grouped.rows.size());
        std::iota(order.begin(), order.end(), std::size_t{0});
        std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
            for (std::size_t k = first_key; k < last_key; ++k) {
                const std::string &a = grouped.rows[x][k].text, &c = grouped.rows[y][k].text;
                if (a != c) return value_less(a, c);
            }
            return false;
        });
        const std::size_t mcol = col_of(grouped.metric), scol = col_of("test_sharpe");
        for (const std::size_t i : order) {
            const auto& row = grouped.rows[i];
            const Cell &m = row[mcol], &sh = row[scol];
            SweepBar s{.label = fmt::format("#{}", i + 1),
                       .metric = m.number,
                       .metric_sd = m.sd,
                       .test_sharpe = sh.number,
                       .test_sharpe_sd = sh.sd,
                       .best = static_cast<int>(i) == grouped.best_row};
            for (std::size_t k = first_key; k < last_key; ++k) {
                const std::string& col = grouped.columns[k];
                s.label += ' ' + col.substr(col.find('.') + 1) + '=' + row[k].text;
            }
            if (!swept) s.label += " all runs";
            for (const auto& p : grouped.row_runs[i])
                if (const auto it = by_path.find(p); it != by_path.end()) s.runs.push_back(it->second);
            items.push_back(std::move(s));
        }
    }
    std::vector<Bar> bars, test_bars;
    for (std::size_t i = 0; i < items.size(); ++i) {
        auto& s = items[i];
        s.color = kPalette[i % std::size(kPalette)];
        std::vector<double> vals, sharpes, holds, val_holds;
        for (const auto* r : s.runs) {
            if (r->best_val) vals.push_back(*r->best_val);
            if (r->test_sharpe) sharpes.push_back(*r->test_sharpe);
            if (r->hold_sharpe) holds.push_back(*r->hold_sharpe);
            if (const auto h = number_at(r->summary, "validation.buy_and_hold." + metric_field(grouped.metric)))
                val_holds.push_back(*h);
        }
        // One bar: the mean over the setting's runs, each run a point when there are several.
        const auto bar_of = [&](double value, std::optional<double> sd, const std::vector<double>& points,
                                std::optional<double> reference) {
            return Bar{.label = s.label,
                       .value = value,
                       .error = sd,
                       .color = s.best ? "#059669" : kStrategyColor,
                       .title = fmt::format("{}: mean {:.3f} over {} run(s)", s.label, value, points.size()),
                       .points = s.runs.size() > 1 ? points : std::vector<double>{},
                       .reference = reference};
        };
        if (s.metric)
            bars.push_back(bar_of(*s.metric, s.metric_sd, vals,
                                  grouped.metric != "val_loss" ? stat(val_holds).mean : std::nullopt));
        if (s.test_sharpe) test_bars.push_back(bar_of(*s.test_sharpe, s.test_sharpe_sd, sharpes, stat(holds).mean));
    }
    const std::string over = per_run ? "per agent (#: rank)" : "mean ± sd over seeds, dots: the seeds (#: rank)";
    b += "<h2>" +
         xml_escape(per_run ? (population ? "Each agent's " : "Each run's ") + grouped.metric
                            : "Settings by mean " + grouped.metric + " over seeds") +
         "</h2>\n";
    ChartOptions o{.title = fmt::format("{}: {} (green: best)", grouped.metric, over),
                   .reference_label = grouped.metric == "val_loss" ? "" : "buy-and-hold",
                   .points_label = per_run ? "" : "seeds"};
    b += panel(bar_chart(bars, o));
    o.title = fmt::format("test Sharpe: {}", over);
    o.reference_label = "buy-and-hold";
    b += panel(bar_chart(test_bars, o));
    std::vector<std::pair<std::string, Span>> shorts;
    if (metric_greyed) shorts.emplace_back("validation", *short_val);
    if (short_test) shorts.emplace_back("test", *short_test);
    if (!shorts.empty()) b += short_split_note(shorts);

    // The validation curves of every setting (or run) on one chart.
    std::vector<Series> curves;
    std::string unit = "env steps";
    std::string legend;
    for (const auto& s : items) {
        Series c = validation_mean(s.runs, s.color, unit);
        if (c.x.empty()) continue;
        legend += fmt::format("<span class=\"key\"><span class=\"sw\" style=\"background:{}\"></span>{}</span> ",
                              s.color, xml_escape(s.label));
        curves.push_back(std::move(c));
    }
    b += "<h2>Validation over training</h2>\n";
    if (curves.empty()) {
        b += note("No validation backtests (no run has an eval.jsonl).");
    } else {
        b += panel(line_chart(curves, {.title = fmt::format("validation {} over training: {}", field,
                                                            per_run ? "each run" : "mean over seeds, band: ± sd"),
                                       .x_label = unit,
                                       .height = 300,
                                       .zero_line = true}) +
                   "<div class=\"keys\">" + legend + "</div>");
    }

    b += "<h2>Table</h2>\n";
    b += panel(html_table(grouped, link_base, greyed));
    b += note(
        "The best validation setting is not always the best on the test split: read the spread over seeds. "
        "bh_*: buy-and-hold on the same test split.");
    if (const auto deflated = deflated_best(runs)) b += note(deflated->text);  // docs/metrics.md
    if (population) b += population_section(base, link_base);
    b += population ? "<h2>Every agent, ranked</h2>\n" : "<h2>Every run</h2>\n";
    b += panel(html_table(all, link_base, greyed));
    return page((name.empty() ? dir : name) +
                    (population ? " — foxhunt-train population report" : " — foxhunt-train sweep report"),
                b);
}

std::string walk_forward_report_html(const std::string& dir) {
    const fs::path base(dir);
    const std::string name = normal(base).filename().string();
    json::Value wf;
    try {
        wf = read_json((base / "walk_forward.json").string(), 64u << 20);
    } catch (const std::exception& e) {
        return page(name, note(fmt::format("walk_forward.json does not parse: {}", e.what())));
    }
    const json::Value& stitched = member_or_null(wf, "stitched");
    const auto folds = number_at(wf, "folds");
    std::string b = heading(name, "walk-forward", "",
                            fmt::format("{} folds, {} window, {}", folds ? std::llround(*folds) : 0,
                                        string_at(wf, "window", "?"), xml_escape(string_at(wf, "trainer", "?"))),
                            base);
    const auto ret = number_at(stitched, "strategy.total_return"),
               hret = number_at(stitched, "buy_and_hold.total_return");
    const auto sh = number_at(stitched, "strategy.sharpe"), hsh = number_at(stitched, "buy_and_hold.sharpe");
    const auto lo = number_at(stitched, "inference.bootstrap.sharpe.lo"),
               hi = number_at(stitched, "inference.bootstrap.sharpe.hi");
    const auto dlo = number_at(stitched, "inference.bootstrap.sharpe_difference.lo"),
               dhi = number_at(stitched, "inference.bootstrap.sharpe_difference.hi");
    b += "<div class=\"cards\">";
    b += card("out-of-sample return", pct(ret), "buy-and-hold " + pct(hret), good_bad(ret, hret));
    b += card("out-of-sample Sharpe", num(sh, 2),
              lo && hi ? fmt::format("interval [{:.2f}, {:.2f}]; buy-and-hold {}", *lo, *hi, num(hsh, 2))
                       : "buy-and-hold " + num(hsh, 2),
              good_bad(sh, hsh));
    if (!dlo || !dhi)
        b += card("beat buy-and-hold?", "-", "no interval");
    else if (*dlo > 0 || *dhi < 0)
        b += card("beat buy-and-hold?", *dlo > 0 ? "yes" : "no: it lost",
                  fmt::format("Sharpe difference [{:.2f}, {:.2f}]", *dlo, *dhi), *dlo > 0 ? "good" : "bad");
    else
        b += card("beat buy-and-hold?", "not distinguishable",
                  fmt::format("Sharpe difference [{:.2f}, {:.2f}]", *dlo, *dhi));
    b += card("PSR against 0", num(number_at(stitched, "inference.psr_zero"), 3),
              "against buy-and-hold " + num(number_at(stitched, "inference.psr_buy_and_hold"), 3));
    if (const auto* d = wf.find("deflated_sharpe"); d != nullptr && d->is_object()) {
        const json::Value* yes = d->find("distinguishable");
        const bool dist = yes != nullptr && yes->kind() == json::Value::Kind::boolean && yes->as_bool();
        b += card("best fold vs luck (DSR)", num(number_at(*d, "dsr"), 3),
                  dist ? "distinguishable from noise" : "NOT distinguishable from noise", dist ? "good" : "bad");
    }
    b += "</div>\n";

    b += "<h2>Stitched out-of-sample curve</h2>\n";
    b += note(
        "The folds' test blocks, each traded with the weights its own fold selected on its validation block, "
        "compounded into one curve; buy-and-hold on the same blocks. Dots mark where each fold's test block starts.");
    const fs::path csv_path = base / "stitched_equity.csv";
    if (is_file(csv_path)) {
        const Csv csv = read_csv(csv_path.string());
        const int ct = csv.column("time"), ce = csv.column("equity"), ch = csv.column("buy_and_hold_equity"),
                  cf = csv.column("fold");
        Series eq{.label = "strategy", .color = kStrategyColor};
        Series hold{.label = "buy-and-hold", .color = kHoldColor, .dashed = true};
        std::string fold;
        for (const auto& row : csv.rows) {
            if (ct < 0 || ce < 0 || ch < 0 || cf < 0 || static_cast<int>(row.size()) <= std::max({ct, ce, ch, cf}))
                continue;
            if (row[static_cast<std::size_t>(cf)] != fold) {
                fold = row[static_cast<std::size_t>(cf)];
                eq.markers.push_back(eq.x.size());
            }
            eq.add(parse_time(row[static_cast<std::size_t>(ct)]), to_number(row[static_cast<std::size_t>(ce)]));
            hold.add(eq.x.back(), to_number(row[static_cast<std::size_t>(ch)]));
        }
        b += panel(line_chart(
            {eq, hold},
            {.title = "stitched test blocks: equity (dots: fold starts)", .y_label = "equity", .x_axis = Axis::time}));
    } else {
        b += note("stitched_equity.csv is missing.");
    }
    b += inference_html(stitched, "stitched");
    b += panel(metrics_table(wf, {{"stitched: strategy", "stitched.strategy", "stitched", {}},
                                  {"stitched: buy-and-hold", "stitched.buy_and_hold", "stitched", {}}}));

    b += "<h2>Folds</h2>\n";
    std::string t =
        "<table><tr><th>fold</th><th>train</th><th>validation</th><th>test</th><th>test return</th>"
        "<th>test Sharpe</th><th>Sharpe interval</th><th>buy-and-hold Sharpe</th><th>PSR(0)</th><th>status</th></tr>";
    if (const auto* runs = wf.find("fold_runs"); runs != nullptr && runs->is_array()) {
        for (const auto& f : runs->as_array()) {
            const auto range = [&](const char* k) {
                const auto b0 = number_at(f, std::string(k) + ".begin"), e0 = number_at(f, std::string(k) + ".end");
                return b0 && e0 ? fmt::format("[{}, {})", std::llround(*b0), std::llround(*e0)) : std::string("-");
            };
            const std::string dir_name = string_at(f, "run_dir");
            const auto flo = number_at(f, "test_backtest.inference.bootstrap.sharpe.lo"),
                       fhi = number_at(f, "test_backtest.inference.bootstrap.sharpe.hi");
            t += fmt::format(
                R"(<tr><td class="name">{}</td><td>{}</td><td>{}</td><td>{}</td><td class="n">{}</td>)"
                R"(<td class="n">{}</td><td class="n">{}</td><td class="n">{}</td><td class="n">{}</td><td>{}</td></tr>)",
                link(dir_name + "/report.html", xml_escape(dir_name)), range("train"), range("validation"),
                range("test"), pct(number_at(f, "test_backtest.strategy.total_return")),
                num(number_at(f, "test_backtest.strategy.sharpe"), 3),
                flo && fhi ? fmt::format("[{:.3f}, {:.3f}]", *flo, *fhi) : "-",
                num(number_at(f, "test_backtest.buy_and_hold.sharpe"), 3),
                num(number_at(f, "test_backtest.inference.psr_zero"), 3), xml_escape(string_at(f, "status")));
        }
    }
    b += panel(t + "</table>\n");
    if (const auto* text = member_at(wf, "deflated_sharpe.text"); text != nullptr && text->is_string())
        b += note(text->as_string());
    return page((name.empty() ? dir : name) + " — foxhunt-train walk-forward report", b);
}

std::string write_report(const std::string& path, const std::string& output) {
    std::error_code ec;
    if (!fs::is_directory(path, ec)) throw UsageError(fmt::format("report: {}: no such directory", path));
    const fs::path dir(path);
    const bool single = is_run_directory(path) || is_file(dir / "eval.json") || is_file(dir / "summary.json");
    const std::string out = output.empty() ? (dir / "report.html").string() : output;
    const auto fail = [&](const std::string& m) { throw UsageError(fmt::format("report: {}", m)); };
    if (const auto parent = fs::absolute(out).parent_path(); !fs::is_directory(parent, ec)) {
        fs::create_directories(parent, ec);
        if (ec) fail(fmt::format("cannot create {}: {}", parent.string(), ec.message()));
    }
    // A sweep or walk-forward directory: every run's report too (UsageError when it holds no run directory).
    if (!single)
        for (const auto& r : collect_runs({path}))
            io::write_file_atomically((fs::path(r.path) / "report.html").string(), run_report_html(r.path), fail);
    const std::string html = single ? run_report_html(path)
                             : is_file(dir / "walk_forward.json")  // a walk-forward directory (docs/walk-forward.md)
                                 ? walk_forward_report_html(path)
                                 : sweep_report_html(path, fs::absolute(out).parent_path().string());
    io::write_file_atomically(out, html, fail);
    return out;
}

}  // namespace fh::report
