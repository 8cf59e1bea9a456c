/// @file regular_file.hpp
/// @brief Opening input files without blocking or reading endless devices: a FIFO given as a
///        profile, data file, checkpoint or replay dump used to block forever, and /dev/zero read
///        as an empty file. Every reader opens through here and refuses anything that is not a
///        regular file (callers turn the message into their error type and exit code).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace fh::util {

/// An open regular file (closed by the destructor) or, when `fd < 0`, why it could not be used:
/// "cannot open: No such file or directory", "is a directory", "is a FIFO (named pipe), not a regular file", ...
class RegularFile {
public:
    /// Opens `path` read-only without blocking (O_NONBLOCK, so a FIFO cannot stall the open) and
    /// checks with fstat that it is a regular file. O_NONBLOCK stays set: it changes nothing for a
    /// file on disk, and a read of a kernel file that would wait (/proc/kmsg) fails instead.
    explicit RegularFile(const std::string& path);
    ~RegularFile();
    RegularFile(const RegularFile&) = delete;
    RegularFile& operator=(const RegularFile&) = delete;

    bool ok() const noexcept { return fd_ >= 0; }
    int fd() const noexcept { return fd_; }
    std::uint64_t size() const noexcept { return size_; }
    /// Why the file cannot be used (empty when ok()).
    const std::string& error() const noexcept { return error_; }
    /// True when the file does not exist (ENOENT), as opposed to any other problem.
    bool missing() const noexcept { return missing_; }

    /// Reads the whole file, at most `max_bytes`: a file whose size is larger sets *too_big
    /// before a byte is read (out empty); one that grows past it while read sets it too (out
    /// holds the first max_bytes + 1 bytes). Returns false with error() set on a read error, or
    /// when a read would block (a file of the kernel such as /proc/kmsg: the descriptor stays
    /// non-blocking, so such a file is refused instead of hanging).
    bool read_all(std::string& out, std::uint64_t max_bytes, bool* too_big = nullptr);

private:
    int fd_ = -1;
    std::uint64_t size_ = 0;
    std::string error_;
    bool missing_ = false;
};

/// The text without a leading UTF-8 byte order mark (some Windows editors write one): profiles
/// and grid files read alike.
std::string_view without_bom(std::string_view text) noexcept;

/// "a FIFO (named pipe)", "a character device", "a directory", ... for a path that exists but is
/// not a regular file; "" for a regular file or a path that does not exist. Follows symlinks.
std::string non_regular_kind(const std::string& path);

}  // namespace fh::util
