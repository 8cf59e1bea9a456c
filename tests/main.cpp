/// @file main.cpp
/// @brief Catch2 main. Without a CUDA device, [gpu] tests are excluded with a visible notice,
///        and a run that asks for [gpu] tests only exits 77, which `meson test` shows as SKIP.
///        `--shard I/N` runs every N-th of the selected test cases from the I-th (0-based), so
///        that `meson test` can run the `unit` suite as N processes side by side.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "support/gpu.hpp"

namespace {

/// A test name as a Catch2 test spec that matches it alone: the parser's special characters
/// escaped ("," separates alternatives, "[" starts a tag, "~" excludes).
std::string exact_spec(const std::string& name) {
    std::string out;
    for (char c : name) {
        if (c == '\\' || c == ',' || c == '[' || c == ']' || c == '"' || c == '~') out += '\\';
        out += c;
    }
    return out;
}

/// Replaces the session's filters by the names of the shard's test cases (every count-th of those
/// the filters select, in Catch2's run order, from index). Returns -1 to run them, else the exit
/// code: 0 for a shard with no test case, 2 (after saying why) for a malformed shard or names that
/// would not select exactly the shard.
int select_shard(Catch::Session& session, const std::string& shard) {
    const auto slash = shard.find('/');
    const auto number = [](const std::string& s) {  // digits only: "-1", "+1", " 1" are refused
        return !s.empty() && s.size() <= 9 &&
               std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
    };
    const bool numbers =
        slash != std::string::npos && number(shard.substr(0, slash)) && number(shard.substr(slash + 1));
    const std::size_t index = numbers ? std::stoul(shard.substr(0, slash)) : 0;
    const std::size_t count = numbers ? std::stoul(shard.substr(slash + 1)) : 0;
    if (index >= count) {  // also every malformed shard: count 0
        std::fprintf(stderr, "--shard %s: expected INDEX/COUNT with 0 <= INDEX < COUNT (e.g. 0/4)\n", shard.c_str());
        return 2;
    }
    const auto names_of = [](const Catch::Config& config) {
        std::vector<std::string> names;
        for (const auto& t : Catch::filterTests(Catch::getAllTestCasesSorted(config), config.testSpec(), config))
            names.push_back(t.name);
        return names;
    };
    const auto selected = names_of(session.config());
    std::vector<std::string> names;
    for (std::size_t i = index; i < selected.size(); i += count) names.push_back(selected[i]);
    if (names.empty()) {
        std::printf("--shard %s: no test case in this shard\n", shard.c_str());
        return 0;
    }
    std::string spec;  // one argument: Catch2 ANDs separate ones, ',' ORs within one
    for (const auto& n : names) spec += (spec.empty() ? "" : ",") + exact_spec(n);
    session.configData().testsOrTags = {spec};
    session.useConfigData(session.configData());
    // The escaped names must select exactly the shard, in the same order: a name the parser reads
    // otherwise fails here rather than running a test twice or never.
    if (const auto got = names_of(session.config()); got != names) {
        std::fprintf(stderr, "--shard %s: the test names of the shard select %zu test cases, not these %zu\n",
                     shard.c_str(), got.size(), names.size());
        return 2;
    }
    return -1;
}

}  // namespace

int main(int argc, char** argv) {
    Catch::Session session;
    std::string shard;
    session.cli(session.cli() | Catch::clara::Opt(shard, "index/count")["--shard"](
                                    "run every count-th selected test case, from the index-th (0-based)"));
    if (const int rc = session.applyCommandLine(argc, argv); rc != 0) return rc;

    std::string why;
    if (!fh::test::gpu_available(&why)) {
        auto& filters = session.configData().testsOrTags;
        for (const auto& f : filters) {
            if (f.find("[gpu]") != std::string::npos && f.find("~[gpu]") == std::string::npos) {
                std::printf("SKIP: [gpu] tests not run: no CUDA device (%s)\n", why.c_str());
                return 77;
            }
        }
        std::printf("NOTICE: no CUDA device (%s): [gpu] tests are excluded from this run\n", why.c_str());
        // In a Catch2 spec ',' separates alternatives and juxtaposition means AND: exclude [gpu]
        // from every alternative.
        if (filters.empty()) filters.push_back("~[.]");  // the default run skips hidden tests
        for (auto& f : filters) {
            std::string out;
            bool escaped = false, quoted = false;  // "\," and a ',' in quotes separate nothing
            for (char c : f) {
                out += c == ',' && !escaped && !quoted ? std::string(",~[gpu]") : std::string(1, c);
                quoted = quoted != (c == '"' && !escaped);
                escaped = c == '\\' && !escaped;
            }
            f = "~[gpu]" + out;  // in front: after a test name, "~[gpu]" would be read as part of it
        }
        session.useConfigData(session.configData());
    }
    if (!shard.empty())
        if (const int rc = select_shard(session, shard); rc >= 0) return rc;
    return session.run();
}
