/// @file halving.hpp
/// @brief Successive halving inside a population (run.search = "halving", docs/sweeps.md
///        "Successive halving"): the rungs of an agent's own training, the decisions at a rung
///        (ASHA's: an agent goes on when it ranks in the top 1/eta of every agent that reached the
///        rung so far), the new points that take the stopped agents' slots, and the result's
///        ranking. Pure functions of their arguments: the population (population.cpp) runs the
///        rounds on the machinery PBT uses (rounds, lineage.jsonl, population.json, resume).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/profile.hpp"
#include "run/search.hpp"

namespace fh::run {

/// The rung an agent stands at after `own_rounds` rounds of its own training (search.interval
/// progress units each): k where own_rounds = eta^k and interval x eta^k < total_steps (the full
/// budget is no rung: the agent completes there); -1 otherwise.
int halving_rung(long long own_rounds, long long eta, long long interval, long long total_steps);

/// The rung an agent that trains its full budget counts as reaching: the number of rungs below it.
int halving_top_rung(long long eta, long long interval, long long total_steps);

/// The points a search trains in all (search.max_points; 0 = eta x the population's agents).
long long halving_points(const config::SearchConfig& search, std::size_t population);

/// One agent at a rung: the rung, its metric there (NaN: none), the round it reached it at and its index.
struct RungEntry {
    int rung = 0;
    double metric = 0;
    long long round = 0;
    int index = 0;
};

/// Whether each of this round's `arrivals` goes on: at its rung, every agent that reached it
/// (`history`, earlier rounds, and this round's arrivals) ranked best first (NaN last; ties by the
/// round reached, then the index), an arrival goes on when its place is within the first
/// ceil(n / eta) of the n. When n agents reach a rung together, the worst n - ceil(n / eta) stop.
std::vector<bool> halving_decisions(const std::vector<RungEntry>& history, const std::vector<RungEntry>& arrivals,
                                    long long eta);

/// A new point's grid line: `line` (the grid line of the agent it is modelled on, its search
/// spaces drawn) with each key of `space` drawn again from `seed` (as plan_population draws an
/// agent's point from its seed: the same seed and line draw the same point), a run.seed token
/// (a line that sets the seed) set to `seed`.
std::vector<std::string> halving_point_line(const std::vector<std::string>& line, const SearchSpace& space,
                                            std::int64_t seed);

/// The search's result, best first: by the last rung reached (an agent that trained its full
/// budget halving_top_rung), then the metric there (NaN last), then the index. `rung` -1: none.
struct RungResult {
    int index = 0;
    int rung = -1;
    double metric = 0;
};
std::vector<RungResult> halving_ranking(std::vector<RungResult> results);

}  // namespace fh::run
