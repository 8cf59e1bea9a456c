/// @file test_special_files.cpp
/// @brief Every reader refuses what is not a regular file at once: a FIFO used to block forever
///        (profile, CSV, checkpoint, replay dump), /dev/zero read as an empty file.
#include <catch2/catch.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <future>
#include <thread>
#include <string>

#include "config/profile.hpp"
#include "data/csv_bars.hpp"
#include "data/fxcache.hpp"
#include "data/load.hpp"
#include "io/replay_dump.hpp"
#include "io/safetensors.hpp"
#include "util/errors.hpp"
#include "util/regular_file.hpp"

namespace fs = std::filesystem;

namespace {

/// A FIFO nobody writes to: opening it for reading blocks until a writer appears.
struct Fifo {
    fs::path path;
    Fifo() {
        path = fs::temp_directory_path() / ("fh-fifo-" + std::to_string(::getpid()) + ".csv");
        fs::remove(path);
        REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
    }
    ~Fifo() { fs::remove(path); }
};

/// Runs `f` with a deadline, so that a regression shows as a failure, not a hung test run. The
/// detached thread of a hung call is left behind (the process ends with the test run).
template <class F>
std::string error_within_seconds(F f) {
    auto task = std::make_shared<std::packaged_task<std::string()>>([f]() -> std::string {
        try {
            f();
        } catch (const std::exception& e) {
            return e.what();
        }
        return "<accepted>";
    });
    auto result = task->get_future();
    std::thread([task] { (*task)(); }).detach();
    if (result.wait_for(std::chrono::seconds(10)) != std::future_status::ready) return "<blocked>";
    return result.get();
}

int exit_code_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const fh::Error& e) {
        return static_cast<int>(e.code());
    }
    return 0;
}

}  // namespace

TEST_CASE("special files: a FIFO or a device is refused at once by every reader", "[io]") {
    Fifo fifo;
    const std::string p = fifo.path.string();
    for (const std::string& path : {p, std::string("/dev/zero")}) {
        INFO(path);
        const std::string kind =
            path == p ? "is a FIFO (named pipe), not a regular file" : "is a character device, not a regular file";
        CHECK_THAT(error_within_seconds([&] { fh::config::resolve_profile_file(path); }), Catch::Contains(kind));
        CHECK_THAT(error_within_seconds([&] { fh::config::locate_profile(path); }), Catch::Contains(kind.substr(3)));
        CHECK_THAT(error_within_seconds([&] { fh::data::read_csv_file(path); }), Catch::Contains(kind));
        fh::data::DataOptions o;
        o.path = path;
        o.use_cache = false;
        CHECK_THAT(error_within_seconds([&] { fh::data::load_market(o); }), Catch::Contains(kind));
        CHECK_THAT(error_within_seconds([&] { fh::io::TensorFile::read(path); }), Catch::Contains(kind));
        CHECK_THAT(error_within_seconds([&] { fh::io::read_replay_dump(path); }), Catch::Contains(kind));
        std::string why;
        fh::data::CachePayload payload;
        CHECK_FALSE(fh::data::read_fxcache(path, fh::data::CacheKey{}, &payload, &why));
        CHECK_THAT(why, Catch::Contains(kind));
        // the exit codes: a profile or a checkpoint is a usage error (2), data is a data error (3)
        CHECK(exit_code_of([&] { fh::config::resolve_profile_file(path); }) == 2);
        CHECK(exit_code_of([&] { fh::io::TensorFile::read(path); }) == 2);
        CHECK(exit_code_of([&] { fh::data::load_market(o); }) == 3);
        CHECK(exit_code_of([&] { fh::io::read_replay_dump(path); }) == 3);
    }
}

TEST_CASE("special files: RegularFile reads a regular file whole and names what is wrong", "[io]") {
    const auto path = fs::temp_directory_path() / ("fh-regular-" + std::to_string(::getpid()));
    {
        std::FILE* f = std::fopen(path.c_str(), "wb");
        REQUIRE(f);
        std::fputs("hello", f);
        std::fclose(f);
    }
    fh::util::RegularFile f(path.string());
    REQUIRE(f.ok());
    std::string text;
    bool too_big = true;
    REQUIRE(f.read_all(text, 100, &too_big));
    CHECK(text == "hello");
    CHECK_FALSE(too_big);
    // Larger than the cap: refused by its size before a byte is read (a 2 GB file is not read to
    // say so).
    fh::util::RegularFile g(path.string());
    REQUIRE(g.read_all(text, 3, &too_big));
    CHECK(too_big);
    CHECK(text.empty());
    fs::resize_file(path, std::uintmax_t{2} << 30);  // sparse: no disk
    fh::util::RegularFile big(path.string());
    REQUIRE(big.read_all(text, 1 << 20, &too_big));
    CHECK(too_big);
    CHECK(text.empty());
    fs::remove(path);
    fh::util::RegularFile missing(path.string());
    CHECK_FALSE(missing.ok());
    CHECK(missing.missing());
    fh::util::RegularFile dir(fs::temp_directory_path().string());
    CHECK_FALSE(dir.ok());
    CHECK_THAT(dir.error(), Catch::Contains("is a directory"));
}
