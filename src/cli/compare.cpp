/// @file compare.cpp
/// @brief `foxhunt-train compare PATH...`: one table of runs, or of settings over seeds
///        (src/report/runs.hpp builds it; this file only picks the format).
#include <fmt/format.h>

#include <cstdio>

#include "cli/commands.hpp"
#include "report/runs.hpp"
#include "util/errors.hpp"
#include "util/log.hpp"

namespace fh::cli {

int run_compare(const GlobalOptions& g, const CompareOptions& c) {
    if (!g.profile.empty() || !g.overrides.empty() || !g.resume.empty() || g.auto_name || !g.seeds.empty() ||
        !g.population_grid.empty() || !g.population_record.empty())
        throw UsageError("compare reads run directories only: --profile, --set, --resume and --auto-name do not apply");
    const auto runs = report::collect_runs(c.paths);
    const report::Table t = c.group_by_seed ? report::seed_table(runs) : report::run_table(runs);
    if (c.format == "csv")  // the table alone on stdout: the duplicates on stderr
        for (const auto& d : t.duplicates) log::warn("{}", report::duplicate_sentence(d));
    if (c.format == "csv") fmt::print("{}", report::to_csv(t));
    else if (c.format == "json") fmt::print("{}", report::to_json(t));
    else fmt::print("{}", report::to_markdown(t));
    std::fflush(stdout);
    return 0;
}

}  // namespace fh::cli
