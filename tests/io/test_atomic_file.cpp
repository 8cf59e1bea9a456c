/// @file test_atomic_file.cpp
/// @brief io::AtomicFile: a committed write replaces the file; an abandoned one leaves the old file
///        and no temporary; failures reach the caller's error type.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include "io/atomic_file.hpp"

namespace fs = std::filesystem;

namespace {

struct Scratch {
    fs::path path = fs::temp_directory_path() / ("fh-atomic-" + std::to_string(::getpid()));
    Scratch() {
        fs::remove_all(path);
        fs::create_directories(path);
    }
    ~Scratch() { fs::remove_all(path); }
};

std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

int entries(const fs::path& dir) {
    int n = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
    return n;
}

struct TestError : std::runtime_error {
    using std::runtime_error::runtime_error;
};
const fh::io::AtomicFile::Fail kFail = [](const std::string& m) { throw TestError(m); };

}  // namespace

TEST_CASE("AtomicFile: commit replaces the file, nothing else is left", "[io][atomic]") {
    Scratch dir;
    const fs::path file = dir.path / "a.txt";
    fh::io::write_file_atomically(file.string(), "old", kFail);
    {
        fh::io::AtomicFile f(file.string(), kFail);
        f.write("new ", 4);
        f.write("text", 4);
        CHECK(slurp(file) == "old");  // not visible before commit
        CHECK(fs::exists(f.temp_path()));
        f.commit();
    }
    CHECK(slurp(file) == "new text");
    CHECK(entries(dir.path) == 1);
}

TEST_CASE("AtomicFile: an abandoned write leaves the old file and no temporary", "[io][atomic]") {
    Scratch dir;
    const fs::path file = dir.path / "a.txt";
    fh::io::write_file_atomically(file.string(), "old", kFail);
    try {
        fh::io::AtomicFile f(file.string(), kFail);
        f.write("half", 4);
        throw std::runtime_error("something failed while writing");
    } catch (const std::runtime_error&) {
    }
    CHECK(slurp(file) == "old");
    CHECK(entries(dir.path) == 1);
}

TEST_CASE("AtomicFile: failures reach the caller's error type; a Fail that returns still throws", "[io][atomic]") {
    Scratch dir;
    const std::string missing = (dir.path / "no-such-dir" / "a.txt").string();
    CHECK_THROWS_AS(fh::io::AtomicFile(missing, kFail), TestError);
    CHECK_THROWS_WITH(fh::io::AtomicFile(missing, kFail), Catch::Contains("cannot create"));
    CHECK_THROWS_AS(fh::io::AtomicFile(missing, [](const std::string&) {}), std::runtime_error);
    CHECK(entries(dir.path) == 0);
}
