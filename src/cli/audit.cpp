/// @file audit.cpp
/// @brief `foxhunt-train audit RUN_DIR|CHECKPOINT` or `audit --profile P`: the look-ahead audit
///        (src/run/audit.hpp); the findings on stdout (and as JSON with --json FILE), exit 6 when
///        something at or before a cut changed.
#include <fmt/format.h>

#include <cstdio>

#include "cli/commands.hpp"
#include "io/run_directory.hpp"
#include "io/json.hpp"
#include "run/audit.hpp"
#include "util/errors.hpp"
#include "util/log.hpp"

namespace fh::cli {

int run_audit(const GlobalOptions& g, const AuditCommand& a) {
    if (a.source.empty() == g.profile.empty())
        throw UsageError(
            "audit: give a run directory or checkpoint (audit RUN_DIR), or a profile (audit --profile P), one of them");
    if (a.cuts < 0 || a.cuts > 1000) throw UsageError(fmt::format("audit --cuts {}: expected 0 to 1000", a.cuts));
    const run::AuditOptions options{.random_cuts = a.cuts, .cut_seed = a.cut_seed};
    run::AuditReport report;
    if (!a.source.empty()) {
        if (g.seed)
            throw UsageError(
                "audit RUN_DIR: --seed does not apply (the policy is the run's; --set data.seed changes a "
                "synthetic market)");
        if (g.force) throw UsageError("audit RUN_DIR: --force applies to audit --profile only");
        report = run::audit_checkpoint(a.source, all_overrides(g), options);  // no --seed, no --output
    } else {
        const config::Profile profile = resolve_from_options(g);
        report = run::audit_profile(profile, g.profile, g.force, options);
    }
    if (!a.json.empty()) io::write_file_atomically(a.json, io::json::serialize(run::audit_value(report)) + "\n");
    fmt::print("{}", run::audit_text(report));
    std::fflush(stdout);
    if (report.clean()) return 0;
    log::error(
        "audit: look-ahead found: something at or before a cut changed when the later bars were replaced "
        "(the findings above)");
    return static_cast<int>(ExitCode::lookahead);
}

}  // namespace fh::cli
