/// @file bench.cpp
/// @brief `foxhunt-train bench`: throughput of the profile's trainer as JSON (SPEC section 9).
#include <fmt/format.h>

#include <cstdio>

#include "cli/commands.hpp"
#include "trainers/pipeline.hpp"

namespace fh::cli {

int run_bench(const GlobalOptions& g) {
    const config::Profile profile = resolve_from_options(g);
    fmt::print("{}\n", trainers::bench(profile));
    std::fflush(stdout);
    return 0;
}

}  // namespace fh::cli
