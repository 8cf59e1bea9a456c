/// @file bench_ablation.hpp
/// @brief What one agent's bench (bench.cpp) and a population's (population.cpp) share: the timed
///        phases, and `bench --kernel-times`' and `bench --ablate`'s tables.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "config/profile.hpp"
#include "device/cuda/kernel_timing.hpp"
#include "io/json.hpp"

namespace fh::run {

/// Seconds from `t` to now.
double seconds_since(std::chrono::steady_clock::time_point t);

/// Iterations per timed phase: the run's length (`total_steps` progress units, `per` an
/// iteration's), at most 500 and at most ~5M progress units (a PPO iteration is a whole rollout),
/// at least 20 (fewer when that cap is lower).
long long bench_phase_iterations(long long total_steps, long long per);

/// What a bench times: `collect(k)`, `update(k)` and `iterate(k)` run k collection steps, updates
/// and whole iterations and return what they did (env steps, updates, env steps) on the devices
/// `synchronize` waits for.
struct BenchPhases {
    std::function<long long(long long)> collect, update, iterate;
    std::function<void()> synchronize;
    bool collects = true;       ///< false: the collection phase is not timed (an offline trainer's)
    bool warm_iterate = false;  ///< one untimed iteration before the timed ones (captures its sequence)
};
struct PhaseTimes {
    long long collected = 0, updates = 0, e2e_steps = 0;
    double collect_s = 0, update_s = 0, e2e_s = 0;
};
/// `phase` calls of each phase timed, a synchronisation around each: collection alone, updates
/// alone, then (when the collection did env steps) whole iterations.
PhaseTimes time_phases(const BenchPhases& phases, long long phase);

/// What a bench measured (counts over all agents).
struct BenchFigures {
    std::string device;
    long long batch_rows = 0, phase = 0;
    PhaseTimes t;
    double first_kernel_s = 0, dataset_rate = 0;  ///< dataset_rate: an offline trainer's collection rate
    std::size_t peak = 0;
    bool batched = false;  ///< one trainers::BatchedPopulation for all agents
};

/// bench's JSON object of `b` (before its diagnostics); a population's (`population` agents, > 0)
/// also has the population's size, whether it is batched and the rates per agent.
io::json::Object bench_json(const config::Profile& p, const BenchFigures& b, std::size_t population = 0);

/// `bench --kernel-times`' table: each op's launches and microseconds per unit of a phase
/// (`phases` units: collection steps, updates), slowest first, and their sum.
io::json::Value kernel_table(std::vector<cuda::KernelTime> times, double phases);

/// The ablation of one phase: `run_phase(k)` runs k captured calls of it and returns the units
/// they did (collection steps, updates; a population's: every agent's). Times the phase as
/// captured (`us_captured`), with every launch replaced by a kernel that does nothing
/// (`us_skeleton`: the graph's nodes and edges without their work), then for each op of
/// `op_names` (the ops' launches by name) with its launches left out (`us_without`, `us_saved`:
/// the op's node and work), replaced by that kernel (`us_stand_in`, `us_work`: its work on the
/// path) and alone (every other launch replaced: `us_alone`, `us_alone_work`: its work with the
/// GPU to itself, beyond the skeleton); `runs` calls each after one untimed call that captures the graphs again (the
/// results of the filtered calls are meaningless); microseconds per unit. `synchronize` waits for every device the
/// phase uses.
io::json::Value ablation_table(const std::function<void()>& synchronize, const std::vector<cuda::KernelTime>& op_names,
                               const std::function<double(long long)>& run_phase, long long runs);

/// bench --ablate's tables of the timed phases `t` ran (ablation_table, `runs` each): "collection",
/// each op of `collect_ops` left out, in microseconds per `per_step` of phases.collect's count, and
/// "update", each op of `update_ops` left out, per update.
io::json::Value ablation_tables(const BenchPhases& phases, const PhaseTimes& t,
                                const std::vector<cuda::KernelTime>& collect_ops,
                                const std::vector<cuda::KernelTime>& update_ops, double per_step, long long runs);

}  // namespace fh::run
