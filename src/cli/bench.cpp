/// @file bench.cpp
/// @brief `foxhunt-train bench` (throughput as JSON) and `eval` (a checkpoint's
///        backtest as JSON): the two subcommands that report without training.
#include <fmt/format.h>

#include <cstdio>

#include "cli/commands.hpp"
#include "config/schema.hpp"
#include "device/cuda/device_info.hpp"
#include "device/make_device.hpp"
#include "run/population.hpp"
#include "run/run.hpp"
#include "util/errors.hpp"

namespace fh::cli {

int run_bench(const GlobalOptions& g) {
    const config::Profile profile = resolve_from_options(g);
    if (!g.seeds.empty() || !g.population_grid.empty() || !g.population_record.empty())
        throw UsageError("bench: --seeds and --population-grid do not apply; --set run.population=N times N agents");
    if (g.ablate) {  // a diagnostic of CUDA's captured steps: refused where there are none, not ignored
        const auto spec = ops::parse_device_spec(profile.run.device);
        if (spec.kind == ops::DeviceSpec::Kind::cpu ||
            (spec.kind == ops::DeviceSpec::Kind::automatic && cuda::device_count() == 0))
            throw UsageError(
                fmt::format("bench --ablate: run.device = \"{}\" runs on the CPU backend, which has no "
                            "captured steps to leave ops out of; --ablate is a CUDA diagnostic",
                            profile.run.device));
    }
    fmt::print("{}\n", profile.run.population > 1 ? run::bench_population(profile, g.force, g.ablate, g.kernel_times)
                                                  : run::bench(profile, g.kernel_times, g.force, g.ablate));
    std::fflush(stdout);
    return 0;
}

int run_eval(const GlobalOptions& g, const std::string& checkpoint, const std::string& split) {
    if (!g.profile.empty())
        throw UsageError(
            "eval uses the profile stored in the checkpoint; --profile does not apply (--set honours the "
            "data, cost and segment keys: docs/sweeps.md)");
    if (!g.resume.empty() || g.auto_name || !g.seeds.empty() || !g.population_grid.empty() ||
        !g.population_record.empty())
        throw UsageError(
            "eval: --resume, --auto-name, --seeds, --population-grid and --population-record do not apply");
    if (g.seed)
        throw UsageError(
            "eval: --seed does not apply (the backtest is deterministic; the checkpoint's seed makes its "
            "synthetic market)");
    run::EvalRequest r;
    r.checkpoint = checkpoint;
    r.split = split;
    r.overrides = g.overrides;
    if (!g.data.empty()) r.overrides.push_back("data.path=" + config::toml_quote(g.data));
    if (!g.device.empty()) r.overrides.push_back("run.device=" + config::toml_quote(g.device));
    r.output_dir = g.output;
    r.force = g.force;
    fmt::print("{}\n", run::evaluate(r));
    std::fflush(stdout);
    return 0;
}

}  // namespace fh::cli
