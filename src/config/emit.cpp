/// @file emit.cpp
/// @brief The resolved profile as TOML, written by hand (toml++ 3.3.0's printer prints floats
///        with 17 digits and has undefined behaviour on long arrays of small numbers).
#include <fmt/format.h>

#include "config/profile.hpp"
#include "config/schema.hpp"

namespace fh::config {

std::string to_toml(const Profile& profile) {
    std::string out = std::string(kResolvedProfileHeader) + "# Every key is listed; docs/profiles.md explains each.\n";
    for (const auto& section : sections()) {
        out += fmt::format("\n[{}]  # {}\n", section.name, section.doc);
        std::size_t width = 0;
        std::vector<std::pair<std::string, const KeyDescriptor*>> lines;
        for (const auto& k : schema()) {
            if (k.section != section.name) continue;
            lines.emplace_back(fmt::format("{} = {}", k.key, toml_value_text(get_value(profile, k))), &k);
            width = std::max(width, lines.back().first.size());
        }
        for (const auto& [line, k] : lines) out += fmt::format("{:<{}}  # {}\n", line, width, k->doc);
    }
    return out;
}

}  // namespace fh::config
