/// @file regular_file.cpp
#include "util/regular_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace fh::util {
namespace {

const char* kind_of(mode_t m) {
    if (S_ISDIR(m)) return "a directory";
    if (S_ISFIFO(m)) return "a FIFO (named pipe)";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    return "not a regular file";
}

}  // namespace

RegularFile::RegularFile(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        missing_ = errno == ENOENT;
        error_ = fmt::format("cannot open: {}", std::strerror(errno));
        return;
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0)
        error_ = fmt::format("cannot stat: {}", std::strerror(errno));
    else if (!S_ISREG(st.st_mode))
        error_ = fmt::format("is {}, not a regular file", kind_of(st.st_mode));
    if (!error_.empty()) {
        ::close(fd);
        return;
    }
    fd_ = fd;
    size_ = static_cast<std::uint64_t>(st.st_size);
}

RegularFile::~RegularFile() {
    if (fd_ >= 0) ::close(fd_);
}

bool RegularFile::read_all(std::string& out, std::uint64_t max_bytes, bool* too_big) {
    out.clear();
    if (too_big) *too_big = false;
    if (fd_ < 0) return false;
    if (size_ > max_bytes) {  // refused before reading (a 2 GB file is not read to say so)
        if (too_big) *too_big = true;
        return true;
    }
    // The size from fstat is a hint (the file may grow or shrink while read): read to the end.
    out.resize(static_cast<std::size_t>(std::min<std::uint64_t>(size_, max_bytes) + 1));
    std::size_t have = 0;
    for (;;) {
        if (have == out.size()) {
            if (have > max_bytes) break;
            out.resize(std::min<std::size_t>(out.size() * 2 + 4096, static_cast<std::size_t>(max_bytes) + 1));
        }
        const ssize_t n = ::read(fd_, out.data() + have, out.size() - have);
        if (n < 0) {
            if (errno == EINTR) continue;
            error_ = errno == EAGAIN || errno == EWOULDBLOCK
                         ? std::string(
                               "cannot read: it has no data now and would wait for more (a file of the "
                               "kernel or a device, not a file on disk)")
                         : fmt::format("cannot read: {}", std::strerror(errno));
            out.clear();
            return false;
        }
        if (n == 0) break;
        have += static_cast<std::size_t>(n);
    }
    out.resize(have);
    if (have > max_bytes && too_big) *too_big = true;
    return true;
}

std::string_view without_bom(std::string_view text) noexcept {
    return text.substr(0, 3) == "\xEF\xBB\xBF" ? text.substr(3) : text;
}

std::string non_regular_kind(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return "";
    return S_ISREG(st.st_mode) ? "" : kind_of(st.st_mode);
}

}  // namespace fh::util
