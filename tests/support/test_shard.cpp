/// @file test_shard.cpp
/// @brief tests/main.cpp's --shard, which the `unit` suite runs as 8 processes: the shards of a
///        selection partition it (every test case in exactly one), and a bad shard is refused.
#include <algorithm>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "support/shell.hpp"

namespace {

namespace fs = std::filesystem;
using fh::test::run_shell;

/// The test names this executable lists for `args`, sorted (the no-GPU notice left out).
std::vector<std::string> listed(const std::string& args, const fs::path& dir, int* code = nullptr) {
    std::string cmd = "'";  // appended, not `"'" + ...`: GCC 12's -Wrestrict misreads that
    cmd += fs::read_symlink("/proc/self/exe").string();
    cmd += "' ";
    cmd += args;
    cmd += " --list-test-names-only";
    const auto r = run_shell(cmd, dir);
    if (code) *code = r.code;
    std::vector<std::string> names;
    std::istringstream in(r.out);
    for (std::string line; std::getline(in, line);)
        if (!line.empty() && line.rfind("NOTICE:", 0) != 0) names.push_back(line);
    std::sort(names.begin(), names.end());
    return names;
}

}  // namespace

TEST_CASE("--shard I/N: the shards of a selection partition it; a malformed shard exits 2", "[support]") {
    const auto dir = fh::test::scratch_dir("fh-shard", "list");
    // Selections whose names hold the test-spec parser's special characters (',' '[' ']' '*').
    for (const std::string filter : {"'~[.]~[gpu]'", "'[config]'"}) {
        INFO(filter);
        const auto all = listed(filter, dir);
        REQUIRE(all.size() > 20);
        for (const int n : {1, 3, 8}) {
            INFO("shards " << n);
            std::vector<std::string> joined;
            std::size_t largest = 0, smallest = all.size();
            for (int i = 0; i < n; ++i) {
                std::string shard = filter;
                shard += " --shard " + std::to_string(i) + "/" + std::to_string(n);
                const auto part = listed(shard, dir);
                largest = std::max(largest, part.size());
                smallest = std::min(smallest, part.size());
                joined.insert(joined.end(), part.begin(), part.end());
            }
            std::sort(joined.begin(), joined.end());
            CHECK(joined == all);            // each test case once: none lost, none twice
            CHECK(largest - smallest <= 1);  // every n-th: the counts differ by at most one
        }
    }
    int code = 0;
    for (const std::string bad : {"3/3", "1/0", "x", "1/2/3", "2/-1", "/2", "1/", "01/2x"}) {
        INFO(bad);
        std::string args = "--shard ";
        args += bad;
        CHECK(listed(args, dir, &code).empty());
        CHECK(code == 2);
    }
    fs::remove_all(dir);
}
