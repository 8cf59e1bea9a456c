/// @file test_compare.cpp
/// @brief [report] compare's tables count a run given twice once (the same resolved profile, seed
///        and data reached through two directories) and say whether the spread over seeds holds
///        the market's variance (data.seed following run.seed) or not.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "config/profile.hpp"
#include "config/schema.hpp"
#include "io/json.hpp"
#include "report/runs.hpp"

namespace fs = std::filesystem;
namespace json = fh::io::json;

namespace {

fs::path scratch(const std::string& name) {
    const fs::path p = fs::temp_directory_path() / ("fh-compare-" + std::to_string(::getpid()) + "-" + name);
    fs::remove_all(p);
    fs::create_directories(p);
    return p;
}

void write(const fs::path& p, const std::string& text) {
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
}

/// A finished run in `dir` (its own run.name and run.output_dir, as a run writes them) with
/// learning rate `lr`, `seed`, the loaded bars' hash `data` and validation metric `val`.
void make_run(const fs::path& dir, const std::string& lr, int seed, const std::string& data, double val,
              const std::vector<std::string>& more = {}) {
    std::vector<std::string> overrides{"training.learning_rate=" + lr, "run.seed=" + std::to_string(seed),
                                       "run.name=" + fh::config::toml_quote(dir.filename().string()),
                                       "run.output_dir=" + fh::config::toml_quote(dir.parent_path().string())};
    overrides.insert(overrides.end(), more.begin(), more.end());
    const auto p = fh::config::resolve_profile_text("[run]\ntrainer = \"dqn\"\n", "p.toml", overrides);
    write(dir / "config.toml", fh::config::to_toml(p));
    const auto metrics = [](double v) { return json::object({{"total_return", v / 10}, {"sharpe", v}}); };
    write(dir / "summary.json",
          json::serialize(
              json::object({{"status", "completed"},
                            {"seed", seed},
                            {"data", json::object({{"path", ""}, {"xxh64", data}})},
                            {"best", json::object({{"metric", "val_sharpe"}, {"value", val}})},
                            {"test", json::object({{"strategy", metrics(val)}, {"buy_and_hold", metrics(0)}})}})) +
              "\n");
}

std::size_t column(const fh::report::Table& t, const std::string& name) {
    return static_cast<std::size_t>(std::find(t.columns.begin(), t.columns.end(), name) - t.columns.begin());
}

}  // namespace

TEST_CASE("compare: the same run reached through two directories is counted once, and said so", "[report][compare]") {
    const auto dir = scratch("duplicates");
    // One sweep run into two folders: a/ and b/ hold the same two runs; b/ has a third seed.
    for (const char* sweep : {"a", "b"}) {
        make_run(dir / sweep / "lr1,seed=1", "1e-3", 1, "00000000000000a1", 1.0);
        make_run(dir / sweep / "lr1,seed=2", "1e-3", 2, "00000000000000a2", 3.0);
    }
    make_run(dir / "b" / "lr1,seed=3", "1e-3", 3, "00000000000000a3", 5.0);
    // Not duplicates: the same seed on other data, or with another key.
    make_run(dir / "c" / "other-data", "1e-3", 1, "00000000000000ff", 2.0);
    make_run(dir / "c" / "other-gamma", "1e-3", 1, "00000000000000a1", 2.0, {"training.gamma=0.9"});

    const auto runs = fh::report::collect_runs({(dir / "a").string(), (dir / "b").string()});
    REQUIRE(runs.size() == 5);
    const auto g = fh::report::seed_table(runs);
    REQUIRE(g.rows.size() == 1);
    CHECK(g.rows[0][column(g, "runs")].text == "3/3");
    CHECK(g.rows[0][column(g, "seeds")].text == "1 2 3");  // not "1 1 2 2 3"
    CHECK(*g.rows[0][column(g, "val_sharpe")].number == Approx(3.0));
    CHECK(*g.rows[0][column(g, "val_sharpe")].sd == Approx(2.0));  // 1, 3, 5: the sd of three runs, not five
    REQUIRE(g.duplicates.size() == 2);
    CHECK(g.duplicates[0].path == (dir / "b" / "lr1,seed=1").string());
    CHECK(g.duplicates[0].same_as == (dir / "a" / "lr1,seed=1").string());
    const std::string md = fh::report::to_markdown(g);
    CHECK(md.find((dir / "b" / "lr1,seed=2").string() + " is the same run as " + (dir / "a" / "lr1,seed=2").string() +
                  " (same resolved profile, seed and data): counted once.") != std::string::npos);
    const auto j = json::parse(fh::report::to_json(g), json::Limits{1 << 20, 16, true});
    REQUIRE(j.find("duplicates")->as_array().size() == 2);
    CHECK(j.find("duplicates")->as_array()[1].find("run_dir")->as_string() == (dir / "b" / "lr1,seed=2").string());
    CHECK(j.find("duplicates")->as_array()[1].find("same_as")->as_string() == (dir / "a" / "lr1,seed=2").string());

    // The ungrouped table too; a run given on its own and inside its sweep directory is one run.
    const auto t =
        fh::report::run_table(fh::report::collect_runs({(dir / "a").string(), (dir / "a" / "lr1,seed=1").string()}));
    CHECK(t.rows.size() == 2);
    CHECK(t.duplicates.size() == 1);

    // Other data or another key: not the same run.
    const auto c = fh::report::run_table(fh::report::collect_runs({(dir / "a").string(), (dir / "c").string()}));
    CHECK(c.rows.size() == 4);
    CHECK(c.duplicates.empty());
    CHECK(json::parse(fh::report::to_json(c), json::Limits{1 << 20, 16, true}).find("duplicates")->as_array().empty());
    fs::remove_all(dir);
}

TEST_CASE("compare: the seed spread says whether it holds the market's variance", "[report][compare]") {
    const auto dir = scratch("spread");
    // Each seed its own market (data.seed follows run.seed): the bars' hashes differ.
    make_run(dir / "own" / "s1", "1e-3", 1, "00000000000000a1", 1.0);
    make_run(dir / "own" / "s2", "1e-3", 2, "00000000000000a2", 2.0);
    // The market held fixed (data.seed = 7): the same bars for both seeds.
    make_run(dir / "fixed" / "s1", "1e-3", 1, "0000000000000007", 1.0, {"data.seed=7"});
    make_run(dir / "fixed" / "s2", "1e-3", 2, "0000000000000007", 2.0, {"data.seed=7"});

    const auto own = fh::report::seed_table(fh::report::collect_runs({(dir / "own").string()}));
    CHECK(own.seed_spread == "data");
    CHECK(fh::report::to_markdown(own).find("includes the market's: each seed drew its own synthetic market") !=
          std::string::npos);
    const auto fixed = fh::report::seed_table(fh::report::collect_runs({(dir / "fixed").string()}));
    CHECK(fixed.seed_spread == "fixed");
    CHECK(fh::report::to_markdown(fixed).find("the training's alone") != std::string::npos);
    CHECK(json::parse(fh::report::to_json(fixed), json::Limits{1 << 20, 16, true}).find("seed_spread")->as_string() ==
          "fixed");
    // Both kinds of setting (data.seed differs between them, so they are two settings).
    const auto both =
        fh::report::seed_table(fh::report::collect_runs({(dir / "own").string(), (dir / "fixed").string()}));
    CHECK(both.rows.size() == 2);
    CHECK(both.seed_spread == "mixed");
    // One seed per setting: nothing to say.
    const auto single = fh::report::run_table(fh::report::collect_runs({(dir / "own" / "s1").string()}));
    CHECK(single.seed_spread.empty());
    CHECK(json::parse(fh::report::to_json(single), json::Limits{1 << 20, 16, true}).find("seed_spread")->is_null());
    fs::remove_all(dir);
}
