/// @file facts.hpp
/// @brief What summary.json records about a run's inputs, so that runs can be compared without
///        their command lines: the seed, the overrides, the data (path, source, bars, hash) and
///        the bars per year used for annualisation.
#pragma once

#include <string>
#include <vector>

#include "config/profile.hpp"
#include "data/market_data.hpp"
#include "io/json.hpp"

namespace fh::run {

/// XXH64 of the loaded bars (time, open, high, low, close, volume, segment starts), as 16 hex
/// digits: the same for the same bars whatever file layout they came from.
std::string bars_hash(const data::BarSeries& bars);

/// The members summary.json gains (docs/sweeps.md): "seed", "overrides" (the command line's
/// "section.key=value" strings; a resumed run keeps those of the command that started it, read
/// from `resume_dir`'s summary.json when it has them), "data" {"path", "source", "bars",
/// "xxh64", "seed" (the synthetic market's, config::data_seed; null for data from files),
/// "seed_follows_run" (data.seed = -1 on the synthetic market)}, "bars_per_year",
/// "bars_per_year_inferred".
io::json::Object run_facts(const config::Profile& p, const data::MarketData& market,
                           const std::vector<std::string>& overrides, const std::string& resume_dir);

}  // namespace fh::run
