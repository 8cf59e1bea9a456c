/// @file facts.cpp
#include "run/facts.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <sstream>

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
    std::ifstream in(std::filesystem::path(dir) / "summary.json", std::ios::binary);
    if (!in) return {};
    std::stringstream ss;
    ss << in.rdbuf();
    try {
        const auto v = json::parse(ss.str(), json::Limits{16u << 20, 64, true});
        const auto* o = v.is_object() ? v.find("overrides") : nullptr;
        if (o != nullptr && o->is_array()) return *o;
    } catch (const json::ParseError&) {
    }
    return {};
}

}  // namespace

std::string bars_hash(const data::BarSeries& b) {
    std::uint64_t h = 0;
    h = mix(h, b.time);
    h = mix(h, b.open);
    h = mix(h, b.high);
    h = mix(h, b.low);
    h = mix(h, b.close);
    h = mix(h, b.volume);
    h = mix(h, b.segment_starts);
    return fmt::format("{:016x}", h);
}

json::Object run_facts(const config::Profile& p, const data::MarketData& market,
                       const std::vector<std::string>& overrides, const std::string& resume_dir) {
    json::Value recorded = resume_dir.empty() ? json::Value() : earlier_overrides(resume_dir);
    if (recorded.is_null()) {
        json::Array a;
        for (const auto& o : overrides) a.emplace_back(o);
        recorded = json::Value::array(std::move(a));
    }
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
