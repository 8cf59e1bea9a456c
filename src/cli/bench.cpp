/// @file bench.cpp
/// @brief `foxhunt-train bench` (throughput as JSON) and `eval` (a checkpoint's
///        backtest as JSON): the two subcommands that report without training.
#include <fmt/format.h>

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
    if (g.ablate) {  // a diagnostic of CUDA's captured steps: refused where there are none, not ignored
        const auto spec = ops::parse_device_spec(profile.run.device);
        if (spec.kind == ops::DeviceSpec::Kind::cpu ||
            (spec.kind == ops::DeviceSpec::Kind::automatic && cuda::device_count() == 0))
            throw UsageError(
                fmt::format("bench --ablate: run.device = \"{}\" runs on the CPU backend, which has no "
                            "captured steps to leave ops out of; --ablate is a CUDA diagnostic",
                            profile.run.device));
    }
    return print_result(profile.run.population > 1 ? run::bench_population(profile, g.force, g.ablate, g.kernel_times)
                                                   : run::bench(profile, g.kernel_times, g.force, g.ablate));
}

int run_eval(const GlobalOptions& g, const std::string& checkpoint, const std::string& split) {
    run::EvalRequest r{
        .checkpoint = checkpoint, .split = split, .overrides = g.overrides, .output_dir = g.output, .force = g.force};
    if (!g.data.empty()) r.overrides.push_back("data.path=" + config::toml_quote(g.data));
    if (!g.device.empty()) r.overrides.push_back("run.device=" + config::toml_quote(g.device));
    return print_result(run::evaluate(r));
}

}  // namespace fh::cli
