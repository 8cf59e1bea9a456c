/// @file compare.cpp
/// @brief `foxhunt-train compare PATH...`: one table of runs, or of settings over seeds
///        (src/report/runs.hpp builds it; this file only picks the format).
#include <fmt/format.h>

#include <cstdio>

#include "cli/commands.hpp"
#include "report/inference.hpp"
#include "report/runs.hpp"
#include "util/log.hpp"

namespace fh::cli {

int run_compare(const GlobalOptions&, const CompareOptions& c) {
    const auto runs = report::collect_runs(c.paths);
    const report::Table t = c.group_by_seed ? report::seed_table(runs) : report::run_table(runs);
    const auto deflated = report::deflated_best(runs);  // docs/metrics.md "Deflated Sharpe ratio"
    if (c.format == "csv") {                            // the table alone on stdout: the duplicates on stderr
        for (const auto& d : t.duplicates) log::warn("{}", report::duplicate_sentence(d));
        fmt::print("{}", report::to_csv(t));
    } else if (c.format == "json") {
        fmt::print("{}", report::with_deflated(report::to_json(t), deflated));
    } else {
        fmt::print("{}", report::to_markdown(t));
        if (deflated) fmt::print("\n{}\n", deflated->text);
        for (const auto& path : c.paths) fmt::print("{}", report::walk_forward_markdown(path));
    }
    std::fflush(stdout);
    return 0;
}

}  // namespace fh::cli
