/// @file naming.hpp
/// @brief Run names derived from a run's overrides and seed (`--auto-name`), and what a run does
///        when its directory exists already (`run.on_exists`). docs/sweeps.md is the reference.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "config/profile.hpp"
#include "io/json.hpp"

namespace fh::run {

/// Longest derived name, in bytes (file systems allow 255 per path component).
inline constexpr std::size_t kMaxDerivedNameBytes = 200;

/// The name of a run from its overrides and seed, stable and filesystem-safe:
///   `<base>,<section.key>=<value>,...,seed=<N>`
/// base is run.name, or run.trainer when run.name is empty; one `section.key=value` per key
/// overridden in `overrides` ("section.key=value" strings as on the command line; a key given
/// twice counts once), sorted by key, placement keys (config::is_placement_key) left out; each value is
/// the resolved profile's, written canonically (so 3e-4 and 0.0003 name the same run): integers
/// and booleans as TOML writes them, floats in their shortest exact form, strings as they are,
/// integer arrays joined by 'x' ([64, 64] -> 64x64). Every byte outside [A-Za-z0-9._+-] (and a
/// leading '.' or '-') is written %XX, so ',' and '=' only separate. A name longer than
/// kMaxDerivedNameBytes is cut and ends with '~' and the 16 hex digits of its full text's XXH64.
std::string derived_run_name(const config::Profile& resolved, const std::vector<std::string>& overrides);

/// The names of a population's agents in the population's directory: what differs between them,
///   `<section.key>=<value>,...,seed=<N>`   (e.g. `seed=3`, `training.learning_rate=0.0003,seed=3`)
/// one `section.key=value` per key (placement keys aside) whose resolved value is not the same for
/// every agent, sorted by key, values written and escaped as derived_run_name writes them, then
/// the seed; cut and hashed as derived_run_name past kMaxDerivedNameBytes. Everything the agents
/// share is in each agent's config.toml and in the population directory's name.
std::vector<std::string> agent_run_names(const std::vector<config::Profile>& agents);

/// What a run does with its directory (run.on_exists, when run.name is set).
struct Placement {
    enum class Action { create, resume, skip };
    Action action = Action::create;
    std::string path;    ///< the existing directory (resume, skip); "" for create
    std::string status;  ///< skip/resume: the status in its summary.json ("" when it has none)
    std::string reason;  ///< one line for the log
};

/// Decides, from run.on_exists, what to do when `<run.output_dir>/<run.name>` exists:
///   new    — create `<name>-2`, `-3`, ... (Action::create; the default);
///   error  — throws UsageError (exit 2) naming the directory;
///   skip   — Action::skip, whatever the run's state;
///   resume — a finished run (summary.json status completed, early_stopped or diverged) is
///            skipped; one with checkpoints/last.safetensors is resumed from it; one without
///            a checkpoint (killed before its first) is removed and started again, provided it
///            holds nothing but run files (otherwise UsageError).
/// run.name empty (a timestamped name) or no such directory: Action::create.
Placement place_run(const config::Profile& resolved);

/// `s` without the `blanks` it begins and ends with.
std::string trim(std::string_view s, std::string_view blanks = " \t");

/// The status field of `run_dir/summary.json`; "" when there is no readable summary.
std::string summary_status(const std::string& run_dir);

/// The JSON value in file `path`; null when the file is missing or unreadable, or does not parse
/// (within `max_bytes`).
io::json::Value read_json_or_null(const std::string& path, std::size_t max_bytes = 16u << 20);

}  // namespace fh::run
