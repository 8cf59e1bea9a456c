/// @file train.cpp
/// @brief `foxhunt-train [train]`. The trainers do not exist yet: the profile is resolved and
///        validated, then the command fails honestly instead of pretending to train.
#include <fmt/format.h>

#include "cli/commands.hpp"
#include "util/errors.hpp"
#include "util/log.hpp"

namespace fh::cli {

int run_train(const GlobalOptions& g) {
    std::string path;
    const config::Profile profile = resolve_from_options(g, &path);
    log::info("profile {}: trainer {}, device {}, {} steps, seed {}", path, profile.run.trainer,
              profile.run.device, profile.run.total_steps, profile.run.seed);
    // TODO(trainers): build the data, the environment and the trainer from `profile` here.
    throw UsageError(fmt::format(
        "the {} trainer is not built yet in this version of foxhunt-train, so nothing was "
        "trained. The profile {} is valid; `foxhunt-train check {}` prints it resolved.",
        profile.run.trainer, path, path));
}

}  // namespace fh::cli
