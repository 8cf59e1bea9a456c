/// @file walk_forward.cpp
/// @brief `foxhunt-train walk-forward`: resolve the profile, then the walk-forward
///        (src/run/walk_forward.hpp); the directory's path is the last line of stdout.
#include <fmt/format.h>

#include <cstdio>

#include "cli/commands.hpp"
#include "run/walk_forward.hpp"
#include "util/errors.hpp"

namespace fh::cli {

int run_walk_forward(const GlobalOptions& g) {
    if (!g.resume.empty() || g.auto_name || !g.seeds.empty() || !g.population_grid.empty() ||
        !g.population_record.empty())
        throw UsageError(
            "walk-forward trains its folds one after the other: --resume, --auto-name, --seeds and "
            "--population-* do not apply (run it again with the same run.name to continue one)");
    std::string path;
    const config::Profile profile = resolve_from_options(g, &path);
    if (profile.run.population > 1) throw UsageError("walk-forward trains one agent per fold: set run.population = 1");
    const std::string dir = run::walk_forward(profile, all_overrides(g), g.force);
    fmt::print("{}\n", dir);
    std::fflush(stdout);
    return 0;
}

}  // namespace fh::cli
