/// @file search.hpp
/// @brief A search inside a population (docs/sweeps.md, "Searching"): search spaces of the
///        per-agent keys (KEY=loguniform(a,b), uniform(a,b), choice(v1,...) in a grid), their
///        seeded draws, and population-based training's exploit (one agent's state copied into
///        another's) and explore (its keys perturbed or drawn again). Every draw is Philox
///        (math/rng.h, Purpose::search): a pure function of a seed and a counter, so the same
///        command draws the same points and a resumed search the same rounds.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/profile.hpp"
#include "config/schema.hpp"
#include "device/device.hpp"
#include "trainers/trainer.hpp"

namespace fh::run {

/// The distribution of one per-agent key.
struct Distribution {
    enum class Kind { loguniform, uniform, choice };
    std::string key;  ///< section.key
    Kind kind = Kind::uniform;
    double low = 0, high = 0;     ///< loguniform and uniform: [low, high)
    std::vector<double> choices;  ///< choice: the values (every per-agent key is a number)
    bool integer = false;         ///< an integer key: a draw is rounded to the nearest integer
    std::string text;             ///< as written, e.g. "loguniform(1e-4,1e-2)"
};

/// Whether a grid value is written as a distribution: WORD(...).
bool is_distribution(std::string_view value);

/// `key`'s value `value` (is_distribution) as a distribution, or the problem: an unknown
/// distribution, a missing parenthesis, a bound that is not a number, low >= high, a
/// loguniform bound <= 0, an empty choice. `offset`: where in `value` the problem is (0-based).
struct ParsedDistribution {
    std::optional<Distribution> distribution;
    std::string problem;
    std::size_t offset = 0;
};
ParsedDistribution parse_distribution(const std::string& key, std::string_view value);

/// The values that bound a distribution (low and high, or each choice) as TOML text: each must be
/// a valid value of its key (the planner checks them as overrides).
std::vector<std::string> bound_values(const Distribution& d);

/// One draw of `d` as the TOML text of a value, from (seed, stream, counter).
std::string draw_value(const Distribution& d, std::uint64_t seed, std::uint32_t stream, std::uint64_t counter);

/// PBT's perturbation of `current` (the key's value): times `down` or `up` (a coin of (seed,
/// stream, counter)), clamped to [low, high]; a choice moves to a neighbouring choice (or stays
/// at an end) from the one nearest `current`.
std::string perturb_value(const Distribution& d, double current, double down, double up, std::uint64_t seed,
                          std::uint32_t stream, std::uint64_t counter);

/// The stream of a key's draws (FNV-1a of its name): each key its own.
std::uint32_t key_stream(std::string_view key);

/// One agent's search space: a distribution per searched key.
using SearchSpace = std::vector<Distribution>;

/// The schema's key named "section.key", or nullptr.
const config::KeyDescriptor* find_dotted_key(std::string_view key);

/// PBT's exploit: copies into `dst` the state `src` would continue from (its networks' weights,
/// the target network, Adam's moments; with `replay` its replay memory), leaving `dst`'s
/// environments, training guard and monitoring its own. The two agents stand at the same
/// iteration (a population advances its agents together), so Adam's step, the update count,
/// is the same (checked). `dst_ops` and `src_ops` hold them (the same device for a batched
/// population). Returns the names of the tensors copied.
std::vector<std::string> copy_agent_state(ops::Device& dst_ops, trainers::Trainer& dst, ops::Device& src_ops,
                                          trainers::Trainer& src, bool replay);

/// One PBT round's decisions for the agents ranked on their validation metric (`metric[i]`,
/// NaN or a stopped agent: not ranked, `live[i]` false: not ranked and never copied).
struct Exploit {
    int agent = 0;   ///< the agent that copies
    int source = 0;  ///< the agent it copies
};
/// The bottom max(1, floor(fraction * ranked)) agents each copy one drawn (seeded by `seed` and
/// `round`) from the top as many; ties rank by agent index. Fewer than 2 ranked agents: none.
std::vector<Exploit> plan_exploits(const std::vector<double>& metric, const std::vector<bool>& live, double fraction,
                                   std::uint64_t seed, std::uint64_t round);

/// PBT's explore of one agent after it copied: each key of its space is drawn again with
/// probability search.resample_probability, else perturbed (search.perturb_down or _up) from the
/// copied agent's value. Returns the overrides ("KEY=VALUE") that set the new values.
std::vector<std::string> explore_keys(const SearchSpace& space, const config::Profile& copied,
                                      const config::SearchConfig& search, std::uint64_t seed, std::uint64_t round,
                                      int agent);

}  // namespace fh::run
