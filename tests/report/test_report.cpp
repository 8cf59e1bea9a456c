/// @file test_report.cpp
/// @brief [report] The comparison tables (ranking, mean and sd over seeds, formats) and the HTML
///        report of a run, an eval output and a sweep built from hand-written run directories:
///        strictly well-formed, self-contained, escaped; rendered by headless Chromium without a
///        console message where Chromium is installed.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "config/profile.hpp"
#include "config/schema.hpp"
#include "io/json.hpp"
#include "report/report.hpp"
#include "report/runs.hpp"
#include "report/svg.hpp"
#include "support/chromium.hpp"
#include "support/shell.hpp"
#include "support/xml_check.hpp"
#include "util/errors.hpp"

namespace fs = std::filesystem;
namespace json = fh::io::json;

namespace {

void write(const fs::path& p, const std::string& text) {
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
}

std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

std::string fmt_lr(double lr) {
    char b[64];
    std::snprintf(b, sizeof b, "training.learning_rate=%g", lr);
    return b;
}

json::Value metrics(double total_return, double sharpe) {
    return json::object({{"total_return", total_return},
                         {"annual_return", total_return * 2},
                         {"sharpe", sharpe},
                         {"sortino", sharpe * 1.5},
                         {"max_drawdown", 0.05},
                         {"calmar", 3.0},
                         {"trades", 12},
                         {"win_rate", 0.5},
                         {"profit_factor", nullptr},
                         {"exposure", 0.4},
                         {"turnover", 20.0},
                         {"action_histogram", json::Value::array({3, 0, 5, 10, 1, 0, 2, 0, 7})}});
}

/// A complete run directory: config.toml, summary.json, eval.jsonl, metrics.jsonl, backtest CSVs.
/// Its splits are 28 bars long (the action histogram's sum), under a quarter of `bars_per_year`
/// unless that is below 112.
void make_run(const fs::path& dir, double lr, int seed, double val, double test_sharpe,
              const std::string& data_path = "", const std::vector<std::string>& extra = {},
              double bars_per_year = 6019.6) {
    std::vector<std::string> overrides{fmt_lr(lr), "run.seed=" + std::to_string(seed),
                                       "data.path=" + fh::config::toml_quote(data_path)};
    overrides.insert(overrides.end(), extra.begin(), extra.end());
    auto p = fh::config::resolve_profile_text("[run]\ntrainer = \"dqn\"\n", "p.toml", overrides);
    write(dir / "config.toml", fh::config::to_toml(p));
    write(dir / "summary.json",
          json::serialize(json::object(
              {{"status", "completed"},
               {"trainer", "dqn"},
               {"device", "cpu (reference backend)"},
               {"env_steps", 2000},
               {"updates", 485},
               {"wall_seconds", 3.5},
               {"seed", seed},
               {"overrides", json::Value::array({fmt_lr(lr)})},
               {"data", json::object({{"path", data_path},
                                      {"source", "synthetic(seed=1)"},
                                      {"bars", 5000},
                                      {"xxh64", "0123456789abcdef"}})},
               {"bars_per_year", bars_per_year},
               {"best", json::object({{"env_steps", 1000}, {"metric", "val_sharpe"}, {"value", val}})},
               {"validation", json::object({{"strategy", metrics(0.1, val)}, {"buy_and_hold", metrics(0.01, 0.2)}})},
               {"test", json::object({{"strategy", metrics(0.05 * test_sharpe, test_sharpe)},
                                      {"buy_and_hold", metrics(-0.02, -0.5)}})}})) +
              "\n");
    std::string evals, lines;
    for (int k = 1; k <= 4; ++k) {
        evals += json::serialize(json::object({{"env_steps", 500 * k},
                                               {"split", "val"},
                                               {"metric", "val_sharpe"},
                                               {"value", val - 4 + k},
                                               {"best", true},
                                               {"buy_and_hold", metrics(0.01, 0.3)}})) +
                 "\n";
    }
    for (int k = 1; k <= 20; ++k)
        lines += json::serialize(json::object({{"step", k * 25},
                                               {"env_steps", k * 100},
                                               {"updates", k * 20},
                                               {"losses/loss", 3.0 / k},
                                               {"q/mean", 0.1 * k},
                                               {"q/min", -0.1 * k},
                                               {"q/max", 0.3 * k},
                                               {"charts/grad_norm", 1.0 + std::sin(k)},
                                               {"losses/cql", 0.5 / k},
                                               {"charts/curiosity", 0.0},
                                               {"charts/skipped_updates", 0},
                                               {"perf/env_steps_per_s", 600.0}})) +
                 "\n";
    write(dir / "eval.jsonl", evals);
    write(dir / "metrics.jsonl", lines + "{\"cut\":");  // a last line cut by a crash is skipped
    std::string equity = "segment,bar,time,close,action,position,equity,drawdown,buy_and_hold_equity\n";
    double e = 100000, h = 100000;
    for (int i = 0; i < 300; ++i) {
        e *= 1 + 0.002 * std::sin(i * 0.1) + 0.0005;
        h *= 1 + 0.003 * std::cos(i * 0.07);
        const long t = 1'600'000'000L + i * 300L + (i >= 200 ? 2 * 86400L : 0);  // a weekend after bar 4199
        char stamp[32];
        std::time_t tt = t;
        std::tm tm{};
        gmtime_r(&tt, &tm);
        std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
        equity += std::to_string(i < 150 ? 0 : 1) + "," + std::to_string(4000 + i) + "," + stamp + ",4000.25," +
                  std::to_string(i % 9) + ",1," + std::to_string(e) + ",0.01," + (i == 299 ? "" : std::to_string(h)) +
                  "\n";
    }
    write(dir / "backtest" / "equity.csv", equity);
    write(dir / "backtest" / "val_equity.csv", equity);
    write(dir / "backtest" / "trades.csv",
          "segment,bar,time,side,contracts,price,order_type,commission\n0,4001,2020-09-13T12:31:40Z,buy,1,4000.5,"
          "market,2.5\n"
          "0,4010,2020-09-13T13:16:40Z,sell,2,4001,passive_limit,5\n");
}

fs::path scratch(const std::string& name) {
    const fs::path p = fs::temp_directory_path() / ("fh-report-" + std::to_string(::getpid()) + "-" + name);
    fs::remove_all(p);
    fs::create_directories(p);
    return p;
}

void check_self_contained(const std::string& html) {
    INFO(fh::test::xml_problem(html));
    CHECK(fh::test::xml_problem(html).empty());
    CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
    CHECK(html.find("<script") == std::string::npos);
    CHECK(html.find("http://") == std::string::npos);
    CHECK(html.find("https://") == std::string::npos);
    CHECK(html.find("src=") == std::string::npos);  // nothing to load: images are inline SVG
    CHECK(html.find("Content-Security-Policy") != std::string::npos);
}

/// Renders with Chromium where installed; elsewhere says so on stderr (fails under CI=true).
void render(const fs::path& html, const fs::path& png) {
    const std::string chromium = fh::test::chromium_for("the report");
    if (chromium.empty()) return;
    const auto r = fh::test::render_with_chromium(chromium, html, png);
    INFO(r.log);
    CHECK(r.code == 0);
    CHECK(r.console.empty());  // no console message: no error, nothing refused by the policy
    CHECK(r.png_signature);
    CHECK(r.png_bytes > 20'000);
}

std::size_t count(const std::string& text, const std::string& what) {
    std::size_t n = 0;
    for (auto p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
    return n;
}

/// The <svg> chart whose title is `title` ("" when none).
std::string chart(const std::string& html, const std::string& title) {
    const auto at = html.find("aria-label=\"" + title);
    if (at == std::string::npos) return "";
    const auto open = html.rfind("<svg", at);
    return html.substr(open, html.find("</svg>", at) - open);
}

/// A population directory's population.json listing `runs` (agent i: runs[i], seed i + 1).
void write_population_json(const fs::path& dir, const std::vector<std::string>& runs) {
    json::Array agents;
    for (std::size_t i = 0; i < runs.size(); ++i)
        agents.push_back(json::object({{"index", static_cast<long long>(i)},
                                       {"seed", static_cast<long long>(i + 1)},
                                       {"overrides", json::Value::array({"run.seed=" + std::to_string(i + 1)})},
                                       {"run", runs[i]},
                                       {"status", "completed"},
                                       {"action", "trained"}}));
    write(dir / "population.json", json::serialize(json::object({{"population", static_cast<long long>(runs.size())},
                                                                 {"trainer", "dqn"},
                                                                 {"agents", json::Value::array(std::move(agents))}})) +
                                       "\n");
}

}  // namespace

TEST_CASE("xml_problem finds what a strict parser refuses", "[report]") {
    using fh::test::xml_problem;
    CHECK(xml_problem("<!DOCTYPE html>\n<html><body><p a=\"1\">x &amp; y</p><br/></body></html>").empty());
    CHECK(!xml_problem("<html><p></html>").empty());
    CHECK(!xml_problem("<html><br></html>").empty());
    CHECK(!xml_problem("<html a=1></html>").empty());
    CHECK(!xml_problem("<html a=\"1\" a=\"2\"></html>").empty());
    CHECK(!xml_problem("<html>&nbsp;</html>").empty());
    CHECK(!xml_problem("<html>a & b</html>").empty());
    CHECK(!xml_problem("<html>a < b</html>").empty());
    CHECK(!xml_problem("<html></html><html></html>").empty());
}

TEST_CASE("compare: runs ranked by validation metric, settings by their mean over seeds", "[report]") {
    const auto dir = scratch("compare");
    make_run(dir / "a1", 1e-3, 1, 2.0, 1.0);
    make_run(dir / "a2", 1e-3, 2, 4.0, 3.0);
    make_run(dir / "b1", 3e-4, 1, 3.5, -1.0);
    make_run(dir / "b2", 3e-4, 2, 3.5, 0.0);
    write(dir / "c1" / "config.toml", slurp(dir / "a1" / "config.toml"));  // unfinished: no summary
    write(dir / "sweep-logs" / "point-0.log", "not a run");

    const auto runs = fh::report::collect_runs({dir.string()});
    REQUIRE(runs.size() == 5);
    CHECK(fh::report::differing_keys(runs) == std::vector<std::string>{"training.learning_rate"});

    const auto t = fh::report::run_table(runs);
    REQUIRE(t.rows.size() == 5);
    CHECK(t.best_row == 0);
    CHECK(t.rows[0][1].text == "a2");  // best validation metric first
    CHECK(t.rows[4][1].text == "c1");  // no result: last
    CHECK(t.rows[4][t.columns.size() - 7 + 0].number.has_value() == false);

    const auto g = fh::report::seed_table(runs);
    REQUIRE(g.rows.size() == 2);
    const auto col = [&](const std::string& name) {
        return static_cast<std::size_t>(std::find(g.columns.begin(), g.columns.end(), name) - g.columns.begin());
    };
    // 3e-4: val 3.5 and 3.5 (mean 3.5, sd 0); 1e-3: 2 and 4 (mean 3, sd sqrt(2)); unfinished c1 counted only.
    CHECK(g.rows[0][col("training.learning_rate")].text == "0.0003");
    CHECK(*g.rows[0][col("val_sharpe")].number == Approx(3.5));
    CHECK(*g.rows[0][col("val_sharpe")].sd == Approx(0.0));
    CHECK(g.rows[1][col("runs")].text == "2/3");
    CHECK(*g.rows[1][col("val_sharpe")].number == Approx(3.0));
    CHECK(*g.rows[1][col("val_sharpe")].sd == Approx(std::sqrt(2.0)));
    CHECK(*g.rows[1][col("test_sharpe")].number == Approx(2.0));
    CHECK(g.best_row == 0);

    const std::string md = fh::report::to_markdown(g);
    CHECK(md.find("| * | 1 | 0.0003 | 2/2 | 1 2 | 3.5000 ± 0.0000 |") != std::string::npos);
    CHECK(md.find("3.0000 ± 1.4142") != std::string::npos);
    const std::string csv = fh::report::to_csv(g);
    CHECK(csv.rfind("best,rank,training.learning_rate,runs,seeds,val_sharpe_mean,val_sharpe_sd,", 0) == 0);
    const auto j = json::parse(fh::report::to_json(g), json::Limits{1 << 20, 16, true});
    REQUIRE(j.find("rows")->as_array().size() == 2);
    CHECK(j.find("rows")->as_array()[0].find("best")->as_bool());
    CHECK(j.find("rows")->as_array()[1].find("val_sharpe")->find("sd")->as_double() == Approx(std::sqrt(2.0)));
    CHECK(j.find("rows")->as_array()[1].find("run_dirs")->as_array().size() == 3);

    CHECK_THROWS_AS(fh::report::collect_runs({(dir / "sweep-logs").string()}), fh::UsageError);
    CHECK_THROWS_AS(fh::report::collect_runs({(dir / "nothing").string()}), fh::UsageError);
    // A folder that holds a sweep (as --seeds ... --output pops holds pops/NAME/seed=S): refused,
    // naming the sweep inside it.
    make_run(dir / "outer" / "pop" / "seed=1", 1e-3, 1, 1.0, 1.0);
    CHECK_THROWS_WITH(
        fh::report::collect_runs({(dir / "outer").string()}),
        Catch::Contains("the sweep or population directories inside it: " + (dir / "outer" / "pop").string()));
    fs::remove_all(dir);
}

TEST_CASE("report: a run's page is well-formed, self-contained and escapes what it shows", "[report]") {
    const auto dir = scratch("run");
    const fs::path run = dir / "lr<&>'\"run";
    make_run(run, 1e-3, 7, 2.5, 1.5, "/data/<es>&\"q\".csv");
    const std::string page = fh::report::write_report(run.string(), "");
    CHECK(page == (run / "report.html").string());
    const std::string html = slurp(page);
    check_self_contained(html);
    for (const char* section : {"Test split", "Validation split", "Validation over training", "Training", "Actions",
                                "Trade statistics", "Resolved profile", "buy-and-hold", "losses/loss",
                                "q (mean, min, max)", "<svg", "+1 far_limit", "-1 market", "passive_limit fills"})
        CHECK(html.find(section) != std::string::npos);
    CHECK(html.find("lr&lt;&amp;&gt;&#39;&quot;run") != std::string::npos);
    CHECK(html.find("&lt;es&gt;&amp;") != std::string::npos);
    CHECK(html.find("perf/") == std::string::npos);  // throughput is not a training curve
    render(page, dir / "run.png");
    fs::remove_all(dir);
}

TEST_CASE("report: missing files give notes, not failures; an unknown directory is exit 2", "[report]") {
    const auto dir = scratch("partial");
    make_run(dir / "r", 1e-3, 1, 1.0, 1.0);
    fs::remove(dir / "r" / "summary.json");
    fs::remove_all(dir / "r" / "backtest");
    fs::remove(dir / "r" / "eval.jsonl");
    const std::string html = slurp(fh::report::write_report((dir / "r").string(), (dir / "out.html").string()));
    check_self_contained(html);
    CHECK(html.find("summary.json is missing") != std::string::npos);
    CHECK(html.find("No test backtest") != std::string::npos);
    CHECK_THROWS_AS(fh::report::write_report((dir / "none").string(), ""), fh::UsageError);
    fs::create_directories(dir / "empty");
    CHECK_THROWS_AS(fh::report::write_report((dir / "empty").string(), ""), fh::UsageError);
    fs::remove_all(dir);
}

TEST_CASE("report: a sweep's page ranks the settings and links every run's report", "[report]") {
    const auto dir = scratch("sweep");
    for (int seed = 1; seed <= 3; ++seed) {
        make_run(dir / ("lr=0.001,seed=" + std::to_string(seed)), 1e-3, seed, 1.0 + seed, 0.5 * seed);
        make_run(dir / ("lr=0.0003,seed=" + std::to_string(seed)), 3e-4, seed, 2.0 + seed * 0.1, -0.2 * seed);
    }
    const std::string page = fh::report::write_report(dir.string(), "");
    const std::string html = slurp(page);
    check_self_contained(html);
    CHECK(html.find("href=\"lr=0.001,seed=1/report.html\"") != std::string::npos);
    CHECK(html.find("<tr class=\"best\">") != std::string::npos);
    for (int seed = 1; seed <= 3; ++seed)
        CHECK(fs::exists(dir / ("lr=0.001,seed=" + std::to_string(seed)) / "report.html"));
    // Elsewhere, the links still lead to the runs.
    const std::string moved = slurp(fh::report::write_report(dir.string(), (dir / "sub" / "page.html").string()));
    CHECK(moved.find("href=\"../lr=0.001,seed=1/report.html\"") != std::string::npos);
    render(page, dir / "sweep.png");
    fs::remove_all(dir);
}

TEST_CASE("svg charts stay well-formed on odd data", "[report]") {
    using namespace fh::report;
    Series s;
    s.label = "a<b";
    s.x = {0, 1, 2, 3};
    s.y = {1, std::nan(""), INFINITY, 1};
    ChartOptions o;
    o.title = "t & u";
    for (const auto& svg : {line_chart({s}, o), line_chart({}, o), bar_chart({}, o),
                            bar_chart({Bar{"x", -1, 0.5, "#000", "", {-2, 1}, 0.5},
                                       Bar{"y", 0, std::nullopt, "#000", "", {}, std::nullopt}},
                                      o)}) {
        INFO(svg);
        CHECK(fh::test::xml_problem(svg).empty());
    }
    CHECK(short_number(12345) == "12.3k");
    CHECK(xml_escape("<a href='x'>&\"") == "&lt;a href=&#39;x&#39;&gt;&amp;&quot;");
}

TEST_CASE("report: annualised figures of a split shorter than a quarter of a year are greyed, with a note",
          "[report]") {
    const auto dir = scratch("short");
    make_run(dir / "short", 1e-3, 1, 2.5, 1.5);              // 28 bars, 6019.6 bars per year
    make_run(dir / "long", 1e-3, 2, 2.5, 1.5, "", {}, 100);  // 28 bars of 100 a year
    const std::string short_html = slurp(fh::report::write_report((dir / "short").string(), ""));
    check_self_contained(short_html);
    // annual return, Sharpe, Sortino, Calmar and turnover of the four columns (test and validation).
    CHECK(count(short_html, "<td class=\"n ann\"") == 20);
    CHECK(count(short_html,
                "of the test split (28 bars) and the validation split (28 bars). Each is under a quarter of "
                "the 6020 bars per year") == 1);
    CHECK(short_html.find("<div class=\"v ann\">1.50</div>") != std::string::npos);  // the Sharpe card
    CHECK(short_html.find("val_sharpe is annualised from a validation split of 28 bars") != std::string::npos);
    const std::string long_html = slurp(fh::report::write_report((dir / "long").string(), ""));
    CHECK(count(long_html, "class=\"n ann\"") == 0);
    CHECK(long_html.find("Greyed") == std::string::npos);
    CHECK(long_html.find("v ann") == std::string::npos);
    // An eval output: the same from eval.json's bars_per_year; the checkpoint and split named.
    const fs::path ev = dir / "eval";
    fs::create_directories(ev);
    fs::copy_file(dir / "short" / "config.toml", ev / "config.toml");
    fs::copy_file(dir / "short" / "backtest" / "equity.csv", ev / "equity.csv");
    write(ev / "eval.json", json::serialize(json::object({{"checkpoint", "/x/best.safetensors"},
                                                          {"split", "test"},
                                                          {"strategy", metrics(0.1, 2.0)},
                                                          {"buy_and_hold", metrics(0.01, 0.2)},
                                                          {"bars_per_year", 6019.6}})));
    const std::string eval_html = slurp(fh::report::write_report(ev.string(), ""));
    check_self_contained(eval_html);
    CHECK(count(eval_html, "<td class=\"n ann\"") == 10);
    CHECK(eval_html.find("of the test split (28 bars). It is under a quarter") != std::string::npos);
    CHECK(eval_html.find("<th>checkpoint</th><td>/x/best.safetensors</td>") != std::string::npos);
    CHECK(eval_html.find("<th>seed</th><td>1</td>") != std::string::npos);  // from the profile it stores
    fs::remove_all(ev);
    // A sweep of short runs greys its Sharpe columns.
    fs::remove_all(dir / "long");
    make_run(dir / "short2", 3e-4, 1, 2.0, 1.0);
    const std::string sweep = slurp(fh::report::write_report(dir.string(), ""));
    CHECK(sweep.find("<td class=\"n ann\">") != std::string::npos);
    CHECK(sweep.find("of the validation split (28 bars) and the test split (28 bars). Each is under") !=
          std::string::npos);
    CHECK(sweep.find("<div class=\"v ann\">") != std::string::npos);
    fs::remove_all(dir);
}

TEST_CASE(
    "report: a run's page draws trading bars, leaves out disabled terms, wraps the profile, names order types once",
    "[report]") {
    const auto dir = scratch("run-layout");
    make_run(dir / "off", 1e-3, 1, 2.5, 1.5);
    make_run(dir / "cql", 1e-3, 1, 2.5, 1.5, "", {"dqn.cql_alpha=0.5"});
    const std::string html = slurp(fh::report::write_report((dir / "off").string(), ""));
    check_self_contained(html);
    // x in bars: ticks at bar indices (the data's bars 4000-4299), each with its bar's date under it.
    const std::string equity = chart(html, "test split: equity");
    REQUIRE(!equity.empty());
    CHECK(equity.find(">4100</text>") != std::string::npos);
    CHECK(equity.find(">4200</text>") != std::string::npos);
    CHECK(equity.find("trading bars only") != std::string::npos);
    CHECK(equity.find(">2020-09-") != std::string::npos);  // dates under the ticks (the split spans a weekend)
    // Terms the profile turns off, and fields that are 0 throughout, get no panel.
    CHECK(html.find("aria-label=\"losses/cql\"") == std::string::npos);
    CHECK(html.find("aria-label=\"charts/curiosity\"") == std::string::npos);
    CHECK(html.find("aria-label=\"charts/skipped_updates\"") == std::string::npos);
    CHECK(html.find("aria-label=\"charts/grad_norm\"") != std::string::npos);
    CHECK(
        html.find("Not drawn: losses/cql: CQL off (dqn.cql_alpha = 0); charts/curiosity, charts/skipped_updates (0 on "
                  "every line).") != std::string::npos);
    const std::string cql = slurp(fh::report::write_report((dir / "cql").string(), ""));
    CHECK(cql.find("aria-label=\"losses/cql\"") != std::string::npos);
    // The resolved profile wraps instead of running off the page.
    const auto pre = html.find("\npre{");
    REQUIRE(pre != std::string::npos);
    CHECK(html.substr(pre, html.find('}', pre) - pre).find("white-space:pre-wrap") != std::string::npos);
    // One name per order type: trades.csv's, in the histogram and the fills table.
    for (const char* name : {"+1 market", "0 passive_limit", "-1 far_limit", ">market fills<", ">passive_limit fills<"})
        CHECK(html.find(name) != std::string::npos);
    for (const char* old : {" mkt", " lim<", " far<", "+1 far ", " lim "}) CHECK(html.find(old) == std::string::npos);
    fs::remove_all(dir);
}

TEST_CASE("report: a population agent's page says so and shows its share of the wall time", "[report]") {
    const auto dir = scratch("agent");
    make_run(dir / "seed=1", 1e-3, 1, 2.5, 1.5);
    make_run(dir / "seed=2", 1e-3, 2, 2.0, 1.0);
    make_run(dir / "seed=3", 1e-3, 3, 1.0, 0.5);
    write_population_json(dir, {"seed=1", "seed=2", "seed=3"});
    const std::string html = slurp(fh::report::write_report((dir / "seed=2").string(), ""));
    check_self_contained(html);
    CHECK(html.find("agent 1 of a population of 3 (agents 0-2)") != std::string::npos);
    CHECK(html.find("trained in a population: agent 1 (agents 0-2), all in one process") != std::string::npos);
    CHECK(html.find("1.167, its even share of the population&#39;s 3.5 s") != std::string::npos);  // 3.5 s / 3
    // A run outside a population says nothing of one.
    const auto solo = scratch("solo");
    make_run(solo / "r", 1e-3, 1, 2.5, 1.5);
    const std::string alone = slurp(fh::report::write_report((solo / "r").string(), ""));
    CHECK(alone.find("trained in a population") == std::string::npos);
    CHECK(alone.find("of a population") == std::string::npos);
    fs::remove_all(dir);
    fs::remove_all(solo);
}

TEST_CASE("report: a sweep's page shows seeds, buy-and-hold, every setting's validation curve, the key's order",
          "[report]") {
    const auto dir = scratch("sweep-layout");
    const std::map<int, double> val{{64, 1.0}, {256, 3.0}, {1024, 2.0}};  // ranks: 256, 1024, 64
    for (const auto& [batch, v] : val)
        for (int seed = 1; seed <= 2; ++seed)
            make_run(dir / ("bs=" + std::to_string(batch) + ",seed=" + std::to_string(seed)), 1e-3, seed,
                     v + 0.1 * seed, v - 1 + 0.2 * seed, "", {"replay_buffer.batch_size=" + std::to_string(batch)});
    const std::string html = slurp(fh::report::write_report(dir.string(), ""));
    check_self_contained(html);
    const std::string bars = chart(html, "val_sharpe: mean");
    const std::string test = chart(html, "test Sharpe: mean");
    REQUIRE(!bars.empty());
    REQUIRE(!test.empty());
    // The key's numeric order (64 < 256 < 1024, not the text order "1024" < "256" < "64"), each with its rank.
    const auto a = bars.find(">#3 batch_size=64<"), b = bars.find(">#1 batch_size=256<"),
               c = bars.find(">#2 batch_size=1024<");
    REQUIRE(a != std::string::npos);
    REQUIRE(b != std::string::npos);
    REQUIRE(c != std::string::npos);
    CHECK(a < b);
    CHECK(b < c);
    // Each seed a dot over its bar; buy-and-hold's Sharpe a dashed line over each bar of both charts.
    CHECK(count(bars, "class=\"pt\"") == 6);
    CHECK(count(test, "class=\"pt\"") == 6);
    CHECK(count(test, "class=\"ref\"") == 3);
    CHECK(test.find(">buy-and-hold</text>") != std::string::npos);
    // Every setting's validation curve on one chart: the mean over seeds with a band.
    const std::string curves = chart(html, "validation sharpe over training: mean over seeds");
    REQUIRE(!curves.empty());
    CHECK(count(curves, "class=\"band\"") == 3);
    // Tables that fit: names wrap at commas, column names at dots, the sd under the mean.
    CHECK(html.find("bs=64,<wbr/>seed=1") != std::string::npos);
    CHECK(html.find("replay_<wbr/>buffer.<wbr/>batch_<wbr/>size") != std::string::npos);
    CHECK(html.find("bh_<wbr/>sharpe") != std::string::npos);
    CHECK(html.find("<span class=\"sd\">± ") != std::string::npos);
    CHECK(html.find("break-all;min-width:220px") == std::string::npos);
    render(dir / "report.html", dir / "sweep.png");
    fs::remove_all(dir);
}

TEST_CASE("report: a population's page lists its agents", "[report]") {
    const auto dir = scratch("population");
    for (int seed = 1; seed <= 3; ++seed)
        make_run(dir / ("seed=" + std::to_string(seed)), 1e-3, seed, 1.0 + seed, 0.5 * seed);
    write_population_json(dir, {"seed=1", "seed=2", "seed=3"});
    const std::string html = slurp(fh::report::write_report(dir.string(), ""));
    check_self_contained(html);
    CHECK(html.find("all runs") == std::string::npos);
    CHECK(html.find(">population</span>") != std::string::npos);
    const std::string bars = chart(html, "val_sharpe: per agent");
    REQUIRE(!bars.empty());
    for (const char* label : {">#3 seed=1<", ">#2 seed=2<", ">#1 seed=3<"})
        CHECK(bars.find(label) != std::string::npos);
    CHECK(html.find("<h2>Agents</h2>") != std::string::npos);
    for (int seed = 1; seed <= 3; ++seed)
        CHECK(html.find("href=\"seed=" + std::to_string(seed) + "/report.html\">seed=" + std::to_string(seed) +
                        "</a>") != std::string::npos);
    fs::remove_all(dir);
}

TEST_CASE("report: a metrics.jsonl line that is JSON but not an object is skipped with a warning", "[report]") {
    const auto dir = scratch("not-object");
    make_run(dir / "r", 1e-3, 1, 2.5, 1.5);
    make_run(dir / "s", 3e-4, 1, 2.0, 1.0);
    const std::string lines = slurp(dir / "r" / "metrics.jsonl");
    write(dir / "r" / "metrics.jsonl", "[1,2]\n42\n" + lines.substr(0, lines.find("{\"cut\"")) + "null\n\"text\"\n");
    write(dir / "r" / "eval.jsonl", "[]\n" + slurp(dir / "r" / "eval.jsonl"));
    const auto run = fh::test::run_shell("\"$EXE\" report '" + (dir / "r").string() + "'", dir);
    INFO(run.err);
    CHECK(run.code == 0);
    CHECK(run.err.find("metrics.jsonl:1: not a JSON object; the line is skipped") != std::string::npos);
    CHECK(run.err.find("metrics.jsonl:2: not a JSON object") != std::string::npos);
    CHECK(run.err.find("metrics.jsonl:23: not a JSON object") != std::string::npos);
    CHECK(run.err.find("eval.jsonl:1: not a JSON object") != std::string::npos);
    CHECK(slurp(dir / "r" / "report.html").find("aria-label=\"losses/loss\"") != std::string::npos);
    const auto sweep = fh::test::run_shell("\"$EXE\" report '" + dir.string() + "'", dir);
    INFO(sweep.err);
    CHECK(sweep.code == 0);
    CHECK(fs::exists(dir / "report.html"));
    fs::remove_all(dir);
}

TEST_CASE("report: a sweep's links are percent-encoded and reach every run's report", "[report]") {
    const auto dir = scratch("links");
    const std::vector<std::string> names{"a%b#c?d e,seed=1", "\xc3\xbc:x,seed=2", "plain=1,seed=3"};
    for (std::size_t i = 0; i < names.size(); ++i)
        make_run(dir / names[i], i == 0 ? 1e-3 : 3e-4, static_cast<int>(i + 1), 1.0 + static_cast<double>(i), 1.0);
    for (const std::string out : {"", "sub/page.html"}) {
        const std::string page = fh::report::write_report(dir.string(), out.empty() ? "" : (dir / out).string());
        const std::string html = slurp(page);
        check_self_contained(html);
        CHECK(html.find("href=\"" + std::string(out.empty() ? "" : "../") + "a%25b%23c%3Fd%20e,seed=1/report.html\"") !=
              std::string::npos);
        CHECK(html.find("%C3%BC%3Ax,seed=2/report.html") != std::string::npos);
        // Every link, percent-decoded, names a file that exists.
        const std::regex href("href=\"([^\"]*)\"");
        std::size_t links = 0;
        for (auto it = std::sregex_iterator(html.begin(), html.end(), href); it != std::sregex_iterator(); ++it) {
            const std::string url = (*it)[1];
            std::string path;
            for (std::size_t i = 0; i < url.size(); ++i) {
                CHECK(url[i] != '#');
                CHECK(url[i] != '?');
                CHECK(url[i] != ' ');
                if (url[i] == '%' && i + 2 < url.size()) {
                    path += static_cast<char>(std::stoi(url.substr(i + 1, 2), nullptr, 16));
                    i += 2;
                } else {
                    path += url[i];
                }
            }
            INFO(url);
            CHECK(fs::exists(fs::path(page).parent_path() / path));
            ++links;
        }
        CHECK(links >= 6);  // the grouped table's and the run table's
    }
    fs::remove_all(dir);
}
