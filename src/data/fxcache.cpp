/// @file fxcache.cpp
/// @brief fxcache encoding, validation and atomic writes.
#include "data/fxcache.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "util/regular_file.hpp"

namespace fh::data {
namespace {

constexpr char kMagic[8] = {'F', 'H', 'X', 'C', 'A', 'C', 'H', 'E'};

/// Appends raw bytes of trivially copyable values.
struct Writer {
    std::string& out;
    template <class T>
    void put(const T& v) {
        out.append(reinterpret_cast<const char*>(&v), sizeof(T));
    }
    template <class T>
    void put_array(const std::vector<T>& v) {
        out.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
    }
};

/// Bounds-checked reads; ok turns false (and stays false) on the first overrun.
struct Reader {
    std::string_view in;
    std::size_t pos = 0;
    bool ok = true;
    template <class T>
    T get() {
        T v{};
        if (!ok || in.size() - pos < sizeof(T)) {
            ok = false;
            return v;
        }
        std::memcpy(&v, in.data() + pos, sizeof(T));
        pos += sizeof(T);
        return v;
    }
    template <class T>
    void get_array(std::vector<T>* v, std::size_t n) {
        if (!ok || n > (in.size() - pos) / sizeof(T)) {
            ok = false;
            return;
        }
        v->resize(n);
        std::memcpy(v->data(), in.data() + pos, n * sizeof(T));
        pos += n * sizeof(T);
    }
};

}  // namespace

std::uint64_t feature_config_hash(const std::string& feature_set) {
    return xxh64(
        fmt::format("feature_set={};feature_code={};fxcache={}", feature_set, kFeatureCodeVersion, kFxcacheVersion));
}

std::string encode_fxcache(const CacheKey& key, const CachePayload& pl) {
    const auto& b = pl.bars;
    const std::size_t n = b.size();
    std::string out;
    out.reserve(kFxcacheHeaderBytes + n * (8 * 7 + 4 * static_cast<std::size_t>(pl.raw.dim)) + 1024);
    out.resize(kFxcacheHeaderBytes);  // filled in below, once the payload's size and checksum are known
    Writer w{out};
    w.put(static_cast<std::uint64_t>((b.has_volume ? 1u : 0u) | (pl.daily_calendar ? 2u : 0u)));
    w.put(static_cast<std::uint64_t>(b.segment_starts.size()));
    for (std::size_t s = 0; s < b.segment_starts.size(); ++s) {
        const std::string& name = s < b.segment_names.size() ? b.segment_names[s] : std::string();
        w.put(static_cast<std::uint64_t>(b.segment_starts[s]));
        w.put(static_cast<std::uint64_t>(name.size()));
        out.append(name);
    }
    w.put_array(b.time);
    for (const auto* v : {&b.open, &b.high, &b.low, &b.close, &b.volume}) w.put_array(*v);
    w.put_array(pl.raw.atr);
    w.put_array(pl.raw.values);

    const std::string_view payload = std::string_view(out).substr(kFxcacheHeaderBytes);
    std::string header;
    Writer h{header};
    header.append(kMagic, 8);
    h.put(kFxcacheVersion);
    h.put(static_cast<std::uint32_t>(kFxcacheHeaderBytes));
    h.put(key.source_hash);
    h.put(key.config_hash);
    h.put(static_cast<std::uint64_t>(payload.size()));
    h.put(xxh64(payload));
    h.put(static_cast<std::uint64_t>(n));
    h.put(static_cast<std::uint32_t>(pl.raw.dim));
    h.put(std::uint32_t{0});
    std::memcpy(out.data(), header.data(), kFxcacheHeaderBytes);
    return out;
}

bool decode_fxcache(std::string_view bytes, const CacheKey& expected, CachePayload* out, std::string* why) {
    auto bad = [&](std::string w) {
        if (why) *why = std::move(w);
        return false;
    };
    if (bytes.size() < kFxcacheHeaderBytes)
        return bad(
            fmt::format("truncated: {} bytes, shorter than the {}-byte header", bytes.size(), kFxcacheHeaderBytes));
    if (std::memcmp(bytes.data(), kMagic, 8) != 0) return bad("not an fxcache file (bad magic)");
    Reader r{bytes, 8};
    const auto version = r.get<std::uint32_t>();
    const auto header_bytes = r.get<std::uint32_t>();
    if (version != kFxcacheVersion || header_bytes != kFxcacheHeaderBytes)
        return bad(fmt::format("format version {}, expected {}", version, kFxcacheVersion));
    const CacheKey key{r.get<std::uint64_t>(), r.get<std::uint64_t>()};  // source, config: read in order
    const auto payload_bytes = r.get<std::uint64_t>();
    const auto checksum = r.get<std::uint64_t>();
    const auto n = r.get<std::uint64_t>();
    const auto dim = r.get<std::uint32_t>();
    if (bytes.size() - kFxcacheHeaderBytes != payload_bytes)
        return bad(fmt::format("truncated: {} payload bytes, the header says {}", bytes.size() - kFxcacheHeaderBytes,
                               payload_bytes));
    if (key.source_hash != expected.source_hash)
        return bad(fmt::format("stale: the source data changed (hash {:016x}, cache made from {:016x})",
                               expected.source_hash, key.source_hash));
    if (key.config_hash != expected.config_hash) return bad("stale: the feature configuration or code version changed");
    const std::string_view payload = bytes.substr(kFxcacheHeaderBytes);
    if (xxh64(payload) != checksum) return bad("corrupt: payload checksum mismatch");

    Reader p{payload};
    CachePayload pl;
    const auto flags = p.get<std::uint64_t>();
    pl.bars.has_volume = (flags & 1u) != 0;
    pl.daily_calendar = (flags & 2u) != 0;
    const auto nseg = p.get<std::uint64_t>();
    if (!p.ok || nseg == 0 || nseg > n) return bad("corrupt: bad segment count");
    pl.bars.segment_starts.clear();
    for (std::uint64_t s = 0; s < nseg && p.ok; ++s) {
        const auto start = p.get<std::uint64_t>();
        const auto len = p.get<std::uint64_t>();
        if (!p.ok || len > payload.size() - p.pos) return bad("corrupt: bad segment name");
        pl.bars.segment_starts.push_back(static_cast<std::size_t>(start));
        pl.bars.segment_names.emplace_back(payload.substr(p.pos, len));
        p.pos += len;
    }
    const auto N = static_cast<std::size_t>(n);
    p.get_array(&pl.bars.time, N);
    for (auto* v : {&pl.bars.open, &pl.bars.high, &pl.bars.low, &pl.bars.close, &pl.bars.volume}) p.get_array(v, N);
    p.get_array(&pl.raw.atr, N);
    p.get_array(&pl.raw.values, N * dim);
    pl.raw.dim = static_cast<int>(dim);
    if (!p.ok || p.pos != payload.size()) return bad("corrupt: payload size does not match its contents");
    if (pl.bars.segment_starts.front() != 0) return bad("corrupt: first segment does not start at bar 0");
    for (std::size_t s = 1; s < pl.bars.segment_starts.size(); ++s)
        if (pl.bars.segment_starts[s] <= pl.bars.segment_starts[s - 1] || pl.bars.segment_starts[s] >= N)
            return bad("corrupt: segment starts out of order");
    // A matching checksum proves the file is the one written, not that what was written is sane:
    // the contents are checked as the CSV parser checks rows (a NaN close, backwards time,
    // high < low, an infinite feature would otherwise reach training).
    if (const std::string why_bars = check_bar_series(pl.bars, false); !why_bars.empty())
        return bad("corrupt: " + why_bars);
    for (std::size_t i = 0; i < N; ++i)
        if (!std::isfinite(pl.raw.atr[i]) || pl.raw.atr[i] < 0)
            return bad(fmt::format("corrupt: bar {}: ATR {} is not finite and >= 0", i, pl.raw.atr[i]));
    for (std::size_t i = 0; i < pl.raw.values.size(); ++i)
        if (!std::isfinite(pl.raw.values[i]))
            return bad(fmt::format("corrupt: bar {}: feature {} is {}", i / dim, i % dim, pl.raw.values[i]));
    *out = std::move(pl);
    return true;
}

bool read_fxcache(const std::string& path, const CacheKey& expected, CachePayload* out, std::string* why) {
    util::RegularFile file(path);  // a FIFO or a device is refused, never opened blocking; closed on return
    if (!file.ok()) {
        if (why) *why = file.missing() ? std::string("no cache file") : file.error();
        return false;
    }
    const auto size = static_cast<std::size_t>(file.size());
    if (size == 0) return decode_fxcache(std::string_view(), expected, out, why);
    // Mapped read: the payload is copied once, straight into the result's vectors.
    void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, file.fd(), 0);
    if (map == MAP_FAILED) {
        if (why) *why = fmt::format("cannot map: {}", std::strerror(errno));
        return false;
    }
    const bool ok = decode_fxcache(std::string_view(static_cast<const char*>(map), size), expected, out, why);
    ::munmap(map, size);
    return ok;
}

bool write_fxcache(const std::string& path, const CacheKey& key, const CachePayload& payload, std::string* why) {
    namespace fs = std::filesystem;
    const fs::path target(path);
    const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) {
        if (why) *why = fmt::format("cannot create {}: {}", dir.string(), ec.message());
        return false;
    }
    const std::string bytes = encode_fxcache(key, payload);
    const std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
    auto fail = [&](const char* what) {
        if (why) *why = fmt::format("{} {}: {}", what, tmp, std::strerror(errno));
        ::unlink(tmp.c_str());
        return false;
    };
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return fail("cannot create");
    std::size_t done = 0;
    while (done < bytes.size()) {
        const ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            ::close(fd);
            return fail("cannot write");
        }
        done += static_cast<std::size_t>(w);
    }
    if (::fsync(fd) != 0) {
        ::close(fd);
        return fail("cannot fsync");
    }
    if (::close(fd) != 0) return fail("cannot close");
    if (::rename(tmp.c_str(), path.c_str()) != 0) return fail("cannot rename");
    if (const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
        ::fsync(dfd);
        ::close(dfd);
    }
    return true;
}

}  // namespace fh::data
