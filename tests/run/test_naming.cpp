/// @file test_naming.cpp
/// @brief [naming] Run names derived from overrides and seed, and run.on_exists's decisions.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "config/profile.hpp"
#include "run/naming.hpp"
#include "util/errors.hpp"

namespace fs = std::filesystem;
using fh::run::derived_run_name;

namespace {

std::string name_of(const std::vector<std::string>& overrides, const std::string& text = "[run]\ntrainer = \"dqn\"\n") {
    const auto p = fh::config::resolve_profile_text(text, "p.toml", overrides);
    return derived_run_name(p, overrides);
}

fh::config::Profile profile_in(const fs::path& root, const std::string& name, const std::string& on_exists) {
    return fh::config::resolve_profile_text("[run]\ntrainer = \"dqn\"\n", "p.toml",
                                            {"run.output_dir=\"" + root.string() + "\"", "run.name=\"" + name + "\"",
                                             "run.on_exists=\"" + on_exists + "\""});
}

void touch(const fs::path& p, const std::string& text = "x") {
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
}

}  // namespace

TEST_CASE("derived run names: canonical values, sorted keys, seed last, placement keys left out", "[naming]") {
    CHECK(name_of({}) == "dqn,seed=0");
    CHECK(name_of({"training.learning_rate=3e-4", "run.seed=2"}) == "dqn,training.learning_rate=0.0003,seed=2");
    // The same run however its overrides are spelled or ordered.
    CHECK(name_of({"training.learning_rate=0.0003", "run.seed=2"}) ==
          name_of({"run.seed=2", "training.learning_rate=3e-4"}));
    CHECK(name_of({"training.gamma=0.9", "dqn.num_atoms=21"}) == "dqn,dqn.num_atoms=21,training.gamma=0.9,seed=0");
    CHECK(name_of({"training.gamma=0.5", "training.gamma=0.9"}) == "dqn,training.gamma=0.9,seed=0");  // the last wins
    // Where and how a run is stored does not name it.
    CHECK(name_of({"run.device=\"cpu\"", "run.output_dir=\"x\"", "run.on_exists=\"resume\"", "run.name=\"base\"",
                   "run.population_batching=\"on\""}) == "base,seed=0");
    CHECK(name_of({"dqn.hidden=[64,64]", "dqn.dueling=false"}) == "dqn,dqn.dueling=false,dqn.hidden=64x64,seed=0");
    CHECK(name_of({"training.epsilon_end=0"}) == "dqn,training.epsilon_end=0.0,seed=0");
}

TEST_CASE("derived run names are filesystem-safe and bounded", "[naming]") {
    const std::string n = name_of({"data.path=\"/data/es 5m,v2=x.csv\""});
    CHECK(n == "dqn,data.path=%2Fdata%2Fes%205m%2Cv2%3Dx.csv,seed=0");
    CHECK(n.find('/') == std::string::npos);
    CHECK(name_of({"run.name=\".up\""}).rfind("%2Eup,", 0) == 0);  // no hidden directory
    CHECK_THROWS_WITH(name_of({"run.name=\"../up\""}), Catch::Contains("is not a directory name"));
    CHECK(name_of({"run.name=\"-x\""}).rfind("%2Dx,", 0) == 0);
    // Long names are cut and end with a hash of the whole name: different overrides, different names.
    const std::string long1 = name_of({"data.path=\"" + std::string(300, 'a') + "1\""});
    const std::string long2 = name_of({"data.path=\"" + std::string(300, 'a') + "2\""});
    CHECK(long1.size() <= fh::run::kMaxDerivedNameBytes);
    CHECK(long1 != long2);
    CHECK(long1[long1.size() - 17] == '~');
    const std::string escaped = name_of({"data.path=\"" + std::string(300, '/') + "\""});
    CHECK(escaped.size() <= fh::run::kMaxDerivedNameBytes);
    const auto tilde = escaped.find('~');
    REQUIRE(tilde != std::string::npos);
    CHECK((escaped[tilde - 1] == 'F' || escaped[tilde - 1] == 'h'));  // never cut inside %2F
}

TEST_CASE("run.on_exists decides what an existing run directory means", "[naming]") {
    const fs::path root = fs::temp_directory_path() / ("fh-naming-" + std::to_string(::getpid()));
    fs::remove_all(root);
    using Action = fh::run::Placement::Action;

    // No directory yet: always create.
    for (const char* mode : {"new", "skip", "resume", "error"})
        CHECK(fh::run::place_run(profile_in(root, "r", mode)).action == Action::create);

    touch(root / "r" / "config.toml");
    CHECK(fh::run::place_run(profile_in(root, "r", "new")).action == Action::create);  // r-2 beside it
    CHECK_THROWS_AS(fh::run::place_run(profile_in(root, "r", "error")), fh::UsageError);
    CHECK(fh::run::place_run(profile_in(root, "r", "skip")).action == Action::skip);

    // resume: finished -> skip; a checkpoint -> resume; neither -> start again (directory removed).
    for (const char* status : {"completed", "early_stopped", "diverged"}) {
        touch(root / "r" / "summary.json", std::string("{\"status\":\"") + status + "\",\"x\":0.5}");
        const auto p = fh::run::place_run(profile_in(root, "r", "resume"));
        CHECK(p.action == Action::skip);
        CHECK(p.status == status);
    }
    touch(root / "r" / "summary.json", "{\"status\":\"interrupted\"}");
    touch(root / "r" / "checkpoints" / "last.safetensors");
    auto p = fh::run::place_run(profile_in(root, "r", "resume"));
    CHECK(p.action == Action::resume);
    CHECK(p.path == (root / "r").string());

    fs::remove(root / "r" / "checkpoints" / "last.safetensors");
    touch(root / "r" / "metrics.jsonl");
    touch(root / "r" / "summary.json.tmp-123");
    p = fh::run::place_run(profile_in(root, "r", "resume"));
    CHECK(p.action == Action::create);
    CHECK(!fs::exists(root / "r"));

    // A directory holding something that is not a run file is never removed.
    touch(root / "r" / "config.toml");
    touch(root / "r" / "notes.txt");
    CHECK_THROWS_AS(fh::run::place_run(profile_in(root, "r", "resume")), fh::UsageError);
    CHECK(fs::exists(root / "r" / "notes.txt"));
    fs::remove_all(root);
}

TEST_CASE("a population's agents are named by what differs between them", "[naming][population]") {
    const auto agent = [](const std::vector<std::string>& overrides) {
        std::vector<std::string> all{"data.path=\"/data/es 5m.csv\"", "instrument.commission=1.5"};  // shared
        all.insert(all.end(), overrides.begin(), overrides.end());
        return fh::config::resolve_profile_text("[run]\ntrainer = \"dqn\"\n", "p.toml", all);
    };
    using fh::run::agent_run_names;
    CHECK(agent_run_names({agent({"run.seed=1"}), agent({"run.seed=2"})}) ==
          std::vector<std::string>{"seed=1", "seed=2"});
    // The shared overrides (the data path, the commission) name none of them; 3e-4 is written canonically.
    CHECK(agent_run_names({agent({"run.seed=3"}), agent({"run.seed=3", "training.learning_rate=3e-4"}),
                           agent({"run.seed=4", "training.learning_rate=3e-4", "training.gamma=0.9"})}) ==
          std::vector<std::string>{"training.gamma=0.99,training.learning_rate=0.0001,seed=3",
                                   "training.gamma=0.99,training.learning_rate=0.0003,seed=3",
                                   "training.gamma=0.9,training.learning_rate=0.0003,seed=4"});
    CHECK(agent_run_names({agent({"run.seed=5"})}) == std::vector<std::string>{"seed=5"});
    // Placement keys never name an agent; long names are bounded as derived names are.
    CHECK(agent_run_names({agent({"run.seed=1", "run.device=\"cpu\""}), agent({"run.seed=2"})}) ==
          std::vector<std::string>{"seed=1", "seed=2"});
    const auto long_names = agent_run_names({agent({"run.seed=1", "data.path=\"" + std::string(300, 'a') + "1\""}),
                                             agent({"run.seed=1", "data.path=\"" + std::string(300, 'a') + "2\""})});
    CHECK(long_names[0].size() <= fh::run::kMaxDerivedNameBytes);
    CHECK(long_names[0] != long_names[1]);
}
