/// @file population_grid.hpp
/// @brief A population's grid file (--population-grid, docs/sweeps.md "Population"): lines of
///        whitespace-separated KEY=VALUE tokens, one agent (or one per seed) a line, a value either
///        a number or a search space (KEY=loguniform(a,b), ...; search.hpp). Read and checked here,
///        token by token, before any agent is planned.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "run/search.hpp"

namespace fh::run {

/// One grid token: where it is and what it says.
struct GridToken {
    int line = 0, column = 0;  // 1-based
    std::string text;
};
struct GridLine {
    int line = 0;
    std::vector<GridToken> tokens;
};

/// "section.key" of an override "section.key=value".
std::string override_key(const std::string& override_text);

/// The lines of grid file `grid_file` (comments and blank lines dropped), every token checked: a
/// known agent key (agent_keys()) set once per line, and a value that resolves with
/// `profile_file` and the `shared` overrides (a search space: both its bounds). Throws
/// UsageError for a file that cannot be read or holds no agent, config::ProfileError naming
/// `file:line:column` for every bad token.
std::vector<GridLine> read_grid(const std::string& grid_file, const std::string& profile_file,
                                const std::vector<std::string>& shared);

/// A grid token's search space (KEY=loguniform(a,b), ...; search.hpp), or nullopt for a value.
/// Throws config::ProfileError naming `file:line:column` for a bad one.
std::optional<Distribution> token_distribution(const std::string& grid_file, const GridToken& token);

}  // namespace fh::run
