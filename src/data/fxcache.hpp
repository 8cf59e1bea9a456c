/// @file fxcache.hpp
/// @brief fxcache: the parsed bars and their raw (un-normalised) features in one binary file,
///        keyed by a hash of the source bytes and of the feature configuration; versioned header,
///        payload checksum, atomic write. Format in docs/data.md "fxcache".
#pragma once

#include "util/xxh64.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "data/features.hpp"
#include "data/market_data.hpp"

namespace fh::data {

/// Format version; a file with another version is reported and rebuilt.
constexpr std::uint32_t kFxcacheVersion = 1;
constexpr std::size_t kFxcacheHeaderBytes = 64;

/// XXH64 (Yann Collet's 64-bit xxHash), written from its specification.
inline std::uint64_t xxh64(const void* data, std::size_t size, std::uint64_t seed = 0) noexcept {
    return util::xxh64(data, size, seed);
}
inline std::uint64_t xxh64(std::string_view s, std::uint64_t seed = 0) noexcept {
    return xxh64(s.data(), s.size(), seed);
}

struct CacheKey {
    std::uint64_t source_hash = 0;  ///< hash of the source bytes (every file, with its name)
    std::uint64_t config_hash = 0;  ///< hash of the feature configuration and code versions
    bool operator==(const CacheKey&) const = default;
};

/// What the cache holds.
struct CachePayload {
    BarSeries bars;
    RawFeatures raw;
    bool daily_calendar = false;
};

/// Hash of the feature configuration: feature set name, kFeatureCodeVersion, kFxcacheVersion.
std::uint64_t feature_config_hash(const std::string& feature_set);

/// Serialises header + payload; the exact bytes a cache file holds.
std::string encode_fxcache(const CacheKey& key, const CachePayload& payload);

/// Decodes a cache file's bytes. Returns false with *why set ("truncated: ...", "checksum
/// mismatch", "version 2, expected 1", "stale: ...") when the bytes must not be used.
bool decode_fxcache(std::string_view bytes, const CacheKey& expected, CachePayload* out, std::string* why);

/// Reads a cache file: false with *why when missing ("no cache file"), unreadable or invalid.
bool read_fxcache(const std::string& path, const CacheKey& expected, CachePayload* out, std::string* why);

/// Writes atomically: a temporary file in the same directory, fsync, rename, fsync of the
/// directory. Creates the directory. Returns false with *why on failure (nothing left behind).
bool write_fxcache(const std::string& path, const CacheKey& key, const CachePayload& payload, std::string* why);

}  // namespace fh::data
