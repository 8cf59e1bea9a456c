/// @file run_directory.hpp
/// @brief The run directory: `<output_dir>/<name>/` with the resolved
///        config.toml, metrics.jsonl (one JSON object per log interval) and summary.json
///        (written atomically: temp file, fsync, rename).
#pragma once

#include <cstdio>
#include <string>

namespace fh::io {

class RunDirectory {
public:
    /// Creates `root/name`, or `root/name-2`, `-3`, ... when it exists (a run never overwrites
    /// another). Throws UsageError when the directory cannot be created.
    static RunDirectory create(const std::string& root, const std::string& name);
    /// Opens an existing run directory to continue it (--resume); metrics.jsonl is appended to.
    static RunDirectory open(const std::string& path);

    RunDirectory(RunDirectory&& o) noexcept;
    RunDirectory& operator=(RunDirectory&&) = delete;
    RunDirectory(const RunDirectory&) = delete;
    ~RunDirectory();

    const std::string& path() const noexcept { return path_; }
    /// Writes `file` inside the directory atomically.
    void write_file(const std::string& file, const std::string& text) const;
    /// Appends one line to metrics.jsonl and flushes it (a crash loses at most the line being written).
    void append_metrics(const std::string& json_object);
    /// Appends one line to eval.jsonl.
    void append_eval(const std::string& json_object) const;
    /// `path()/relative`, creating its parent folder.
    std::string file_path(const std::string& relative) const;

private:
    explicit RunDirectory(std::string path);
    std::string path_;
    std::FILE* metrics_ = nullptr;
};

/// Writes `text` to `path` atomically: a temporary file in the same directory, fsync, rename.
void write_file_atomically(const std::string& path, const std::string& text);

/// A JSON number: the shortest form that reads back exactly; null for NaN and infinities.
std::string json_number(double v);
/// A JSON string literal with escapes.
std::string json_string(const std::string& s);

}  // namespace fh::io
