/// @file runs.cpp
#include "report/runs.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <numeric>
#include <set>

#include "config/profile.hpp"
#include "config/schema.hpp"
#include "util/errors.hpp"
#include "util/log.hpp"
#include "util/xxh64.hpp"

namespace fh::report {

namespace fs = std::filesystem;
namespace json = io::json;

namespace {

const json::Limits kSummaryLimits{16u << 20, 64, true};

std::string setting_text(const config::KeyValue& v) {
    if (const auto* s = std::get_if<std::string>(&v)) return *s;
    return config::toml_value_text(v);
}

/// Sorts rows by `key` descending, absent values last, ties by name.
template <class T, class Key, class Name>
void rank(std::vector<T>& items, Key key, Name name) {
    std::stable_sort(items.begin(), items.end(), [&](const T& a, const T& b) {
        const std::optional<double> ka = key(a), kb = key(b);
        if (ka.has_value() != kb.has_value()) return ka.has_value();
        if (ka && kb && *ka != *kb) return *ka > *kb;
        return name(a) < name(b);
    });
}

Cell text_cell(std::string s) {
    return Cell{.text = std::move(s)};
}
Cell number_cell(std::optional<double> v, bool integer = false) {
    return Cell{.number = v, .is_number = true, .is_integer = integer};
}

/// A number column of the tables (after the validation metric's, Table::metric's, whose `name` is
/// null): each run's value (read_run reads it from summary.json's member `at`), or per setting the
/// mean and sd over seeds where `per_seed`. A null `value` is the run's test Sharpe interval, as text.
struct Column {
    const char* name;
    std::optional<double> RunRecord::*value;
    const char* at;
    bool integer = false, per_seed = true;
};
constexpr Column kColumns[] = {{nullptr, &RunRecord::best_val, "best.value"},
                               {"test_return", &RunRecord::test_return, "test.strategy.total_return"},
                               {"test_sharpe", &RunRecord::test_sharpe, "test.strategy.sharpe"},
                               {"test_sharpe [lo, hi]", nullptr, nullptr, false, false},
                               {"test_psr", &RunRecord::test_psr, "test.inference.psr_zero", false, false},
                               {"test_max_drawdown", &RunRecord::test_max_drawdown, "test.strategy.max_drawdown"},
                               {"test_trades", &RunRecord::test_trades, "test.strategy.trades", true},
                               {"bh_return", &RunRecord::hold_return, "test.buy_and_hold.total_return"},
                               {"bh_sharpe", &RunRecord::hold_sharpe, "test.buy_and_hold.sharpe"}};

/// The values of `keys` in a run's settings ("?" where it has none).
std::vector<std::string> values_of(const RunRecord& r, const std::vector<std::string>& keys) {
    std::vector<std::string> values;
    for (const auto& k : keys) {
        const auto it = r.settings.find(k);
        values.push_back(it == r.settings.end() ? "?" : it->second);
    }
    return values;
}

std::string metric_of(const std::vector<RunRecord>& runs) {
    std::set<std::string> names;
    for (const auto& r : runs)
        if (!r.metric.empty()) names.insert(r.metric);
    return names.size() == 1 ? *names.begin() : "val_metric";
}

std::string csv_field(const std::string& s) {
    if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
    std::string out = "\"";
    for (char c : s) {
        if (c == '"') out += '"';
        out += c;
    }
    return out + "\"";
}

std::string integer_text(double v) {
    return fmt::format("{}", static_cast<long long>(std::llround(v)));
}

/// Calls `line` with each line of `text` (without its '\n') and its 1-based number.
template <class Line>
void for_each_line(const std::string& text, Line line) {
    for (std::size_t pos = 0, number = 1; pos < text.size(); ++number) {
        auto end = text.find('\n', pos);
        if (end == std::string::npos) end = text.size();
        line(std::string_view(text.data() + pos, end - pos), number);
        pos = end + 1;
    }
}

}  // namespace

std::string read_text(const std::string& path, std::size_t max_bytes) {
    std::error_code ec;
    const auto size = fs::file_size(path, ec);
    if (ec) throw UsageError(fmt::format("cannot read {}: {}", path, ec.message()));
    if (size > max_bytes)
        throw UsageError(fmt::format("{} is too large ({} bytes, at most {})", path, size, max_bytes));
    std::ifstream in(path, std::ios::binary);
    if (!in) throw UsageError(fmt::format("cannot read {}", path));
    return std::string(std::istreambuf_iterator<char>(in), {});
}

int Csv::column(const std::string& name) const {
    const auto it = std::find(header.begin(), header.end(), name);
    return it == header.end() ? -1 : static_cast<int>(it - header.begin());
}

Csv read_csv(const std::string& path) {
    Csv csv;
    for_each_line(read_text(path), [&](std::string_view line, std::size_t) {
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (line.empty()) return;
        std::vector<std::string> fields;
        std::size_t b = 0;
        while (true) {
            const auto c = line.find(',', b);
            fields.emplace_back(line.substr(b, c == std::string_view::npos ? std::string_view::npos : c - b));
            if (c == std::string_view::npos) break;
            b = c + 1;
        }
        if (csv.header.empty())  // the first line (a line has at least one field)
            csv.header = std::move(fields);
        else
            csv.rows.push_back(std::move(fields));
    });
    return csv;
}

std::vector<json::Value> read_jsonl(const std::string& path) {
    std::vector<json::Value> out;
    if (!is_file(path)) return out;
    for_each_line(read_text(path), [&](std::string_view line, std::size_t number) {
        if (line.find_first_not_of(" \t\r") == std::string_view::npos) return;
        try {
            json::Value v = json::parse(line, kSummaryLimits);
            if (v.is_object())
                out.push_back(std::move(v));
            else
                log::warn("{}:{}: not a JSON object; the line is skipped", path, number);
        } catch (const json::ParseError&) {
            // a line cut by a crash: skipped
        }
    });
    return out;
}

bool is_file(const fs::path& p) {
    std::error_code ec;
    return fs::is_regular_file(p, ec);
}

json::Value read_json(const std::string& path, std::size_t limit, std::size_t max_bytes) {
    return json::parse(read_text(path, max_bytes), json::Limits{limit, 64, true});
}

const json::Value* member_at(const json::Value& v, const std::string& dotted) {
    const json::Value* cur = &v;
    for (std::size_t b = 0; cur != nullptr;) {
        if (!cur->is_object()) return nullptr;
        const auto dot = dotted.find('.', b);
        cur = cur->find(std::string_view(dotted).substr(b, dot == std::string::npos ? std::string::npos : dot - b));
        if (dot == std::string::npos) break;
        b = dot + 1;
    }
    return cur;
}

std::optional<double> number_at(const json::Value& v, const std::string& dotted) {
    const json::Value* m = member_at(v, dotted);
    if (m == nullptr || !m->is_number()) return std::nullopt;
    const double d = m->as_double();
    return std::isfinite(d) ? std::optional<double>(d) : std::nullopt;
}

std::string string_at(const json::Value& v, const std::string& dotted, const std::string& otherwise) {
    const json::Value* m = member_at(v, dotted);
    return m != nullptr && m->is_string() ? m->as_string() : otherwise;
}

Stat stat(const std::vector<double>& xs) {
    Stat s;
    if (xs.empty()) return s;
    const double m = std::accumulate(xs.begin(), xs.end(), 0.0) / static_cast<double>(xs.size());
    s.mean = m;
    if (xs.size() >= 2) {
        double v = 0;
        for (double x : xs) v += (x - m) * (x - m);
        s.var = v / static_cast<double>(xs.size() - 1);
        s.sd = std::sqrt(*s.var);
    }
    return s;
}

bool is_run_directory(const std::string& path) {
    return is_file(fs::path(path) / "config.toml");
}

RunRecord read_run(const std::string& path) {
    if (!is_run_directory(path)) throw UsageError(fmt::format("{} is not a run directory (no config.toml)", path));
    RunRecord r;
    r.path = path;
    r.name = fs::path(path).filename().string();
    if (r.name.empty()) r.name = fs::path(path).parent_path().filename().string();  // "dir/"
    try {
        const config::Profile p = config::resolve_profile_file((fs::path(path) / "config.toml").string());
        std::string identity;  // every key that changes what the run computes, in schema order
        for (const auto& k : config::schema()) {
            r.settings[k.full_name()] = setting_text(config::get_value(p, k));
            if (!config::is_placement_key(k.full_name()))
                identity += k.full_name() + "=" + config::toml_value_text(config::get_value(p, k)) + "\n";
        }
        r.profile_hash = fmt::format("{:016x}", util::xxh64(identity.data(), identity.size()));
        r.seed = p.run.seed;
        r.metric = p.early_stopping.metric;
        r.data_follows_seed = p.data.path.empty() && p.data.seed < 0;
    } catch (const Error& e) {
        log::warn("{}: config.toml does not resolve ({}); its settings are left out", path, e.what());
    }
    const fs::path summary = fs::path(path) / "summary.json";
    if (!is_file(summary)) {
        r.status = "no summary";
        return r;
    }
    try {
        r.summary = read_json(summary.string(), kSummaryLimits.max_bytes);
        r.status = string_at(r.summary, "status", "unreadable summary");
    } catch (const std::exception& e) {
        log::warn("{}: {}", summary.string(), e.what());
        r.status = "unreadable summary";
        r.summary = json::Value();
        return r;
    }
    for (const Column& c : kColumns)
        if (c.value != nullptr) r.*c.value = number_at(r.summary, c.at);
    r.rung = number_at(r.summary, "search.rung");
    r.rung_metric = number_at(r.summary, "search.metric");
    r.test_sharpe_lo = number_at(r.summary, "test.inference.bootstrap.sharpe.lo");
    r.test_sharpe_hi = number_at(r.summary, "test.inference.bootstrap.sharpe.hi");
    if (const auto seed = number_at(r.summary, "seed")) r.seed = static_cast<std::int64_t>(*seed);
    r.data_hash = string_at(r.summary, "data.xxh64");
    return r;
}

std::vector<Duplicate> drop_duplicates(std::vector<RunRecord>& runs) {
    std::vector<Duplicate> dropped;
    std::map<std::string, std::string> seen;  // identity -> the run counted
    std::vector<RunRecord> kept;
    for (auto& r : runs) {
        if (!r.profile_hash.empty()) {
            const std::string id = fmt::format("{} {} {}", r.profile_hash, r.seed, r.data_hash);
            if (const auto [it, fresh] = seen.emplace(id, r.path); !fresh) {
                dropped.push_back(Duplicate{r.path, it->second});
                continue;
            }
        }
        kept.push_back(std::move(r));
    }
    runs = std::move(kept);
    return dropped;
}

std::string duplicate_sentence(const Duplicate& d) {
    if (d.path == d.same_as) return fmt::format("{} is given twice: counted once.", d.path);
    return fmt::format("{} is the same run as {} (same resolved profile, seed and data): counted once.", d.path,
                       d.same_as);
}

std::string seed_spread(const std::vector<RunRecord>& runs, const std::vector<std::string>& keys) {
    // The settings (values of `keys`) -> the data of their finished runs.
    std::map<std::vector<std::string>, std::vector<const RunRecord*>> groups;
    for (const auto& r : runs) {
        if (!r.best_val && !r.test_return) continue;
        groups[values_of(r, keys)].push_back(&r);
    }
    bool varies = false, fixed = false;
    for (const auto& [values, members] : groups) {
        std::set<std::int64_t> seeds;
        std::set<std::string> data;
        bool follows = false;
        for (const auto* r : members) {
            seeds.insert(r->seed);
            data.insert(r->data_hash);
            follows = follows || r->data_follows_seed;
        }
        if (seeds.size() < 2) continue;
        // The data hash says it where summary.json records it; else the profile (data.seed).
        const bool differs = data.count("") == 0 ? data.size() > 1 : follows;
        (differs ? varies : fixed) = true;
    }
    if (varies && fixed) return "mixed";
    if (varies) return "data";
    if (fixed) return "fixed";
    return "";
}

std::string seed_spread_sentence(const std::string& spread) {
    if (spread == "data")
        return "The spread over seeds includes the market's: each seed drew its own synthetic market (data.seed "
               "follows run.seed); set data.seed to hold the market fixed.";
    if (spread == "fixed")
        return "The spread over seeds is the training's alone: every seed of a setting saw the same bars.";
    if (spread == "mixed")
        return "The spread over seeds includes the market's for some settings (each seed its own synthetic market) "
               "and not for others (the same bars for every seed).";
    return "";
}

namespace {

/// The run directories directly inside `dir`, sorted; an entry that cannot be examined (a symlink
/// loop, a dangling link) is skipped with a warning when `warn`.
std::vector<std::string> runs_inside(const fs::path& dir, bool warn) {
    std::vector<std::string> found;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
        std::error_code entry;
        const bool is_dir = e.is_directory(entry);
        if (entry) {  // not a run; the others still count
            if (warn) log::warn("{}: skipped: {}", e.path().string(), entry.message());
            continue;
        }
        if (is_dir && is_run_directory(e.path().string())) found.push_back(e.path().string());
    }
    std::sort(found.begin(), found.end());
    return found;
}

}  // namespace

std::vector<RunRecord> collect_runs(const std::vector<std::string>& paths) {
    if (paths.empty()) throw UsageError("name at least one run directory or sweep directory");
    std::vector<RunRecord> runs;
    for (const auto& path : paths) {
        std::error_code ec;
        if (!fs::is_directory(path, ec)) throw UsageError(fmt::format("{}: no such directory", path));
        if (is_run_directory(path)) {
            runs.push_back(read_run(path));
            continue;
        }
        const auto found = runs_inside(path, true);
        if (found.empty()) {
            // `--seeds ... --output pops` writes pops/NAME/seed=S: name the folders one level down
            // that are sweep or population directories, the usual reason for this mistake.
            std::vector<std::string> sweeps;
            for (const auto& e : fs::directory_iterator(path, ec)) {
                std::error_code entry;
                if (e.is_directory(entry) && !runs_inside(e.path(), false).empty()) sweeps.push_back(e.path().string());
            }
            std::sort(sweeps.begin(), sweeps.end());
            throw UsageError(fmt::format(
                "{} is neither a run directory (no config.toml) nor a sweep directory (no run directory inside){}",
                path,
                sweeps.empty()
                    ? std::string()
                    : fmt::format("; the sweep or population directories inside it: {}", fmt::join(sweeps, ", "))));
        }
        for (const auto& f : found) runs.push_back(read_run(f));
    }
    return runs;
}

std::vector<std::string> differing_keys(const std::vector<RunRecord>& runs) {
    std::vector<std::string> out;
    for (const auto& k : config::schema()) {
        const std::string key = k.full_name();
        if (config::is_placement_key(key)) continue;
        std::set<std::string> values;
        for (const auto& r : runs) {
            const auto it = r.settings.find(key);
            if (it != r.settings.end()) values.insert(it->second);
        }
        if (values.size() > 1) out.push_back(key);
    }
    return out;
}

Table run_table(const std::vector<RunRecord>& input) {
    std::vector<RunRecord> runs = input;
    Table t{.duplicates = drop_duplicates(runs)};
    t.metric = metric_of(runs);
    // Higher is better, but for a loss (val_loss): ranked by the negated value.
    const double sign = t.metric == "val_loss" ? -1.0 : 1.0;
    rank(
        runs,
        [sign](const RunRecord& r) { return r.best_val ? std::optional<double>(sign * *r.best_val) : std::nullopt; },
        [](const RunRecord& r) { return r.name; });
    // Successive halving's agents: by the last rung reached, then the metric there.
    const bool rungs = std::any_of(runs.begin(), runs.end(), [](const RunRecord& r) { return r.rung.has_value(); });
    if (rungs) {
        rank(
            runs, [](const RunRecord& r) { return r.rung_metric; }, [](const RunRecord& r) { return r.name; });
        std::stable_sort(runs.begin(), runs.end(), [](const RunRecord& a, const RunRecord& b) {
            return a.rung.value_or(-2) > b.rung.value_or(-2);
        });
    }
    const auto keys = differing_keys(runs);
    t.seed_spread = seed_spread(runs, keys);
    t.columns = {"rank", "run"};
    for (const auto& k : keys) t.columns.push_back(k);
    for (const char* c : {"seed", "status"}) t.columns.emplace_back(c);
    if (rungs)
        for (const char* c : {"rung", "rung_metric"}) t.columns.emplace_back(c);
    for (const Column& c : kColumns) t.columns.emplace_back(c.name != nullptr ? c.name : t.metric);
    for (std::size_t i = 0; i < runs.size(); ++i) {
        const auto& r = runs[i];
        std::vector<Cell> row{number_cell(static_cast<double>(i + 1), true), text_cell(r.name)};
        for (auto& v : values_of(r, keys)) row.push_back(text_cell(std::move(v)));
        row.push_back(number_cell(static_cast<double>(r.seed), true));
        row.push_back(text_cell(r.status));
        if (rungs) {
            row.push_back(number_cell(r.rung, true));
            row.push_back(number_cell(r.rung_metric));
        }
        for (const Column& c : kColumns)
            row.push_back(c.value != nullptr
                              ? number_cell(r.*c.value, c.integer)
                              : text_cell(r.test_sharpe_lo && r.test_sharpe_hi
                                              ? fmt::format("[{:.4f}, {:.4f}]", *r.test_sharpe_lo, *r.test_sharpe_hi)
                                              : "-"));
        t.rows.push_back(std::move(row));
        t.row_runs.push_back({r.path});
    }
    if (!runs.empty() && (rungs ? runs[0].rung_metric.has_value() : runs[0].best_val.has_value())) t.best_row = 0;
    return t;
}

Table seed_table(const std::vector<RunRecord>& input) {
    std::vector<RunRecord> runs = input;
    Table t{.grouped = true, .duplicates = drop_duplicates(runs)};
    t.metric = metric_of(runs);
    const auto keys = differing_keys(runs);
    t.seed_spread = seed_spread(runs, keys);
    struct Group {
        std::vector<std::string> values;
        std::vector<const RunRecord*> runs;
        std::vector<Cell> cells;  // kColumns' per_seed columns: mean and sd over the finished runs
        std::size_t finished = 0;
    };
    std::vector<Group> groups;
    for (const auto& r : runs) {
        std::vector<std::string> values = values_of(r, keys);
        auto g = std::find_if(groups.begin(), groups.end(), [&](const Group& x) { return x.values == values; });
        if (g == groups.end()) g = groups.insert(groups.end(), Group{values, {}, {}, 0});
        g->runs.push_back(&r);
    }
    const auto finished = [](const RunRecord* r) { return r->best_val || r->test_return; };  // else not averaged
    for (auto& g : groups) {
        g.finished = static_cast<std::size_t>(std::count_if(g.runs.begin(), g.runs.end(), finished));
        for (const Column& c : kColumns) {
            if (!c.per_seed) continue;
            std::vector<double> xs;
            for (const auto* r : g.runs)
                if (finished(r) && r->*c.value) xs.push_back(*(r->*c.value));
            const Stat st = stat(xs);
            g.cells.push_back({.number = st.mean, .sd = st.sd, .is_number = true, .is_integer = c.integer});
        }
    }
    const double sign = t.metric == "val_loss" ? -1.0 : 1.0;  // lower is better for a loss
    rank(
        groups,
        [sign](const Group& g) {
            return g.cells[0].number ? std::optional<double>(sign * *g.cells[0].number) : std::nullopt;
        },
        [](const Group& g) { return fmt::format("{}", fmt::join(g.values, "\x1f")); });
    t.columns = {"rank"};
    for (const auto& k : keys) t.columns.push_back(k);
    for (const char* c : {"runs", "seeds"}) t.columns.emplace_back(c);
    for (const Column& c : kColumns)
        if (c.per_seed) t.columns.emplace_back(c.name != nullptr ? c.name : t.metric);
    for (std::size_t i = 0; i < groups.size(); ++i) {
        const auto& g = groups[i];
        std::vector<Cell> row{number_cell(static_cast<double>(i + 1), true)};
        for (const auto& v : g.values) row.push_back(text_cell(v));
        row.push_back(text_cell(fmt::format("{}/{}", g.finished, g.runs.size())));
        std::vector<std::int64_t> seeds;
        for (const auto* r : g.runs) seeds.push_back(r->seed);
        std::sort(seeds.begin(), seeds.end());
        row.push_back(text_cell(fmt::format("{}", fmt::join(seeds, " "))));
        row.insert(row.end(), g.cells.begin(), g.cells.end());
        t.rows.push_back(std::move(row));
        t.row_runs.emplace_back();
        for (const auto* r : g.runs) t.row_runs.back().push_back(r->path);
    }
    if (!groups.empty() && groups[0].cells[0].number) t.best_row = 0;
    return t;
}

std::string cell_text(const Cell& c, int decimals) {
    if (!c.is_number) return c.text;
    if (!c.number) return "-";
    if (c.is_integer && c.sd) return fmt::format("{:.1f} ± {:.1f}", *c.number, *c.sd);  // counts over seeds
    if (c.is_integer) return integer_text(*c.number);
    std::string s = fmt::format("{:.{}f}", *c.number, decimals);
    if (c.sd) s += fmt::format(" ± {:.{}f}", *c.sd, decimals);
    return s;
}

std::string to_markdown(const Table& t) {
    // A row: `first`, then each cell with its '|' escaped.
    const auto row = [](std::string first, const auto& cells, const auto& text) {
        for (const auto& c : cells) {
            for (const char ch : text(c)) first += ch == '|' ? std::string("\\|") : std::string(1, ch);
            first += " | ";
        }
        first.pop_back();
        return first + "\n";
    };
    std::string out = row("| best | ", t.columns, [](const std::string& c) { return c; }) + "|---|";
    for (std::size_t j = 0; j < t.columns.size(); ++j) out += "---|";
    out += "\n";
    for (std::size_t i = 0; i < t.rows.size(); ++i)
        out += row(static_cast<int>(i) == t.best_row ? "| * | " : "|   | ", t.rows[i],
                   [](const Cell& c) { return cell_text(c); });
    if (t.grouped)
        out +=
            fmt::format("\n{} settings ranked by the mean {} over seeds (mean ± sd; runs = finished/all); * = best.\n",
                        t.rows.size(), t.metric);
    else
        out += fmt::format(
            "\n{} runs ranked by {}; * = best; test_* and bh_* (buy-and-hold) on the test split.\n", t.rows.size(),
            std::find(t.columns.begin(), t.columns.end(), "rung") != t.columns.end()
                ? fmt::format("the last rung of successive halving they reached, then the {} there (rung_metric)",
                              t.metric)
                : "the best " + t.metric);
    for (const auto& d : t.duplicates) out += duplicate_sentence(d) + "\n";
    if (const std::string s = seed_spread_sentence(t.seed_spread); !s.empty()) out += s + "\n";
    return out;
}

std::string to_csv(const Table& t) {
    std::string out = "best";
    for (std::size_t j = 0; j < t.columns.size(); ++j) {
        const bool spread = t.grouped && !t.rows.empty() && t.rows[0][j].is_number && j > 0;
        out += "," + (spread ? csv_field(t.columns[j] + "_mean") + "," + csv_field(t.columns[j] + "_sd")
                             : csv_field(t.columns[j]));
    }
    out += "\n";
    for (std::size_t i = 0; i < t.rows.size(); ++i) {
        out += static_cast<int>(i) == t.best_row ? "1" : "0";
        for (std::size_t j = 0; j < t.rows[i].size(); ++j) {
            const Cell& c = t.rows[i][j];
            out += ",";
            if (!c.is_number) {
                out += csv_field(c.text);
                continue;
            }
            if (c.number)
                out += c.is_integer && !(t.grouped && j > 0) ? integer_text(*c.number) : fmt::format("{}", *c.number);
            if (t.grouped && j > 0) {
                out += ",";
                if (c.sd) out += fmt::format("{}", *c.sd);
            }
        }
        out += "\n";
    }
    return out;
}

std::string to_json(const Table& t) {
    json::Array rows;
    for (std::size_t i = 0; i < t.rows.size(); ++i) {
        json::Object o{{"best", static_cast<int>(i) == t.best_row}};
        for (std::size_t j = 0; j < t.rows[i].size(); ++j) {
            const Cell& c = t.rows[i][j];
            if (!c.is_number) {
                o.emplace_back(t.columns[j], c.text);
            } else if (t.grouped && j > 0) {
                o.emplace_back(t.columns[j], json::object({{"mean", c.number}, {"sd", c.sd}}));
            } else if (c.is_integer && c.number) {
                o.emplace_back(t.columns[j], static_cast<long long>(std::llround(*c.number)));
            } else {
                o.emplace_back(t.columns[j], c.number);
            }
        }
        json::Array paths;
        for (const auto& p : t.row_runs[i]) paths.emplace_back(p);
        o.emplace_back(t.grouped ? "run_dirs" : "run_dir",
                       t.grouped ? json::Value::array(std::move(paths)) : paths.at(0));
        rows.push_back(json::Value::object(std::move(o)));
    }
    json::Array duplicates;
    for (const auto& d : t.duplicates)
        duplicates.push_back(json::object({{"run_dir", d.path}, {"same_as", d.same_as}}));
    return json::serialize(
               json::object({{"metric", t.metric},
                             {"grouped_by_seed", t.grouped},
                             {"seed_spread", t.seed_spread.empty() ? json::Value() : json::Value(t.seed_spread)},
                             {"duplicates", json::Value::array(std::move(duplicates))},
                             {"rows", json::Value::array(std::move(rows))}})) +
           "\n";
}

}  // namespace fh::report
