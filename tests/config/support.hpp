/// @file support.hpp
/// @brief Helpers for the [config] tests: resolve a profile text and capture its problems.
#pragma once

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "config/profile.hpp"

namespace fh::test {

/// The outcome of resolving a profile text.
struct Outcome {
    bool ok = false;
    int exit_code = 0;                  ///< the exit code of the exception (2 for profiles)
    std::string message;                ///< what(): every problem plus a closing hint
    std::vector<std::string> problems;  ///< one `origin:line:col: message` each
    config::Profile profile;
};

inline Outcome resolve(const std::string& text, const std::vector<std::string>& overrides = {},
                       const std::string& origin = "p.toml") {
    Outcome o;
    try {
        o.profile = config::resolve_profile_text(text, origin, overrides);
        o.ok = true;
    } catch (const config::ProfileError& e) {
        o.exit_code = static_cast<int>(e.code());
        o.message = e.what();
        o.problems = e.problems();
    }
    return o;
}

/// True when some problem starts with `prefix` and contains `text`.
inline bool has_problem(const Outcome& o, const std::string& prefix, const std::string& text) {
    for (const auto& p : o.problems)
        if (p.rfind(prefix, 0) == 0 && p.find(text) != std::string::npos) return true;
    return false;
}

/// The minimal valid profile.
inline const std::string kMinimal = "[run]\ntrainer = \"dqn\"\n";

}  // namespace fh::test
