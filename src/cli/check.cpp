/// @file check.cpp
/// @brief `foxhunt-train check PROFILE`: validate, print the resolved profile and the memory
///        estimate. Needs no GPU. Everything printed to stdout is TOML (the estimate is in
///        comments), so `check P > resolved.toml` feeds back as a profile.
#include <fmt/format.h>

#include <cstdio>

#include "cli/commands.hpp"
#include "config/memory_estimate.hpp"
#include "data/load.hpp"
#include "trainers/setup.hpp"
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

    // ---- the data: loaded and validated (a data error exits with 3 and names the line), the
    // fxcache built or reused, a summary printed as comments, the real bar count estimated.
    const auto market = data::load_market(trainers::data_options(profile));
    fmt::print("\n# Data:\n");
    std::string summary = data::describe(market);
    std::size_t start = 0;
    while (start < summary.size()) {
        std::size_t end = summary.find('\n', start);
        if (end == std::string::npos) end = summary.size();
        fmt::print("#   {}\n", std::string_view(summary).substr(start, end - start));
        start = end + 1;
    }
    const std::uint64_t bars = market.bars.size();

    const auto items = config::estimate_device_memory(profile, bars);
    fmt::print("\n# Estimated device memory ({} bars of market data):\n", bars);
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
