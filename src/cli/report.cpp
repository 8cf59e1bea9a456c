/// @file report.cpp
/// @brief `foxhunt-train report PATH [-o FILE]`: the HTML report of a run, an eval output or a
///        sweep (src/report/report.hpp); the page's path is the last line of stdout.
#include <fmt/format.h>

#include <cstdio>

#include "cli/commands.hpp"
#include "report/report.hpp"
#include "util/errors.hpp"
#include "util/log.hpp"

namespace fh::cli {

int run_report(const GlobalOptions& g, const std::string& path, const std::string& output) {
    if (!g.profile.empty() || !g.overrides.empty() || !g.resume.empty() || g.auto_name)
        throw UsageError(
            "report reads a run, eval or sweep directory only: --profile, --set, --resume and --auto-name "
            "do not apply");
    const std::string page = report::write_report(path, output);
    log::info("report written to {}", page);
    fmt::print("{}\n", page);
    std::fflush(stdout);
    return 0;
}

}  // namespace fh::cli
