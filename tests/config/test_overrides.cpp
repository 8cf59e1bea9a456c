/// @file test_overrides.cpp
/// @brief `--set section.key=value`: precedence (defaults < profile < command line), unknown
///        keys, bad values, arrays, the buffer_size alias.
#include "config/schema.hpp"
#include "config/toml_reader.hpp"
#include "support.hpp"

using fh::test::has_problem;
using fh::test::kMinimal;
using fh::test::resolve;

TEST_CASE("overrides: defaults < profile < command line", "[config]") {
    const std::string profile = kMinimal + "seed = 3\n[training]\nlearning_rate = 1e-3\n";
    auto o = resolve(profile);
    REQUIRE(o.ok);
    CHECK(o.profile.run.seed == 3);           // profile over default
    CHECK(o.profile.training.gamma == 0.99);  // default
    o = resolve(profile, {"run.seed=7", "training.gamma=0.5"});
    REQUIRE(o.ok);
    CHECK(o.profile.run.seed == 7);                      // command line over profile
    CHECK(o.profile.training.gamma == 0.5);              // command line over default
    CHECK(o.profile.training.learning_rate == 1e-3);     // untouched
    o = resolve(profile, {"run.seed=7", "run.seed=8"});  // a later override wins
    REQUIRE(o.ok);
    CHECK(o.profile.run.seed == 8);
}

TEST_CASE("overrides: values are TOML; bare words for string keys", "[config]") {
    auto o = resolve(kMinimal, {"dqn.hidden=[512, 512, 128]", "run.name=\"es 7\"", "training.learning_rate=3e-4",
                                "dqn.dueling=false", "run.device=cuda:1", "data.path=/data/es 5m.csv",
                                " env.position_levels = 15 "});
    INFO(o.message);
    REQUIRE(o.ok);
    CHECK(o.profile.dqn.hidden == std::vector<std::int64_t>{512, 512, 128});
    CHECK(o.profile.run.name == "es 7");
    CHECK(o.profile.training.learning_rate == 3e-4);
    CHECK_FALSE(o.profile.dqn.dueling);
    CHECK(o.profile.run.device == "cuda:1");
    CHECK(o.profile.data.path == "/data/es 5m.csv");
    CHECK(o.profile.env.position_levels == 15);
    // the trainer itself may come from the command line
    o = resolve("", {"run.trainer=ppo"});
    REQUIRE(o.ok);
    CHECK(o.profile.run.trainer == "ppo");
    // an empty value is an empty string for string keys
    o = resolve(kMinimal + "name = \"x\"\n", {"run.name="});
    REQUIRE(o.ok);
    CHECK(o.profile.run.name.empty());
}

TEST_CASE("overrides: unknown keys and sections", "[config]") {
    auto o = resolve(kMinimal, {"dqn.hiden=[64]"});
    CHECK(o.exit_code == 2);
    CHECK(has_problem(o, "--set dqn.hiden=[64]:", "did you mean 'hidden'"));
    o = resolve(kMinimal, {"dqm.hidden=[64]"});
    CHECK(has_problem(o, "--set dqm.hidden=[64]:", "did you mean [dqn]"));
    o = resolve(kMinimal, {"learning_rate=3e-4"});
    CHECK(has_problem(o, "--set learning_rate=3e-4:", "is not section.key"));
    o = resolve(kMinimal, {"training.learning_rate"});
    CHECK(has_problem(o, "--set training.learning_rate:", "expected section.key=value"));
    o = resolve(kMinimal, {"a.b.c=1"});
    CHECK(has_problem(o, "--set a.b.c=1:", "is not section.key"));
}

TEST_CASE("overrides: bad values", "[config]") {
    auto o = resolve(kMinimal, {"run.seed=abc"});
    CHECK(has_problem(o, "--set run.seed=abc:", "not valid TOML"));
    o = resolve(kMinimal, {"run.seed=1.5"});
    CHECK(has_problem(o, "--set run.seed=1.5:", "must be an integer, got a float"));
    o = resolve(kMinimal, {"env.position_levels=4"});
    CHECK(has_problem(o, "--set env.position_levels=4:", "must be odd"));
    o = resolve(kMinimal, {"training.gamma=2"});
    CHECK(has_problem(o, "--set training.gamma=2:", "[0, 1]"));
    o = resolve(kMinimal, {"run.trainer=dqm"});
    CHECK(has_problem(o, "--set run.trainer=dqm:", "did you mean \"dqn\""));
    o = resolve(kMinimal, {"run.seed=1 \n[x]"});  // no smuggling a second line
    CHECK(has_problem(o, "--set run.seed=1", "one line"));
    o = resolve(kMinimal, {"run.seed=1, other = 2"});
    CHECK(has_problem(o, "--set run.seed=1, other = 2:", "not valid TOML"));
    o = resolve(kMinimal, {"run.name=\"\xff\""});
    CHECK(has_problem(o, "--set run.name=", "invalid UTF-8"));
    // several bad overrides: all reported, with the profile's own problems
    o = resolve(kMinimal + "seed = \"x\"\n", {"run.seed=1", "dqn.nope=1", "training.gamma=-1"});
    // the file's own typo is still reported although the command line replaces the value
    CHECK(o.problems.size() == 3);
    CHECK(has_problem(o, "p.toml:3:8:", "run.seed must be an integer"));
    CHECK(has_problem(o, "--set dqn.nope=1:", "unknown key 'nope'"));
    CHECK(has_problem(o, "--set training.gamma=-1:", "training.gamma must be"));
}

TEST_CASE("overrides: nested and mixed arrays", "[config]") {
    auto o = resolve(kMinimal, {"dqn.hidden=[[64], [64]]"});
    CHECK(has_problem(o, "--set dqn.hidden=[[64], [64]]:", "element 0 is an array"));
    o = resolve(kMinimal, {"dqn.hidden=[64, \"64\"]"});
    CHECK(has_problem(o, "--set dqn.hidden=[64, \"64\"]:", "element 1 is a string"));
    o = resolve(kMinimal, {"dqn.hidden=64"});
    CHECK(has_problem(o, "--set dqn.hidden=64:", "must be an array of integers"));
    o = resolve(kMinimal, {"dqn.hidden=[]"});
    CHECK(has_problem(o, "--set dqn.hidden=[]:", "1 to 16 values"));
    o = resolve(kMinimal, {"dqn.hidden={a=1}"});
    CHECK(has_problem(o, "--set dqn.hidden={a=1}:", "got a table"));
    o = resolve(kMinimal, {"dqn.hidden=[" + std::string(500, '[') + "]"});
    CHECK(o.exit_code == 2);
}

TEST_CASE("overrides: the buffer_size alias", "[config]") {
    // alias alone sets the buffer
    auto o = resolve(kMinimal + "[training]\nbuffer_size = 50000\n");
    REQUIRE(o.ok);
    CHECK(o.profile.replay_buffer.buffer_size == 50000);
    // both in the profile and equal: fine (this is what the emitter writes)
    o = resolve(kMinimal + "[replay_buffer]\nbuffer_size = 50000\n[training]\nbuffer_size = 50000\n");
    REQUIRE(o.ok);
    // a command-line value of either replaces the profile's pair
    o = resolve(kMinimal + "[replay_buffer]\nbuffer_size = 50000\n[training]\nbuffer_size = 50000\n",
                {"replay_buffer.buffer_size=20000"});
    REQUIRE(o.ok);
    CHECK(o.profile.replay_buffer.buffer_size == 20000);
    CHECK(o.profile.training.buffer_size == 20000);
    o = resolve(kMinimal + "[replay_buffer]\nbuffer_size = 50000\n", {"training.buffer_size=30000"});
    REQUIRE(o.ok);
    CHECK(o.profile.replay_buffer.buffer_size == 30000);
    // both on the command line and different: an error at the alias
    o = resolve(kMinimal, {"replay_buffer.buffer_size=20000", "training.buffer_size=30000"});
    CHECK(has_problem(o, "--set training.buffer_size=30000:", "contradicts"));
    // an override's cross-key conflict is reported at the override
    o = resolve(kMinimal, {"replay_buffer.min_replay_size=2000000"});
    CHECK(has_problem(o, "--set replay_buffer.min_replay_size=2000000:", "exceeds buffer_size"));
}

TEST_CASE("overrides: toml_quote writes every ASCII string as a TOML string that reads back equal", "[config]") {
    std::string all;
    for (int c = 1; c < 128; ++c) all += static_cast<char>(c);  // control bytes, quotes, backslash, DEL
    for (const std::string& s : {all, std::string("plain"), std::string("a \"b\" \\c\\"), std::string("\x7f")}) {
        const auto t = fh::config::parse_toml("k = " + fh::config::toml_quote(s) + "\n", "quoted");
        REQUIRE(t.items.size() == 1);
        CHECK(t.items[0].string == s);
    }
}
