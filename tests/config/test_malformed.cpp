/// @file test_malformed.cpp
/// @brief Malformed profiles: each is a usage error (exit 2) with every problem located at
///        `file:line:col`; none crashes (also the inputs that break toml++ 3.3.0).
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "config/schema.hpp"
#include "support.hpp"

using fh::test::has_problem;
using fh::test::kMinimal;
using fh::test::resolve;

namespace {

struct Case {
    const char* name;
    std::string text;
    std::string where;  ///< expected location prefix of one problem, e.g. "p.toml:3:8:"
    std::string what;   ///< expected words in that problem
};

const std::string R = kMinimal;  // "[run]\ntrainer = \"dqn\"\n" (lines 1-2)

std::vector<Case> cases() {
    return {
        // --- TOML syntax (toml++ reports one error with its position) -----------------------
        {"unterminated string", "[run]\ntrainer = \"dqn\n", "p.toml:2:", "TOML syntax error"},
        {"missing value", R + "seed =\n", "p.toml:3:", "TOML syntax error"},
        {"unclosed table header", "[run\ntrainer = \"dqn\"\n", "p.toml:1:", "TOML syntax error"},
        {"duplicate key", R + "trainer = \"ppo\"\n", "p.toml:3:", "TOML syntax error"},
        {"duplicate table", R + "[run]\nseed = 1\n", "p.toml:3:", "TOML syntax error"},
        {"bare word value", R + "seed = abc\n", "p.toml:3:", "TOML syntax error"},
        {"integer overflow", R + "seed = 99999999999999999999\n", "p.toml:3:", "TOML syntax error"},
        {"toml++ assert [=]", "[=]", "p.toml:1:", "TOML syntax error"},
        {"toml++ assert [&", "[&", "p.toml:1:", "TOML syntax error"},
        {"toml++ assert [[[1]]]", "[[[1]]]", "p.toml:1:", "TOML syntax error"},
        {"nesting 300 deep", R + "seed = " + std::string(300, '[') + std::string(300, ']') + "\n",
         "p.toml:3:", "more than 32 levels deep"},
        // --- encoding ------------------------------------------------------------------------
        {"invalid UTF-8 in a value", "[run]\ntrainer = \"dq\xff\"\n", "p.toml:2:14:", "invalid UTF-8"},
        {"overlong UTF-8 in a comment", R + "# \xc0\xaf\n", "p.toml:3:3:", "invalid UTF-8"},
        {"UTF-16 surrogate", R + "name = \"\xed\xa0\x80\"\n", "p.toml:3:9:", "invalid UTF-8"},
        {"truncated UTF-8 at the end", R + "# \xe2\x82", "p.toml:3:3:", "invalid UTF-8"},
        // toml++ 3.3.0 reaches __builtin_unreachable testing many non-ASCII code points for
        // whitespace (found by fuzz/profile_fuzzer); these must be refused before toml++ runs
        {"fuzz: non-ASCII bare key", std::string("\xc3\xa9na\x05\x00&", 7),
         "p.toml:1:1:", "non-ASCII character outside a string"},
        {"non-ASCII value without quotes", R + "name = Zürich\n",
         "p.toml:3:9:", "non-ASCII character outside a string"},
        {"CJK after a value", R + "seed = 1 、\n", "p.toml:3:10:", "non-ASCII character outside a string"},
        {"fuzz: non-ASCII scanned inside a bad value",
         std::string("a.b.a = 1dddddddddddPPPPPPPPPPPPPPPPddddD\0\0\0\0\0\0\0'[\xc3\xa3'[=]\0da.b", 61),
         "p.toml:1:", "TOML syntax error"},
        {"non-ASCII in a bad number", R + "seed = 1x'é'\n", "p.toml:3:", "TOML syntax error"},
        {"non-ASCII escape", R + "name = \"a\\é\"\n", "p.toml:3:11:", "must start an escape"},
        // --- missing and unknown -----------------------------------------------------------
        {"empty file", "", "p.toml:1:1:", "missing required key run.trainer"},
        {"only comments", "# nothing\n# here\n", "p.toml:1:1:", "missing required key run.trainer"},
        {"[run] without trainer", "# c\n\n[run]\nseed = 1\n", "p.toml:3:1:", "[run] has no 'trainer'"},
        {"unknown key", R + "[training]\nlerning_rate = 1e-3\n", "p.toml:4:1:", "did you mean 'learning_rate'"},
        {"unknown section", R + "[replay]\nbuffer_size = 5\n", "p.toml:3:1:", "did you mean [replay_buffer]"},
        {"misspelt section", R + "[dqm]\nhidden = [1]\n", "p.toml:3:1:", "did you mean [dqn]"},
        {"key outside any section", "trainer = \"dqn\"\n", "p.toml:1:1:", "belongs under [run]"},
        {"key in the wrong section", R + "[dqn]\nbuffer_size = 5\n",
         "p.toml:4:1:", "is a key of [replay_buffer, training]"},
        {"sub-table", R + "[dqn.extra]\nx = 1\n", "p.toml:", "unknown key 'extra' in [dqn]"},
        {"section given as a value", R + "data = 5\n", "p.toml:3:1:", "unknown key 'data' in [run]"},
        {"top-level section as a value", "data = 5\n" + R, "p.toml:1:1:", "[data] must be a table"},
        // --- wrong types ----------------------------------------------------------------------
        {"string for integer", R + "seed = \"7\"\n", "p.toml:3:8:", "run.seed must be an integer, got a string"},
        {"float for integer", R + "total_steps = 1e6\n", "p.toml:3:15:", "must be an integer, got a float"},
        {"string for float", R + "[training]\nlearning_rate = \"fast\"\n", "p.toml:4:17:", "must be a number"},
        {"integer for bool", R + "[dqn]\ndueling = 1\n", "p.toml:4:11:", "must be true or false"},
        {"integer for array", R + "[dqn]\nhidden = 256\n", "p.toml:4:10:", "must be an array of integers"},
        {"float in an int array", R + "[dqn]\nhidden = [256, 256.5]\n", "p.toml:4:10:", "element 1 is a float"},
        {"nested array", R + "[dqn]\nhidden = [[256], [256]]\n", "p.toml:4:10:", "element 0 is an array"},
        {"date for integer", R + "seed = 1979-05-27\n", "p.toml:3:8:", "got a date/time"},
        {"inline table for array", R + "[dqn]\nhidden = {a = 1}\n", "p.toml:4:", "got a table"},
        {"number for string", "[run]\ntrainer = 3\n", "p.toml:2:11:", "must be a string"},
        // --- out of range -----------------------------------------------------------------
        {"trainer not a choice", "[run]\ntrainer = \"dqm\"\n", "p.toml:2:11:", "did you mean \"dqn\""},
        {"head case", R + "[dqn]\nhead = \"C51\"\n", "p.toml:4:8:", "did you mean \"c51\""},
        {"even position_levels", R + "[env]\nposition_levels = 4\n", "p.toml:4:19:", "must be odd"},
        {"position_levels too small", R + "[env]\nposition_levels = 1\n", "p.toml:4:19:", "[3, 101]"},
        {"gamma above 1", R + "[training]\ngamma = 1.5\n", "p.toml:4:9:", "training.gamma must be [0, 1]"},
        {"zero learning rate", R + "[training]\nlearning_rate = 0\n", "p.toml:4:17:", "(0, 1]"},
        {"nan learning rate", R + "[training]\nlearning_rate = nan\n", "p.toml:4:17:", "finite"},
        {"infinite v_max", R + "[dqn]\nv_max = inf\n", "p.toml:4:9:", "finite"},
        {"negative seed", R + "seed = -1\n", "p.toml:3:8:", "run.seed must be"},
        {"empty hidden", R + "[dqn]\nhidden = []\n", "p.toml:4:10:", "must have 1 to 16 values"},
        {"zero-width layer", R + "[dqn]\nhidden = [64, 0]\n", "p.toml:4:10:", "dqn.hidden[1]"},
        {"bad device", R + "device = \"gpu\"\n", "p.toml:3:10:", "auto, cpu, cuda, cuda:N"},
        {"control character", R + "name = \"a\\u0001b\"\n", "p.toml:3:8:", "control characters"},
        {"memory_fraction 0", R + "[gpu]\nmemory_fraction = 0.0\n", "p.toml:4:19:", "(0, 1]"},
        // --- cross-key rules --------------------------------------------------------------
        {"fractions above 1", R + "[data]\ntrain_fraction = 0.8\nval_fraction = 0.2\ntest_fraction = 0.2\n",
         "p.toml:6:17:", "exceeds 1"},
        {"min_replay_size > buffer_size",
         R + "[replay_buffer]\nbuffer_size = 100\nmin_replay_size = 200\nbatch_size = 32\n",
         "p.toml:5:19:", "min_replay_size = 200 exceeds buffer_size = 100"},
        {"buffer_size alias contradiction", R + "[replay_buffer]\nbuffer_size = 5000\n[training]\nbuffer_size = 6000\n",
         "p.toml:6:15:", "contradicts replay_buffer.buffer_size = 5000 (set at p.toml:4:15)"},
        {"v_min >= v_max", R + "[dqn]\nv_min = 5.0\nv_max = 5.0\n", "p.toml:5:9:", "must be below dqn.v_max"},
        {"epsilon_end > epsilon_start", R + "[training]\nepsilon_start = 0.1\nepsilon_end = 0.5\n",
         "p.toml:5:15:", "epsilon_end = 0.5 exceeds epsilon_start = 0.1"},
        {"batch > min_replay (dqn)", R + "[replay_buffer]\nmin_replay_size = 64\nbatch_size = 128\n",
         "p.toml:5:14:", "exceeds min_replay_size"},
        {"csv without a path", R + "[data]\nformat = \"csv\"\n", "p.toml:4:10:", "data.path is empty"},
        {"n_step >= episode", R + "[experience]\ngpu_timesteps_per_episode = 3\nn_step = 3\n",
         "p.toml:5:10:", "shorter than an episode"},
        {"ppo minibatches > rollout",
         "[run]\ntrainer = \"ppo\"\n[experience]\ngpu_n_episodes = 2\ngpu_timesteps_per_episode = "
         "4\n[ppo]\nminibatches = 16\n",
         "p.toml:7:15:", "exceeds the rollout's 8 transitions"},
        {"iql batch > dataset", "[run]\ntrainer = \"iql\"\n[iql]\ndataset_size = 10\n",
         "p.toml:4:16:", "exceeds iql.dataset_size = 10"},
        {"early stopping without validation", R + "[data]\nval_fraction = 0.0\n",
         "p.toml:4:16:", "needs a validation split"},
        {"val_loss without the supervised trainer", R + "[early_stopping]\nmetric = \"val_loss\"\n",
         "p.toml:4:10:", "needs run.trainer = \"supervised\""},
        {"supervised exit above entry",
         "[run]\ntrainer = \"supervised\"\n[supervised]\nentry_threshold = 0.1\nexit_threshold = 0.2\n",
         "p.toml:5:18:", "exceeds supervised.entry_threshold"},
        {"dt embedding not a multiple of heads", "[run]\ntrainer = \"dt\"\n[dt]\nheads = 3\nembedding = 64\n",
         "p.toml:5:13:", "is not a multiple of dt.heads = 3"},
        {"dt batch > dataset", "[run]\ntrainer = \"dt\"\n[dt]\ndataset_size = 10\n",
         "p.toml:4:16:", "exceeds dt.dataset_size = 10"},
        {"supervised far limit with one urgency",
         "[run]\ntrainer = \"supervised\"\n[env]\nurgency_levels = 1\n[supervised]\norder_type = \"far_limit\"\n",
         "p.toml:6:14:", "needs env.urgency_levels >= 3"},
    };
}

}  // namespace

TEST_CASE("malformed profiles: exit code 2 and the right file:line:col", "[config]") {
    const auto all = cases();
    REQUIRE(all.size() >= 25);
    for (const auto& c : all) {
        INFO("case: " << c.name);
        const auto o = resolve(c.text);
        INFO("problems:\n" << o.message);
        CHECK_FALSE(o.ok);
        CHECK(o.exit_code == 2);
        CHECK(has_problem(o, c.where, c.what));
    }
}

TEST_CASE("every problem is reported, not just the first", "[config]") {
    const auto o = resolve(
        "[run]\ntrainr = \"dqn\"\nseed = \"x\"\n[dqm]\n[env]\nposition_levels = 4\n"
        "[replay_buffer]\nbuffer_size = 10\nmin_replay_size = 20\nbatch_size = 5\n");
    REQUIRE_FALSE(o.ok);
    CHECK(o.problems.size() == 6);
    CHECK(has_problem(o, "p.toml:2:1:", "did you mean 'trainer'"));
    CHECK(has_problem(o, "p.toml:3:8:", "must be an integer"));
    CHECK(has_problem(o, "p.toml:4:1:", "did you mean [dqn]"));
    CHECK(has_problem(o, "p.toml:1:1:", "[run] has no 'trainer'"));
    CHECK(has_problem(o, "p.toml:6:19:", "must be odd"));
    CHECK(has_problem(o, "p.toml:9:19:", "exceeds buffer_size"));
    CHECK(o.message.find("(6 problems in the profile") != std::string::npos);
}

TEST_CASE("binary garbage, NUL bytes and random bytes never crash", "[config]") {
    std::string nul = R + "name = \"a";
    nul.push_back('\0');
    nul += "b\"\n";
    auto o = resolve(nul);
    CHECK(o.exit_code == 2);
    CHECK(has_problem(o, "p.toml:3:", ""));

    // An ELF-like header: invalid UTF-8 in the first line.
    o =
        resolve(std::string("\x7f"
                            "ELF\x02\x01\x01\x00\x00\x00\xff\xfe",
                            12));
    CHECK(o.exit_code == 2);
    CHECK(has_problem(o, "p.toml:1:", "invalid UTF-8"));

    std::mt19937 rng(42);
    for (int i = 0; i < 300; ++i) {
        std::string text(static_cast<std::size_t>(rng() % 200), '\0');
        for (auto& ch : text) ch = static_cast<char>(rng() % (i % 2 ? 128 : 256));
        const auto r = resolve(text);
        CHECK((r.ok || r.exit_code == 2));
    }
}

TEST_CASE("a huge profile is refused with exit code 2", "[config]") {
    const std::string big = R + std::string(fh::config::kMaxProfileBytes, '#');
    const auto o = resolve(big);
    CHECK(o.exit_code == 2);
    CHECK(has_problem(o, "p.toml:1:1:", "the limit is 1048576"));
}

TEST_CASE("non-ASCII UTF-8 in comments and strings parses", "[config]") {
    const auto o = resolve(
        "# Gewinn – größer als erwartet 😀 ✓\n[run]  # Lauf\ntrainer = \"dqn\"  # ✓ ok\n"
        "name = \"Zürich-λ\"\n");
    REQUIRE(o.ok);
    CHECK(o.profile.run.name == "Zürich-λ");
    // and it round-trips through the emitter
    const auto again = resolve(fh::config::to_toml(o.profile));
    REQUIRE(again.ok);
    CHECK(again.profile == o.profile);
}

TEST_CASE("CRLF line endings parse", "[config]") {
    const auto o = resolve("[run]\r\ntrainer = \"ppo\"\r\n[env]\r\nposition_levels = 15\r\n");
    REQUIRE(o.ok);
    CHECK(o.profile.env.position_levels == 15);
}

TEST_CASE("floats are emitted in their shortest exact form (not toml++'s printer)", "[config]") {
    const auto o = resolve(R + "[training]\nlearning_rate = 3e-4\ngamma = 0.1\n[dqn]\nv_min = -1e-7\n");
    REQUIRE(o.ok);
    const auto text = fh::config::to_toml(o.profile);
    CHECK(text.find("learning_rate = 0.0003 ") != std::string::npos);
    CHECK(text.find("gamma = 0.1 ") != std::string::npos);
    CHECK(text.find("v_min = -1e-07 ") != std::string::npos);
    CHECK(text.find("0.00029999") == std::string::npos);
}

TEST_CASE("multi-line and literal strings with non-ASCII text still parse", "[config]") {
    auto o = resolve(R + "name = \"\"\"Zürich \"größer\" \"\"\"\"\n[iql]\ndataset = '''/data/è/dump'''\n");
    INFO(o.message);
    REQUIRE(o.ok);
    CHECK(o.profile.run.name == "Zürich \"größer\" \"");
    CHECK(o.profile.iql.dataset == "/data/è/dump");
    o = resolve(R + "name = \"\"\"a\\\n    b\\\n\u3000c\"\"\"\n");  // line-ending backslashes
    INFO(o.message);
    REQUIRE(o.ok);
    CHECK(o.profile.run.name == "abc");
    o = resolve(R + "name = \"\"\"\\\n   élan\"\"\"\n");  // non-ASCII after a line-ending backslash
    INFO(o.message);
    REQUIRE(o.ok);
    CHECK(o.profile.run.name == "élan");
    o = resolve(R + "name = 'it''s'\n");  // not a multi-line opener: a syntax error, no crash
    CHECK(o.exit_code == 2);
}

namespace {

std::string repeat(const std::string& unit, int n) {
    std::string out;
    for (int i = 0; i < n; ++i) out += unit;
    return out;
}

}  // namespace

TEST_CASE("deep nesting is refused at its place, never by a crash (10,000 levels)", "[config]") {
    // A dotted key, a table header, inline tables and arrays: each 10,000 levels deep (20-40 KB).
    // The first one crashed with a stack overflow in the tree conversion before the limit.
    struct Deep {
        std::string text, where;
    };
    const std::vector<Deep> deep = {
        {R + repeat("a.", 10000) + "b = 1\n", "p.toml:3:62:"},  // [run] + 31 parts: the 31st dot
        {R + "[" + repeat("a.", 10000) + "b]\nc = 1\n", "p.toml:3:"},
        {R + "x = " + repeat("{a = ", 10000) + "1" + repeat("}", 10000) + "\n", "p.toml:3:"},
        {R + "x = {" + repeat("a.", 10000) + "b = 1}\n", "p.toml:3:"},
        {R + "x = " + repeat("[", 10000) + repeat("]", 10000) + "\n", "p.toml:3:"},
        {R + "[a]\n" + repeat("b.", 40) + "c = 1\n", "p.toml:4:"},  // header + key parts
        {R + "x = [" + repeat("{a = [", 20) + "1" + repeat("]}", 20) + "]\n", "p.toml:3:"},
    };
    for (const auto& d : deep) {
        INFO(d.text.substr(0, 80));
        const auto o = resolve(d.text);
        CHECK(o.exit_code == 2);
        CHECK(has_problem(o, d.where, "more than 32 levels deep"));
    }
    // At the limit: an ordinary unknown-key error, not a nesting one.
    const auto o = resolve(R + "[dqn]\n" + repeat("a.", 30) + "b = 1\n");
    CHECK(o.exit_code == 2);
    CHECK(has_problem(o, "p.toml:4:1:", "unknown key 'a' in [dqn]"));
    for (const auto& p : o.problems) CHECK(p.find("levels deep") == std::string::npos);
    // Strings and comments with dots and brackets do not count.
    const auto fine = resolve(R + "output_dir = \"" + repeat("a.[{", 2000) + "\"  # " + repeat(".[{", 2000) + "\n");
    INFO(fine.message);
    CHECK(fine.ok);
}

TEST_CASE("a profile that starts with a UTF-8 byte order mark parses", "[config]") {
    const auto o = resolve("\xEF\xBB\xBF[run]\ntrainer = \"ppo\"\n");
    INFO(o.message);
    REQUIRE(o.ok);
    CHECK(o.profile.run.trainer == "ppo");
    // positions on line 1 count from the character after the mark
    const auto bad = resolve("\xEF\xBB\xBF[rum]\ntrainer = \"ppo\"\n");
    CHECK(has_problem(bad, "p.toml:1:1:", "unknown section [rum]"));
}

TEST_CASE("an out-of-range buffer_size is reported once, where it was set (no phantom alias)", "[config]") {
    auto o = resolve(R + "[replay_buffer]\nbuffer_size = -5\n");
    REQUIRE(o.problems.size() == 1);
    CHECK(has_problem(o, "p.toml:4:15:", "replay_buffer.buffer_size must be"));
    o = resolve(R, {"replay_buffer.buffer_size=3000000000"});
    REQUIRE(o.problems.size() == 1);
    CHECK(has_problem(o, "--set replay_buffer.buffer_size=3000000000:", "replay_buffer.buffer_size must be"));
    // the alias itself, when set, is still checked at its own place
    o = resolve(R + "[training]\nbuffer_size = -5\n");
    CHECK(has_problem(o, "p.toml:4:15:", "training.buffer_size must be"));
}

TEST_CASE("a float for an integer key suggests the same number as an integer", "[config]") {
    auto o = resolve(R, {"run.total_steps=1e4"});
    CHECK(has_problem(o, "--set run.total_steps=1e4:", "(write 10000: an integer has no fraction or exponent)"));
    o = resolve(R + "total_steps = 2.5e6\n");
    CHECK(has_problem(o, "p.toml:3:15:", "(write 2500000:"));
    o = resolve(R + "total_steps = 1.5\n");
    CHECK(has_problem(o, "p.toml:3:15:", "(an integer has no fraction or exponent)"));
    for (const auto& p : o.problems) CHECK(p.find("write") == std::string::npos);
}

TEST_CASE("cross-key rules never compute with a value that failed its own check (no trap, one message)", "[config]") {
    // Hostile values for every key of the schema, alone and (integers) in pairs within a section,
    // under every trainer: each resolves to problems or a profile, never a signal (a rule like
    // dt.embedding % dt.heads ran on dt.heads = 0, or INT64_MIN % -1, and trapped).
    using fh::config::KeyType;
    const std::vector<std::string> ints = {"0", "-1", "1", "-9223372036854775808", "9223372036854775807", "2147483648"};
    const std::vector<std::string> numbers = {"0.0", "-1.0", "1e308", "-1e308", "4.9e-324", "inf", "nan", "-0.0"};
    const std::vector<std::string> arrays = {"[0]", "[-1]", "[-9223372036854775808]", "[9223372036854775807]"};
    std::size_t resolved = 0;
    for (const std::string trainer : {"dqn", "ppo", "iql", "supervised", "dt"}) {
        const std::string text = "[run]\ntrainer = \"" + trainer + "\"\n";
        for (const auto& d : fh::config::schema()) {
            const auto* values = d.type == KeyType::integer     ? &ints
                                 : d.type == KeyType::number    ? &numbers
                                 : d.type == KeyType::int_array ? &arrays
                                                                : nullptr;
            if (values == nullptr) continue;
            for (const auto& v : *values) {
                const auto o = resolve(text, {d.full_name() + "=" + v});
                if (!o.ok) CHECK(o.exit_code == 2);
                ++resolved;
            }
            if (d.type != KeyType::integer) continue;
            for (const auto& e : fh::config::schema()) {
                if (e.section != d.section || e.type != KeyType::integer || &e == &d) continue;
                for (const auto& v : ints)
                    for (const auto& w : ints) {
                        (void)resolve(text, {d.full_name() + "=" + v, e.full_name() + "=" + w});
                        ++resolved;
                    }
            }
        }
    }
    CHECK(resolved > 10000);
    // The bad key is reported once, at its place, and no rule adds a message computed from it.
    auto o = resolve(R, {"dt.heads=0"});
    REQUIRE(o.problems.size() == 1);
    CHECK(has_problem(o, "--set dt.heads=0:", "dt.heads must be [1, 64]"));
    o = resolve(R, {"dt.heads=-1", "dt.embedding=-9223372036854775808"});
    CHECK(o.problems.size() == 2);
}

TEST_CASE("float keys are checked as the 32-bit floats the kernels receive", "[config]") {
    // A value valid as a double but not as a float32 (rounded onto an excluded bound, or to 0 /
    // a denormal) is refused by `check` as by `train`, for every float key of the schema.
    std::size_t refused = 0;
    for (const auto& d : fh::config::schema()) {
        if (d.type != fh::config::KeyType::number) continue;
        std::vector<double> values;
        const auto& b = d.bounds;
        if (std::isfinite(b.lo) && b.lo_open) values.push_back(b.lo == 0 ? 1e-300 : b.lo + std::fabs(b.lo) * 1e-12);
        if (std::isfinite(b.hi) && b.hi_open) values.push_back(b.hi - std::fabs(b.hi) * 1e-12);
        if (b.lo <= 1e-40 && b.hi >= 1e-40) values.push_back(1e-40);  // a float32 denormal
        if (b.lo <= 4.9e-324 && b.hi >= 4.9e-324) values.push_back(4.9e-324);
        for (const double v : values) {
            char text[64];
            std::snprintf(text, sizeof text, "%.17g", v);
            const auto o = resolve(R, {d.full_name() + "=" + text});
            INFO(d.full_name() << " = " << text);
            CHECK_FALSE(o.ok);
            CHECK(has_problem(o, "--set " + d.full_name(), "32-bit float"));
            ++refused;
        }
    }
    CHECK(refused > 40);
    // The values, and a C51 support that is empty as floats.
    for (const std::string s : {"iql.expectile=1e-300", "iql.expectile=0.9999999999", "iql.max_weight=1e-300",
                                "supervised.full_score=1e-300", "supervised.volatility_floor=4.9e-324"})
        CHECK_FALSE(resolve(R, {s}).ok);
    const auto o = resolve(R, {"dqn.v_min=1.00000001", "dqn.v_max=1.00000002"});
    CHECK(has_problem(o, "--set dqn.v_", "as the 32-bit floats"));
    CHECK(resolve(R, {"dqn.v_min=0.5", "dqn.v_max=0.5000001"}).ok);  // distinct floats: fine
}

TEST_CASE("gpu.tf32 is refused, naming gpu.precision; gpu.precision takes fp32, tf32, bf16", "[config][precision]") {
    for (const char* value : {"true", "false"}) {
        const auto o = resolve(R + "[gpu]\ntf32 = " + value + "\n");
        INFO(o.message);
        CHECK(o.exit_code == 2);
        CHECK(has_problem(o, "p.toml:4:1:", "gpu.tf32 is no longer a key"));
        CHECK(has_problem(o, "p.toml:4:1:", "gpu.precision = \"tf32\""));
    }
    const auto cli = resolve(R, {"gpu.tf32=true"});
    CHECK(cli.exit_code == 2);
    CHECK(has_problem(cli, "--set gpu.tf32=true:", "gpu.precision = \"tf32\""));
    CHECK(resolve(R).profile.gpu.precision == "fp32");  // the default
    for (const char* value : {"fp32", "tf32", "bf16"}) {
        const auto o = resolve(R + "[gpu]\nprecision = \"" + value + "\"\n");
        INFO(o.message);
        REQUIRE(o.ok);
        CHECK(o.profile.gpu.precision == value);
    }
    const auto bad = resolve(R + "[gpu]\nprecision = \"fp16\"\n");
    CHECK(bad.exit_code == 2);
    CHECK(has_problem(bad, "p.toml:4:13:", "gpu.precision must be one of fp32, tf32, bf16"));
}

TEST_CASE("a profile foxhunt-train wrote before gpu.precision (config.toml, a checkpoint's) reads its gpu.tf32",
          "[config][precision]") {
    // An earlier version's resolved profile: to_toml's text with `tf32 = B` where precision is now.
    fh::config::Profile p = resolve(R).profile;
    const std::string text = fh::config::to_toml(p);
    REQUIRE(text.starts_with(fh::config::kResolvedProfileHeader));
    const auto at = text.find("precision = \"fp32\"");
    REQUIRE(at != std::string::npos);
    for (const bool on : {true, false}) {
        std::string old = text;
        old.replace(at, std::string("precision = \"fp32\"").size(), on ? "tf32 = true" : "tf32 = false");
        const auto o = resolve(old);
        INFO(o.message);
        REQUIRE(o.ok);
        CHECK(o.profile.gpu.precision == (on ? "tf32" : "fp32"));
        // The same text without the header is a person's profile: refused, naming the new key.
        const auto edited = resolve(old.substr(fh::config::kResolvedProfileHeader.size()));
        CHECK(edited.exit_code == 2);
        CHECK(edited.message.find("gpu.precision = \"tf32\"") != std::string::npos);
    }
}
