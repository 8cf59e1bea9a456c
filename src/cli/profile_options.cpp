/// @file profile_options.cpp
/// @brief From the global command-line options to a resolved profile.
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>

#include "cli/commands.hpp"
#include "config/schema.hpp"

namespace fh::cli {

std::vector<std::string> all_overrides(const GlobalOptions& g) {
    std::vector<std::string> o = g.overrides;
    // Dedicated options become overrides of string keys with quoted TOML values, so that any
    // text (spaces, '#', quotes) survives.
    if (!g.data.empty()) o.push_back("data.path=" + config::toml_quote(g.data));
    if (g.seed) o.push_back(fmt::format("run.seed={}", *g.seed));
    if (!g.device.empty()) o.push_back("run.device=" + config::toml_quote(g.device));
    if (!g.output.empty()) o.push_back("run.output_dir=" + config::toml_quote(g.output));
    return o;
}

int print_result(const std::string& line) {
    fmt::print("{}\n", line);
    std::fflush(stdout);
    return 0;
}

config::Profile resolve_from_options(const GlobalOptions& g, std::string* path) {
    std::string name = g.profile;
    if (name.empty() && !g.resume.empty()) {
        name = (std::filesystem::path(g.resume) / "config.toml").string();
        std::error_code ec;
        if (!std::filesystem::is_regular_file(name, ec))
            throw UsageError(fmt::format("--resume {}: no config.toml there; is it a run directory?", g.resume));
    }
    if (name.empty())
        throw UsageError(
            "no profile: pass --profile PATH|NAME, e.g. --profile dqn-smoketest "
            "(`foxhunt-train check --help` lists the shipped profiles)");
    const std::string file = config::locate_profile(name);
    if (path != nullptr) *path = file;
    return config::resolve_profile_file(file, all_overrides(g));
}

}  // namespace fh::cli
