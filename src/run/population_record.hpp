/// @file population_record.hpp
/// @brief A population's agents in this process (Member) and its record, population.json (docs/sweeps.md
///        "Population"): written whenever an agent's status changes, read back by --resume POPDIR and by
///        a population its command continues (run.on_exists = resume).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/profile.hpp"
#include "io/json.hpp"
#include "run/agent_run.hpp"
#include "run/population.hpp"

namespace fh::run {

/// What each agent does in this process.
enum class AgentAction { create, resume, done };

struct Member {
    AgentPlan plan;
    AgentAction action = AgentAction::create;
    std::string status;   ///< the status it ends with (or had, when done)
    std::string done_by;  ///< population.json's "action": trained, resumed or skipped (left as it was)
    std::unique_ptr<AgentRun> run;
    bool live = false;
    long long start_round = 0;  ///< halving: the round the point started at (its rungs count from there)
};

/// A search's progress units between rounds (halving: the first rung's budget); 0 when the
/// population does not search.
long long search_interval(const config::Profile& p);

/// A JSON number, or NaN (null, absent).
double number_or_nan(const io::json::Value* v);

/// `v`'s member `key`; nullptr when `v` is not an object or has none.
const io::json::Value* field(const io::json::Value& v, std::string_view key);

/// `v`'s member `key` when it is an integer (a record's or a lineage line's), else nullopt.
std::optional<std::int64_t> integer_field(const io::json::Value& v, std::string_view key);

/// Where the agents' run directories are and where population.json goes: the population's directory
/// for both, or (flat) run.output_dir and a file the command line names.
struct Where {
    std::string agents;  ///< the folder of the agents' run directories
    std::string record;  ///< population.json's path
    bool flat = false;
};

/// Writes population.json (where.record, atomically): the population's agents, their seeds, overrides,
/// search spaces, directories, status and results (a search's lineage and keys, from each agent's
/// lineage.jsonl). UsageError when it cannot be written.
void write_population_json(const Where& where, const config::Profile& base, const std::vector<Member>& members);

/// A population resumed by its command (run.on_exists = resume): its agents keep the directories
/// `dir`'s population.json names (a population written by an earlier version named them otherwise),
/// where the recorded agent is the planned one (the same index, seed and grid line). An unreadable
/// record leaves the planned names.
void adopt_recorded_names(const std::string& dir, std::vector<Member>& members);

/// `--resume POPDIR`: the agents `dir`'s population.json lists, each planned from its run directory's
/// config.toml with `overrides` (the resume's command line), its recorded grid line and search space.
/// UsageError naming the file for a record that is unreadable, lists no agent, an agent twice or one
/// without a valid directory name, config.toml or search space.
std::vector<Member> read_population_json(const std::string& dir, const std::vector<std::string>& overrides);

/// A halving search continued by its command (run.on_exists = "resume"): the points it added after
/// the planned agents, as population.json (`where.record`) records them.
void adopt_recorded_points(const Where& where, std::vector<Member>& members);

}  // namespace fh::run
