/// @file replay_dump.cpp
/// @brief The replay dump writer and its strict reader (docs/replay-dump.md).
#include "io/replay_dump.hpp"

#include "io/atomic_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <stdexcept>

#include "util/errors.hpp"
#include "util/regular_file.hpp"
#include "util/xxh64.hpp"

namespace fh::io {

// The arrays are written and read as the host's bytes: the format is little-endian.
static_assert(std::endian::native == std::endian::little, "replay dumps are little-endian; port the array I/O");
static_assert(sizeof(float) == 4 && sizeof(int) == 4, "replay dumps store 4-byte floats and ints");

namespace {

// ---- header layout (docs/replay-dump.md) ----------------------------------------------------
constexpr std::size_t kOffMagic = 0;        // 8 bytes "FHREPLAY"
constexpr std::size_t kOffVersion = 8;      // u32
constexpr std::size_t kOffHeaderSize = 12;  // u32
constexpr std::size_t kOffStateDim = 16;    // i32
constexpr std::size_t kOffEnvs = 20;        // i32
constexpr std::size_t kOffCapacity = 24;    // i32
constexpr std::size_t kOffActions = 28;     // i32
constexpr std::size_t kOffPushed = 32;      // i64
constexpr std::size_t kOffReserved = 40;    // zeros up to kReplayDumpHeaderBytes
constexpr std::size_t kChecksumBytes = 8;

using Header = unsigned char[kReplayDumpHeaderBytes];

void put_u32(unsigned char* p, std::uint32_t v) {
    for (int i = 0; i < 4; ++i) p[i] = static_cast<unsigned char>((v >> (8 * i)) & 0xFF);
}
void put_u64(unsigned char* p, std::uint64_t v) {
    for (int i = 0; i < 8; ++i) p[i] = static_cast<unsigned char>((v >> (8 * i)) & 0xFF);
}
std::uint32_t get_u32(const unsigned char* p) {
    std::uint32_t v = 0;
    for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
    return v;
}
std::uint64_t get_u64(const unsigned char* p) {
    std::uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
    return v;
}

/// a * b, or nullopt on overflow.
std::optional<std::uint64_t> mul(std::uint64_t a, std::uint64_t b) {
    if (a != 0 && b > std::numeric_limits<std::uint64_t>::max() / a) return std::nullopt;
    return a * b;
}
std::optional<std::uint64_t> add(std::optional<std::uint64_t> a, std::optional<std::uint64_t> b) {
    if (!a || !b || *b > std::numeric_limits<std::uint64_t>::max() - *a) return std::nullopt;
    return *a + *b;
}

/// The sizes a header describes.
struct Sizes {
    std::uint64_t rows = 0;        ///< capacity_steps * n_envs
    std::uint64_t state_floats = 0;  ///< rows * state_dim
    std::uint64_t file_bytes = 0;  ///< header + arrays + checksum
};

/// What is wrong with the dimensions, or an empty string. Also computes the sizes.
std::string check_dimensions(int state_dim, int n_envs, int capacity_steps, int num_actions, long long pushed,
                             Sizes& sizes) {
    auto range = [](const char* name, long long v, long long hi) {
        return v < 1 || v > hi ? fmt::format("{} is {}, expected 1..{}", name, v, hi) : std::string();
    };
    for (const std::string& s : {range("state_dim", state_dim, kReplayDumpMaxStateDim),
                                 range("n_envs", n_envs, kReplayDumpMaxEnvs),
                                 range("capacity_steps", capacity_steps, std::numeric_limits<int>::max()),
                                 range("num_actions", num_actions, kReplayDumpMaxActions)})
        if (!s.empty()) return s;
    if (pushed < 0) return fmt::format("pushed_steps is {}, expected >= 0", pushed);
    const std::uint64_t rows = static_cast<std::uint64_t>(capacity_steps) * static_cast<std::uint64_t>(n_envs);
    const auto floats = mul(rows, static_cast<std::uint64_t>(state_dim));
    // header + 2 state arrays (4 bytes a float) + rewards, actions (4 bytes) + done (1) + checksum
    const auto bytes = add(add(std::optional<std::uint64_t>(kReplayDumpHeaderBytes + kChecksumBytes),
                               floats ? mul(*floats, 8) : std::nullopt),
                           mul(rows, 9));
    if (!bytes) return "the dimensions describe more than 2^64 bytes";
    sizes = Sizes{rows, *floats, *bytes};
    return {};
}

// ---- writing ---------------------------------------------------------------------------------

[[noreturn]] void io_fail(const std::string& path, const std::string& what) {
    throw DataError(fmt::format("replay dump {}: {}", path, what));
}


}  // namespace

void write_replay_dump(const std::string& path, const ReplayDump& d) {
    Sizes sz;
    const std::string problem =
        check_dimensions(d.state_dim, d.n_envs, d.capacity_steps, d.num_actions, d.pushed_steps, sz);
    if (!problem.empty())
        throw std::invalid_argument(fmt::format("write_replay_dump {}: {}", path, problem));
    auto require = [&](std::size_t got, std::uint64_t want, const char* what) {
        if (got != want)
            throw std::invalid_argument(
                fmt::format("write_replay_dump {}: {} has {} elements, expected {}", path, what, got, want));
    };
    require(d.states.size(), sz.state_floats, "states");
    require(d.next_states.size(), sz.state_floats, "next_states");
    require(d.rewards.size(), sz.rows, "rewards");
    require(d.actions.size(), sz.rows, "actions");
    require(d.done.size(), sz.rows, "done");
    for (std::size_t i = 0; i < d.actions.size(); ++i)
        if (d.actions[i] < 0 || d.actions[i] >= d.num_actions)
            throw std::invalid_argument(fmt::format("write_replay_dump {}: action {} at row {} is outside [0, {})",
                                                    path, d.actions[i], i, d.num_actions));
    for (std::size_t i = 0; i < d.done.size(); ++i)
        if (d.done[i] > 2)
            throw std::invalid_argument(fmt::format("write_replay_dump {}: done flag {} at row {} is not 0, 1 or 2",
                                                    path, d.done[i], i));

    Header h{};
    std::memcpy(h + kOffMagic, kReplayDumpMagic, sizeof kReplayDumpMagic);
    put_u32(h + kOffVersion, kReplayDumpVersion);
    put_u32(h + kOffHeaderSize, kReplayDumpHeaderBytes);
    put_u32(h + kOffStateDim, static_cast<std::uint32_t>(d.state_dim));
    put_u32(h + kOffEnvs, static_cast<std::uint32_t>(d.n_envs));
    put_u32(h + kOffCapacity, static_cast<std::uint32_t>(d.capacity_steps));
    put_u32(h + kOffActions, static_cast<std::uint32_t>(d.num_actions));
    put_u64(h + kOffPushed, static_cast<std::uint64_t>(d.pushed_steps));

    // Atomically (io::AtomicFile), with the checksum computed while writing.
    AtomicFile file(path, [&](const std::string& m) { io_fail(path, m); });
    util::Xxh64Stream hash;
    auto put = [&](const void* data, std::size_t size) {
        hash.update(data, size);
        file.write(data, size);
    };
    put(h, sizeof h);
    put(d.states.data(), d.states.size() * sizeof(float));
    put(d.next_states.data(), d.next_states.size() * sizeof(float));
    put(d.rewards.data(), d.rewards.size() * sizeof(float));
    put(d.actions.data(), d.actions.size() * sizeof(int));
    put(d.done.data(), d.done.size());
    unsigned char sum[kChecksumBytes];
    put_u64(sum, hash.digest());
    file.write(sum, sizeof sum);
    file.commit();
}

// ---- reading ---------------------------------------------------------------------------------

namespace {

class FdReader {
public:
    FdReader(int fd, const std::string& path) : fd_(fd), path_(path) {}
    ~FdReader() { ::close(fd_); }
    FdReader(const FdReader&) = delete;
    FdReader& operator=(const FdReader&) = delete;

    /// Reads exactly `size` bytes (hashed unless `hashed` is false).
    void read(void* data, std::size_t size, bool hashed = true) {
        auto* p = static_cast<char*>(data);
        std::size_t left = size;
        while (left > 0) {
            const ssize_t n = ::read(fd_, p, std::min<std::size_t>(left, std::size_t{1} << 30));
            if (n < 0) {
                if (errno == EINTR) continue;
                io_fail(path_, fmt::format("cannot read: {}", std::strerror(errno)));
            }
            if (n == 0) io_fail(path_, "unexpected end of file (the file was truncated while it was read)");
            p += n;
            left -= static_cast<std::size_t>(n);
        }
        if (hashed) hash_.update(data, size);
    }
    std::uint64_t digest() const { return hash_.digest(); }

private:
    int fd_;
    const std::string& path_;
    util::Xxh64Stream hash_;
};

}  // namespace

ReplayDump read_replay_dump(const std::string& path) {
    util::RegularFile file(path);  // a FIFO or a device is refused, never opened blocking
    if (!file.ok()) io_fail(path, file.error());
    const std::uint64_t file_bytes = file.size();
    FdReader in(file.release(), path);  // closes the descriptor
    if (file_bytes == 0) io_fail(path, "the file is empty (not a replay dump)");
    if (file_bytes < kReplayDumpHeaderBytes + kChecksumBytes)
        io_fail(path, fmt::format("too short: {} bytes (a replay dump has a {}-byte header and an {}-byte "
                                  "checksum); the file is truncated or not a replay dump",
                                  file_bytes, kReplayDumpHeaderBytes, kChecksumBytes));

    Header h;
    in.read(h, sizeof h);
    if (std::memcmp(h + kOffMagic, kReplayDumpMagic, sizeof kReplayDumpMagic) != 0)
        io_fail(path, "not a replay dump: the file does not start with the magic \"FHREPLAY\"");
    const std::uint32_t version = get_u32(h + kOffVersion);
    if (version != kReplayDumpVersion)
        io_fail(path, fmt::format("format version {} is not supported (this build reads version {})", version,
                                  kReplayDumpVersion));
    const std::uint32_t header_bytes = get_u32(h + kOffHeaderSize);
    if (header_bytes != kReplayDumpHeaderBytes)
        io_fail(path, fmt::format("invalid header: header size {}, expected {} for version {}", header_bytes,
                                  kReplayDumpHeaderBytes, kReplayDumpVersion));
    for (std::size_t i = kOffReserved; i < kReplayDumpHeaderBytes; ++i)
        if (h[i] != 0) io_fail(path, fmt::format("invalid header: reserved byte {} is {}, expected 0", i, h[i]));

    ReplayDump d;
    d.state_dim = static_cast<std::int32_t>(get_u32(h + kOffStateDim));
    d.n_envs = static_cast<std::int32_t>(get_u32(h + kOffEnvs));
    d.capacity_steps = static_cast<std::int32_t>(get_u32(h + kOffCapacity));
    d.num_actions = static_cast<std::int32_t>(get_u32(h + kOffActions));
    d.pushed_steps = static_cast<std::int64_t>(get_u64(h + kOffPushed));
    Sizes sz;
    const std::string problem =
        check_dimensions(d.state_dim, d.n_envs, d.capacity_steps, d.num_actions, d.pushed_steps, sz);
    if (!problem.empty()) io_fail(path, "invalid header: " + problem);
    if (sz.file_bytes != file_bytes)
        io_fail(path, fmt::format("the file has {} bytes but its header (state_dim {}, n_envs {}, capacity_steps {}) "
                                  "describes {}; the file is {}",
                                  file_bytes, d.state_dim, d.n_envs, d.capacity_steps, sz.file_bytes,
                                  file_bytes < sz.file_bytes ? "truncated" : "longer than its content (corrupt)"));

    // Sizes are now bounded by the file's real length: allocating them is safe.
    d.states.resize(static_cast<std::size_t>(sz.state_floats));
    d.next_states.resize(static_cast<std::size_t>(sz.state_floats));
    d.rewards.resize(static_cast<std::size_t>(sz.rows));
    d.actions.resize(static_cast<std::size_t>(sz.rows));
    d.done.resize(static_cast<std::size_t>(sz.rows));
    in.read(d.states.data(), d.states.size() * sizeof(float));
    in.read(d.next_states.data(), d.next_states.size() * sizeof(float));
    in.read(d.rewards.data(), d.rewards.size() * sizeof(float));
    in.read(d.actions.data(), d.actions.size() * sizeof(int));
    in.read(d.done.data(), d.done.size());
    const std::uint64_t actual = in.digest();
    unsigned char sum[kChecksumBytes];
    in.read(sum, sizeof sum, /*hashed=*/false);
    if (get_u64(sum) != actual)
        io_fail(path, fmt::format("checksum mismatch: the content hashes to {:016x} but the file says {:016x}; the "
                                  "file is corrupt",
                                  actual, get_u64(sum)));

    for (std::size_t i = 0; i < d.actions.size(); ++i)
        if (d.actions[i] < 0 || d.actions[i] >= d.num_actions)
            io_fail(path, fmt::format("action {} at row {} is outside [0, {})", d.actions[i], i, d.num_actions));
    for (std::size_t i = 0; i < d.done.size(); ++i)
        if (d.done[i] > 2) io_fail(path, fmt::format("done flag {} at row {} is not 0, 1 or 2", d.done[i], i));
    return d;
}

}  // namespace fh::io
