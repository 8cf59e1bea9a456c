/// @file run_directory.cpp
#include "io/run_directory.hpp"

#include "io/atomic_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <sys/file.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <iterator>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "util/errors.hpp"
#include "util/regular_file.hpp"

namespace fh::io {

namespace fs = std::filesystem;

namespace {

[[noreturn]] void symlink_refused(const std::string& file) {
    throw UsageError(
        fmt::format("{} is a symbolic link; a run directory's files must be its own (remove the link, "
                    "or copy the file in its place)",
                    file));
}

/// True for `<anything>.tmp-<digits>`: an io::AtomicFile temporary.
bool is_temporary(const std::string& name) {
    const auto at = name.rfind(".tmp-");
    if (at == std::string::npos || at == 0 || at + 5 >= name.size()) return false;
    return std::all_of(name.begin() + static_cast<std::ptrdiff_t>(at + 5), name.end(),
                       [](char c) { return c >= '0' && c <= '9'; });
}

/// The value of `"<key>":N` in a JSON line, or -1.
long long progress_of(const std::string& line, const std::string& key) {
    const std::string needle = "\"" + key + "\":";
    const auto at = line.find(needle);
    if (at == std::string::npos) return -1;
    long long v = 0;
    const char* first = line.data() + at + needle.size();
    const auto [ptr, ec] = std::from_chars(first, line.data() + line.size(), v);
    return ec == std::errc() && ptr != first ? v : -1;
}

/// Opens `file` to append to it (created when missing); a symbolic link is refused.
int open_to_append(const std::string& file) {
    const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0 && errno == ELOOP) symlink_refused(file);
    if (fd < 0) throw UsageError(fmt::format("cannot write {}: {}", file, std::strerror(errno)));
    return fd;
}

/// Opens the directory `path` and takes its lock (flock, exclusive, not waiting); UsageError
/// naming `what` and the directory's `kind` when another process holds it or it cannot be opened.
int lock_directory(const std::string& path, const std::string& what, const std::string& kind = "run directory") {
    const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) throw UsageError(fmt::format("{}: cannot open: {}", what, std::strerror(errno)));
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
        const int e = errno;
        ::close(fd);
        if (e == EWOULDBLOCK)
            throw UsageError(
                fmt::format("{}: another foxhunt-train process is running in this {} "
                            "(it holds the directory's lock); wait for it to finish, or stop it (Ctrl-C "
                            "saves a checkpoint) and resume then",
                            what, kind));
        throw UsageError(fmt::format("{}: cannot lock the {}: {}", what, kind, std::strerror(e)));
    }
    return fd;
}

}  // namespace

RunDirectory RunDirectory::create(const std::string& root, const std::string& name) {
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos)
        throw UsageError(
            fmt::format("run.name = \"{}\" is not a directory name: it must not be \".\" or \"..\" or "
                        "contain '/' (set run.output_dir or --output for another place)",
                        name));
    std::error_code ec;
    fs::create_directories(root, ec);
    if (ec)
        throw UsageError(fmt::format("cannot create the output directory {}: {} (set run.output_dir or --output)", root,
                                     ec.message()));
    for (int k = 1; k < 10000; ++k) {
        const fs::path candidate = fs::path(root) / (k == 1 ? name : fmt::format("{}-{}", name, k));
        if (::mkdir(candidate.c_str(), 0755) != 0) {
            if (errno == EEXIST) continue;  // a directory, a file or a link of that name: the next name
            throw UsageError(
                fmt::format("cannot create the run directory {}: {}", candidate.string(), std::strerror(errno)));
        }
        const int fd = ::open(candidate.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0 || ::flock(fd, LOCK_EX | LOCK_NB) != 0) {
            const int e = errno;
            if (fd >= 0) ::close(fd);
            throw UsageError(fmt::format("cannot lock the run directory {}: {}", candidate.string(), std::strerror(e)));
        }
        return RunDirectory(candidate.string(), fd);
    }
    throw UsageError(fmt::format("too many runs named {} in {}", name, root));
}

RunDirectory RunDirectory::open(const std::string& path) {
    std::error_code ec;
    if (!fs::is_directory(path, ec)) throw UsageError(fmt::format("--resume {}: no such run directory", path));
    const fs::path last = fs::path(path) / "checkpoints" / "last.safetensors";
    if (!fs::exists(fs::symlink_status(last, ec)))
        throw UsageError(
            fmt::format("--resume {}: there is no checkpoints/last.safetensors: the run stopped before "
                        "its first checkpoint; start it again instead",
                        path));
    return RunDirectory(path, lock_directory(path, "--resume " + path));
}

DirectoryLock::DirectoryLock(const std::string& path, const std::string& kind)
    : fd_(lock_directory(path, path, kind)) {}

DirectoryLock::~DirectoryLock() {
    if (fd_ >= 0) ::close(fd_);
}

void RunDirectory::append_eval(const std::string& json_object) const {
    const std::string file = (fs::path(path_) / "eval.jsonl").string();
    const int fd = open_to_append(file);
    const std::string line = json_object + "\n";
    const ssize_t n = ::write(fd, line.data(), line.size());  // one write: a line is whole or absent
    const int e = errno;
    ::close(fd);
    if (n != static_cast<ssize_t>(line.size()))
        throw UsageError(fmt::format("cannot write {}: {}", file, std::strerror(e)));
}

std::string RunDirectory::file_path(const std::string& relative) const {
    // Every folder and file the run reads or writes passes here: none may be a symbolic link (a
    // linked backtest/ would have a resumed run overwrite files outside the run, a linked
    // checkpoint be read from anywhere). Missing folders are created, one at a time.
    fs::path p = path_;
    const fs::path rel(relative);
    for (auto it = rel.begin(); it != rel.end(); ++it) {
        p /= *it;
        const bool last = std::next(it) == rel.end();
        struct stat st {};
        if (::lstat(p.c_str(), &st) == 0) {
            if (S_ISLNK(st.st_mode)) symlink_refused(p.string());
            if (!last && !S_ISDIR(st.st_mode))
                throw UsageError(
                    fmt::format("{} is not a directory; a run directory's {} must be one", p.string(), it->string()));
        } else if (errno != ENOENT) {
            throw UsageError(fmt::format("cannot use {}: {}", p.string(), std::strerror(errno)));
        } else if (!last && ::mkdir(p.c_str(), 0755) != 0 && errno != EEXIST) {
            throw UsageError(fmt::format("cannot create {}: {}", p.string(), std::strerror(errno)));
        }
    }
    return p.string();
}

RunDirectory::RunDirectory(std::string path, int lock_fd) : path_(std::move(path)), lock_fd_(lock_fd) {}

RunDirectory::RunDirectory(RunDirectory&& o) noexcept
    : path_(std::move(o.path_)), lock_fd_(o.lock_fd_), metrics_(o.metrics_) {
    o.metrics_ = nullptr;
    o.lock_fd_ = -1;
}

RunDirectory::~RunDirectory() {
    if (metrics_) std::fclose(metrics_);
    if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the lock
}

void RunDirectory::write_file(const std::string& file, const std::string& text) const {
    write_file_atomically(file_path(file), text);
}

std::optional<std::string> RunDirectory::read_file(const std::string& file) const {
    const std::string p = (fs::path(path_) / file).string();
    const int fd = ::open(p.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) return std::nullopt;
    if (fd < 0 && errno == ELOOP) symlink_refused(p);
    if (fd < 0) throw UsageError(fmt::format("cannot read {}: {}", p, std::strerror(errno)));
    ::close(fd);
    util::RegularFile f(p);
    if (!f.ok()) throw UsageError(fmt::format("{}: {}", p, f.error()));
    std::string text;
    bool too_big = false;
    if (!f.read_all(text, std::uint64_t{1} << 32, &too_big) || too_big)
        throw UsageError(fmt::format("cannot read {}: {}", p, too_big ? "larger than 4 GiB" : f.error()));
    return text;
}

void RunDirectory::append_metrics(const std::string& json_object) {
    if (!metrics_) {  // opened on the first line: a refused resume writes nothing
        const std::string file = (fs::path(path_) / "metrics.jsonl").string();
        const int fd = open_to_append(file);
        if ((metrics_ = ::fdopen(fd, "a")) == nullptr) {
            const int e = errno;
            ::close(fd);
            throw UsageError(fmt::format("cannot write {}: {}", file, std::strerror(e)));
        }
    }
    std::fprintf(metrics_, "%s\n", json_object.c_str());
    std::fflush(metrics_);
}

RunDirectory::ResumeCleanup RunDirectory::prepare_resume(long long progress, const std::string& unit_key) {
    ResumeCleanup c;
    for (const char* sub : {"", "checkpoints", "backtest"}) {
        std::error_code ec;
        const fs::path dir = *sub ? fs::path(file_path(sub)) : fs::path(path_);  // a linked folder is refused
        for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
            const std::string name = it->path().filename().string();
            if (!is_temporary(name)) continue;
            if (fs::remove(it->path(), ec)) ++c.temporaries_removed;
        }
    }
    for (const char* file : {"metrics.jsonl", "eval.jsonl", "lineage.jsonl"}) {
        const auto text = read_file(file);
        if (!text) continue;
        std::string kept;
        std::size_t at = 0;
        int dropped = 0;
        bool cut = false;
        while (at < text->size()) {
            const auto nl = text->find('\n', at);
            const std::string line = text->substr(at, nl == std::string::npos ? std::string::npos : nl - at);
            at = nl == std::string::npos ? text->size() : nl + 1;
            const long long p = progress_of(line, unit_key);
            if (!cut && nl != std::string::npos && !line.empty() && line.front() == '{' && line.back() == '}' &&
                p >= 0 && p <= progress) {
                kept += line + "\n";
            } else {
                cut = true;  // a partial or foreign line, or one past the checkpoint: it and what follows go
                ++dropped;
            }
        }
        if (dropped > 0) {
            write_file(file, kept);
            c.lines_dropped += dropped;
        }
    }
    return c;
}

std::string RunDirectory::last_metrics_line() const {
    const auto text = read_file("metrics.jsonl");
    if (!text) return "";
    const std::size_t end = text->rfind('\n');  // what follows the last newline is a partial line
    if (end == std::string::npos || end == 0) return "";
    const auto before = text->rfind('\n', end - 1);
    const std::size_t begin = before == std::string::npos ? 0 : before + 1;
    return text->substr(begin, end - begin);
}

std::string summary_status(const std::string& summary) {
    const std::string key = "\"status\":\"";
    const auto at = summary.find(key);
    if (at == std::string::npos) return "";
    const auto end = summary.find('"', at + key.size());
    return end == std::string::npos ? "" : summary.substr(at + key.size(), end - at - key.size());
}

void write_file_atomically(const std::string& path, const std::string& text) {
    io::write_file_atomically(path, text,
                              [&](const std::string& m) { throw UsageError(fmt::format("{}: {}", path, m)); });
}

}  // namespace fh::io
