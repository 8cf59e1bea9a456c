/// @file test_eval_data.cpp
/// @brief [eval] eval on a user's whole file (--split all, a bar range), what eval.json and the
///        eval report record, --output's refusal of a non-empty directory, no fxcache left by a
///        CSV that fails to load; [data-seed] data.seed holds the synthetic market fixed across
///        run seeds (single runs and a population's agents) and defaults to the run seed.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "config/profile.hpp"
#include "data/load.hpp"
#include "io/json.hpp"
#include "run/facts.hpp"
#include "support/shell.hpp"
#include "trainers/setup.hpp"

namespace fs = std::filesystem;
namespace json = fh::io::json;

namespace {

using fh::test::slurp;
fs::path scratch(const std::string& name) {
    return fh::test::scratch_dir("fh-eval-data", name);
}
fh::test::ShellResult sh(const std::string& script, const fs::path& dir) {
    return fh::test::run_shell(script, dir);
}

json::Value parse(const std::string& text) {
    return json::parse(text, json::Limits{64u << 20, 64, true});
}

std::string last_line(std::string t) {
    while (!t.empty() && t.back() == '\n') t.pop_back();
    const auto nl = t.rfind('\n');
    return nl == std::string::npos ? t : t.substr(nl + 1);
}

/// The XXH64 of the synthetic market a profile with `overrides` loads.
std::string market_hash(const std::vector<std::string>& overrides) {
    auto p = fh::config::resolve_profile_text("[run]\ntrainer = \"dqn\"\n[data]\nsynthetic_bars = 3000\n", "p.toml",
                                              overrides);
    return fh::run::bars_hash(fh::data::load_market(fh::trainers::data_options(p)).bars);
}

std::size_t lines(const std::string& text) {
    return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
}

}  // namespace

TEST_CASE("data.seed: the same data seed with other run seeds loads the same market; -1 follows run.seed",
          "[data-seed]") {
    // Default (data.seed = -1): the market follows run.seed, as before data.seed existed.
    CHECK(market_hash({"run.seed=1"}) != market_hash({"run.seed=2"}));
    CHECK(market_hash({"run.seed=2"}) == market_hash({"run.seed=5", "data.seed=2"}));
    CHECK(market_hash({"run.seed=2", "data.seed=-1"}) == market_hash({"run.seed=2"}));
    // Held fixed: every run seed sees the bars of data.seed.
    CHECK(market_hash({"run.seed=1", "data.seed=7"}) == market_hash({"run.seed=2", "data.seed=7"}));
    CHECK(market_hash({"run.seed=1", "data.seed=7"}) != market_hash({"run.seed=1", "data.seed=8"}));
    CHECK_THROWS_AS(fh::config::resolve_profile_text("[run]\ntrainer = \"dqn\"\n", "p.toml", {"data.seed=-2"}),
                    fh::config::ProfileError);
}

TEST_CASE("data.seed through train: summary.json records it; a population's agents share the fixed market",
          "[data-seed][population]") {
    const auto dir = scratch("population");
    const std::string common =
        "\"$EXE\" --profile dqn-smoketest --device cpu --set run.total_steps=200 "
        "--set run.eval_interval=0 --set run.checkpoint_interval=0 --seeds 1,2 ";
    for (const char* mode : {"fixed", "follows"}) {
        const std::string extra = std::string(mode) == "fixed" ? "--set data.seed=7 " : "";
        const auto r = sh(common + extra + "--output '" + (dir / mode).string() + "'", dir);
        INFO(r.err);
        REQUIRE(r.code == 0);
        const fs::path pop = last_line(r.out);
        const auto s1 = parse(slurp(pop / "seed=1" / "summary.json"));
        const auto s2 = parse(slurp(pop / "seed=2" / "summary.json"));
        const auto& d1 = *s1.find("data");
        const auto& d2 = *s2.find("data");
        if (std::string(mode) == "fixed") {
            CHECK(d1.find("seed")->as_i64() == 7);
            CHECK(d2.find("seed")->as_i64() == 7);
            CHECK_FALSE(d1.find("seed_follows_run")->as_bool());
            CHECK(d1.find("xxh64")->as_string() == d2.find("xxh64")->as_string());
        } else {
            CHECK(d1.find("seed")->as_i64() == 1);
            CHECK(d2.find("seed")->as_i64() == 2);
            CHECK(d1.find("seed_follows_run")->as_bool());
            CHECK(d1.find("xxh64")->as_string() != d2.find("xxh64")->as_string());
        }
        // compare says which.
        const auto c = sh("\"$EXE\" compare --group-by-seed '" + pop.string() + "'", dir);
        INFO(c.err);
        CHECK(c.code == 0);
        CHECK(c.out.find(std::string(mode) == "fixed" ? "the training's alone" : "includes the market's") !=
              std::string::npos);
    }
    fs::remove_all(dir);
}

TEST_CASE("eval --split all and FROM:TO score the bars asked for; eval.json and the report say what was evaluated",
          "[eval]") {
    const auto dir = scratch("split");
    const auto train =
        sh("\"$EXE\" --profile dqn-smoketest --device cpu --set run.total_steps=200 --set "
           "run.eval_interval=0 --set run.checkpoint_interval=0 --output '" +
               dir.string() + "'",
           dir);
    INFO(train.err);
    REQUIRE(train.code == 0);
    const std::string ckpt = (fs::path(last_line(train.out)) / "checkpoints" / "last.safetensors").string();
    const std::string eval = "\"$EXE\" eval --checkpoint '" + ckpt + "' --device cpu ";

    // The bare form: the test split (the last 15% of dqn-smoketest's 5000 bars).
    const auto test = sh(eval, dir);
    INFO(test.err);
    REQUIRE(test.code == 0);
    const auto tj = parse(last_line(test.out));
    CHECK(tj.find("bars")->find("from")->as_i64() == 4250);
    CHECK(tj.find("bars")->find("to")->as_i64() == 5000);
    CHECK(tj.find("trainer")->as_string() == "dqn");
    CHECK(tj.find("seed")->as_i64() == 1);
    CHECK(tj.find("bars_per_year")->as_double() > 0);
    CHECK(tj.find("bars_per_year_inferred")->as_bool());
    CHECK(tj.find("device")->as_string().find("cpu") != std::string::npos);

    // The whole file: every bar past the 128-bar warm-up, in the output's equity.csv.
    const auto all = sh(eval + "--split all --output '" + (dir / "all").string() + "'", dir);
    INFO(all.err);
    REQUIRE(all.code == 0);
    const auto aj = parse(slurp(dir / "all" / "eval.json"));
    CHECK(aj.find("split")->as_string() == "all");
    CHECK(aj.find("bars")->find("from")->as_i64() == 0);
    CHECK(aj.find("bars")->find("to")->as_i64() == 5000);
    CHECK(lines(slurp(dir / "all" / "equity.csv")) == 1 + 5000 - 128);
    const std::string page = slurp(dir / "all" / "report.html");
    CHECK(page.find(ckpt) != std::string::npos);  // the report names the checkpoint
    for (const char* fact : {"bars per year", "(inferred from the data)", "trainer", "device", "seed", "bars scored"})
        CHECK(page.find(fact) != std::string::npos);

    // A range, and a range to the last bar.
    const auto range = sh(eval + "--split 1000:2000", dir);
    INFO(range.err);
    REQUIRE(range.code == 0);
    const auto rj = parse(last_line(range.out));
    CHECK(rj.find("bars")->find("from")->as_i64() == 1000);
    CHECK(rj.find("bars")->find("to")->as_i64() == 2000);
    CHECK(parse(last_line(sh(eval + "--split 4000:", dir).out)).find("bars")->find("to")->as_i64() == 5000);
    // bars_per_year from the profile: not inferred.
    const auto given = sh(eval + "--set instrument.bars_per_year=252", dir);
    CHECK_FALSE(parse(last_line(given.out)).find("bars_per_year_inferred")->as_bool());

    // Refused: bad forms and ranges (exit 2), a range inside the warm-up (exit 3).
    for (const char* bad : {"train", "2000:1000", "5:5", ":10", "a:b", "10:20:30", "-1:5"}) {
        const auto r = sh(eval + "--split '" + bad + "'", dir);
        INFO(bad << ": " << r.err);
        CHECK(r.code == 2);
    }
    CHECK(sh(eval + "--split 4000:6000", dir).code == 2);
    const auto warm = sh(eval + "--split 0:100", dir);
    CHECK(warm.code == 3);
    CHECK(warm.err.find("warm-up") != std::string::npos);

    // --output: an existing non-empty directory is refused unless --force.
    const auto again = sh(eval + "--split all --output '" + (dir / "all").string() + "'", dir);
    CHECK(again.code == 2);
    CHECK(again.err.find("--force") != std::string::npos);
    fs::create_directories(dir / "empty");
    CHECK(sh(eval + "--output '" + (dir / "empty").string() + "'", dir).code == 0);
    const auto forced = sh(eval + "--output '" + (dir / "all").string() + "' --force", dir);
    INFO(forced.err);
    CHECK(forced.code == 0);
    CHECK(parse(slurp(dir / "all" / "eval.json")).find("split")->as_string() == "test");
    fs::remove_all(dir);
}

TEST_CASE("a CSV that fails to load leaves no fxcache behind", "[eval][fxcache]") {
    const auto dir = scratch("fxcache");
    // 100 hourly bars: they parse, but leave the training split no bar past the 128-bar warm-up.
    std::string csv = "timestamp,open,high,low,close,volume\n";
    for (int i = 0; i < 100; ++i) csv += std::to_string(1'600'000'000L + 3600L * i) + ",4000,4001,3999,4000.5,10\n";
    std::ofstream(dir / "short.csv") << csv;
    const auto r = sh("\"$EXE\" check dqn-smoketest --data '" + (dir / "short.csv").string() + "'", dir);
    INFO(r.err);
    CHECK(r.code == 3);
    CHECK_FALSE(fs::exists(dir / "short.csv.fxcache"));
    // A file that loads keeps its cache.
    for (int i = 100; i < 2000; ++i) {
        const int open = 4000 + i % 7, close = 4001 + i % 5;
        csv += std::to_string(1'600'000'000L + 3600L * i) + "," + std::to_string(open) + "," +
               std::to_string(std::max(open, close) + 1) + "," + std::to_string(std::min(open, close) - 1) + "," +
               std::to_string(close) + ",10\n";
    }
    std::ofstream(dir / "long.csv") << csv;
    const auto ok = sh("\"$EXE\" check dqn-smoketest --data '" + (dir / "long.csv").string() + "'", dir);
    INFO(ok.err);
    CHECK(ok.code == 0);
    CHECK(fs::exists(dir / "long.csv.fxcache"));
    fs::remove_all(dir);
}
