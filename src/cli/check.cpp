/// @file check.cpp
/// @brief `foxhunt-train check PROFILE`: the validation `train` does before it allocates anything
///        (the profile, the data, the data-dependent rules, sizes and memory: src/trainers/
///        run_checks.hpp), then the resolved profile, a data summary and the memory estimates.
///        Needs no GPU (with one, the device memory is compared too). Nothing is printed to stdout
///        unless the run would start; everything printed is TOML (the rest in comments), so
///        `check P > resolved.toml` feeds back as a profile.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <sstream>

#include "cli/commands.hpp"
#include "config/memory_estimate.hpp"
#include "device/cuda/device_info.hpp"
#include "data/load.hpp"
#include "device/make_device.hpp"
#include "run/population.hpp"
#include "run/session.hpp"
#include "trainers/run_checks.hpp"
#include "trainers/setup.hpp"
#include "util/log.hpp"

namespace fh::cli {
namespace {

void print_items(const std::vector<config::MemoryItem>& items, const std::string& limit) {
    std::size_t width = 5;
    for (const auto& i : items) width = std::max(width, i.consumer.size());
    for (const auto& i : items)
        fmt::print("#   {:<{}}  {:>10}  {}\n", i.consumer, width, config::format_bytes(i.bytes),
                   i.key.empty() ? "" : "(" + i.key + ")");
    fmt::print("#   {:<{}}  {:>10}  ({})\n", "total", width, config::format_bytes(config::total_bytes(items)), limit);
}

}  // namespace

int run_check(const GlobalOptions& g) {
    std::string path;
    const config::Profile profile = resolve_from_options(g, &path);
    // A population: the grid and every agent's profile checked as train checks them (the grid's
    // problems named file:line:column), before the data is read.
    const run::PopulationRequest request{parse_seeds(g.seeds), g.population_grid, !g.population_record.empty()};
    std::optional<run::PopulationPlan> plan;
    if (run::wants_population(profile, request))
        plan = run::plan_population(path, profile, all_overrides(g), request, g.auto_name);
    else
        run::refuse_search_without_population(profile);

    // Everything `train` checks before it allocates: the data (a data error exits with 3 and
    // names the line; the fxcache is built or reused), the data-dependent rules, sizes, memory.
    const auto spec = ops::parse_device_spec(profile.run.device);
    std::string why;
    const int gpus = spec.kind == ops::DeviceSpec::Kind::cpu ? 0 : cuda::device_count(&why);
    trainers::RunCheckOptions options;
    options.force = g.force;
    options.verify_dataset = true;
    options.host_backend = spec.kind != ops::DeviceSpec::Kind::cuda && gpus == 0;  // cpu, or auto without a GPU
    trainers::check_data_size(profile, options);
    const auto market = data::load_market(trainers::data_options(profile));
    const auto sizes = trainers::check_run(profile, market, options);
    std::string device_limit;
    if (!options.host_backend && gpus > spec.ordinal) {
        const auto d = cuda::query_device(spec.ordinal);
        const auto budget =
            static_cast<std::uint64_t>(static_cast<double>(d.free_memory) * profile.gpu.memory_fraction);
        config::require_memory(
            sizes.device, budget, "device memory",
            fmt::format("gpu.memory_fraction {} of the {} free on {}, cuda:{}", profile.gpu.memory_fraction,
                        config::format_bytes(d.free_memory), d.name, spec.ordinal));
        device_limit = fmt::format("fits: {} available on {}, gpu.memory_fraction = {} of its free memory",
                                   config::format_bytes(budget), d.name, profile.gpu.memory_fraction);
    } else if (options.host_backend) {
        device_limit = "the CPU backend: counted in the host memory below";
    } else {
        device_limit = fmt::format(
            "not compared: no GPU here ({}); a run compares it with gpu.memory_fraction = {} "
            "of the device's free memory before it allocates",
            why, profile.gpu.memory_fraction);
    }

    fmt::print("# foxhunt-train check: {} is valid", path);
    if (const std::size_t n = all_overrides(g).size(); n > 0)
        fmt::print(" (with {} command-line override{})", n, n == 1 ? "" : "s");
    fmt::print("\n{}", config::to_toml(profile));
    fmt::print("\n# Precision: {}\n",
               ops::precision_effect(run::profile_precision(profile),
                                     options.host_backend ? ops::Backend::cpu : ops::Backend::cuda));

    fmt::print("\n# Data:\n");
    std::istringstream summary(data::describe(market));
    for (std::string line; std::getline(summary, line);) fmt::print("#   {}\n", line);
    if (!sizes.dump_key.empty())
        fmt::print("#   {:<16}{} (verified: {} rows allocated)\n", sizes.dump_key + ":", sizes.dump_path,
                   sizes.inputs.dump_rows);

    fmt::print("\n# Estimated device memory ({} bars of market data):\n", market.bars.size());
    print_items(sizes.device, device_limit);
    fmt::print("\n# Estimated peak host memory:\n");
    print_items(sizes.host, sizes.host_available > 0
                                ? fmt::format("fits: {} available", config::format_bytes(sizes.host_available))
                                : std::string("not compared: the available memory could not be read"));
    if (plan) {
        fmt::print(
            "\n# Population: {} agents in one process, in {}/{}/ (the memory above is one agent's; the\n"
            "# device holds every agent's). Per agent: seed, its own keys, run directory:\n",
            plan->agents.size(), profile.run.output_dir, plan->name);
        for (const auto& a : plan->agents)
            fmt::print("#   {:>3}  seed {:<6} {}  {}\n", a.index, a.seed, fmt::join(a.grid, " "), a.name);
        std::vector<const config::Profile*> agents;
        for (const auto& a : plan->agents) agents.push_back(&a.profile);
        const std::string unbatched = run::unbatched_reason(agents);
        fmt::print("# {}\n", unbatched.empty()
                                 ? std::string("Batched: one engine for every agent, each op one launch for all "
                                               "of them (run.population_batching)")
                                 : "Each agent its own launches: " + unbatched);
        fmt::print(
            "# Estimated device memory of the {} agents: {} (train compares it with the device's before it "
            "allocates)\n",
            plan->agents.size(), config::format_bytes(config::total_bytes(sizes.device) * plan->agents.size()));
    }
    std::fflush(stdout);
    return 0;
}

}  // namespace fh::cli
