/// @file population_grid.cpp
/// @brief A population's grid file: its tokens read and checked (population_grid.hpp), and the
///        keys an agent may set (agent_keys()).
#include "run/population_grid.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <sstream>
#include <string_view>

#include "config/schema.hpp"
#include "run/naming.hpp"
#include "run/population.hpp"
#include "util/errors.hpp"
#include "util/regular_file.hpp"

namespace fh::run {

std::string override_key(const std::string& o) {
    return trim(std::string_view(o).substr(0, o.find('=')), " \t\r");
}

namespace {

/// The lines of a grid file: whitespace-separated KEY=VALUE tokens, '#' to the end of the line a
/// comment, blank lines ignored (scripts/sweep.sh's --grid format).
std::vector<GridLine> read_grid_lines(const std::string& file) {
    // Read as a profile is: a regular file only, its size checked before a byte is read, a UTF-8
    // byte order mark dropped.
    util::RegularFile in(file);
    if (!in.ok())
        throw UsageError(fmt::format("--population-grid {}: {}", file, in.missing() ? "no such file" : in.error()));
    std::string whole;
    bool too_big = false;
    if (!in.read_all(whole, config::kMaxProfileBytes, &too_big))
        throw UsageError(fmt::format("--population-grid {}: {}", file, in.error()));
    if (too_big)
        throw UsageError(fmt::format("--population-grid {}: larger than {} bytes (1 MiB): is this really a grid?", file,
                                     config::kMaxProfileBytes));
    const std::string_view body = util::without_bom(whole);
    std::vector<GridLine> lines;
    std::istringstream stream{std::string(body)};
    int number = 0;
    for (std::string text; std::getline(stream, text);) {
        ++number;
        if (const auto hash = text.find('#'); hash != std::string::npos) text.resize(hash);
        for (std::size_t i = 0; i < text.size(); ++i) {
            const auto c = static_cast<unsigned char>(text[i]);
            if ((c < 0x20 && c != '\t' && c != '\r') || c == 0x7f)
                throw UsageError(
                    fmt::format("{}:{}:{}: a control character (byte 0x{:02X}): a grid is text of KEY=VALUE tokens",
                                file, number, i + 1, c));
        }
        GridLine line{number, {}};
        constexpr std::string_view kBlanks = " \t\r";
        for (std::size_t i = text.find_first_not_of(kBlanks); i != std::string::npos;
             i = text.find_first_not_of(kBlanks, i)) {
            const std::size_t start = i;
            // A search space's arguments may be spaced: "choice(0.9, 0.99)" is one token.
            int depth = 0;
            while (i < text.size() && (depth > 0 || kBlanks.find(text[i]) == std::string_view::npos)) {
                if (text[i] == '(') ++depth;
                if (text[i] == ')') --depth;
                ++i;
            }
            line.tokens.push_back({number, static_cast<int>(start) + 1, text.substr(start, i - start)});
        }
        // One value per key and agent: a key twice on a line would keep only the last.
        for (std::size_t a = 0; a < line.tokens.size(); ++a)
            for (std::size_t b = 0; b < a; ++b) {
                const auto& first = line.tokens[b];
                const auto& again = line.tokens[a];
                if (first.text.find('=') != std::string::npos && again.text.find('=') != std::string::npos &&
                    override_key(first.text) == override_key(again.text))
                    throw UsageError(
                        fmt::format("{}:{}:{}: {} is set twice on this line (first at column {}): an "
                                    "agent has one value per key",
                                    file, number, again.column, override_key(again.text), first.column));
            }
        if (!line.tokens.empty()) lines.push_back(std::move(line));
    }
    if (lines.empty())
        throw UsageError(fmt::format("--population-grid {}: no agent (every line is blank or a comment)", file));
    return lines;
}

/// The problem with one grid token ("" when none): KEY=VALUE, a known key, an agent key.
std::string token_problem(const GridToken& t) {
    const auto eq = t.text.find('=');
    if (eq == std::string::npos || eq == 0) return fmt::format("'{}' is not KEY=VALUE", t.text);
    const std::string key = override_key(t.text);
    if (find_dotted_key(key) == nullptr) {
        std::vector<std::string> names;
        for (const auto& d : config::schema()) names.push_back(d.full_name());
        const auto near = config::closest(key, names);
        return fmt::format("unknown key '{}'{}", key, near ? fmt::format(" (did you mean '{}'?)", *near) : "");
    }
    if (!is_agent_key(key)) {
        const bool shape = key.find("hidden") != std::string::npos || key == "dqn.num_atoms" ||
                           key.find("batch") != std::string::npos || key.find("size") != std::string::npos ||
                           key.find("n_episodes") != std::string::npos || key == "experience.n_step";
        return fmt::format(
            "{} cannot differ between the agents of one population: it {}; put those points in separate "
            "processes (scripts/sweep.sh runs them). Keys an agent may set: {}",
            key,
            shape ? "changes a shape"
                  : "changes a shape or what the agents share (the data, the budget, the device, the environment)",
            fmt::join(agent_keys(), ", "));
    }
    return "";
}

/// "<file>:<line>:<column>: " + the problem a resolve found in this token alone.
std::vector<std::string> value_problems(const std::string& profile_file, const std::vector<std::string>& base,
                                        const std::string& grid_file, const GridToken& t) {
    std::vector<std::string> out;
    std::vector<std::string> o = base;
    o.push_back(t.text);
    try {
        (void)config::resolve_profile_file(profile_file, o);
    } catch (const config::ProfileError& e) {
        for (const auto& problem : e.problems())
            if (problem.find(t.text) != std::string::npos || problem.rfind("--set", 0) == 0)
                out.push_back(fmt::format("{}:{}:{}: {}", grid_file, t.line, t.column, problem));
        if (out.empty())
            for (const auto& problem : e.problems())
                out.push_back(fmt::format("{}:{}:{}: {}: {}", grid_file, t.line, t.column, t.text, problem));
    }
    return out;
}

}  // namespace

std::optional<Distribution> token_distribution(const std::string& grid_file, const GridToken& t) {
    const auto eq = t.text.find('=');
    const std::string value = t.text.substr(eq + 1);
    if (!is_distribution(value)) return std::nullopt;
    const std::string key = override_key(t.text);
    const auto where = [&](std::size_t offset) {
        return fmt::format("{}:{}:{}", grid_file, t.line, t.column + static_cast<int>(eq + 1 + offset));
    };
    if (key == "run.seed")
        throw config::ProfileError(
            {fmt::format("{}: run.seed cannot be searched: give the seeds (--seeds, "
                         "run.population); each agent draws its point from its seed",
                         where(0))});
    auto parsed = parse_distribution(key, value);
    if (!parsed.distribution) throw config::ProfileError({fmt::format("{}: {}", where(parsed.offset), parsed.problem)});
    return parsed.distribution;
}

std::vector<GridLine> read_grid(const std::string& grid_file, const std::string& profile_file,
                                const std::vector<std::string>& shared) {
    std::vector<GridLine> lines = read_grid_lines(grid_file);
    std::vector<std::string> problems;
    for (const auto& line : lines)
        for (const auto& t : line.tokens) {
            const std::string why = token_problem(t);
            if (!why.empty()) {
                problems.push_back(fmt::format("{}:{}:{}: {}", grid_file, t.line, t.column, why));
                continue;
            }
            std::optional<Distribution> d;
            try {
                d = token_distribution(grid_file, t);
            } catch (const config::ProfileError& e) {
                problems.insert(problems.end(), e.problems().begin(), e.problems().end());
                continue;
            }
            if (!d) {
                for (auto& p : value_problems(profile_file, shared, grid_file, t)) problems.push_back(std::move(p));
                continue;
            }
            // Every value the space can draw lies between its bounds: each bound must be a
            // value of the key.
            for (const auto& bound : bound_values(*d)) {
                GridToken b = t;
                b.text = d->key + "=" + bound;
                for (auto& p : value_problems(profile_file, shared, grid_file, b))
                    problems.push_back(fmt::format("{} (a bound of {})", p, d->text));
            }
        }
    if (!problems.empty()) throw config::ProfileError(problems);
    return lines;
}

const std::vector<std::string>& agent_keys() {
    static const std::vector<std::string> keys{
        "run.seed",
        "training.learning_rate",
        "training.gamma",
        "training.tau",
        "training.target_update_period",
        "training.epsilon_start",
        "training.epsilon_end",
        "training.epsilon_decay_steps",
        "training.grad_clip_norm",
        "training.max_bad_updates",
        "dqn.cql_alpha",
        "dqn.mse_blend_alpha",
        "dqn.curiosity_coef",
        "dqn.her_ratio",
        "dqn.her_reward",
        "ppo.clip",
        "ppo.gae_lambda",
        "ppo.entropy_coef",
        "ppo.value_coef",
        "ppo.diversity_coef",
        "ppo.curiosity_coef",
        "iql.expectile",
        "iql.beta",
        "iql.max_weight",
    };
    return keys;
}

bool is_agent_key(std::string_view k) {
    const auto& keys = agent_keys();
    return std::find(keys.begin(), keys.end(), k) != keys.end();
}

}  // namespace fh::run
