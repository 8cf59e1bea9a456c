/// @file data_test_util.hpp
/// @brief Helpers of the [data] tests: a scratch directory per test, file writing, small series.
#pragma once

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>

#include "data/market_data.hpp"

namespace fh::test {

/// A fresh directory under the system temp dir, removed with everything in it at scope exit.
struct TempDir {
    std::filesystem::path path;
    TempDir() {
        static std::atomic<int> counter{0};
        path = std::filesystem::temp_directory_path() /
               ("fh-data-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
        std::filesystem::remove_all(path);
        std::filesystem::create_directories(path);
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    std::string file(const std::string& name) const { return (path / name).string(); }
};

inline void write_text(const std::string& path, const std::string& text) {
    std::ofstream f(path, std::ios::binary);
    f << text;
}

/// CSV text of a BarSeries (daily dates when daily, else Unix seconds).
inline std::string to_csv(const data::BarSeries& b, std::size_t begin, std::size_t end) {
    std::string s = "timestamp,open,high,low,close,volume\n";
    char buf[256];
    for (std::size_t i = begin; i < end; ++i) {
        std::snprintf(buf, sizeof buf, "%lld,%.17g,%.17g,%.17g,%.17g,%.17g\n", static_cast<long long>(b.time[i]),
                      b.open[i], b.high[i], b.low[i], b.close[i], b.volume[i]);
        s += buf;
    }
    return s;
}

}  // namespace fh::test
