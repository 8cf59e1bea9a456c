/// @file bench_ablation.hpp
/// @brief `bench --kernel-times`' and `bench --ablate`'s tables, shared by one agent's bench (bench.cpp) and a
/// population's
///        (population.cpp).
#pragma once

#include <functional>
#include <vector>

#include "device/cuda/kernel_timing.hpp"
#include "io/json.hpp"

namespace fh::run {

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

}  // namespace fh::run
