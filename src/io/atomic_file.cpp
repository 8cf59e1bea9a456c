/// @file atomic_file.cpp
#include "io/atomic_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace fh::io {

AtomicFile::AtomicFile(std::string path, Fail fail)
    : path_(std::move(path)), tmp_(fmt::format("{}.tmp-{}", path_, ::getpid())), fail_(std::move(fail)) {
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) raise(fmt::format("cannot create {}: {} (is the directory writable?)", tmp_, std::strerror(errno)));
}

AtomicFile::~AtomicFile() {
    if (!committed_) discard();
}

void AtomicFile::discard() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    ::unlink(tmp_.c_str());
}

void AtomicFile::raise(const std::string& message) {
    discard();
    committed_ = true;  // nothing left to clean up
    fail_(message);
    throw std::runtime_error(message);  // a Fail that returned
}

void AtomicFile::write(const void* data, std::size_t bytes) {
    const auto* p = static_cast<const char*>(data);
    while (bytes > 0) {
        const ssize_t n = ::write(fd_, p, std::min<std::size_t>(bytes, std::size_t{1} << 30));
        if (n < 0) {
            if (errno == EINTR) continue;
            raise(fmt::format("cannot write {}: {}", tmp_, std::strerror(errno)));
        }
        p += n;
        bytes -= static_cast<std::size_t>(n);
    }
}

void AtomicFile::commit() {
    if (::fsync(fd_) != 0) raise(fmt::format("fsync of {} failed: {}", tmp_, std::strerror(errno)));
    const int closed = ::close(fd_);
    fd_ = -1;
    if (closed != 0) raise(fmt::format("cannot write {}: {}", tmp_, std::strerror(errno)));
    if (std::rename(tmp_.c_str(), path_.c_str()) != 0)
        raise(fmt::format("cannot rename {} over it: {}", tmp_, std::strerror(errno)));
    committed_ = true;
    // Make the rename itself durable.
    std::filesystem::path dir = std::filesystem::path(path_).parent_path();
    if (dir.empty()) dir = ".";
    const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0 || ::fsync(dfd) != 0) {
        const int e = errno;
        if (dfd >= 0) ::close(dfd);
        raise(fmt::format("cannot fsync directory {}: {}", dir.string(), std::strerror(e)));
    }
    ::close(dfd);
}

void write_file_atomically(const std::string& path, const std::string& text, const AtomicFile::Fail& fail) {
    AtomicFile f(path, fail);
    f.write(text.data(), text.size());
    f.commit();
}

}  // namespace fh::io
