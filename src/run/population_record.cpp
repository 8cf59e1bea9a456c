/// @file population_record.cpp
/// @brief population.json written and read back (population_record.hpp).
#include "run/population_record.hpp"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "io/atomic_file.hpp"
#include "io/json.hpp"
#include "report/runs.hpp"
#include "run/naming.hpp"
#include "run/halving.hpp"
#include "run/search.hpp"
#include "util/errors.hpp"
#include "util/log.hpp"

namespace fh::run {

namespace fs = std::filesystem;
namespace json = io::json;

namespace {

/// A run directory's name as population.json records it: one directory name, not hidden.
bool valid_run_name(const std::string& name) {
    return !name.empty() && name[0] != '.' && name.find('/') == std::string::npos;
}

/// The strings of JSON array `v`.
std::vector<std::string> strings_of(const json::Value& v) {
    std::vector<std::string> out;
    for (const auto& s : v.as_array())
        if (s.is_string()) out.push_back(s.as_string());
    return out;
}

/// The agents population.json `file` lists; none when it is unreadable.
json::Array recorded_agents(const std::string& file) {
    const json::Value v = read_json_or_null(file, 64u << 20);
    const auto* agents = field(v, "agents");
    return agents != nullptr && agents->is_array() ? agents->as_array() : json::Array{};
}

/// An agent population.json records (`a`, after `members`): its plan from its config.toml (with
/// `overrides`) and the record; `what` opens each problem (exit 2).
Member recorded_member(const std::string& dir, const json::Value& a, const std::vector<Member>& members,
                       const std::vector<std::string>& overrides, const std::string& what) {
    const auto* run = field(a, "run");
    const auto index = integer_field(a, "index");
    if (run == nullptr || !run->is_string() || !index || !valid_run_name(run->as_string()))
        throw UsageError(fmt::format("{}: population.json: an agent without a valid run directory name", what));
    Member m;
    m.plan.index = static_cast<int>(*index);
    m.plan.name = run->as_string();
    for (const auto& other : members)
        if (other.plan.name == m.plan.name || other.plan.index == m.plan.index)
            throw UsageError(
                fmt::format("{}: population.json lists agent {} ({}) twice; the file was edited: each agent once", what,
                            m.plan.index, m.plan.name));
    const fs::path config_file = fs::path(dir) / m.plan.name / "config.toml";
    if (!fs::is_regular_file(config_file))
        throw UsageError(
            fmt::format("{}: agent {} has no {} (the population stopped before that agent "
                        "started); run the population's command again with --set "
                        "run.on_exists=resume, which starts the agents that have no directory",
                        what, m.plan.index, config_file.string()));
    m.plan.profile = config::resolve_profile_file(config_file.string(), overrides);
    m.plan.profile.run.population = 1;
    m.plan.profile.run.output_dir = dir;
    m.plan.profile.run.name = m.plan.name;
    m.plan.seed = m.plan.profile.run.seed;
    if (const auto r = integer_field(a, "start_round")) m.start_round = *r;
    if (const auto* g = a.find("overrides"); g != nullptr && g->is_array()) m.plan.grid = strings_of(*g);
    if (const auto* sp = a.find("space"); sp != nullptr && sp->is_array())
        for (const auto& o : sp->as_array()) {
            const std::string text = o.is_string() ? o.as_string() : "";
            const auto eq = text.find('=');
            auto parsed = eq == std::string::npos || !is_agent_key(text.substr(0, eq))
                              ? ParsedDistribution{std::nullopt, "not KEY=DISTRIBUTION", 0}
                              : parse_distribution(text.substr(0, eq), text.substr(eq + 1));
            if (!parsed.distribution)
                throw UsageError(fmt::format("{}: population.json: agent {}: search space '{}': {}", what, m.plan.index,
                                             text, parsed.problem));
            m.plan.space.push_back(std::move(*parsed.distribution));
        }
    return m;
}

}  // namespace

long long search_interval(const config::Profile& p) {
    if (p.run.search == "none") return 0;
    return p.search.interval > 0 ? p.search.interval : p.run.eval_interval;
}

double number_or_nan(const json::Value* v) {
    return v != nullptr && v->is_number() ? v->as_double() : std::nan("");
}

const json::Value* field(const json::Value& v, std::string_view key) {
    return v.is_object() ? v.find(key) : nullptr;
}

std::optional<std::int64_t> integer_field(const json::Value& v, std::string_view key) {
    const json::Value* f = field(v, key);
    if (f == nullptr || !f->is_integer()) return std::nullopt;
    return f->as_i64();
}

void write_population_json(const Where& where, const config::Profile& base, const std::vector<Member>& members) {
    const std::string& dir = where.agents;
    json::Array agents;
    std::vector<RungResult> rungs;
    for (const auto& m : members) {
        json::Object a{{"index", m.plan.index},
                       {"seed", m.plan.seed},
                       {"overrides", json::array_of<std::string>(m.plan.grid)},
                       {"run", m.plan.name},
                       {"status", m.status.empty() ? std::string("pending") : m.status}};
        if (!m.done_by.empty()) a.emplace_back("action", m.done_by);
        if (!m.plan.space.empty()) {
            json::Array space;
            for (const auto& d : m.plan.space) space.emplace_back(d.key + "=" + d.text);
            a.emplace_back("space", json::Value::array(std::move(space)));
        }
        const json::Value s = read_json_or_null((fs::path(dir) / m.plan.name / "summary.json").string());
        if (base.run.search != "none") {  // the agent's lineage.jsonl: whom it copied when, its keys now
            json::Array copies;
            json::Value keys;
            RungResult rung{m.plan.index, -1, std::nan("")};
            for (auto& line : report::read_jsonl((fs::path(dir) / m.plan.name / "lineage.jsonl").string())) {
                if (const auto* k = line.find("keys")) keys = *k;
                if (const auto r = integer_field(line, "rung"))
                    rung = {m.plan.index, static_cast<int>(*r), number_or_nan(line.find("metric"))};
                if (line.find("copied") == nullptr) continue;
                json::Object c;
                for (const auto& [k, v] : line.as_object())
                    if (k != "keys" && k != "tensors") c.emplace_back(k, v);
                copies.push_back(json::Value::object(std::move(c)));
            }
            if (!keys.is_null()) a.emplace_back("keys", std::move(keys));
            a.emplace_back("lineage", json::Value::array(std::move(copies)));
            if (base.run.search == "halving") {  // its last rung: summary.json's once it ended, else its lineage's
                if (const auto* r = field(s, "search"))
                    if (const auto k = integer_field(*r, "rung"))
                        rung = {m.plan.index, static_cast<int>(*k), number_or_nan(r->find("metric"))};
                a.emplace_back("start_round", m.start_round);
                a.emplace_back("rung", rung.rung);
                a.emplace_back("rung_metric", rung.metric);
                rungs.push_back(rung);
            }
        }
        for (const char* key : {"best", "test", "error"})
            if (const auto* v = field(s, key)) a.emplace_back(key, *v);
        agents.push_back(json::Value::object(std::move(a)));
    }
    json::Object top{{"population", static_cast<std::int64_t>(members.size())}, {"trainer", base.run.trainer}};
    if (where.flat) top.emplace_back("directory", dir);
    if (base.run.search == "pbt")
        top.emplace_back("search", json::object({{"method", base.run.search},
                                                 {"interval", search_interval(base)},
                                                 {"fraction", base.search.fraction},
                                                 {"perturb_down", base.search.perturb_down},
                                                 {"perturb_up", base.search.perturb_up},
                                                 {"resample_probability", base.search.resample_probability},
                                                 {"copy_replay", base.search.copy_replay}}));
    if (base.run.search == "halving") {
        std::size_t population = 0;  // the first agents: those that started at round 0
        for (const auto& m : members) population += m.start_round == 0;
        json::Array ranking;  // best first: the last rung reached, then the metric there
        for (const auto& r : halving_ranking(rungs))
            ranking.push_back(json::object({{"index", r.index},
                                            {"run", members[static_cast<std::size_t>(r.index)].plan.name},
                                            {"rung", r.rung},
                                            {"metric", r.metric}}));
        top.emplace_back("search", json::object({{"method", base.run.search},
                                                 {"interval", search_interval(base)},
                                                 {"eta", base.search.eta},
                                                 {"max_points", halving_points(base.search, population)},
                                                 {"slots", static_cast<std::int64_t>(population)},
                                                 {"ranking", json::Value::array(std::move(ranking))}}));
    }
    top.emplace_back("agents", json::Value::array(std::move(agents)));
    io::write_file_atomically(where.record, json::serialize(json::Value::object(std::move(top))) + "\n",
                              [&](const std::string& m) { throw UsageError(fmt::format("{}: {}", where.record, m)); });
}

void adopt_recorded_names(const std::string& dir, std::vector<Member>& members) {
    // (An unreadable record lists none: the planned names.)
    for (const auto& a : recorded_agents((fs::path(dir) / "population.json").string())) {
        const auto index = integer_field(a, "index");
        const auto seed = integer_field(a, "seed");
        const auto* run = field(a, "run");
        const auto* grid = field(a, "overrides");
        if (!index || !seed || run == nullptr || !run->is_string() || grid == nullptr || !grid->is_array()) continue;
        const std::string& name = run->as_string();
        if (*index < 0 || static_cast<std::size_t>(*index) >= members.size() || !valid_run_name(name)) continue;
        Member& m = members[static_cast<std::size_t>(*index)];
        if (*seed != m.plan.seed || strings_of(*grid) != m.plan.grid || name == m.plan.name) continue;
        log::info("agent {}: its run directory is {} (population.json)", m.plan.index, name);
        m.plan.name = name;
        m.plan.profile.run.name = name;
    }
}

std::vector<Member> read_population_json(const std::string& dir, const std::vector<std::string>& overrides) {
    std::ifstream in(fs::path(dir) / "population.json", std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    json::Value v;
    try {
        v = json::parse(text.str(), json::Limits{64u << 20, 64, true});
    } catch (const json::ParseError& e) {
        throw UsageError(fmt::format("--resume {}: population.json is unreadable: {}", dir, e.what()));
    }
    const auto* agents = field(v, "agents");
    if (agents == nullptr || !agents->is_array() || agents->as_array().empty())
        throw UsageError(fmt::format("--resume {}: population.json lists no agents", dir));
    std::vector<Member> members;
    for (const auto& a : agents->as_array())
        members.push_back(recorded_member(dir, a, members, overrides, "--resume " + dir));
    return members;
}

void adopt_recorded_points(const Where& where, std::vector<Member>& members) {
    // (An unreadable record lists none: place_members starts the points again.)
    for (const auto& a : recorded_agents(where.record)) {
        const auto index = integer_field(a, "index");
        if (!index || *index < static_cast<std::int64_t>(members.size())) continue;
        if (*index != static_cast<std::int64_t>(members.size()))
            throw UsageError(fmt::format("{}: agent {} follows agent {}: the file was edited", where.record, *index,
                                         members.size() - 1));
        members.push_back(recorded_member(where.agents, a, members, {}, where.record));
        log::info("agent {}: a point of the search, {} (population.json)", members.back().plan.index,
                  members.back().plan.name);
    }
}

}  // namespace fh::run
