/// @file xxh64.cpp
/// @brief XXH64 per its specification (reference vectors in tests/data/test_fxcache.cpp).
#include "util/xxh64.hpp"

#include <algorithm>
#include <cstring>

namespace fh::util {
namespace {

constexpr std::uint64_t P1 = 0x9E3779B185EBCA87ULL;
constexpr std::uint64_t P2 = 0xC2B2AE3D27D4EB4FULL;
constexpr std::uint64_t P3 = 0x165667B19E3779F9ULL;
constexpr std::uint64_t P4 = 0x85EBCA77C2B2AE63ULL;
constexpr std::uint64_t P5 = 0x27D4EB2F165667C5ULL;
inline std::uint64_t rotl(std::uint64_t x, int r) {
    return (x << r) | (x >> (64 - r));
}
inline std::uint64_t round(std::uint64_t acc, std::uint64_t in) {
    return rotl(acc + in * P2, 31) * P1;
}
inline std::uint64_t merge(std::uint64_t acc, std::uint64_t v) {
    return (acc ^ round(0, v)) * P1 + P4;
}
inline std::uint64_t rd64(const unsigned char* p) {
    std::uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
    return v;
}
inline std::uint32_t rd32(const unsigned char* p) {
    std::uint32_t v = 0;
    for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
    return v;
}

}  // namespace

Xxh64Stream::Xxh64Stream(std::uint64_t seed) noexcept
    : v_{seed + P1 + P2, seed + P2, seed, seed - P1}, seed_(seed), buf_{} {}

void Xxh64Stream::update(const void* data, std::size_t size) noexcept {
    const auto* p = static_cast<const unsigned char*>(data);
    total_ += size;
    if (buffered_ > 0) {
        const std::size_t take = std::min(size, 32 - buffered_);
        std::memcpy(buf_ + buffered_, p, take);
        buffered_ += take;
        p += take;
        size -= take;
        if (buffered_ < 32) return;
        for (int i = 0; i < 4; ++i) v_[i] = round(v_[i], rd64(buf_ + 8 * i));
        buffered_ = 0;
    }
    while (size >= 32) {
        for (int i = 0; i < 4; ++i) v_[i] = round(v_[i], rd64(p + 8 * i));
        p += 32;
        size -= 32;
    }
    if (size > 0) {
        std::memcpy(buf_, p, size);
        buffered_ = size;
    }
}

std::uint64_t Xxh64Stream::digest() const noexcept {
    std::uint64_t h;
    if (total_ >= 32) {
        h = rotl(v_[0], 1) + rotl(v_[1], 7) + rotl(v_[2], 12) + rotl(v_[3], 18);
        for (int i = 0; i < 4; ++i) h = merge(h, v_[i]);
    } else {
        h = seed_ + P5;
    }
    h += total_;
    const unsigned char* p = buf_;
    const unsigned char* const end = buf_ + buffered_;
    for (; end - p >= 8; p += 8) h = rotl(h ^ round(0, rd64(p)), 27) * P1 + P4;
    if (end - p >= 4) {
        h = rotl(h ^ (static_cast<std::uint64_t>(rd32(p)) * P1), 23) * P2 + P3;
        p += 4;
    }
    for (; p < end; ++p) h = rotl(h ^ (*p * P5), 11) * P1;
    h ^= h >> 33;
    h *= P2;
    h ^= h >> 29;
    h *= P3;
    h ^= h >> 32;
    return h;
}

std::uint64_t xxh64(const void* data, std::size_t size, std::uint64_t seed) noexcept {
    Xxh64Stream h(seed);
    h.update(data, size);
    return h.digest();
}

}  // namespace fh::util
