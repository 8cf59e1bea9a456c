/// @file main.cpp
/// @brief Catch2 main. Without a CUDA device, [gpu] tests are excluded with a visible notice,
///        and a run that asks for [gpu] tests only exits 77, which `meson test` shows as SKIP.
///        `--shard I/N` runs every N-th of the selected test cases from the I-th (0-based), so
///        that `meson test` can run the `unit` suite as N processes side by side.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <set>
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
/// the filters select, in Catch2's run order, from index). Returns false, after saying why, when
/// the shard is malformed or the names would not select exactly that shard; sets *empty when the
/// shard has no test case.
bool select_shard(Catch::Session& session, const std::string& shard, bool* empty) {
    // Digits only on either side of one '/' (std::from_chars, unlike sscanf's %u, refuses "-1").
    unsigned index = 0, count = 0;
    const char* const end = shard.data() + shard.size();
    const auto slash = shard.find('/');
    const auto [i_end, i_err] = std::from_chars(shard.data(), shard.data() + std::min(slash, shard.size()), index);
    const auto [n_end, n_err] = slash == std::string::npos ? std::from_chars_result{end, std::errc::invalid_argument}
                                                           : std::from_chars(shard.data() + slash + 1, end, count);
    if (i_err != std::errc() || n_err != std::errc() || i_end != shard.data() + slash || n_end != end || count == 0 ||
        index >= count) {
        std::fprintf(stderr, "--shard %s: expected INDEX/COUNT with 0 <= INDEX < COUNT (e.g. 0/4)\n", shard.c_str());
        return false;
    }
    const Catch::Config& config = session.config();
    const auto selected = Catch::filterTests(Catch::getAllTestCasesSorted(config), config.testSpec(), config);
    std::vector<std::string> names;
    for (std::size_t i = index; i < selected.size(); i += count) names.push_back(selected[i].name);
    *empty = names.empty();
    if (names.empty()) return true;
    auto& data = session.configData();
    std::string spec;  // one argument: Catch2 ANDs separate ones, ',' ORs within one
    for (const auto& n : names) spec += (spec.empty() ? "" : ",") + exact_spec(n);
    data.testsOrTags = {spec};
    session.useConfigData(data);
    // The escaped names must select exactly the shard: a name the parser reads otherwise fails
    // here rather than running a test twice or never.
    const Catch::Config& sharded = session.config();
    const auto got = Catch::filterTests(Catch::getAllTestCasesSorted(sharded), sharded.testSpec(), sharded);
    std::set<std::string> want(names.begin(), names.end()), have;
    for (const auto& t : got) have.insert(t.name);
    if (have != want || got.size() != names.size()) {
        std::fprintf(stderr, "--shard %s: the test names of the shard select %zu test cases, not %zu\n", shard.c_str(),
                     got.size(), names.size());
        return false;
    }
    return true;
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
    if (!shard.empty()) {
        bool empty = false;
        if (!select_shard(session, shard, &empty)) return 2;
        if (empty) {
            std::printf("--shard %s: no test case in this shard\n", shard.c_str());
            return 0;
        }
    }
    return session.run();
}
