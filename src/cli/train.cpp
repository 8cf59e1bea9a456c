/// @file train.cpp
/// @brief `foxhunt-train [train]`: resolve the profile, then run the trainer pipeline
///        (src/trainers/pipeline.cpp), which writes the run directory.
#include "cli/commands.hpp"
#include "trainers/pipeline.hpp"
#include "util/log.hpp"

namespace fh::cli {

int run_train(const GlobalOptions& g) {
    std::string path;
    const config::Profile profile = resolve_from_options(g, &path);
    log::info("profile {}: trainer {}, device {}, {} env steps, seed {}", path, profile.run.trainer,
              profile.run.device, profile.run.total_steps, profile.run.seed);
    trainers::train(profile, g.resume, g.force);
    return 0;
}

}  // namespace fh::cli
