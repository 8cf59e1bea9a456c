/// @file atomic_file.hpp
/// @brief One way to write a file so that readers, a crash or a second Ctrl-C see either the old
///        complete file or the new complete file, never a partial one: the bytes go to
///        `<path>.tmp-<pid>` in the same directory; commit() fsyncs it, renames it over `path`
///        and fsyncs the directory. Used by checkpoints, replay dumps and the run directory.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

namespace fh::io {

class AtomicFile {
public:
    /// Called with a message (naming the temporary or the directory) on any failure; it must
    /// throw the caller's error type (its exit code), e.g. CheckpointError.
    using Fail = std::function<void(const std::string& message)>;

    /// Creates the temporary.
    AtomicFile(std::string path, Fail fail);
    /// Without commit() (an error, an exception on the way): closes and removes the temporary;
    /// `path` is untouched.
    ~AtomicFile();
    AtomicFile(const AtomicFile&) = delete;
    AtomicFile& operator=(const AtomicFile&) = delete;

    void write(const void* data, std::size_t bytes);
    /// fsync, close, rename over `path`, fsync the directory.
    void commit();
    const std::string& temp_path() const noexcept { return tmp_; }

private:
    [[noreturn]] void raise(const std::string& message);
    void discard() noexcept;

    std::string path_, tmp_;
    Fail fail_;
    int fd_ = -1;
    bool committed_ = false;
};

/// Writes `text` to `path` through an AtomicFile.
void write_file_atomically(const std::string& path, const std::string& text, const AtomicFile::Fail& fail);

}  // namespace fh::io
