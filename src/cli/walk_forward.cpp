/// @file walk_forward.cpp
/// @brief `foxhunt-train walk-forward`: resolve the profile, then the walk-forward
///        (src/run/walk_forward.hpp); the directory's path is the last line of stdout.
#include "cli/commands.hpp"
#include "run/walk_forward.hpp"
#include "util/errors.hpp"

namespace fh::cli {

int run_walk_forward(const GlobalOptions& g) {
    std::string path;
    const config::Profile profile = resolve_from_options(g, &path);
    if (profile.run.population > 1) throw UsageError("walk-forward trains one agent per fold: set run.population = 1");
    return print_result(run::walk_forward(profile, all_overrides(g), g.force));
}

}  // namespace fh::cli
