/// @file halving.cpp
/// @brief Successive halving's rungs, decisions, new points and ranking (halving.hpp).
#include "run/halving.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "run/population_grid.hpp"

namespace fh::run {

namespace {

/// a before b: the better metric (NaN last), then the earlier round, then the lower index.
bool better(double ma, long long ra, int ia, double mb, long long rb, int ib) {
    const bool na = std::isnan(ma), nb = std::isnan(mb);
    if (na != nb) return nb;
    if (!na && ma != mb) return ma > mb;
    if (ra != rb) return ra < rb;
    return ia < ib;
}

}  // namespace

int halving_rung(long long own_rounds, long long eta, long long interval, long long total_steps) {
    if (own_rounds < 1 || eta < 2 || interval < 1) return -1;
    const long long below = (total_steps - 1) / interval;  // the rounds r with interval x r < total_steps
    int k = 0;
    for (long long at = 1; at <= below && at <= own_rounds; at *= eta, ++k)
        if (at == own_rounds) return k;
    return -1;
}

int halving_top_rung(long long eta, long long interval, long long total_steps) {
    const long long below = (total_steps - 1) / interval;
    int k = 0;
    for (long long at = 1; at <= below; at *= eta) ++k;
    return k;
}

long long halving_points(const config::SearchConfig& search, std::size_t population) {
    return search.max_points > 0 ? search.max_points : search.eta * static_cast<long long>(population);
}

std::vector<bool> halving_decisions(const std::vector<RungEntry>& history, const std::vector<RungEntry>& arrivals,
                                    long long eta) {
    std::vector<bool> out;
    for (const auto& a : arrivals) {
        std::size_t n = 0, ahead = 0;
        const auto count = [&](const RungEntry& e) {
            if (e.rung != a.rung) return;
            ++n;
            if (better(e.metric, e.round, e.index, a.metric, a.round, a.index)) ++ahead;
        };
        for (const auto& e : history) count(e);
        for (const auto& e : arrivals) count(e);  // counts `a` itself (never ahead of itself)
        const auto keep =
            static_cast<std::size_t>((n + static_cast<std::size_t>(eta) - 1) / static_cast<std::size_t>(eta));
        out.push_back(ahead < keep);
    }
    return out;
}

std::vector<std::string> halving_point_line(const std::vector<std::string>& line, const SearchSpace& space,
                                            std::int64_t seed) {
    std::vector<std::string> out;
    for (const auto& token : line) {
        const std::string key = override_key(token);
        const auto d = std::find_if(space.begin(), space.end(), [&](const Distribution& x) { return x.key == key; });
        if (d != space.end())
            out.push_back(key + "=" + draw_value(*d, static_cast<std::uint64_t>(seed), key_stream(key), 0));
        else if (key == "run.seed")
            out.push_back(fmt::format("run.seed={}", seed));
        else
            out.push_back(token);
    }
    return out;
}

std::vector<RungResult> halving_ranking(std::vector<RungResult> results) {
    std::stable_sort(results.begin(), results.end(), [](const RungResult& a, const RungResult& b) {
        if (a.rung != b.rung) return a.rung > b.rung;
        return better(a.metric, 0, a.index, b.metric, 0, b.index);
    });
    return results;
}

}  // namespace fh::run
