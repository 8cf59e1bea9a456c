/// @file facts.cpp
#include "run/facts.hpp"

#include <fmt/format.h>

#include <filesystem>

#include "run/naming.hpp"
#include "util/xxh64.hpp"

namespace fh::run {

namespace json = io::json;

namespace {

template <class T>
std::uint64_t mix(std::uint64_t h, const std::vector<T>& v) {
    return util::xxh64(v.data(), v.size() * sizeof(T), h);
}

/// The "overrides" array of an earlier summary.json in `dir`, or null.
json::Value earlier_overrides(const std::string& dir) {
    const json::Value v = read_json_or_null((std::filesystem::path(dir) / "summary.json").string());
    const auto* o = v.is_object() ? v.find("overrides") : nullptr;
    return o != nullptr && o->is_array() ? *o : json::Value();
}

}  // namespace

std::string bars_hash(const data::BarSeries& b) {
    std::uint64_t h = 0;
    h = mix(h, b.time);
    for (const auto* column : {&b.open, &b.high, &b.low, &b.close, &b.volume}) h = mix(h, *column);
    h = mix(h, b.segment_starts);
    return fmt::format("{:016x}", h);
}

json::Object run_facts(const config::Profile& p, const data::MarketData& market,
                       const std::vector<std::string>& overrides, const std::string& resume_dir) {
    json::Value recorded = resume_dir.empty() ? json::Value() : earlier_overrides(resume_dir);
    if (recorded.is_null()) recorded = json::array_of<std::string>(overrides);
    const bool synthetic = p.data.path.empty();
    return json::Object{{"seed", p.run.seed},
                        {"overrides", recorded},
                        {"data", json::object({{"path", p.data.path},
                                               {"source", market.source},
                                               {"bars", market.bars.size()},
                                               {"xxh64", bars_hash(market.bars)},
                                               {"seed", synthetic ? json::Value(config::data_seed(p)) : json::Value()},
                                               {"seed_follows_run", synthetic && p.data.seed < 0}})},
                        {"bars_per_year", market.bars_per_year},
                        {"bars_per_year_inferred", market.bars_per_year_inferred}};
}

}  // namespace fh::run
