/// @file search.cpp
/// @brief Search spaces, their seeded draws, and PBT's exploit and explore (search.hpp).
#include "run/search.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

#include "math/rng.h"
#include "run/naming.hpp"
#include "trainers/state_tensor.hpp"

namespace fh::run {

namespace {

/// A number (a bound or a choice; spaces around it allowed), or nullopt.
std::optional<double> number(std::string_view text) {
    const std::string s = trim(text);
    if (s.empty() || s.find_first_of(" \t") != std::string::npos) return std::nullopt;
    errno = 0;
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (end != s.c_str() + s.size() || errno == ERANGE || !std::isfinite(v)) return std::nullopt;
    return v;
}

const config::KeyDescriptor& descriptor(const std::string& key) {
    const config::KeyDescriptor* k = find_dotted_key(key);
    if (k == nullptr) throw std::invalid_argument("search: unknown key " + key);
    return *k;
}

/// A value of the distribution's key as TOML text (rounded for an integer key).
std::string value_text(const Distribution& d, double v) {
    if (d.integer) return config::toml_value_text(static_cast<std::int64_t>(std::llround(v)));
    return config::toml_value_text(v);
}

/// The value of a numeric `key` in `profile`.
double key_number(const config::Profile& profile, const std::string& key) {
    const config::KeyValue v = config::get_value(profile, descriptor(key));
    if (const auto* i = std::get_if<std::int64_t>(&v)) return static_cast<double>(*i);
    if (const auto* x = std::get_if<double>(&v)) return *x;
    throw std::invalid_argument("search: " + key + " is not a number");
}

double unit(const rng::U32x4& w, int pair) {
    return rng::unit_double(w.v[2 * pair], w.v[2 * pair + 1]);
}

}  // namespace

bool is_distribution(std::string_view value) {
    const auto open = value.find('(');
    if (open == std::string_view::npos || open == 0) return false;
    for (std::size_t i = 0; i < open; ++i)
        if (!std::isalpha(static_cast<unsigned char>(value[i])) && value[i] != '_') return false;
    return true;
}

ParsedDistribution parse_distribution(const std::string& key, std::string_view value) {
    const auto fail = [](std::string problem, std::size_t offset = 0) {
        return ParsedDistribution{std::nullopt, std::move(problem), offset};
    };
    const auto open = value.find('(');
    const std::string name(value.substr(0, open));
    Distribution d;
    d.key = key;
    d.text = std::string(value);
    if (name == "loguniform")
        d.kind = Distribution::Kind::loguniform;
    else if (name == "uniform")
        d.kind = Distribution::Kind::uniform;
    else if (name == "choice")
        d.kind = Distribution::Kind::choice;
    else
        return fail(fmt::format(
            "unknown distribution '{}': a search space is loguniform(a,b), uniform(a,b) or choice(v1,v2,...)", name));
    if (value.back() != ')' || value.find(')') != value.size() - 1)
        return fail(fmt::format("{}(...) must end with its ')' (and hold no other parenthesis)", name),
                    std::min(value.find(')'), value.size()));
    // The arguments, split at commas, each a number.
    std::vector<std::string> args;
    std::vector<double> numbers;
    for (std::size_t at = open + 1, close = value.size() - 1;;) {
        const std::size_t comma = std::min(value.find(',', at), close);
        args.emplace_back(value.substr(at, comma - at));
        const auto v = number(args.back());
        if (!v)
            return fail(args.back().find_first_not_of(" \t") == std::string::npos
                            ? fmt::format("{}(...): an empty argument", name)
                            : fmt::format("{}(...): '{}' is not a number", name, args.back()),
                        at);
        numbers.push_back(*v);
        if (comma == close) break;
        at = comma + 1;
    }
    d.integer = descriptor(key).type == config::KeyType::integer;
    if (d.kind == Distribution::Kind::choice) {
        d.choices = numbers;
    } else {
        if (numbers.size() != 2)
            return fail(fmt::format("{}(a,b) takes two numbers, not {}", name, numbers.size()), open + 1);
        d.low = numbers[0];
        d.high = numbers[1];
        if (!(d.low < d.high))
            return fail(fmt::format("{}({},{}): the first bound must be below the second", name, args[0], args[1]),
                        open + 1);
        if (d.kind == Distribution::Kind::loguniform && d.low <= 0)
            return fail(fmt::format("loguniform({},{}): the bounds must be > 0 (it draws their logarithm uniformly)",
                                    args[0], args[1]),
                        open + 1);
    }
    return {std::move(d), "", 0};
}

std::vector<std::string> bound_values(const Distribution& d) {
    std::vector<std::string> out;
    if (d.kind == Distribution::Kind::choice) {
        for (double c : d.choices) out.push_back(value_text(d, c));
    } else {
        out.push_back(value_text(d, d.low));
        out.push_back(value_text(d, d.high));
    }
    return out;
}

std::uint32_t key_stream(std::string_view key) {
    std::uint32_t h = 2166136261u;
    for (char c : key) {
        h ^= static_cast<unsigned char>(c);
        h *= 16777619u;
    }
    return h;
}

std::string draw_value(const Distribution& d, std::uint64_t seed, std::uint32_t stream, std::uint64_t counter) {
    const rng::U32x4 w = rng::draw(seed, rng::Purpose::search, stream, counter);
    switch (d.kind) {
        case Distribution::Kind::choice:
            return value_text(d, d.choices[rng::below(w.v[0], static_cast<std::uint32_t>(d.choices.size()))]);
        case Distribution::Kind::uniform:
            return value_text(d, d.low + (d.high - d.low) * unit(w, 0));
        case Distribution::Kind::loguniform: {
            const double lo = std::log(d.low), hi = std::log(d.high);
            return value_text(d, std::min(d.high, std::exp(lo + (hi - lo) * unit(w, 0))));
        }
    }
    throw std::logic_error("draw_value: unknown distribution");
}

std::string perturb_value(const Distribution& d, double current, double down, double up, std::uint64_t seed,
                          std::uint32_t stream, std::uint64_t counter) {
    const rng::U32x4 w = rng::draw(seed, rng::Purpose::search, stream, counter);
    const bool go_up = (w.v[0] & 1u) != 0;
    if (d.kind == Distribution::Kind::choice) {
        std::size_t at = 0;
        for (std::size_t i = 1; i < d.choices.size(); ++i)
            if (std::abs(d.choices[i] - current) < std::abs(d.choices[at] - current)) at = i;
        if (go_up && at + 1 < d.choices.size()) ++at;
        if (!go_up && at > 0) --at;
        return value_text(d, d.choices[at]);
    }
    return value_text(d, std::clamp(current * (go_up ? up : down), d.low, d.high));
}

const config::KeyDescriptor* find_dotted_key(std::string_view key) {
    const auto dot = key.find('.');
    return dot == std::string_view::npos ? nullptr : config::find_key(key.substr(0, dot), key.substr(dot + 1));
}

std::vector<std::string> copy_agent_state(ops::Device& dst_ops, trainers::Trainer& dst, ops::Device& src_ops,
                                          trainers::Trainer& src, bool replay) {
    if (dst.updates() != src.updates() || dst.iterations() != src.iterations())
        throw std::logic_error("copy_agent_state: the agents stand at different iterations");
    const auto copied = [replay](const std::string& name) {
        if (trainers::replay_memory(name)) return replay;
        return name.starts_with("params/") || name.starts_with("adam/") ||
               (name.starts_with("curiosity/") && name != "curiosity/stats");
    };
    std::vector<trainers::StateTensor> to = dst.state_tensors();
    const std::vector<trainers::StateTensor> from = src.state_tensors();
    std::vector<std::string> names;
    for (auto& t : to) {
        if (!copied(t.name)) continue;
        const auto s = std::find_if(from.begin(), from.end(), [&](const auto& f) { return f.name == t.name; });
        if (s == from.end() || s->bytes.size() != t.bytes.size())
            throw std::logic_error("copy_agent_state: the agents' state differs in " + t.name);
        const ops::View<const std::byte> bytes(s->bytes);
        if (&dst_ops == &src_ops)
            dst_ops.copy_raw(t.bytes, bytes);
        else {
            const std::vector<std::byte> host = src_ops.to_host(bytes);
            dst_ops.upload(t.bytes, std::span<const std::byte>(host));
        }
        names.push_back(t.name);
    }
    dst_ops.synchronize();
    return names;
}

std::vector<Exploit> plan_exploits(const std::vector<double>& metric, const std::vector<bool>& live, double fraction,
                                   std::uint64_t seed, std::uint64_t round) {
    std::vector<int> ranked;
    for (std::size_t i = 0; i < metric.size(); ++i)
        if (live[i] && !std::isnan(metric[i])) ranked.push_back(static_cast<int>(i));
    if (ranked.size() < 2) return {};
    // Best first; ties by agent index.
    std::stable_sort(ranked.begin(), ranked.end(), [&](int a, int b) {
        return metric[static_cast<std::size_t>(a)] > metric[static_cast<std::size_t>(b)];
    });
    const std::size_t n = ranked.size();
    const std::size_t share =
        std::clamp<std::size_t>(static_cast<std::size_t>(std::floor(fraction * static_cast<double>(n))), 1, n / 2);
    std::vector<Exploit> out;
    for (std::size_t k = 0; k < share; ++k) {
        const int agent = ranked[n - share + k];
        const rng::U32x4 w =
            rng::draw(seed, rng::Purpose::search, 0xFFFFFFFFu, (round << 20) | static_cast<std::uint64_t>(agent));
        out.push_back({agent, ranked[rng::below(w.v[0], static_cast<std::uint32_t>(share))]});
    }
    return out;
}

std::vector<std::string> explore_keys(const SearchSpace& space, const config::Profile& copied,
                                      const config::SearchConfig& search, std::uint64_t seed, std::uint64_t round,
                                      int agent) {
    std::vector<std::string> out;
    for (const auto& d : space) {
        const std::uint32_t stream = key_stream(d.key);
        const std::uint64_t counter = (round << 20) | (static_cast<std::uint64_t>(agent) << 4);
        const rng::U32x4 coin = rng::draw(seed, rng::Purpose::search, stream, counter);
        const bool resample = unit(coin, 0) < search.resample_probability;
        const std::string v = resample ? draw_value(d, seed, stream, counter + 1)
                                       : perturb_value(d, key_number(copied, d.key), search.perturb_down,
                                                       search.perturb_up, seed, stream, counter + 1);
        out.push_back(d.key + "=" + v);
    }
    return out;
}

}  // namespace fh::run
