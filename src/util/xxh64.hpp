/// @file xxh64.hpp
/// @brief XXH64 (Yann Collet's xxHash, 64-bit), written once: the fxcache key and checksum and the
///        checkpoint data checksum both use it. Streaming and one-shot give the same value.
#pragma once

#include <cstddef>
#include <cstdint>

namespace fh::util {

/// Streaming XXH64: update() with pieces, digest() the hash of their concatenation.
class Xxh64Stream {
public:
    explicit Xxh64Stream(std::uint64_t seed = 0) noexcept;
    void update(const void* data, std::size_t size) noexcept;
    std::uint64_t digest() const noexcept;

private:
    std::uint64_t v_[4];
    std::uint64_t seed_;
    std::uint64_t total_ = 0;
    unsigned char buf_[32];
    std::size_t buffered_ = 0;
};

/// XXH64 of one buffer.
std::uint64_t xxh64(const void* data, std::size_t size, std::uint64_t seed = 0) noexcept;

}  // namespace fh::util
