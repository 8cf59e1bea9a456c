/// @file audit.cpp
/// @brief The look-ahead audit (audit.hpp): the cuts, the replaced bars, the data reloaded through
///        data::load_market and the decisions through backtest::backtest, the findings compared.
#include "run/audit.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "data/csv_bars.hpp"
#include "data/load.hpp"
#include "data/splits.hpp"
#include "env/vec_env.hpp"
#include "math/rng.h"
#include "run/run.hpp"
#include "run/session.hpp"
#include "trainers/checkpoint.hpp"
#include "trainers/setup.hpp"
#include "trainers/trainer.hpp"
#include "util/errors.hpp"
#include "util/log.hpp"

namespace fh::run {

namespace json = io::json;

namespace {

/// Contract boundaries audited at most (evenly chosen among them, the first and last included).
constexpr std::size_t kMaxContractCuts = 8;

double unit(std::uint32_t w) {
    return rng::unit_double(w, 0);
}

/// The typical size of a bar's log return up to `cut` (the median absolute close-to-close return
/// inside the contracts), kept within [1e-4, 0.05]; 1e-3 for a flat series.
double typical_return(const data::BarSeries& b, std::size_t cut) {
    std::vector<double> r;
    for (std::size_t t = 1; t <= cut && t < b.size(); ++t)
        if (b.segment_begin(t) < t) r.push_back(std::abs(std::log(b.close[t] / b.close[t - 1])));
    if (r.empty()) return 1e-3;
    auto mid = r.begin() + static_cast<std::ptrdiff_t>(r.size() / 2);
    std::nth_element(r.begin(), mid, r.end());
    return *mid > 0 ? std::clamp(*mid, 1e-4, 0.05) : 1e-3;
}

/// The feature columns (as the policy observes them) and the ATR at the bars up to the cut.
void compare_features(const data::MarketData& before, const data::MarketData& after, std::size_t cut, AuditCut& out) {
    const auto D = static_cast<std::size_t>(before.market_dim);
    if (after.market_dim != before.market_dim || after.bars.size() != before.bars.size())
        throw std::logic_error("audit: the altered data changed shape");
    for (std::size_t k = 0; k <= D; ++k) {  // column D: the ATR
        FeatureChange c;
        c.feature = k < D ? before.feature_names.at(k) : std::string("atr");
        c.column = k < D ? static_cast<int>(k) : -1;
        for (std::size_t t = 0; t <= cut; ++t) {
            const double x = k < D ? before.features[t * D + k] : before.atr[t];
            const double y = k < D ? after.features[t * D + k] : after.atr[t];
            if (x == y) continue;
            if (c.bars_changed++ == 0) c.first_bar = t, c.before = x, c.after = y;
        }
        if (c.bars_changed > 0) out.features.push_back(c);
    }
}

void compare_statistics(const data::MarketData& before, const data::MarketData& after, AuditCut& out) {
    out.statistics_checked = true;
    const auto& a = before.norm;
    const auto& b = after.norm;
    for (std::size_t k = 0; k < a.mean.size(); ++k)
        if (a.mean[k] != b.mean[k] || a.stddev[k] != b.stddev[k])
            out.statistics.push_back(StatisticChange{before.feature_names.at(k), static_cast<int>(k), a.mean[k],
                                                     b.mean[k], a.stddev[k], b.stddev[k]});
}

/// The greedy decisions of `weights` at every bar of `md`: one backtest over all its bars (each
/// contract one sequential pass from flat past its warm-up), as eval runs one.
std::vector<int> decisions(ops::Device& ops, const config::Profile& p, data::MarketData md,
                           const std::vector<float>& weights) {
    md.test = data::SplitRange{0, md.bars.size()};
    const env::DeviceMarket dm(ops, md);
    const auto params = trainers::env_params(p, md.market_dim);
    const auto policy = trainers::make_greedy_policy(p, params.state_dim);  // a new one: no history
    if (policy->weights_size() != weights.size())
        throw std::logic_error("audit: the policy's weights do not fit its network");
    const auto online = ops.from_host<float>(weights);
    auto act = [&](ops::View<int> a, ops::View<const float> s, int n) { policy->act(ops, online.cview(), a, s, n); };
    const auto report = backtest::backtest(ops, dm, md, env::Split::test, params, act, 1, true, policy->capture_safe());
    return backtest_decisions(report, md.bars.size());
}

/// The audit proper, on `ops`, of `weights` with the data of `options` normalised with `norm`.
void audit_data(ops::Device& ops, const config::Profile& p, data::DataOptions options,
                const data::NormalizationStats& norm, const std::vector<float>& weights, AuditReport& r) {
    options.use_cache = false;                            // every load below the same way, the unaltered one included
    constexpr auto kNone = static_cast<std::size_t>(-1);  // no cut: the data as they are
    auto load = [&](std::size_t cut, bool fit) {
        data::DataOptions o = options;
        if (cut != kNone)
            o.alter_bars = [cut, seed = r.options.cut_seed](data::BarSeries& b) { replace_bars_after(b, cut, seed); };
        if (fit)
            o.normalization.reset();
        else
            o.normalization = norm;
        return data::load_market(o);
    };
    const data::MarketData base = load(kNone, false);
    r.data = base.source;
    r.bars = base.bars.size();
    r.warmup = base.warmup_bars;
    r.train = base.train;
    r.val = base.val;
    r.test = base.test;
    r.feature_names = base.feature_names;
    r.time = base.bars.time;
    r.device = ops.description();
    const auto cuts = audit_cuts(base, r.options);
    const auto base_decisions = decisions(ops, p, base, weights);
    std::optional<data::MarketData> base_fit;  // the statistics fitted to the unaltered data
    for (const auto& [cut, kind] : cuts) {
        AuditCut c;
        c.bar = cut;
        c.kind = kind;
        data::MarketData altered = load(cut, false);
        compare_features(base, altered, cut, c);
        if (cut + 1 >= base.train.end) {  // every replaced bar lies after the training split
            if (!base_fit) base_fit = load(kNone, true);
            compare_statistics(*base_fit, load(cut, true), c);
        }
        c.decisions = compare_decisions(base_decisions, decisions(ops, p, std::move(altered), weights), cut,
                                        &c.decisions_checked);
        log::info("audit: cut at bar {} ({}): {}", cut, kind, c.clean() ? "clean" : "CHANGED");
        r.cuts.push_back(std::move(c));
    }
}

std::string bar_text(const AuditReport& r, std::size_t bar) {
    return fmt::format("bar {} ({})", bar, bar < r.time.size() ? data::format_time(r.time[bar]) : std::string("?"));
}

std::string feature_label(const FeatureChange& f) {
    return f.column >= 0 ? fmt::format("feature {} (column {})", f.feature, f.column)
                         : std::string("atr (the ATR(14) of limit orders)");
}

}  // namespace

bool AuditReport::clean() const noexcept {
    return std::all_of(cuts.begin(), cuts.end(), [](const AuditCut& c) { return c.clean(); });
}

std::vector<std::pair<std::size_t, std::string>> audit_cuts(const data::MarketData& md, const AuditOptions& o) {
    const std::size_t n = md.bars.size();
    std::map<std::size_t, std::vector<std::string>> cuts;
    auto add = [&](std::size_t bar, std::string kind) {
        if (bar + 1 < n) cuts[bar].push_back(std::move(kind));  // a later bar to replace
    };
    if (md.train.end > 0) add(md.train.end - 1, "last training bar");
    if (md.val.size() > 0) add(md.val.end - 1, "last validation bar");
    const auto& starts = md.bars.segment_starts;
    const std::size_t contracts = starts.size() - 1;  // boundaries: the bar before starts[1..]
    const std::size_t pick = std::min(contracts, kMaxContractCuts);
    std::set<std::size_t> chosen;
    for (std::size_t i = 0; i < pick; ++i) chosen.insert(1 + (pick == 1 ? 0 : i * (contracts - 1) / (pick - 1)));
    for (const std::size_t k : chosen)
        add(starts[k] - 1,
            fmt::format("end of contract {}",
                        k - 1 < md.bars.segment_names.size() ? md.bars.segment_names[k - 1] : std::to_string(k - 1)));
    const std::size_t lo = md.warmup_bars, hi = n >= 2 ? n - 2 : 0;
    if (o.random_cuts > 0 && lo <= hi) {
        const auto span = static_cast<std::uint32_t>(std::min<std::size_t>(hi - lo + 1, 0xffffffffu));
        for (int k = 0; k < o.random_cuts; ++k) {
            const auto w = rng::draw(o.cut_seed, rng::Purpose::audit, 0, static_cast<std::uint64_t>(k));
            add(lo + rng::below(w.v[0], span), "random");
        }
    }
    std::vector<std::pair<std::size_t, std::string>> out;
    for (auto& [bar, kinds] : cuts) {
        kinds.erase(std::unique(kinds.begin(), kinds.end()), kinds.end());  // "random" twice: once
        out.emplace_back(bar, fmt::format("{}", fmt::join(kinds, ", ")));
    }
    return out;
}

void replace_bars_after(data::BarSeries& b, std::size_t cut, std::uint64_t seed) {
    const std::size_t n = b.size();
    if (cut + 1 >= n) return;
    const double sigma = typical_return(b, cut);
    const std::int64_t spacing = std::max<std::int64_t>(data::median_spacing(b), 1);
    const auto stream = static_cast<std::uint32_t>(1 + cut);
    const auto clamp_price = [](double x) { return std::clamp(x, data::kMinPrice, data::kMaxPrice); };
    // One shift for every later bar keeps the times strictly increasing: by 1 to 2 spacings.
    const auto ws = rng::draw(seed, rng::Purpose::audit, stream, 2 * static_cast<std::uint64_t>(cut));
    const std::int64_t shift = spacing + 1 + static_cast<std::int64_t>(unit(ws.v[0]) * static_cast<double>(spacing));
    for (std::size_t t = cut + 1; t < n; ++t) {
        const auto u = rng::draw(seed, rng::Purpose::audit, stream, 2 * static_cast<std::uint64_t>(t));
        const auto v = rng::draw(seed, rng::Purpose::audit, stream, 2 * static_cast<std::uint64_t>(t) + 1);
        const double level = std::exp(3.0 * sigma * (2.0 * unit(u.v[0]) - 1.0));
        const double lo = b.low[t];
        const double hi = b.high[t] > b.low[t] ? b.high[t] : b.low[t] * (1.0 + sigma);
        const double o = level * (lo + unit(u.v[1]) * (hi - lo));
        const double c = level * (lo + unit(u.v[2]) * (hi - lo));
        // Monotone clamps keep low <= open, close <= high.
        b.high[t] = clamp_price(level * hi * (1.0 + sigma * unit(u.v[3])));
        b.low[t] = clamp_price(level * lo / (1.0 + sigma * unit(v.v[0])));
        b.open[t] = clamp_price(o);
        b.close[t] = clamp_price(c);
        if (b.has_volume) b.volume[t] = (b.volume[t] + 1.0) * (0.25 + 1.5 * unit(v.v[1]));
        b.time[t] += shift;
    }
}

std::vector<int> backtest_decisions(const backtest::BacktestReport& r, std::size_t n_bars) {
    std::vector<int> out(n_bars, -1);
    for (std::size_t s = 0; s < r.segments.size(); ++s) {
        const auto& seg = r.segments[s];
        for (int i = 1; i < r.segment_bars.at(s); ++i)
            out.at(static_cast<std::size_t>(seg.start + i - 1)) =
                r.records.at(static_cast<std::size_t>(seg.offset + i)).action;
    }
    return out;
}

std::optional<DecisionChange> compare_decisions(const std::vector<int>& before, const std::vector<int>& after,
                                                std::size_t cut, std::size_t* checked) {
    std::optional<DecisionChange> out;
    std::size_t compared = 0;
    for (std::size_t t = 0; t <= cut && t < std::max(before.size(), after.size()); ++t) {
        const int x = t < before.size() ? before[t] : -1;
        const int y = t < after.size() ? after[t] : -1;
        compared += x >= 0 || y >= 0;
        if (x == y) continue;
        if (!out) out = DecisionChange{0, t, x, y};
        ++out->bars_changed;
    }
    if (checked) *checked = compared;
    return out;
}

AuditReport audit_checkpoint(const std::string& source, const std::vector<std::string>& overrides,
                             const AuditOptions& options) {
    AuditReport r;
    r.source = source;
    r.options = options;
    r.checkpoint = policy_checkpoint(source);
    const config::Profile p = checkpoint_profile(r.checkpoint, overrides, "audit");
    r.trainer = p.run.trainer;
    const data::NormalizationStats norm = trainers::checkpoint_normalization(r.checkpoint);
    const int state_dim = static_cast<int>(norm.mean.size()) + env::kPortfolioFeatures;
    const auto weights =
        checkpoint_policy_weights(r.checkpoint, p, trainers::make_greedy_policy(p, state_dim)->weights_size());
    const auto ops = make_device(p);
    audit_data(*ops, p, trainers::data_options(p), norm, weights, r);
    return r;
}

AuditReport audit_profile(const config::Profile& p, const std::string& name, bool force, const AuditOptions& options) {
    AuditReport r;
    r.source = "profile " + name;
    r.options = options;
    r.trainer = p.run.trainer;
    // The run's set-up, checks included, and its trainer's initial policy.
    Session session(p, force);
    std::vector<float> weights;
    {
        const auto trainer = trainers::make_trainer(*session.ops, p, *session.device_market);
        weights = session.ops->to_host(ops::View<const float>(trainer->policy_weights()));
    }
    session.device_market.reset();
    audit_data(*session.ops, p, trainers::data_options(p), session.market.norm, weights, r);
    return r;
}

std::string audit_text(const AuditReport& r) {
    std::string s = fmt::format(
        "look-ahead audit of {}{}: {} policy, {} bars of {} (training [{}, {}), validation [{}, {}), test [{}, {})), "
        "{}; cut seed {}\n",
        r.source, r.checkpoint.empty() ? " (its trainer's initial policy)" : fmt::format(" ({})", r.checkpoint),
        r.trainer, r.bars, r.data, r.train.begin, r.train.end, r.val.begin, r.val.end, r.test.begin, r.test.end,
        r.device, r.options.cut_seed);
    std::map<std::string, std::size_t> flagged;  // feature -> earliest bar
    std::size_t leaky = 0, decision_cuts = 0;
    for (const auto& c : r.cuts) {
        s += fmt::format("cut after bar {} ({}, {}): ", c.bar, data::format_time(r.time.at(c.bar)), c.kind);
        if (c.clean()) {
            s += fmt::format("clean ({} features and atr at {} bars{}, {} decisions)\n", r.feature_names.size(),
                             c.bar + 1, c.statistics_checked ? ", the normalisation statistics" : "",
                             c.decisions_checked);
            continue;
        }
        ++leaky;
        s += "LOOK-AHEAD\n";
        for (const auto& f : c.features) {
            s += fmt::format("  {} changed at {} bar{}, first at {}: {:.6g} -> {:.6g}\n", feature_label(f),
                             f.bars_changed, f.bars_changed == 1 ? "" : "s", bar_text(r, f.first_bar), f.before,
                             f.after);
            const auto it = flagged.find(f.feature);
            if (it == flagged.end() || f.first_bar < it->second) flagged[f.feature] = f.first_bar;
        }
        for (const auto& st : c.statistics) {
            s += fmt::format(
                "  normalisation statistics of {} (column {}) changed: mean {:.6g} -> {:.6g}, stddev {:.6g} -> "
                "{:.6g}\n",
                st.feature, st.column, st.mean_before, st.mean_after, st.stddev_before, st.stddev_after);
            flagged.emplace(st.feature, c.bar);
        }
        if (c.decisions) {
            ++decision_cuts;
            s += fmt::format("  decisions changed at {} of {} bars, first at {}: action {} -> {}\n",
                             c.decisions->bars_changed, c.decisions_checked, bar_text(r, c.decisions->first_bar),
                             c.decisions->before, c.decisions->after);
        }
    }
    if (r.clean()) {
        s += fmt::format(
            "clean: no feature, normalisation statistic or decision at or before any of the {} cuts "
            "changed when every later bar was replaced\n",
            r.cuts.size());
    } else {
        std::vector<std::string> names;
        for (const auto& [feature, bar] : flagged)
            names.push_back(fmt::format("{} (first at {})", feature, bar_text(r, bar)));
        s += fmt::format("look-ahead found at {} of {} cuts: {}{}\n", leaky, r.cuts.size(),
                         names.empty() ? std::string("no feature") : fmt::format("{}", fmt::join(names, ", ")),
                         decision_cuts > 0 ? fmt::format("; decisions changed at {} cut{}", decision_cuts,
                                                         decision_cuts == 1 ? "" : "s")
                                           : std::string("; no decision changed"));
    }
    return s;
}

json::Value audit_value(const AuditReport& r) {
    json::Array cuts;
    for (const auto& c : r.cuts) {
        json::Array features, statistics;
        for (const auto& f : c.features)
            features.push_back(json::object({{"feature", f.feature},
                                             {"column", f.column >= 0 ? json::Value(f.column) : json::Value()},
                                             {"bars_changed", f.bars_changed},
                                             {"first_bar", f.first_bar},
                                             {"first_time", data::format_time(r.time.at(f.first_bar))},
                                             {"before", f.before},
                                             {"after", f.after}}));
        for (const auto& st : c.statistics)
            statistics.push_back(json::object({{"feature", st.feature},
                                               {"column", st.column},
                                               {"mean_before", st.mean_before},
                                               {"mean_after", st.mean_after},
                                               {"stddev_before", st.stddev_before},
                                               {"stddev_after", st.stddev_after}}));
        json::Value decisions;
        if (c.decisions)
            decisions = json::object({{"bars_changed", c.decisions->bars_changed},
                                      {"first_bar", c.decisions->first_bar},
                                      {"first_time", data::format_time(r.time.at(c.decisions->first_bar))},
                                      {"before", c.decisions->before},
                                      {"after", c.decisions->after}});
        cuts.push_back(json::object({{"bar", c.bar},
                                     {"time", data::format_time(r.time.at(c.bar))},
                                     {"kind", c.kind},
                                     {"clean", c.clean()},
                                     {"features", json::Value::array(std::move(features))},
                                     {"statistics_checked", c.statistics_checked},
                                     {"statistics", json::Value::array(std::move(statistics))},
                                     {"decisions_checked", c.decisions_checked},
                                     {"decisions", decisions}}));
    }
    return json::object({{"source", r.source},
                         {"checkpoint", r.checkpoint.empty() ? json::Value() : json::Value(r.checkpoint)},
                         {"trainer", r.trainer},
                         {"data", r.data},
                         {"device", r.device},
                         {"bars", r.bars},
                         {"warmup", r.warmup},
                         {"splits", json::object({{"train", json::Value::array({r.train.begin, r.train.end})},
                                                  {"val", json::Value::array({r.val.begin, r.val.end})},
                                                  {"test", json::Value::array({r.test.begin, r.test.end})}})},
                         {"random_cuts", r.options.random_cuts},
                         {"cut_seed", r.options.cut_seed},
                         {"clean", r.clean()},
                         {"cuts", json::Value::array(std::move(cuts))}});
}

}  // namespace fh::run
