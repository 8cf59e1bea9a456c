/// @file population.hpp
/// @brief Many agents of one trainer and network shape in one process (docs/sweeps.md
///        "Population"): each with its own seed and, from a grid file, its own scalar
///        hyperparameters, its own trainer, device streams and run directory, advanced by
///        host workers. Agent i's files are exactly those of a single run with its seed and overrides.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "config/profile.hpp"
#include "run/search.hpp"

namespace fh::trainers {
class Trainer;
}

namespace fh::run {

/// Most agents in one process (run.population's bound).
inline constexpr std::size_t kMaxAgents = 256;

/// The keys an agent may set on its own (a grid line): scalars that change no shape, no data and
/// nothing the agents share. Everything else is the same for every agent.
const std::vector<std::string>& agent_keys();
bool is_agent_key(std::string_view section_dot_key);

/// What the command line asks for besides the profile.
struct PopulationRequest {
    std::vector<std::int64_t> seeds;  ///< --seeds (empty: run.seed, run.seed + 1, ... for run.population)
    std::string grid_file;            ///< --population-grid ("" = none)
    /// --population-record: the agents go beside single runs (flat), each named as --auto-name
    /// names its single run; else in the population's directory, named by what differs between
    /// them (agent_run_names).
    bool flat = false;
};

/// True when the request or the profile asks for more than one agent, or for a grid.
bool wants_population(const config::Profile& profile, const PopulationRequest& request);

/// A single run (no population) whose profile asks for a search (run.search): UsageError (exit 2)
/// saying a search needs a population. `train` and `check` refuse it alike.
void refuse_search_without_population(const config::Profile& profile);

/// One agent of a plan.
struct AgentPlan {
    int index = 0;
    std::int64_t seed = 0;
    std::vector<std::string> grid;       ///< its grid line's overrides, its search spaces drawn ("" none)
    std::vector<Distribution> space;     ///< its line's search spaces (KEY=loguniform(a,b), ...; search.hpp)
    std::vector<std::string> overrides;  ///< the single run's command-line overrides (summary.json)
    config::Profile profile;             ///< resolved; run.population 1, run.name its name
    std::string name;                    ///< its run directory's name (PopulationRequest::flat says how it is made)
};

struct PopulationPlan {
    config::Profile base;  ///< the population's profile (run.name, output_dir, on_exists)
    std::vector<AgentPlan> agents;
    std::string name;  ///< the population directory's name
    /// "" = the agents in `<run.output_dir>/<name>/` with its population.json. Else (flat) the
    /// agents directly in run.output_dir, run.on_exists applied to each agent's directory as to a
    /// single run's, and population.json written to this file (scripts/sweep.sh).
    std::string record;
};

/// The agents: the seeds (--seeds, else run.seed + i for i < run.population) crossed with the grid
/// lines (the line varies slowest; a line that sets run.seed is one agent with that seed). Each
/// agent's profile is `profile_file` with `overrides` (less run.seed and run.population), its line
/// and its seed, resolved and checked as a single run's. Throws config::ProfileError (exit 2)
/// naming `file:line:column` for a grid key that is unknown or not an agent key, or a bad value;
/// UsageError for more than kMaxAgents agents or two agents that would be the same run.
/// `auto_name`: the population's directory is named from the overrides (--auto-name).
PopulationPlan plan_population(const std::string& profile_file, const config::Profile& base,
                               const std::vector<std::string>& overrides, const PopulationRequest& request,
                               bool auto_name);

/// Trains the plan's agents on host workers in `<run.output_dir>/<plan.name>` (run.on_exists applies
/// to it) and returns that directory (flat, plan.record set: run.output_dir). A diverged agent stops alone (its
/// summary.json says so); after the others finish the population exits with DivergedError (5). SIGINT/SIGTERM: every
/// live agent writes its checkpoint and summary ("interrupted"), then InterruptedError (130).
std::string train_population(const PopulationPlan& plan, bool force);

/// Why a population of these agents (resolved profiles, the first's settings deciding) would not
/// train as one batched engine, trainers::BatchedPopulation ("" when it would): run.population_batching,
/// the agents' trainer and options or their sizes under "auto" (docs/sweeps.md). Resuming agents
/// must also stand at one iteration (the runner checks their checkpoints).
std::string unbatched_reason(const std::vector<const config::Profile*>& agents);

/// True when `dir` holds a population (population.json).
bool is_population_directory(const std::string& dir);

/// `--resume POPDIR`: every unfinished agent from its last checkpoint (an agent without one starts
/// again), each with its own config.toml and `overrides` (the resume's command line); finished
/// agents are left as they are.
std::string resume_population(const std::string& dir, const std::vector<std::string>& overrides, bool force);

/// Tests: called with each agent's index and trainer before the population trains (a NaN
/// injection); empty = none.
void set_agent_hook_for_tests(std::function<void(int agent, trainers::Trainer& trainer)> hook);

/// Throughput of the population's agents advanced together (bench --set run.population=N): as one
/// batched engine where run.population_batching and the agents allow it, else each agent's own
/// graphs on host workers. With `ablate` (CUDA only), also each op's cost to the population's
/// throughput: the phases timed again with that op left out (bench --ablate). `kernel_times`
/// (CUDA, a batched population only): each op of a batched collection step and update timed alone.
std::string bench_population(const config::Profile& profile, bool force, bool ablate = false,
                             bool kernel_times = false);

}  // namespace fh::run
