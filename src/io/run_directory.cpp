/// @file run_directory.cpp
#include "io/run_directory.hpp"

#include "io/atomic_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "util/errors.hpp"

namespace fh::io {

namespace fs = std::filesystem;

RunDirectory RunDirectory::create(const std::string& root, const std::string& name) {
    std::error_code ec;
    fs::create_directories(root, ec);
    if (ec) throw UsageError(fmt::format("cannot create the output directory {}: {} (set run.output_dir or --output)", root, ec.message()));
    for (int k = 1; k < 10000; ++k) {
        const fs::path candidate = fs::path(root) / (k == 1 ? name : fmt::format("{}-{}", name, k));
        if (fs::create_directory(candidate, ec)) return RunDirectory(candidate.string());
        if (ec) throw UsageError(fmt::format("cannot create the run directory {}: {}", candidate.string(), ec.message()));
    }
    throw UsageError(fmt::format("too many runs named {} in {}", name, root));
}

RunDirectory RunDirectory::open(const std::string& path) {
    if (!fs::is_directory(path))
        throw UsageError(fmt::format("--resume {}: no such run directory", path));
    return RunDirectory(path);
}

void RunDirectory::append_eval(const std::string& json_object) const {
    const std::string file = (fs::path(path_) / "eval.jsonl").string();
    std::FILE* f = std::fopen(file.c_str(), "a");
    if (!f) throw UsageError(fmt::format("cannot write {}: {}", file, std::strerror(errno)));
    std::fputs(json_object.c_str(), f);
    std::fputc('\n', f);
    std::fclose(f);
}

std::string RunDirectory::file_path(const std::string& relative) const {
    const fs::path p = fs::path(path_) / relative;
    std::error_code ec;
    fs::create_directories(p.parent_path(), ec);
    if (ec) throw UsageError(fmt::format("cannot create {}: {}", p.parent_path().string(), ec.message()));
    return p.string();
}

RunDirectory::RunDirectory(std::string path) : path_(std::move(path)) {
    const std::string metrics = (fs::path(path_) / "metrics.jsonl").string();
    metrics_ = std::fopen(metrics.c_str(), "a");
    if (!metrics_) throw UsageError(fmt::format("cannot write {}: {}", metrics, std::strerror(errno)));
}

RunDirectory::RunDirectory(RunDirectory&& o) noexcept : path_(std::move(o.path_)), metrics_(o.metrics_) { o.metrics_ = nullptr; }

RunDirectory::~RunDirectory() {
    if (metrics_) std::fclose(metrics_);
}

void RunDirectory::write_file(const std::string& file, const std::string& text) const {
    write_file_atomically((fs::path(path_) / file).string(), text);
}

void RunDirectory::append_metrics(const std::string& json_object) {
    std::fputs(json_object.c_str(), metrics_);
    std::fputc('\n', metrics_);
    std::fflush(metrics_);
}

void write_file_atomically(const std::string& path, const std::string& text) {
    io::write_file_atomically(path, text, [&](const std::string& m) { throw UsageError(fmt::format("{}: {}", path, m)); });
}

}  // namespace fh::io
