/// @file walk_forward.cpp
#include "run/walk_forward.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>
#include <string>

#include "data/csv_bars.hpp"
#include "data/load.hpp"
#include "data/walk_forward.hpp"
#include "backtest/backtest.hpp"
#include "backtest/inference.hpp"
#include "io/run_directory.hpp"
#include "io/json.hpp"
#include "report/inference.hpp"
#include "report/report.hpp"
#include "report/runs.hpp"
#include "run/naming.hpp"
#include "run/run.hpp"
#include "trainers/setup.hpp"
#include "util/errors.hpp"
#include "util/log.hpp"

namespace fh::run {

namespace fs = std::filesystem;
namespace json = io::json;

namespace {

const json::Limits kLimits{64u << 20, 64, true};

json::Value range_value(const data::SplitRange& r, const data::BarSeries& b) {
    return json::object(
        {{"begin", r.begin},
         {"end", r.end},
         {"first_time", r.size() > 0 ? json::Value(data::format_time(b.time.at(r.begin))) : json::Value()},
         {"last_time", r.size() > 0 ? json::Value(data::format_time(b.time.at(r.end - 1))) : json::Value()}});
}

std::string fold_name(std::size_t k) {
    return fmt::format("fold-{}", k);
}

/// The metrics of a compounded curve from its returns (curve_metrics), without the trade
/// statistics a curve lacks.
json::Value curve_value(const std::vector<double>& returns, double initial_equity, double bars_per_year,
                        std::optional<double> trades) {
    std::vector<double> curve{initial_equity};
    double g = 1;
    for (double r : returns) {
        g *= 1 + r;
        curve.push_back(initial_equity * g);
    }
    const backtest::Metrics m = backtest::curve_metrics(curve, bars_per_year);
    return json::object({{"total_return", m.total_return},
                         {"annual_return", m.annual_return},
                         {"sharpe", m.sharpe},
                         {"sortino", m.sortino},
                         {"max_drawdown", m.max_drawdown},
                         {"calmar", m.calmar},
                         {"trades", trades},
                         {"bars", returns.size()}});
}

/// Stitches the folds of a walk-forward directory (fold-0 .. fold-{K-1}, each finished) into
/// walk_forward.json and stitched_equity.csv; returns walk_forward.json's text. `folds`: one
/// object per fold with its bar ranges (from walk_forward()).
std::string stitch_walk_forward(const std::string& dir, const config::Profile& p, const json::Array& folds) {
    const std::size_t K = folds.size();
    std::vector<std::vector<double>> seg_strategy, seg_hold;  // every fold's segments, in order
    std::string csv = "fold,segment,bar,time,close,action,position,equity,buy_and_hold_equity\n";
    double g = 1, h = 1;  // the stitched compounded curves
    double trades = 0, bars_per_year = 0, initial_equity = p.instrument.initial_equity;
    json::Array fold_values;
    for (std::size_t k = 0; k < K; ++k) {
        const fs::path run = fs::path(dir) / fold_name(k);
        const report::RunRecord rec = report::read_run(run.string());
        if (rec.status != "completed" && rec.status != "early_stopped")
            throw UsageError(
                fmt::format("walk-forward: {} is not finished (status: {}); run the walk-forward again to continue it",
                            run.string(), rec.status));
        if (const auto bpy = report::number_at(rec.summary, "bars_per_year")) bars_per_year = *bpy;
        trades += rec.test_trades.value_or(0);
        const report::Csv eq = report::read_csv((run / "backtest" / "equity.csv").string());
        const int cs = eq.column("segment"), cb = eq.column("bar"), ct = eq.column("time"), cc = eq.column("close"),
                  ca = eq.column("action"), cp = eq.column("position"), ce = eq.column("equity"),
                  ch = eq.column("buy_and_hold_equity");
        if (std::min({cs, cb, ct, cc, ca, cp, ce, ch}) < 0)
            throw DataError((run / "backtest" / "equity.csv").string() + ": missing columns");
        std::string seg;
        double prev_e = 0, prev_h = 0;
        bool first_row_of_fold = true;
        for (const auto& row : eq.rows) {
            if (row.size() <= static_cast<std::size_t>(std::max({cs, cb, ct, cc, ca, cp, ce, ch}))) continue;
            const auto at = [&row](int c) -> const std::string& { return row[static_cast<std::size_t>(c)]; };
            const double e = std::stod(at(ce));
            const std::string& hs = at(ch);
            const bool new_segment = at(cs) != seg;
            if (new_segment) {
                seg = at(cs);
                seg_strategy.emplace_back();
                seg_hold.emplace_back();
            }
            seg_strategy.back().push_back(e);
            if (!hs.empty()) seg_hold.back().push_back(std::stod(hs));
            if (!new_segment) {
                g *= e / prev_e;
                if (!hs.empty() && prev_h > 0) h *= std::stod(hs) / prev_h;
            }
            prev_e = e;
            prev_h = hs.empty() ? 0 : std::stod(hs);
            // A segment's first row is a flat start (no return): only the first fold's first row is
            // written, so that the stitched curve is one line.
            if (new_segment && !(k == 0 && first_row_of_fold)) continue;
            first_row_of_fold = false;
            csv += fmt::format("{},0,{},{},{},{},{},{},{}\n", k, at(cb), at(ct), at(cc), at(ca), at(cp),
                               initial_equity * g, hs.empty() ? std::string() : fmt::format("{}", initial_equity * h));
        }
        json::Object fv = folds[k].as_object();
        fv.emplace_back("run_dir", fold_name(k));
        fv.emplace_back("status", rec.status);
        const json::Value* test = rec.summary.find("test");
        fv.emplace_back("test_backtest", test != nullptr ? *test : json::Value());
        fold_values.push_back(json::Value::object(std::move(fv)));
    }
    if (!(bars_per_year > 0)) throw DataError(dir + ": the folds' summary.json give no bars_per_year");
    const backtest::ReturnSeries returns = backtest::segment_returns(seg_strategy, seg_hold);
    const json::Value stitched = json::object(
        {{"strategy", curve_value(returns.strategy, initial_equity, bars_per_year, trades)},
         {"buy_and_hold", curve_value(returns.hold, initial_equity, bars_per_year, std::nullopt)},
         {"inference", backtest::inference_value(returns, bars_per_year, backtest::bootstrap_options(p.eval))}});
    const auto runs = report::collect_runs({dir});
    const auto deflated = report::deflated_best(runs);
    const json::Value out =
        json::object({{"kind", "walk_forward"},
                      {"folds", K},
                      {"window", p.walk_forward.window},
                      {"trainer", p.run.trainer},
                      {"bars_per_year", bars_per_year},
                      {"initial_equity", initial_equity},
                      {"fold_runs", json::Value::array(std::move(fold_values))},
                      {"stitched", stitched},
                      {"deflated_sharpe", deflated ? report::deflated_value(*deflated) : json::Value()}});
    io::write_file_atomically((fs::path(dir) / "stitched_equity.csv").string(), csv);
    const std::string text = json::serialize(out) + "\n";
    io::write_file_atomically((fs::path(dir) / "walk_forward.json").string(), text);
    return text;
}

}  // namespace

std::string walk_forward(const config::Profile& profile, const std::vector<std::string>& overrides, bool force) {
    const auto K = static_cast<std::size_t>(profile.walk_forward.folds);
    if (K < 2)
        throw UsageError(
            fmt::format("walk-forward: walk_forward.folds = {}: set it to the number of folds, at least 2 "
                        "(--set walk_forward.folds=5)",
                        profile.walk_forward.folds));
    // The folds' geometry over the whole data, refused before anything trains when a fold is too short.
    auto options = trainers::data_options(profile);
    options.walk_forward_folds = 0;
    const data::MarketData md = data::load_market(options);
    const auto folds = data::walk_forward_folds(
        md.bars.size(),
        data::SplitFractions{profile.data.train_fraction, profile.data.val_fraction, profile.data.test_fraction},
        static_cast<int>(K), profile.walk_forward.window == "sliding");
    data::check_walk_forward_folds(folds, md.warmup_bars, options.episode_length, static_cast<int>(K));
    json::Array fold_json;
    for (std::size_t k = 0; k < K; ++k)
        fold_json.push_back(json::object({{"fold", k},
                                          {"train", range_value(folds[k].train, md.bars)},
                                          {"validation", range_value(folds[k].val, md.bars)},
                                          {"test", range_value(folds[k].test, md.bars)}}));

    // The directory: <output_dir>/<run name>; an existing one per run.on_exists (error: refused;
    // new: NAME-2, ...; skip and resume: continued, each fold skipped when finished).
    std::string name = run_name(profile);
    fs::path dir = fs::path(profile.run.output_dir) / name;
    std::error_code ec;
    if (fs::exists(dir, ec)) {
        if (profile.run.on_exists == "error")
            throw UsageError(fmt::format("walk-forward: {} exists (run.on_exists = \"error\")", dir.string()));
        if (profile.run.on_exists == "new") {
            for (int i = 2; fs::exists(dir, ec); ++i)
                dir = fs::path(profile.run.output_dir) / fmt::format("{}-{}", name, i);
        } else {
            log::info("walk-forward: continuing {} (run.on_exists = \"{}\")", dir.string(), profile.run.on_exists);
        }
    }
    fs::create_directories(dir, ec);
    if (ec) throw UsageError(fmt::format("walk-forward: cannot create {}: {}", dir.string(), ec.message()));
    io::write_file_atomically((dir / "walk_forward_folds.json").string(),
                              json::serialize(json::Value::array(fold_json)) + "\n");

    for (std::size_t k = 0; k < K; ++k) {
        config::Profile fp = profile;
        fp.walk_forward.fold = static_cast<std::int64_t>(k);
        fp.run.name = fold_name(k);
        fp.run.output_dir = dir.string();
        fp.run.on_exists = "resume";
        std::vector<std::string> fold_overrides = overrides;
        fold_overrides.push_back(fmt::format("walk_forward.fold={}", k));
        const Placement placement = place_run(fp);
        if (placement.action == Placement::Action::skip) {
            log::info("walk-forward: fold {} finished already ({})", k, placement.path);
            continue;
        }
        log::info("walk-forward: fold {} of {}: train [{}, {}), validation [{}, {}), test [{}, {})", k, K,
                  folds[k].train.begin, folds[k].train.end, folds[k].val.begin, folds[k].val.end, folds[k].test.begin,
                  folds[k].test.end);
        train(fp, placement.action == Placement::Action::resume ? placement.path : "", fold_overrides, force);
    }
    const std::string text = stitch_walk_forward(dir.string(), profile, fold_json);
    const json::Value wf = json::parse(text, kLimits);
    log::info("walk-forward: stitched test blocks: {}", report::inference_sentence(*wf.find("stitched")));
    const std::string page = report::write_report(dir.string(), "");
    log::info("walk-forward: {} (walk_forward.json, stitched_equity.csv, {})", dir.string(),
              fs::path(page).filename().string());
    return dir.string();
}

}  // namespace fh::run
