/// @file check.cpp
/// @brief `foxhunt-train check PROFILE`: validate, print the resolved profile and the memory
///        estimate. Needs no GPU. Everything printed to stdout is TOML (the estimate is in
///        comments), so `check P > resolved.toml` feeds back as a profile.
#include <fmt/format.h>

#include <cstdio>

#include "cli/commands.hpp"
#include "config/memory_estimate.hpp"
#include "util/log.hpp"

namespace fh::cli {

int run_check(const GlobalOptions& g) {
    std::string path;
    const config::Profile profile = resolve_from_options(g, &path);

    fmt::print("# foxhunt-train check: {} is valid", path);
    if (!all_overrides(g).empty())
        fmt::print(" (with {} command-line override{})", all_overrides(g).size(),
                   all_overrides(g).size() == 1 ? "" : "s");
    fmt::print("\n{}", config::to_toml(profile));

    // ---- DATA SUMMARY (hook for the data layer) ----------------------------------------------
    // When `check --data PATH` (or data.path) names a CSV, the data layer loads it here
    // (fh::data::load_market with DataOptions filled from [data], [run] seed and [instrument]
    // bars_per_year, then fh::data::describe printed as "# " comment lines), and the real bar
    // count goes to the estimate. Until that is wired, the estimate uses data.synthetic_bars.
    std::uint64_t bars = 0;
    const bool bars_known = profile.data.path.empty();
    // ------------------------------------------------------------------------------------------

    const auto items = config::estimate_device_memory(profile, bars);
    fmt::print("\n# Estimated device memory ({}):\n", bars_known
                                                        ? "synthetic market"
                                                        : "data size not read yet: market data "
                                                          "assumes data.synthetic_bars bars");
    std::size_t width = 0;
    for (const auto& i : items) width = std::max(width, i.consumer.size());
    for (const auto& i : items)
        fmt::print("#   {:<{}}  {:>10}  {}\n", i.consumer, width, config::format_bytes(i.bytes),
                   i.key.empty() ? "" : "(" + i.key + ")");
    fmt::print("#   {:<{}}  {:>10}  (limit: gpu.memory_fraction = {} of the device)\n", "total",
               width, config::format_bytes(config::total_bytes(items)),
               profile.gpu.memory_fraction);
    std::fflush(stdout);
    return 0;
}

}  // namespace fh::cli
