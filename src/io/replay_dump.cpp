/// @file replay_dump.cpp
/// @brief The replay dump writer and its strict reader (docs/replay-dump.md).
#include "io/replay_dump.hpp"

#include "io/atomic_file.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <span>
#include <type_traits>
#include <cerrno>
#include <cstring>
#include <cstddef>
#include <limits>
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
// The header as the file holds it (the host is little-endian): the magic, u32 version, u32 header
// size, the dimensions (i32 state_dim, n_envs, capacity_steps, num_actions, i64 pushed_steps) and
// zeros up to kReplayDumpHeaderBytes.
struct Header {
    char magic[8];
    std::uint32_t version, header_bytes;
    ReplayDumpInfo dims;
    unsigned char reserved[24];
};
static_assert(sizeof(ReplayDumpInfo) == 24 && offsetof(Header, dims) == 16 && sizeof(Header) == kReplayDumpHeaderBytes,
              "the header's layout is the file's");
constexpr std::size_t kChecksumBytes = 8;

/// The sizes a header describes.
struct Sizes {
    std::uint64_t rows = 0;          ///< capacity_steps * n_envs
    std::uint64_t state_floats = 0;  ///< rows * state_dim
    std::uint64_t file_bytes = 0;    ///< header + arrays + checksum
};

/// What is wrong with the dimensions, or an empty string. Also computes the sizes.
std::string check_dimensions(const ReplayDumpInfo& d, Sizes& sizes) {
    auto range = [](const char* name, long long v, long long hi) {
        return v < 1 || v > hi ? fmt::format("{} is {}, expected 1..{}", name, v, hi) : std::string();
    };
    for (const std::string& s :
         {range("state_dim", d.state_dim, kReplayDumpMaxStateDim), range("n_envs", d.n_envs, kReplayDumpMaxEnvs),
          range("capacity_steps", d.capacity_steps, std::numeric_limits<int>::max()),
          range("num_actions", d.num_actions, kReplayDumpMaxActions)})
        if (!s.empty()) return s;
    if (d.pushed_steps < 0) return fmt::format("pushed_steps is {}, expected >= 0", d.pushed_steps);
    const std::uint64_t rows = static_cast<std::uint64_t>(d.capacity_steps) * static_cast<std::uint64_t>(d.n_envs);
    // header + 2 state arrays (4 bytes a float) + rewards, actions (4 bytes) + done (1) + checksum
    std::uint64_t floats = 0, state_bytes = 0, row_bytes = 0, bytes = 0;
    if (__builtin_mul_overflow(rows, static_cast<std::uint64_t>(d.state_dim), &floats) ||
        __builtin_mul_overflow(floats, 8, &state_bytes) || __builtin_mul_overflow(rows, 9, &row_bytes) ||
        __builtin_add_overflow(state_bytes, row_bytes, &bytes) ||
        __builtin_add_overflow(bytes, kReplayDumpHeaderBytes + kChecksumBytes, &bytes))
        return "the dimensions describe more than 2^64 bytes";
    sizes = Sizes{rows, floats, bytes};
    return {};
}

// ---- writing ---------------------------------------------------------------------------------

[[noreturn]] void io_fail(const std::string& path, const std::string& what) {
    throw DataError(fmt::format("replay dump {}: {}", path, what));
}

}  // namespace

void write_replay_dump(const std::string& path, const ReplayDump& d) {
    Sizes sz;
    const std::string problem = check_dimensions(d, sz);
    if (!problem.empty()) throw std::invalid_argument(fmt::format("write_replay_dump {}: {}", path, problem));
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
            throw std::invalid_argument(
                fmt::format("write_replay_dump {}: done flag {} at row {} is not 0, 1 or 2", path, d.done[i], i));

    Header h{};
    std::memcpy(h.magic, kReplayDumpMagic, sizeof h.magic);
    h.version = kReplayDumpVersion;
    h.header_bytes = kReplayDumpHeaderBytes;
    h.dims = d;

    // Atomically (io::AtomicFile), with the checksum computed while writing.
    AtomicFile file(path, [&](const std::string& m) { io_fail(path, m); });
    util::Xxh64Stream hash;
    auto put = [&](const void* data, std::size_t size) {
        hash.update(data, size);
        file.write(data, size);
    };
    put(&h, sizeof h);
    put(d.states.data(), d.states.size() * sizeof(float));
    put(d.next_states.data(), d.next_states.size() * sizeof(float));
    put(d.rewards.data(), d.rewards.size() * sizeof(float));
    put(d.actions.data(), d.actions.size() * sizeof(int));
    put(d.done.data(), d.done.size());
    const std::uint64_t sum = hash.digest();
    file.write(&sum, sizeof sum);
    file.commit();
}

// ---- reading ---------------------------------------------------------------------------------

namespace {

/// Reads a file that stays open meanwhile, hashing what it reads.
struct FdReader {
    int fd;
    const std::string& path;
    util::Xxh64Stream hash;

    /// Reads exactly `size` bytes (hashed unless `hashed` is false).
    void read(void* data, std::size_t size, bool hashed = true) {
        auto* p = static_cast<char*>(data);
        std::size_t left = size;
        while (left > 0) {
            const ssize_t n = ::read(fd, p, std::min<std::size_t>(left, std::size_t{1} << 30));
            if (n < 0) {
                if (errno == EINTR) continue;
                io_fail(path, fmt::format("cannot read: {}", std::strerror(errno)));
            }
            if (n == 0) io_fail(path, "unexpected end of file (the file was truncated while it was read)");
            p += n;
            left -= static_cast<std::size_t>(n);
        }
        if (hashed) hash.update(data, size);
    }
};

/// Reads and checks a whole dump: the header, then every array in order, hashed as it is read
/// and validated (finite states and rewards in the written rows, actions and done flags in
/// range), then the checksum. With `keep` the arrays are stored in *keep; without, they are read
/// in chunks of at most 1 MiB and dropped (a dump is verified without holding it in memory).
ReplayDumpInfo scan_replay_dump(const std::string& path, bool header_only, ReplayDump* keep) {
    util::RegularFile file(path);  // a FIFO or a device is refused, never opened blocking
    if (!file.ok()) io_fail(path, file.error());
    const std::uint64_t file_bytes = file.size();
    FdReader in{file.fd(), path, util::Xxh64Stream()};  // `file` closes the descriptor
    if (file_bytes == 0) io_fail(path, "the file is empty (not a replay dump)");
    if (file_bytes < kReplayDumpHeaderBytes + kChecksumBytes)
        io_fail(path, fmt::format("too short: {} bytes (a replay dump has a {}-byte header and an {}-byte "
                                  "checksum); the file is truncated or not a replay dump",
                                  file_bytes, kReplayDumpHeaderBytes, kChecksumBytes));

    Header h;
    in.read(&h, sizeof h);
    if (std::memcmp(h.magic, kReplayDumpMagic, sizeof h.magic) != 0)
        io_fail(path, "not a replay dump: the file does not start with the magic \"FHREPLAY\"");
    if (h.version != kReplayDumpVersion)
        io_fail(path, fmt::format("format version {} is not supported (this build reads version {})", h.version,
                                  kReplayDumpVersion));
    if (h.header_bytes != kReplayDumpHeaderBytes)
        io_fail(path, fmt::format("invalid header: header size {}, expected {} for version {}", h.header_bytes,
                                  kReplayDumpHeaderBytes, kReplayDumpVersion));
    for (std::size_t i = 0; i < sizeof h.reserved; ++i)
        if (h.reserved[i] != 0)
            io_fail(path, fmt::format("invalid header: reserved byte {} is {}, expected 0",
                                      offsetof(Header, reserved) + i, h.reserved[i]));

    const ReplayDumpInfo info = h.dims;
    Sizes sz;
    const std::string problem = check_dimensions(info, sz);
    if (!problem.empty()) io_fail(path, "invalid header: " + problem);
    if (sz.file_bytes != file_bytes)
        io_fail(path, fmt::format("the file has {} bytes but its header (state_dim {}, n_envs {}, capacity_steps {}) "
                                  "describes {}; the file is {}",
                                  file_bytes, info.state_dim, info.n_envs, info.capacity_steps, sz.file_bytes,
                                  file_bytes < sz.file_bytes ? "truncated" : "longer than its content (corrupt)"));
    if (header_only) return info;

    // Rows of steps that were never pushed are unwritten (whatever the memory held): only the
    // written rows, [0, min(pushed, capacity) * n_envs), must hold finite values.
    const std::uint64_t written = info.transitions();
    const std::uint64_t D = static_cast<std::uint64_t>(info.state_dim);
    // Sizes are bounded by the file's real length: allocating them is safe.
    if (keep) static_cast<ReplayDumpInfo&>(*keep) = info;
    // The first bad value is reported after the checksum: a corrupt file says "checksum
    // mismatch" (the file is damaged), a well-formed one with bad values names the value.
    std::string bad_value;
    const auto note = [&](std::string m) {
        if (bad_value.empty()) bad_value = std::move(m);
    };
    // One array: `count` elements of T, read into `dest` (keep) or through a bounded buffer,
    // each chunk checked by check(chunk, first element index).
    const auto array = [&](auto* dest, std::uint64_t count, const auto& check) {
        using T = std::remove_pointer_t<decltype(dest->data())>;
        if (keep) {
            dest->resize(static_cast<std::size_t>(count));
            in.read(dest->data(), dest->size() * sizeof(T));
            check(std::span<const T>(*dest), std::uint64_t{0});
            return;
        }
        std::vector<T> chunk;
        const std::uint64_t step = std::max<std::uint64_t>(1, (std::uint64_t{1} << 20) / sizeof(T));
        for (std::uint64_t at = 0; at < count; at += step) {
            chunk.resize(static_cast<std::size_t>(std::min(step, count - at)));
            in.read(chunk.data(), chunk.size() * sizeof(T));
            check(std::span<const T>(chunk), at);
        }
    };
    const auto finite_states = [&](const char* what) {
        return [&, what](std::span<const float> v, std::uint64_t first) {
            for (std::size_t i = 0; i < v.size(); ++i) {
                const std::uint64_t row = (first + i) / D;
                if (row < written && !std::isfinite(v[i]) && bad_value.empty())
                    note(
                        fmt::format("{} of row {} (feature {}) is {}: the dump holds non-finite values "
                                    "(was it written by a diverged run?)",
                                    what, row, (first + i) % D, v[i]));
            }
        };
    };
    std::vector<float> states, next_states, rewards;
    std::vector<int> actions;
    std::vector<std::uint8_t> done;
    array(keep ? &keep->states : &states, sz.state_floats, finite_states("the state"));
    array(keep ? &keep->next_states : &next_states, sz.state_floats, finite_states("the next state"));
    array(keep ? &keep->rewards : &rewards, sz.rows, [&](std::span<const float> v, std::uint64_t first) {
        for (std::size_t i = 0; i < v.size(); ++i)
            if (first + i < written && !std::isfinite(v[i]) && bad_value.empty())
                note(fmt::format("the reward of row {} is {}: the dump holds non-finite values", first + i, v[i]));
    });
    array(keep ? &keep->actions : &actions, sz.rows, [&](std::span<const int> v, std::uint64_t first) {
        for (std::size_t i = 0; i < v.size(); ++i)
            if ((v[i] < 0 || v[i] >= info.num_actions) && bad_value.empty())
                note(fmt::format("action {} at row {} is outside [0, {})", v[i], first + i, info.num_actions));
    });
    array(keep ? &keep->done : &done, sz.rows, [&](std::span<const std::uint8_t> v, std::uint64_t first) {
        for (std::size_t i = 0; i < v.size(); ++i)
            if (v[i] > 2 && bad_value.empty())
                note(fmt::format("done flag {} at row {} is not 0, 1 or 2", v[i], first + i));
    });
    const std::uint64_t actual = in.hash.digest();
    std::uint64_t sum = 0;
    in.read(&sum, sizeof sum, /*hashed=*/false);
    if (sum != actual)
        io_fail(path, fmt::format("checksum mismatch: the content hashes to {:016x} but the file says {:016x}; the "
                                  "file is corrupt",
                                  actual, sum));
    if (!bad_value.empty()) io_fail(path, bad_value);
    return info;
}

}  // namespace

std::uint64_t ReplayDumpInfo::transitions() const noexcept {
    const long long steps = std::min<long long>(pushed_steps, capacity_steps);
    return static_cast<std::uint64_t>(std::max(0LL, steps)) * static_cast<std::uint64_t>(std::max(0, n_envs));
}

ReplayDump read_replay_dump(const std::string& path) {
    ReplayDump d;
    scan_replay_dump(path, false, &d);
    return d;
}

ReplayDumpInfo read_replay_dump_info(const std::string& path) {
    return scan_replay_dump(path, true, nullptr);
}

ReplayDumpInfo verify_replay_dump(const std::string& path) {
    return scan_replay_dump(path, false, nullptr);
}

}  // namespace fh::io
