/// @file export.cpp
/// @brief `foxhunt-train export RUN_DIR|CHECKPOINT -o FILE.safetensors`: the policy's weights as
///        named tensors (src/run/export.cpp writes them; this file only checks the options).
#include <fmt/format.h>

#include <cstdio>

#include "cli/commands.hpp"
#include "run/run.hpp"
#include "util/errors.hpp"

namespace fh::cli {

int run_export(const GlobalOptions& g, const std::string& source, const std::string& output) {
    if (!g.profile.empty() || !g.overrides.empty() || !g.resume.empty() || g.auto_name || !g.seeds.empty() ||
        !g.population_grid.empty() || !g.population_record.empty() || !g.data.empty() || g.seed || !g.device.empty() ||
        !g.output.empty())
        throw UsageError("export reads a checkpoint and writes one file: only -o FILE and --force apply");
    const std::string checkpoint = run::export_policy(source, output, g.force);
    fmt::print("{}\n", output);
    std::fflush(stdout);
    (void)checkpoint;
    return 0;
}

}  // namespace fh::cli
