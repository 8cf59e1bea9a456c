/// @file train.cpp
/// @brief `foxhunt-train [train]`: resolve the profile, name the run and decide what to do when its
///        directory exists (src/run/naming.hpp), then run the training pipeline (src/run/train.cpp).
#include <fmt/format.h>

#include <cstdio>

#include "cli/commands.hpp"
#include "run/naming.hpp"
#include "run/run.hpp"
#include "util/errors.hpp"
#include "util/log.hpp"

namespace fh::cli {

int run_train(const GlobalOptions& g) {
    std::string path;
    config::Profile profile = resolve_from_options(g, &path);
    const std::vector<std::string> overrides = all_overrides(g);
    std::string resume = g.resume;
    if (g.auto_name) {
        if (!resume.empty())
            throw UsageError("--auto-name names a new run and --resume continues an existing one: give one of them "
                             "(with --auto-name, run.on_exists = \"resume\" resumes the named run)");
        profile.run.name = run::derived_run_name(profile, overrides);
        log::info("run name (--auto-name): {}", profile.run.name);
    }
    if (resume.empty()) {
        const run::Placement placement = run::place_run(profile);
        if (!placement.reason.empty()) log::info("{}", placement.reason);
        if (placement.action == run::Placement::Action::skip) {
            fmt::print("{}\n", placement.path);
            std::fflush(stdout);
            return 0;
        }
        if (placement.action == run::Placement::Action::resume) resume = placement.path;
    }
    log::info("profile {}: trainer {}, device {}, {} env steps, seed {}", path, profile.run.trainer,
              profile.run.device, profile.run.total_steps, profile.run.seed);
    const std::string dir = run::train(profile, resume, overrides, g.force);
    fmt::print("{}\n", dir);
    std::fflush(stdout);
    return 0;
}

}  // namespace fh::cli
