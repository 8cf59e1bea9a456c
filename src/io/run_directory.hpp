/// @file run_directory.hpp
/// @brief The run directory: `<output_dir>/<name>/` with the resolved config.toml,
///        metrics.jsonl and eval.jsonl (one JSON object per line), summary.json, checkpoints/
///        and backtest/ (whole files written atomically: temp file, fsync, rename).
///
/// A process holds the directory's lock (flock on the directory itself) for as long as it runs
/// in it: a second `--resume` of a run in progress is refused instead of interleaving its lines.
/// The kernel drops the lock when the process dies, even by `kill -9`, so a lock is never stale.
#pragma once

#include <cstdio>
#include <optional>
#include <string>

namespace fh::io {

class RunDirectory {
public:
    /// Creates `root/name`, or `root/name-2`, `-3`, ... when that name is taken by anything (a
    /// run never overwrites another), and takes its lock. `name` must be one directory name (no
    /// '/', not "." or ".."). Throws UsageError when the directory cannot be created.
    static RunDirectory create(const std::string& root, const std::string& name);
    /// Opens an existing run directory to continue it (--resume) and takes its lock; writes
    /// nothing. Throws UsageError when it is not a run directory or another process holds it.
    static RunDirectory open(const std::string& path);

    RunDirectory(RunDirectory&& o) noexcept;
    RunDirectory& operator=(RunDirectory&&) = delete;
    RunDirectory(const RunDirectory&) = delete;
    ~RunDirectory();

    const std::string& path() const noexcept { return path_; }
    /// Writes `file` inside the directory atomically.
    void write_file(const std::string& file, const std::string& text) const;
    /// Reads `file` inside the directory (a regular file, not a symbolic link); nullopt when it
    /// does not exist. Throws UsageError when it cannot be read.
    std::optional<std::string> read_file(const std::string& file) const;
    /// Appends one line to metrics.jsonl and flushes it (a crash loses at most the line being
    /// written; prepare_resume drops such a partial line).
    void append_metrics(const std::string& json_object);
    /// Appends one line to eval.jsonl.
    void append_eval(const std::string& json_object) const;
    /// `path()/relative`, creating its missing folders; UsageError when any folder on the way or
    /// the file itself is a symbolic link (every file a run reads or writes comes from here).
    std::string file_path(const std::string& relative) const;

    /// What prepare_resume cleaned.
    struct ResumeCleanup {
        int temporaries_removed = 0;  ///< `*.tmp-<pid>` files of a killed process
        int lines_dropped = 0;        ///< metrics.jsonl and eval.jsonl lines past the checkpoint or partial
    };
    /// Before a resumed run writes anything (its checkpoint validated): removes the temporary
    /// files a killed process left (`<file>.tmp-<pid>`, in the directory, checkpoints/ and
    /// backtest/; the lock guarantees no live process is writing them) and rewrites metrics.jsonl,
    /// eval.jsonl and a search's lineage.jsonl without the lines past `progress` (whose `"<unit_key>":N` is larger: the
    /// resumed run writes them again) or after a partial line, so that both read as the
    /// uninterrupted run's.
    ResumeCleanup prepare_resume(long long progress, const std::string& unit_key);
    /// The last complete line of metrics.jsonl, "" when none.
    std::string last_metrics_line() const;

private:
    RunDirectory(std::string path, int lock_fd);
    std::string path_;
    int lock_fd_ = -1;
    std::FILE* metrics_ = nullptr;
};

/// The lock of an existing directory (the same flock a RunDirectory holds), held while this object
/// lives: taken before a directory that run.on_exists found is removed to start the run again, so
/// that a run in progress there (before its first checkpoint) is refused rather than deleted, and
/// by a population for its directory while it trains (`kind` "population directory": the word
/// its messages use). UsageError when another process holds it.
class DirectoryLock {
public:
    explicit DirectoryLock(const std::string& path, const std::string& kind = "run directory");
    ~DirectoryLock();
    DirectoryLock(const DirectoryLock&) = delete;
    DirectoryLock& operator=(const DirectoryLock&) = delete;

private:
    int fd_ = -1;
};

/// The status of a summary.json text ("completed", "early_stopped", "interrupted", "diverged"),
/// "" when it has none.
std::string summary_status(const std::string& summary_json);

/// Writes `text` to `path` atomically: a temporary file in the same directory, fsync, rename.
void write_file_atomically(const std::string& path, const std::string& text);

}  // namespace fh::io
