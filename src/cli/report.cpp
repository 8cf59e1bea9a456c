/// @file report.cpp
/// @brief `foxhunt-train report PATH [-o FILE]`: the HTML report of a run, an eval output or a
///        sweep (src/report/report.hpp); the page's path is the last line of stdout.
#include "cli/commands.hpp"
#include "report/report.hpp"
#include "util/log.hpp"

namespace fh::cli {

int run_report(const GlobalOptions&, const std::string& path, const std::string& output) {
    const std::string page = report::write_report(path, output);
    log::info("report written to {}", page);
    return print_result(page);
}

}  // namespace fh::cli
