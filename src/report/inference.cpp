/// @file inference.cpp
#include "report/inference.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "backtest/sharpe_inference.hpp"
#include "report/svg.hpp"

namespace fh::report {

namespace json = io::json;

std::optional<DeflatedBest> deflated_best(const std::vector<RunRecord>& runs) {
    struct Trial {
        const RunRecord* run;
        backtest::SharpeMoments m;
    };
    std::vector<Trial> trials;
    for (const auto& r : runs) {
        const auto sr = number_at(r.summary, "test.inference.sharpe_per_bar");
        const auto n = number_at(r.summary, "test.inference.bars");
        if (!sr || !n) continue;
        trials.push_back({&r,
                          {.n = static_cast<std::size_t>(*n),
                           .sharpe = *sr,
                           .skewness = number_at(r.summary, "test.inference.skewness").value_or(0.0),
                           .kurtosis = number_at(r.summary, "test.inference.kurtosis").value_or(3.0)}});
    }
    if (trials.size() < 2) return std::nullopt;
    const auto best = std::max_element(trials.begin(), trials.end(),
                                       [](const Trial& a, const Trial& b) { return a.m.sharpe < b.m.sharpe; });
    std::vector<double> sharpes;
    for (const auto& t : trials) sharpes.push_back(t.m.sharpe);
    const double var = *stat(sharpes).var;
    const auto d = backtest::deflated_sharpe(best->m, trials.size(), var);
    DeflatedBest out;
    out.trials = trials.size();
    out.best_run = best->run->path;
    out.best_sharpe_per_bar = best->m.sharpe;
    out.sd_sharpe_per_bar = std::sqrt(var);
    out.expected_max_z = backtest::expected_maximum_normal(trials.size());
    out.sr0 = d.sr0;
    out.dsr = d.dsr;
    if (const auto it = best->run->settings.find("eval.confidence"); it != best->run->settings.end())
        out.threshold = std::atof(it->second.c_str()) > 0 ? std::atof(it->second.c_str()) : 0.95;
    out.distinguishable = d.dsr && *d.dsr >= out.threshold;
    out.text = fmt::format(
        "Deflated Sharpe ratio of the best of {} runs ({}: test Sharpe per bar {:.4f}; the {} runs' per-bar Sharpe "
        "ratios have sd {:.4f}, so the best of {} tries of noise reaches {:.4f}): DSR = {}. {}",
        out.trials, best->run->name, out.best_sharpe_per_bar, out.trials, out.sd_sharpe_per_bar, out.trials, out.sr0,
        d.dsr ? fmt::format("{:.3f}", *d.dsr) : std::string("undefined"),
        fmt::format("The best run is {}distinguishable from the best of {} tries of noise (DSR {} {}).",
                    out.distinguishable ? "" : "NOT ", out.trials, out.distinguishable ? ">=" : "<", out.threshold));
    return out;
}

json::Value deflated_value(const DeflatedBest& d) {
    return json::object({{"trials", d.trials},
                         {"best_run", d.best_run},
                         {"best_sharpe_per_bar", d.best_sharpe_per_bar},
                         {"sd_sharpe_per_bar", d.sd_sharpe_per_bar},
                         {"expected_max_z", d.expected_max_z},
                         {"sr0", d.sr0},
                         {"dsr", d.dsr},
                         {"threshold", d.threshold},
                         {"distinguishable", d.distinguishable},
                         {"text", d.text}});
}

std::string with_deflated(const std::string& text, const std::optional<DeflatedBest>& d) {
    json::Object o = json::parse(text, json::Limits{256u << 20, 64, true}).as_object();
    o.emplace_back("deflated_sharpe", d ? deflated_value(*d) : json::Value());
    return json::serialize(json::Value::object(std::move(o))) + "\n";
}

namespace {

struct Row {
    std::string label;
    std::optional<double> point, lo, hi;
    bool percent = false;
};

std::string fmt_value(double v, bool percent) {
    return percent ? fmt::format("{:.2f}%", 100 * v) : fmt::format("{:.3f}", v);
}

/// Horizontal interval bars, one row each on its own scale (zero always shown).
std::string interval_svg(const std::vector<Row>& rows) {
    const int width = 860, row_h = 46, left = 230, right = 40;
    std::string out = fmt::format(
        R"(<svg xmlns="http://www.w3.org/2000/svg" width="{0}" height="{1}" viewBox="0 0 {0} {1}" role="img">)", width,
        row_h * static_cast<int>(rows.size()) + 10);
    for (std::size_t i = 0; i < rows.size(); ++i) {
        const Row& r = rows[i];
        const double y = 20.0 + static_cast<double>(i) * row_h;
        out += fmt::format(R"(<text x="4" y="{:.1f}" font-size="12" fill="#1f2937">{}</text>)", y + 4,
                           xml_escape(r.label));
        if (!r.lo || !r.hi) {
            out +=
                fmt::format(R"(<text x="{}" y="{:.1f}" font-size="12" fill="#6b7280">no interval</text>)", left, y + 4);
            continue;
        }
        double lo = std::min({*r.lo, 0.0, r.point.value_or(0.0)}), hi = std::max({*r.hi, 0.0, r.point.value_or(0.0)});
        if (!(hi > lo)) hi = lo + 1;
        const double pad = (hi - lo) * 0.08;
        lo -= pad;
        hi += pad;
        const auto x = [&](double v) { return left + (v - lo) / (hi - lo) * (width - left - right); };
        const char* color = *r.lo > 0 ? "#059669" : *r.hi < 0 ? "#dc2626" : "#6b7280";  // excludes zero: green, red
        out += fmt::format(R"(<line x1="{0:.1f}" x2="{0:.1f}" y1="{1:.1f}" y2="{2:.1f}" stroke="#9ca3af" )"
                           R"(stroke-dasharray="3 3"/>)",
                           x(0), y - 12, y + 12);
        out += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" font-size="10" fill="#6b7280" text-anchor="middle">0</text>)",
                           x(0), y + 22);
        out += fmt::format(
            R"(<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="8" fill="{}" opacity="0.35">)"
            R"(<title>{}</title></rect>)",
            x(*r.lo), y - 4, std::max(1.0, x(*r.hi) - x(*r.lo)), color,
            xml_escape(fmt::format("{}: [{}, {}]", r.label, fmt_value(*r.lo, r.percent), fmt_value(*r.hi, r.percent))));
        for (double v : {*r.lo, *r.hi})
            out += fmt::format(
                R"(<text x="{:.1f}" y="{:.1f}" font-size="10" fill="#1f2937" text-anchor="middle">{}</text>)", x(v),
                y - 8, xml_escape(fmt_value(v, r.percent)));
        if (r.point)
            out += fmt::format(R"(<circle cx="{:.1f}" cy="{:.1f}" r="4" fill="{}"><title>{}</title></circle>)",
                               x(*r.point), y, color,
                               xml_escape(fmt::format("point estimate {}", fmt_value(*r.point, r.percent))));
    }
    return out + "</svg>";
}

std::string interval_text(const std::string& what, std::optional<double> lo, std::optional<double> hi,
                          const char* above, const char* below, const char* neither) {
    if (!lo || !hi) return "";
    return fmt::format("{} [{}, {}]: {}.", what, fmt_value(*lo, false), fmt_value(*hi, false),
                       *lo > 0   ? above
                       : *hi < 0 ? below
                                 : neither);
}

}  // namespace

std::string inference_sentence(const json::Value& b) {
    const json::Value* inf = member_at(b, "inference");
    if (inf == nullptr || !inf->is_object()) return "";
    const auto conf = number_at(*inf, "bootstrap.confidence");
    const std::string pct = conf ? fmt::format("{:g}%", 100 * *conf) : std::string("-");
    std::string s;
    const auto add = [&](const std::string& t) {
        if (t.empty()) return;
        if (!s.empty()) s += ' ';
        s += t;
    };
    add(interval_text(fmt::format("The {} interval of the annualised Sharpe ratio is", pct),
                      number_at(*inf, "bootstrap.sharpe.lo"), number_at(*inf, "bootstrap.sharpe.hi"),
                      "it excludes zero (positive)", "it excludes zero (negative)",
                      "it includes zero: not distinguishable from no edge"));
    add(interval_text("Of the Sharpe difference against buy-and-hold",
                      number_at(*inf, "bootstrap.sharpe_difference.lo"),
                      number_at(*inf, "bootstrap.sharpe_difference.hi"), "the strategy beat buy-and-hold",
                      "buy-and-hold beat the strategy", "it includes zero: not distinguishable from buy-and-hold"));
    const auto pz = number_at(*inf, "psr_zero"), ph = number_at(*inf, "psr_buy_and_hold");
    if (pz || ph)
        add(fmt::format("PSR against 0: {}; against buy-and-hold's Sharpe: {}.", pz ? fmt::format("{:.3f}", *pz) : "-",
                        ph ? fmt::format("{:.3f}", *ph) : "-"));
    return s;
}

std::string walk_forward_markdown(const std::string& dir) {
    const std::string path = (std::filesystem::path(dir) / "walk_forward.json").string();
    if (!is_file(path)) return "";
    const json::Value wf = read_json(path, 64u << 20);
    const json::Value* st = wf.find("stitched");
    if (st == nullptr || !st->is_object()) return "";
    const auto v = [&](const char* k) {
        const auto x = number_at(*st, k);
        return x ? fmt::format("{:.4f}", *x) : std::string("-");
    };
    const auto folds = number_at(wf, "folds");
    return fmt::format(
        "\nWalk-forward {} ({} folds), the stitched test blocks: return {} (buy-and-hold {}), Sharpe {} "
        "(buy-and-hold {}). {}\n",
        dir, folds ? std::llround(*folds) : 0, v("strategy.total_return"), v("buy_and_hold.total_return"),
        v("strategy.sharpe"), v("buy_and_hold.sharpe"), inference_sentence(*st));
}

std::string inference_html(const json::Value& b, const std::string& split_label) {
    const json::Value* inf = member_at(b, "inference");
    if (inf == nullptr || !inf->is_object())
        return note("No confidence intervals for the " + split_label + " backtest (written by an older version).");
    const auto sh = number_at(b, "strategy.sharpe"), hsh = number_at(b, "buy_and_hold.sharpe");
    std::vector<Row> rows{
        {"Sharpe (annualised)", sh, number_at(*inf, "bootstrap.sharpe.lo"), number_at(*inf, "bootstrap.sharpe.hi"),
         false},
        {"Sharpe − buy-and-hold's", sh && hsh ? std::optional<double>(*sh - *hsh) : std::nullopt,
         number_at(*inf, "bootstrap.sharpe_difference.lo"), number_at(*inf, "bootstrap.sharpe_difference.hi"), false},
        {"total return", number_at(b, "strategy.total_return"), number_at(*inf, "bootstrap.total_return.lo"),
         number_at(*inf, "bootstrap.total_return.hi"), true}};
    std::string method;
    if (const auto* bo = inf->find("bootstrap"); bo != nullptr && bo->is_object()) {
        const auto count = [](std::optional<double> v) { return v ? std::llround(*v) : 0; };
        method = fmt::format(
            "Stationary block bootstrap of {} per-bar returns: {} resamples, mean block length {} ({}), "
            "seed {}; percentile intervals (docs/metrics.md).",
            count(number_at(*inf, "bars")), count(number_at(*bo, "resamples")), count(number_at(*bo, "block_length")),
            string_at(*bo, "block_rule", "?"), count(number_at(*bo, "seed")));
    } else {
        method = "Too few returns for a bootstrap.";
    }
    return panel(interval_svg(rows) + "<p class=\"note\">" + xml_escape(inference_sentence(b)) +
                 "</p><p class=\"note\">" + xml_escape(method) + "</p>");
}

}  // namespace fh::report
