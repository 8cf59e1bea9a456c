/// @file bench.cpp
/// @brief `foxhunt-train bench` (throughput as JSON) and `eval` (a checkpoint's
///        backtest as JSON): the two subcommands that report without training.
#include <fmt/format.h>

#include <cstdio>

#include "cli/commands.hpp"
#include "trainers/pipeline.hpp"

namespace fh::cli {

int run_bench(const GlobalOptions& g) {
    const config::Profile profile = resolve_from_options(g);
    fmt::print("{}\n", trainers::bench(profile, g.force));
    std::fflush(stdout);
    return 0;
}

int run_eval(const GlobalOptions& g, const std::string& checkpoint, const std::string& split) {
    fmt::print("{}\n", trainers::evaluate(checkpoint, split, g.data, g.device));
    std::fflush(stdout);
    return 0;
}

}  // namespace fh::cli
