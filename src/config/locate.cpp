/// @file locate.cpp
/// @brief `--profile PATH|NAME`: finding shipped profiles by name.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "build_config.hpp"
#include "config/profile.hpp"
#include "config/schema.hpp"
#include "util/regular_file.hpp"

namespace fh::config {
namespace {

namespace fs = std::filesystem;

/// Directories that may hold shipped profiles, most specific first.
std::vector<fs::path> profile_dirs() {
    std::vector<fs::path> dirs;
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) {
        const auto bin = exe.parent_path();
        dirs.push_back(bin / ".." / "share" / "foxhunt-train" / "profiles");  // installed
        dirs.push_back(bin / ".." / "profiles");                              // build/ in the tree
        dirs.push_back(bin / "profiles");
    }
    dirs.emplace_back(fs::path(FH_SOURCE_DIR) / "profiles");
    dirs.emplace_back(fs::path(FH_INSTALL_DATADIR) / "profiles");
    std::vector<fs::path> unique;
    for (auto& d : dirs) {
        d = d.lexically_normal();
        if (std::find(unique.begin(), unique.end(), d) == unique.end()) unique.push_back(d);
    }
    return unique;
}

bool is_file(const fs::path& p) {
    std::error_code ec;
    return fs::is_regular_file(p, ec);
}

}  // namespace

std::vector<std::string> shipped_profile_names() {
    std::set<std::string> names;  // sorted, each once
    for (const auto& dir : profile_dirs()) {
        std::error_code ec;
        for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
            if (it->path().extension() == ".toml") names.insert(it->path().stem().string());
    }
    return {names.begin(), names.end()};
}

std::string locate_profile(const std::string& path_or_name) {
    if (path_or_name.empty())
        throw UsageError(fmt::format("no profile given: pass --profile PATH|NAME (shipped: {})",
                                     fmt::join(shipped_profile_names(), ", ")));
    if (is_file(path_or_name)) return path_or_name;
    if (const auto kind = util::non_regular_kind(path_or_name); !kind.empty())
        throw UsageError(
            fmt::format("profile '{}' is {}, not a regular file; a profile is a TOML text file", path_or_name, kind));
    const bool looks_like_path = path_or_name.find('/') != std::string::npos;
    if (!looks_like_path) {
        fs::path name(path_or_name);
        if (name.extension() != ".toml") name += ".toml";
        for (const auto& dir : profile_dirs())
            if (is_file(dir / name)) return (dir / name).lexically_normal().string();
    }
    const auto names = shipped_profile_names();
    std::string hint;
    const auto stem = fs::path(path_or_name).stem().string();
    if (const auto g = closest(stem, names)) hint = fmt::format(" Did you mean '{}'?", *g);
    std::string where;
    for (const auto& d : profile_dirs()) where += "\n  " + d.lexically_normal().string();
    throw UsageError(
        fmt::format("profile '{}' not found: it is not a file{}.{}\nShipped profiles: {}{}", path_or_name,
                    looks_like_path ? "" : ", nor a shipped profile name", hint,
                    names.empty() ? std::string("(none found)") : fmt::format("{}", fmt::join(names, ", ")),
                    looks_like_path ? std::string() : "\nLooked in:" + where));
}

}  // namespace fh::config
