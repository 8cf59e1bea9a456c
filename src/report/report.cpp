/// @file report.cpp
#include "report/report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <map>

#include "io/atomic_file.hpp"
#include "io/json.hpp"
#include "report/inference.hpp"
#include "report/runs.hpp"
#include "report/svg.hpp"
#include "util/errors.hpp"

namespace fh::report {

namespace fs = std::filesystem;
namespace json = io::json;

namespace {

constexpr const char* kStrategyColor = "#2563eb";
constexpr const char* kHoldColor = "#d97706";
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

constexpr const char* kCss = R"(
:root{--fg:#1f2937;--muted:#6b7280;--line:#e5e7eb;--bg:#f8fafc;--card:#fff;--blue:#2563eb;--amber:#d97706}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);font:14px/1.45 -apple-system,"Segoe UI",Roboto,"DejaVu Sans",Helvetica,Arial,sans-serif}
main{max-width:1100px;margin:0 auto;padding:24px 20px 48px}
h1{font-size:22px;margin:0 0 4px;word-break:break-all}
h2{font-size:16px;margin:28px 0 10px;padding-bottom:4px;border-bottom:1px solid var(--line)}
.sub{color:var(--muted);margin:0 0 16px}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;font-weight:600;background:#e0e7ff;color:#3730a3}
.badge.completed,.badge.early_stopped{background:#dcfce7;color:#166534}
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
table{border-collapse:collapse;width:100%;font-size:12.5px;background:var(--card)}
th,td{padding:4px 6px;border-bottom:1px solid var(--line);text-align:left;white-space:nowrap}
th{background:#f1f5f9;font-weight:600;white-space:normal;vertical-align:bottom}
td.name{white-space:normal;word-break:break-all;min-width:220px;font-size:12px}
td.n{text-align:right;font-variant-numeric:tabular-nums}
tr.best td{background:#ecfdf5;font-weight:600}
.note{color:var(--muted);font-size:13px}
pre{background:#0f172a;color:#e2e8f0;padding:12px;border-radius:8px;overflow-x:auto;font-size:12px;line-height:1.4}
a{color:var(--blue)}
footer{margin-top:32px;color:var(--muted);font-size:12px}
)";

Series make_series(std::string label, std::string color) {
    Series s;
    s.label = std::move(label);
    s.color = std::move(color);
    return s;
}

std::string page(const std::string& title, const std::string& body) {
    return "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n"
           "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
           "img-src data:\"/>\n"
           "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>\n<title>" +
           xml_escape(title) + "</title>\n<style>" + kCss + "</style>\n</head>\n<body>\n<main>\n" + body +
           "<footer>foxhunt-train report: one self-contained file (inline SVG, no scripts, nothing loaded from the "
           "network).</footer>\n</main>\n</body>\n</html>\n";
}

bool is_file(const fs::path& p) {
    std::error_code ec;
    return fs::is_regular_file(p, ec);
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
std::string num(std::optional<double> v, int decimals = 3) { return v ? fmt::format("{:.{}f}", *v, decimals) : "-"; }
std::string integer(std::optional<double> v) { return v ? fmt::format("{}", std::llround(*v)) : "-"; }

const json::Value& member_or_null(const json::Value& v, const char* key) {
    static const json::Value null;
    const json::Value* m = v.is_object() ? v.find(key) : nullptr;
    return m != nullptr ? *m : null;
}

std::string panel(const std::string& inner) { return "<div class=\"panel\">" + inner + "</div>\n"; }
std::string note(const std::string& text) { return "<p class=\"note\">" + xml_escape(text) + "</p>\n"; }

/// The equity and drawdown charts of one equity.csv (strategy and buy-and-hold).
std::string equity_section(const fs::path& csv_path, const std::string& split) {
    if (!is_file(csv_path)) return note(fmt::format("No {} backtest ({} is missing).", split, csv_path.filename().string()));
    const Csv csv = read_csv(csv_path.string());
    const int ct = csv.column("time"), ce = csv.column("equity"), ch = csv.column("buy_and_hold_equity"),
              cs = csv.column("segment");
    if (ct < 0 || ce < 0) return note(csv_path.string() + " has no time/equity columns.");
    Series eq = make_series("strategy", kStrategyColor);
    Series hold = make_series("buy-and-hold", kHoldColor);
    Series dd = make_series("strategy", kStrategyColor);
    Series hdd = make_series("buy-and-hold", kHoldColor);
    dd.fill_to_zero = true;
    hold.dashed = hdd.dashed = true;
    std::string segment;
    double peak = 0, hpeak = 0;
    for (const auto& row : csv.rows) {
        if (static_cast<int>(row.size()) <= std::max({ct, ce, ch, cs})) continue;
        const double t = parse_time(row[static_cast<std::size_t>(ct)]);
        const double e = to_number(row[static_cast<std::size_t>(ce)]);
        const double h = ch >= 0 ? to_number(row[static_cast<std::size_t>(ch)]) : kNaN;
        const std::string seg = cs >= 0 ? row[static_cast<std::size_t>(cs)] : "0";
        if (seg != segment) {  // a new segment starts flat: break the lines
            if (!segment.empty())
                for (Series* s : {&eq, &hold, &dd, &hdd}) {
                    s->x.push_back(t);
                    s->y.push_back(kNaN);
                }
            segment = seg;
            peak = e;
            hpeak = h;
        }
        peak = std::max(peak, e);
        if (std::isfinite(h)) hpeak = std::isfinite(hpeak) ? std::max(hpeak, h) : h;
        eq.x.push_back(t);
        eq.y.push_back(e);
        hold.x.push_back(t);
        hold.y.push_back(h);
        dd.x.push_back(t);
        dd.y.push_back(peak > 0 ? -(peak - e) / peak : kNaN);
        hdd.x.push_back(t);
        hdd.y.push_back(std::isfinite(h) && hpeak > 0 ? -(hpeak - h) / hpeak : kNaN);
    }
    ChartOptions o;
    o.title = fmt::format("{} split: equity", split);
    o.x_axis = Axis::time;
    o.y_label = "equity";
    std::string out = panel(line_chart({eq, hold}, o));
    ChartOptions d;
    d.title = fmt::format("{} split: drawdown from the running peak", split);
    d.x_axis = Axis::time;
    d.y_axis = Axis::percent;
    d.height = 200;
    out += panel(line_chart({dd, hdd}, d));
    if (ch < 0) out += note(csv_path.string() + " has no buy_and_hold_equity column (written by an older version).");
    return out;
}

std::string card(const std::string& key, const std::string& value, const std::string& comment, const std::string& cls = "") {
    return fmt::format("<div class=\"card\"><div class=\"k\">{}</div><div class=\"v{}\">{}</div><div class=\"c\">{}</div></div>",
                       xml_escape(key), cls.empty() ? "" : " " + cls, xml_escape(value), xml_escape(comment));
}

std::string good_bad(std::optional<double> a, std::optional<double> b) {
    if (!a || !b) return "";
    return *a > *b ? "good" : *a < *b ? "bad" : "";
}

/// Action labels from the profile: "+1 mkt" (target contracts, order type).
std::vector<std::string> action_labels(const std::map<std::string, std::string>& s, std::size_t n) {
    std::vector<std::string> out;
    const auto get = [&](const char* k) -> long long {
        const auto it = s.find(k);
        return it == s.end() ? 0 : std::atoll(it->second.c_str());
    };
    const long long L = get("env.position_levels"), U = get("env.urgency_levels"), M = get("instrument.max_contracts");
    static const char* urgency[] = {"mkt", "lim", "far"};
    for (std::size_t a = 0; a < n; ++a) {
        if (L < 3 || U < 1 || U > 3 || static_cast<long long>(n) != L * U || M < 1) {
            out.push_back(fmt::format("a{}", a));
            continue;
        }
        const long long i = static_cast<long long>(a) / U, u = static_cast<long long>(a) % U;
        const long long half = (L - 1) / 2, k = i - half;
        const long long target = static_cast<long long>(std::llround(static_cast<double>(k * M) / static_cast<double>(half)));
        out.push_back(fmt::format("{}{} {}", target > 0 ? "+" : "", target, urgency[u]));
    }
    return out;
}

std::string histogram_chart(const json::Value* hist, const std::vector<std::string>& labels_from, const std::string& title) {
    if (hist == nullptr || !hist->is_array() || hist->as_array().empty()) return note("No action histogram.");
    std::vector<Bar> bars;
    double total = 0;
    for (const auto& v : hist->as_array()) total += v.is_number() ? v.as_double() : 0;
    const auto& a = hist->as_array();
    for (std::size_t i = 0; i < a.size(); ++i) {
        const double count = a[i].is_number() ? a[i].as_double() : 0;
        const std::string label = i < labels_from.size() ? labels_from[i] : fmt::format("a{}", i);
        bars.push_back(Bar{label, total > 0 ? count / total : 0, std::nullopt, kStrategyColor,
                           fmt::format("action {} ({}): {} bars, {:.1f}%", i, label, std::llround(count),
                                       total > 0 ? 100 * count / total : 0.0)});
    }
    ChartOptions o;
    o.title = title;
    o.y_axis = Axis::percent;
    o.height = 230;
    return panel(bar_chart(bars, o));
}

std::string metrics_table(const json::Value& summary_like, const std::vector<std::pair<std::string, std::string>>& columns) {
    // columns: (heading, dotted prefix such as "test.strategy")
    struct Row {
        const char* key;
        const char* label;
        int kind;  // 0 percent, 1 ratio, 2 integer
    };
    static const Row rows[] = {{"total_return", "total return", 0}, {"annual_return", "annual return", 0},
                               {"sharpe", "Sharpe", 1},             {"sortino", "Sortino", 1},
                               {"max_drawdown", "max drawdown", 0}, {"calmar", "Calmar", 1},
                               {"trades", "trades", 2},             {"win_rate", "win rate", 0},
                               {"profit_factor", "profit factor", 1}, {"exposure", "exposure", 0},
                               {"turnover", "turnover (per year)", 1}};
    std::string out = "<table><tr><th>metric</th>";
    for (const auto& c : columns) out += "<th>" + xml_escape(c.first) + "</th>";
    out += "</tr>";
    for (const auto& r : rows) {
        out += "<tr><td>" + std::string(r.label) + "</td>";
        for (const auto& c : columns) {
            const auto v = number_at(summary_like, c.second + "." + r.key);
            out += "<td class=\"n\">" + xml_escape(r.kind == 0 ? pct(v) : r.kind == 1 ? num(v, 3) : integer(v)) + "</td>";
        }
        out += "</tr>";
    }
    return out + "</table>\n";
}

std::string fills_table(const fs::path& trades_csv) {
    if (!is_file(trades_csv)) return note("No trades.csv.");
    const Csv csv = read_csv(trades_csv.string());
    const int side = csv.column("side"), contracts = csv.column("contracts"), type = csv.column("order_type"),
              commission = csv.column("commission");
    if (side < 0 || contracts < 0 || type < 0 || commission < 0) return note(trades_csv.string() + ": unexpected columns");
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
    std::string out = "<table><tr><th>fills</th><th>buys</th><th>sells</th><th>contracts traded</th><th>commission</th>";
    for (const auto& [t, n] : by_type) out += "<th>" + xml_escape(t) + " fills</th>";
    out += fmt::format("</tr><tr><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>"
                       "<td class=\"n\">{:.2f}</td>",
                       buys + sells, buys, sells, qty, fees);
    for (const auto& [t, n] : by_type) out += fmt::format("<td class=\"n\">{}</td>", n);
    return out + "</tr></table>\n";
}

/// Validation metric over training (eval.jsonl): the strategy's with the best marked, and
/// buy-and-hold's on the same split.
std::string validation_chart(const fs::path& eval_jsonl, const std::string& metric) {
    const auto lines = read_jsonl(eval_jsonl.string());
    if (lines.empty()) return note("No validation backtests (eval.jsonl is missing or empty; run.eval_interval = 0?).");
    const std::string field = metric.substr(metric.find('_') + 1) == "return" ? "total_return" : metric.substr(metric.find('_') + 1);
    Series s = make_series(metric, kStrategyColor);
    Series h = make_series("buy-and-hold " + field, kHoldColor);
    h.dashed = true;
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
        s.x.push_back(*x);
        s.y.push_back(v ? *v : kNaN);
        h.x.push_back(*x);
        const auto hv = number_at(l, "buy_and_hold." + field);
        h.y.push_back(hv ? *hv : kNaN);
        if (v && *v > best) {
            best = *v;
            best_i = s.x.size() - 1;
        }
    }
    if (std::isfinite(best)) s.markers.push_back(best_i);
    ChartOptions o;
    o.title = fmt::format("validation {} over training (dot: best)", field);
    o.x_label = unit;
    o.zero_line = true;
    return panel(line_chart({s, h}, o));
}

/// Small multiples of metrics.jsonl: q/* together, every other numeric field alone.
std::string training_charts(const fs::path& metrics_jsonl) {
    const auto lines = read_jsonl(metrics_jsonl.string());
    if (lines.empty()) return note("No training metrics (metrics.jsonl is missing or empty).");
    const std::string xkey = number_at(lines.front(), "env_steps") && number_at(lines.back(), "env_steps") &&
                                     *number_at(lines.back(), "env_steps") > 0
                                 ? "env_steps"
                                 : "updates";
    std::vector<std::string> fields;
    for (const auto& [k, v] : lines.back().as_object()) {
        if (!v.is_number() || k == "step" || k == "env_steps" || k == "updates" || k.rfind("perf/", 0) == 0) continue;
        fields.push_back(k);
    }
    static const char* palette[] = {"#2563eb", "#dc2626", "#059669", "#7c3aed", "#d97706", "#0891b2"};
    std::vector<std::pair<std::string, std::vector<Series>>> charts;  // title, series
    std::vector<Series> q;
    for (const auto& f : fields) {
        Series s = make_series(f.substr(f.find('/') + 1), palette[0]);
        for (const auto& l : lines) {
            const auto x = number_at(l, xkey);
            const json::Value* v = l.is_object() ? l.find(f) : nullptr;
            if (!x) continue;
            s.x.push_back(*x);
            s.y.push_back(v != nullptr && v->is_number() ? v->as_double() : kNaN);
        }
        if (f.rfind("q/", 0) == 0) {
            s.color = palette[q.size() % std::size(palette)];
            q.push_back(std::move(s));
        } else {
            charts.push_back({f, {std::move(s)}});
        }
    }
    if (!q.empty()) charts.insert(charts.begin(), {"q (mean, min, max)", std::move(q)});
    std::string out = "<div class=\"grid2\">";
    for (auto& [title, series] : charts) {
        ChartOptions o;
        o.title = title;
        o.width = 440;
        o.height = 210;
        o.x_label = xkey == "env_steps" ? "env steps" : "updates";
        if (series.size() == 1) series[0].label = "";
        out += panel(line_chart(series, o));
    }
    return out + "</div>\n";
}

std::string facts_table(const json::Value& s) {
    std::vector<std::pair<std::string, std::string>> rows;
    auto text_at = [&](const char* k) -> std::string {
        const json::Value* v = s.is_object() ? s.find(k) : nullptr;
        if (v == nullptr || v->is_null()) return "-";
        if (v->is_string()) return v->as_string();
        if (v->is_integer()) return fmt::format("{}", v->as_i64());
        if (v->is_number()) return fmt::format("{:.6g}", v->as_double());
        return json::serialize(*v);
    };
    rows.reserve(12);
    rows.emplace_back("trainer", text_at("trainer"));
    rows.emplace_back("device", text_at("device"));
    rows.emplace_back("seed", text_at("seed"));
    std::string overrides = "-";
    if (const auto* o = s.is_object() ? s.find("overrides") : nullptr; o != nullptr && o->is_array() && !o->as_array().empty()) {
        overrides.clear();
        for (const auto& v : o->as_array())
            if (v.is_string()) overrides += (overrides.empty() ? "" : "  ") + v.as_string();
    }
    rows.emplace_back("overrides", overrides);
    if (const auto* d = s.is_object() ? s.find("data") : nullptr; d != nullptr && d->is_object()) {
        const auto* src = d->find("source");
        const auto* h = d->find("xxh64");
        const auto bars = number_at(*d, "bars");
        rows.emplace_back("data", fmt::format("{} ({} bars, xxh64 {})", src && src->is_string() ? src->as_string() : "-",
                                              integer(bars), h && h->is_string() ? h->as_string() : "-"));
    } else if (const auto* d2 = s.is_object() ? s.find("data") : nullptr; d2 != nullptr && d2->is_string()) {
        rows.emplace_back("data", d2->as_string());
    }
    rows.emplace_back("bars per year", text_at("bars_per_year"));
    rows.emplace_back("env steps", text_at("env_steps"));
    rows.emplace_back("updates", text_at("updates"));
    rows.emplace_back("wall time (s)", text_at("wall_seconds"));
    rows.emplace_back("env steps/s", text_at("env_steps_per_s"));
    std::string out = "<table>";
    for (const auto& [k, v] : rows) {
        if (v == "-" && (k == "env steps/s" || k == "updates")) continue;
        out += "<tr><th>" + xml_escape(k) + "</th><td>" + xml_escape(v) + "</td></tr>";
    }
    return out + "</table>\n";
}

std::map<std::string, std::string> settings_of(const fs::path& dir) {
    if (!is_file(dir / "config.toml")) return {};
    try {
        return read_run(dir.string()).settings;
    } catch (const Error&) {
        return {};
    }
}

std::string run_page(const fs::path& dir, bool eval_layout) {
    const std::string name = fs::absolute(dir).lexically_normal().filename().string().empty()
                                 ? fs::absolute(dir).lexically_normal().parent_path().filename().string()
                                 : fs::absolute(dir).lexically_normal().filename().string();
    const fs::path summary_path = dir / (eval_layout ? "eval.json" : "summary.json");
    json::Value summary;
    std::string problem;
    if (is_file(summary_path)) {
        try {
            summary = json::parse(read_text(summary_path.string()), json::Limits{16u << 20, 64, true});
        } catch (const std::exception& e) {
            problem = fmt::format("{} does not parse: {}", summary_path.string(), e.what());
        }
    } else {
        problem = summary_path.filename().string() + " is missing (the run is still going, or was killed).";
    }
    const auto settings = settings_of(dir);
    const auto setting = [&](const char* k) {
        const auto it = settings.find(k);
        return it == settings.end() ? std::string() : it->second;
    };
    const std::string metric = setting("early_stopping.metric").empty() ? "val_sharpe" : setting("early_stopping.metric");
    // eval.json has {strategy, buy_and_hold} at the top; summary.json under "test".
    const std::string test = eval_layout ? "" : "test.";
    std::string status = eval_layout ? "eval" : "unknown";
    if (const auto* s = summary.is_object() ? summary.find("status") : nullptr; s != nullptr && s->is_string())
        status = s->as_string();
    std::string split = "test";
    if (const auto* s = summary.is_object() ? summary.find("split") : nullptr; s != nullptr && s->is_string())
        split = s->as_string() == "val" ? "validation" : "test";

    std::string b;
    b += "<h1>" + xml_escape(name) + "</h1>\n";
    b += fmt::format("<p class=\"sub\"><span class=\"badge {}\">{}</span> &#160; {} &#160;·&#160; {}</p>\n",
                     xml_escape(status), xml_escape(status),
                     xml_escape(eval_layout ? "eval of a checkpoint" : setting("run.trainer").empty() ? "run" : setting("run.trainer")),
                     xml_escape(fs::absolute(dir).lexically_normal().string()));
    if (!problem.empty()) b += note(problem);

    const auto ret = number_at(summary, test + "strategy.total_return");
    const auto hret = number_at(summary, test + "buy_and_hold.total_return");
    const auto sh = number_at(summary, test + "strategy.sharpe");
    const auto hsh = number_at(summary, test + "buy_and_hold.sharpe");
    const auto dd = number_at(summary, test + "strategy.max_drawdown");
    const auto hdd = number_at(summary, test + "buy_and_hold.max_drawdown");
    b += "<div class=\"cards\">";
    b += card(split + " return", pct(ret), "buy-and-hold " + pct(hret), good_bad(ret, hret));
    b += card(split + " Sharpe", num(sh, 2), "buy-and-hold " + num(hsh, 2), good_bad(sh, hsh));
    b += card("max drawdown", pct(dd), "buy-and-hold " + pct(hdd), good_bad(hdd, dd));
    b += card("trades", integer(number_at(summary, test + "strategy.trades")),
              "win rate " + pct(number_at(summary, test + "strategy.win_rate"), 0));
    if (!eval_layout) {
        const auto best = number_at(summary, "best.value");
        const auto step = number_at(summary, "best.env_steps") ? number_at(summary, "best.env_steps") : number_at(summary, "best.updates");
        b += card("best " + metric, num(best, 3), step ? "at step " + short_number(*step) : "no validation");
    }
    b += "</div>\n";

    b += "<h2>" + xml_escape(split == "test" ? "Test split" : "Validation split") + "</h2>\n";
    b += equity_section(dir / (eval_layout ? "equity.csv" : "backtest/equity.csv"), split);
    b += inference_html(eval_layout ? summary : member_or_null(summary, "test"), split);  // intervals, PSRs
    if (!eval_layout) {
        b += "<h2>Validation split</h2>\n";
        b += note("The same weights as the test backtest (the best validation weights), one sequential pass.");
        b += equity_section(dir / "backtest/val_equity.csv", "validation");
        b += inference_html(member_or_null(summary, "validation"), "validation");
        b += "<h2>Validation over training</h2>\n";
        b += validation_chart(dir / "eval.jsonl", metric);
        b += "<h2>Training</h2>\n";
        b += training_charts(dir / "metrics.jsonl");
    }
    b += "<h2>Actions</h2>\n";
    const json::Value* hist = nullptr;
    if (summary.is_object()) {
        const json::Value* t = eval_layout ? &summary : summary.find("test");
        if (t != nullptr && t->is_object())
            if (const auto* st = t->find("strategy"); st != nullptr && st->is_object()) hist = st->find("action_histogram");
    }
    const std::size_t n_actions = hist != nullptr && hist->is_array() ? hist->as_array().size() : 0;
    b += histogram_chart(hist, action_labels(settings, n_actions),
                         fmt::format("actions taken on the {} split (target contracts, order type)", split));

    b += "<h2>Trade statistics</h2>\n";
    std::vector<std::pair<std::string, std::string>> cols{{split + ": strategy", eval_layout ? "strategy" : "test.strategy"},
                                                          {split + ": buy-and-hold", eval_layout ? "buy_and_hold" : "test.buy_and_hold"}};
    if (!eval_layout && summary.is_object() && summary.find("validation") != nullptr && !summary.find("validation")->is_null()) {
        cols.emplace_back("validation (best): strategy", "validation.strategy");
        cols.emplace_back("validation: buy-and-hold", "validation.buy_and_hold");
    }
    b += panel(metrics_table(summary, cols));
    b += panel(fills_table(dir / (eval_layout ? "trades.csv" : "backtest/trades.csv")));

    b += "<h2>Run</h2>\n";
    b += panel(facts_table(summary));
    b += "<h2>Resolved profile</h2>\n";
    if (is_file(dir / "config.toml")) b += "<pre>" + xml_escape(read_text((dir / "config.toml").string())) + "</pre>\n";
    else b += note("config.toml is missing.");
    return page(name + " — foxhunt-train report", b);
}

std::string link(const std::string& href, const std::string& text) {
    return "<a href=\"" + xml_escape(href) + "\">" + xml_escape(text) + "</a>";
}

/// A table as HTML: an ungrouped table links each run's name to its report; a grouped one
/// links each seed's run after the setting.
std::string html_table(const Table& t, const fs::path& base) {
    const auto href = [&](const std::string& p) {
        const std::string rel =
            fs::absolute(p).lexically_normal().lexically_relative(fs::absolute(base).lexically_normal()).generic_string();
        return (rel.empty() ? p : rel) + "/report.html";
    };
    const auto runs_col = std::find(t.columns.begin(), t.columns.end(), "runs") - t.columns.begin();
    std::string out = "<table><tr>";
    for (std::size_t j = 0; j < t.columns.size(); ++j) {
        if (t.grouped && static_cast<long>(j) == runs_col) out += "<th>reports</th>";
        out += "<th>" + xml_escape(t.columns[j]) + "</th>";
    }
    out += "</tr>";
    for (std::size_t i = 0; i < t.rows.size(); ++i) {
        out += static_cast<int>(i) == t.best_row ? "<tr class=\"best\">" : "<tr>";
        for (std::size_t j = 0; j < t.rows[i].size(); ++j) {
            const Cell& c = t.rows[i][j];
            if (t.grouped && static_cast<long>(j) == runs_col) {
                std::string links;
                for (std::size_t k = 0; k < t.row_runs[i].size(); ++k)
                {
                    if (k > 0) links += ' ';
                    links += link(href(t.row_runs[i][k]), fmt::format("#{}", k + 1));
                }
                out += "<td>" + links + "</td>";
            }
            if (!t.grouped && t.columns[j] == "run") {
                out += "<td class=\"name\">" + link(href(t.row_runs[i].at(0)), c.text) + "</td>";
                continue;
            }
            out += std::string(c.is_number ? "<td class=\"n\">" : "<td>") + xml_escape(cell_text(c, 3)) + "</td>";
        }
        out += "</tr>";
    }
    return out + "</table>\n";
}

}  // namespace

std::string run_report_html(const std::string& dir) {
    const bool eval_layout = is_file(fs::path(dir) / "eval.json");
    return run_page(dir, eval_layout);
}

std::string sweep_report_html(const std::string& dir, const std::string& links_from) {
    const auto runs = collect_runs({dir});
    const Table grouped = seed_table(runs);
    const Table all = run_table(runs);
    const fs::path base(dir);
    const fs::path link_base = links_from.empty() ? base : fs::path(links_from);
    std::string b;
    const std::string name = fs::absolute(base).lexically_normal().filename().string();
    b += "<h1>" + xml_escape(name.empty() ? dir : name) + "</h1>\n";
    b += fmt::format("<p class=\"sub\"><span class=\"badge\">sweep</span> &#160; {} runs, {} settings &#160;·&#160; {}</p>\n",
                     runs.size(), grouped.rows.size(), xml_escape(fs::absolute(base).lexically_normal().string()));
    std::size_t finished = 0;
    for (const auto& r : runs) finished += r.status == "completed" || r.status == "early_stopped";
    b += "<div class=\"cards\">";
    b += card("runs finished", fmt::format("{}/{}", finished, runs.size()), "completed or early stopped");
    if (grouped.best_row >= 0) {
        const auto& best = grouped.rows[static_cast<std::size_t>(grouped.best_row)];
        const auto col = [&](const std::string& c) -> const Cell* {
            const auto it = std::find(grouped.columns.begin(), grouped.columns.end(), c);
            return it == grouped.columns.end() ? nullptr : &best[static_cast<std::size_t>(it - grouped.columns.begin())];
        };
        if (const Cell* v = col(grouped.metric)) b += card("best mean " + grouped.metric, cell_text(*v, 2), "± sd over seeds");
        if (const Cell* v = col("test_sharpe")) b += card("its test Sharpe", cell_text(*v, 2), "mean ± sd over seeds");
    }
    b += "</div>\n";

    b += "<h2>Settings ranked by mean " + xml_escape(grouped.metric) + " over seeds</h2>\n";
    std::vector<Bar> bars, test_bars;
    const auto metric_col = std::find(grouped.columns.begin(), grouped.columns.end(), grouped.metric) - grouped.columns.begin();
    const auto sharpe_col = std::find(grouped.columns.begin(), grouped.columns.end(), "test_sharpe") - grouped.columns.begin();
    const long first_key = 1;
    const long last_key = static_cast<long>(std::find(grouped.columns.begin(), grouped.columns.end(), "runs") -
                                                           grouped.columns.begin());
    for (std::size_t i = 0; i < grouped.rows.size(); ++i) {
        const auto& row = grouped.rows[i];
        std::string label;
        for (long k = first_key; k < last_key; ++k) {
            const std::string& col = grouped.columns[static_cast<std::size_t>(k)];
            if (!label.empty()) label += ' ';
            label.append(col, col.find('.') + 1);
            label += '=';
            label += row[static_cast<std::size_t>(k)].text;
        }
        if (label.empty()) label = "all runs";
        const Cell& m = row[static_cast<std::size_t>(metric_col)];
        const Cell& s = row[static_cast<std::size_t>(sharpe_col)];
        const std::string color = static_cast<int>(i) == grouped.best_row ? "#059669" : kStrategyColor;
        if (m.number) bars.push_back(Bar{label, *m.number, m.sd, color, label + ": " + cell_text(m, 3)});
        if (s.number) test_bars.push_back(Bar{label, *s.number, s.sd, color, label + ": " + cell_text(s, 3)});
    }
    ChartOptions o;
    o.title = fmt::format("mean {} ± sd over seeds (green: best)", grouped.metric);
    b += panel(bar_chart(bars, o));
    o.title = "test Sharpe of the same settings: mean ± sd over seeds";
    b += panel(bar_chart(test_bars, o));
    b += panel(html_table(grouped, link_base));
    b += note("The best validation setting is not always the best on the test split: read the spread over seeds.");
    if (const auto deflated = deflated_best(runs)) b += note(deflated->text);  // docs/metrics.md
    b += "<h2>Every run</h2>\n";
    b += panel(html_table(all, link_base));
    return page((name.empty() ? dir : name) + " — foxhunt-train sweep report", b);
}

std::string walk_forward_report_html(const std::string& dir) {
    const fs::path base(dir);
    const std::string name = fs::absolute(base).lexically_normal().filename().string();
    json::Value wf;
    try {
        wf = json::parse(read_text((base / "walk_forward.json").string()), json::Limits{64u << 20, 64, true});
    } catch (const std::exception& e) {
        return page(name, note(fmt::format("walk_forward.json does not parse: {}", e.what())));
    }
    const json::Value& stitched = member_or_null(wf, "stitched");
    std::string b;
    b += "<h1>" + xml_escape(name) + "</h1>\n";
    const auto folds = number_at(wf, "folds");
    const json::Value* window = wf.find("window");
    const json::Value* trainer = wf.find("trainer");
    b += fmt::format(
        "<p class=\"sub\"><span class=\"badge\">walk-forward</span> &#160; {} folds, {} window, {} "
        "&#160;·&#160; {}</p>\n",
        folds ? std::llround(*folds) : 0, window != nullptr && window->is_string() ? window->as_string() : "?",
        trainer != nullptr && trainer->is_string() ? xml_escape(trainer->as_string()) : "?",
        xml_escape(fs::absolute(base).lexically_normal().string()));
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
    b += card("beat buy-and-hold?",
              dlo && dhi ? (*dlo > 0   ? "yes"
                            : *dhi < 0 ? "no: it lost"
                                       : "not distinguishable")
                         : "-",
              dlo && dhi ? fmt::format("Sharpe difference [{:.2f}, {:.2f}]", *dlo, *dhi) : "no interval",
              dlo && dhi ? (*dlo > 0   ? "good"
                            : *dhi < 0 ? "bad"
                                       : "")
                         : "");
    b += card("PSR against 0", num(number_at(stitched, "inference.psr_zero"), 3),
              "against buy-and-hold " + num(number_at(stitched, "inference.psr_buy_and_hold"), 3));
    if (const auto* d = wf.find("deflated_sharpe"); d != nullptr && d->is_object()) {
        const auto dsr = number_at(*d, "dsr");
        const json::Value* yes = d->find("distinguishable");
        const bool dist = yes != nullptr && yes->kind() == json::Value::Kind::boolean && yes->as_bool();
        b += card("best fold vs luck (DSR)", num(dsr, 3),
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
        Series eq = make_series("strategy", kStrategyColor);
        Series hold = make_series("buy-and-hold", kHoldColor);
        hold.dashed = true;
        std::string fold;
        for (const auto& row : csv.rows) {
            if (ct < 0 || ce < 0 || ch < 0 || cf < 0 || static_cast<int>(row.size()) <= std::max({ct, ce, ch, cf}))
                continue;
            if (row[static_cast<std::size_t>(cf)] != fold) {
                fold = row[static_cast<std::size_t>(cf)];
                eq.markers.push_back(eq.x.size());
            }
            eq.x.push_back(parse_time(row[static_cast<std::size_t>(ct)]));
            eq.y.push_back(to_number(row[static_cast<std::size_t>(ce)]));
            hold.x.push_back(eq.x.back());
            hold.y.push_back(to_number(row[static_cast<std::size_t>(ch)]));
        }
        ChartOptions o;
        o.title = "stitched test blocks: equity (dots: fold starts)";
        o.x_axis = Axis::time;
        o.y_label = "equity";
        b += panel(line_chart({eq, hold}, o));
    } else {
        b += note("stitched_equity.csv is missing.");
    }
    b += inference_html(stitched, "stitched");
    b += panel(metrics_table(
        wf, {{"stitched: strategy", "stitched.strategy"}, {"stitched: buy-and-hold", "stitched.buy_and_hold"}}));

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
            const json::Value* rd = f.find("run_dir");
            const std::string dir_name = rd != nullptr && rd->is_string() ? rd->as_string() : "";
            const json::Value* st = f.find("status");
            const auto flo = number_at(f, "test_backtest.inference.bootstrap.sharpe.lo"),
                       fhi = number_at(f, "test_backtest.inference.bootstrap.sharpe.hi");
            t += fmt::format(
                "<tr><td class=\"name\">{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"n\">{}</td><td "
                "class=\"n\">{}</td>"
                "<td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td></tr>",
                link(dir_name + "/report.html", dir_name), range("train"), range("validation"), range("test"),
                pct(number_at(f, "test_backtest.strategy.total_return")), num(number_at(f, "test_backtest.strategy.sharpe"), 3),
                flo && fhi ? fmt::format("[{:.3f}, {:.3f}]", *flo, *fhi) : "-",
                num(number_at(f, "test_backtest.buy_and_hold.sharpe"), 3), num(number_at(f, "test_backtest.inference.psr_zero"), 3),
                st != nullptr && st->is_string() ? xml_escape(st->as_string()) : "");
        }
    }
    b += panel(t + "</table>\n");
    if (const auto* d = wf.find("deflated_sharpe"); d != nullptr && d->is_object())
        if (const auto* text = d->find("text"); text != nullptr && text->is_string()) b += note(text->as_string());
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
    if (single) {
        io::write_file_atomically(out, run_report_html(path), fail);
        return out;
    }
    const auto runs = collect_runs({path});  // UsageError when it holds no run directory
    for (const auto& r : runs) io::write_file_atomically((fs::path(r.path) / "report.html").string(), run_report_html(r.path), fail);
    if (is_file(dir / "walk_forward.json")) {  // a walk-forward directory (docs/walk-forward.md)
        io::write_file_atomically(out, walk_forward_report_html(path), fail);
        return out;
    }
    const fs::path out_dir = fs::absolute(out).parent_path();
    io::write_file_atomically(out, sweep_report_html(path, out_dir.string()), fail);
    return out;
}

}  // namespace fh::report
