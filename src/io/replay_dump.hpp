/// @file replay_dump.hpp
/// @brief Replay dumps: a DQN run's replay ring written to one binary file, the offline data set
///        of IQL. Little-endian, a fixed 64-byte header, the arrays in a fixed order and a
///        trailing XXH64 of every preceding byte (docs/replay-dump.md states the format).
///
/// Writing is atomic (a temporary file in the same directory, fsync, rename over the path,
/// fsync of the directory). Reading is strict: every problem (wrong magic, unknown version, a
/// header field out of range, a file length that does not match the header, truncation, a
/// checksum mismatch, an action or done flag out of range) throws fh::DataError (exit code 3)
/// whose message starts with "replay dump <path>: ". Nothing is allocated before the header's
/// sizes have been checked against the file's length.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fh::io {

/// A dump's dimensions.
struct ReplayDumpInfo {
    int state_dim = 0, n_envs = 0, capacity_steps = 0, num_actions = 0;
    long long pushed_steps = 0;  ///< steps ever pushed (rows of steps >= min(pushed, capacity) are unwritten)
    /// Transitions written: min(pushed_steps, capacity_steps) * n_envs.
    std::uint64_t transitions() const noexcept;
};

/// The replay ring of a DQN run. rows = capacity_steps * n_envs; row (s % capacity_steps) *
/// n_envs + e holds environment e's transition of step s (replay::ReplayView's layout).
struct ReplayDump : ReplayDumpInfo {
    std::vector<float> states, next_states, rewards;  ///< (rows, state_dim), (rows, state_dim), (rows)
    std::vector<int> actions;                         ///< (rows), in [0, num_actions)
    std::vector<std::uint8_t> done;                   ///< (rows), env::DoneFlag: 0, 1 or 2
};

/// The file's first 8 bytes.
inline constexpr char kReplayDumpMagic[8] = {'F', 'H', 'R', 'E', 'P', 'L', 'A', 'Y'};
/// The format version this build writes and reads.
inline constexpr std::uint32_t kReplayDumpVersion = 1;
/// Bytes of the version-1 header (the arrays start here).
inline constexpr std::uint32_t kReplayDumpHeaderBytes = 64;
/// Largest dimensions a reader accepts ("not absurd"; the file length bounds the rest).
inline constexpr int kReplayDumpMaxStateDim = 1 << 20;
inline constexpr int kReplayDumpMaxEnvs = 1 << 24;
inline constexpr int kReplayDumpMaxActions = 1 << 20;

/// Writes `dump` to `path` atomically. A dump whose vectors do not match its dimensions, or
/// whose actions or done flags are out of range, is refused with std::invalid_argument (a
/// programming error) before anything is written; an I/O failure throws fh::DataError naming the
/// path and the system error, leaving any previous file untouched.
void write_replay_dump(const std::string& path, const ReplayDump& dump);

/// Reads and validates `path` (see the file comment): also the contents, whatever the checksum
/// says: every state, next state and reward of a written row (steps < min(pushed_steps,
/// capacity_steps)) must be finite. Throws fh::DataError.
ReplayDump read_replay_dump(const std::string& path);

/// The header alone, checked (magic, version, dimensions, the file's length); the arrays are
/// not read. Throws fh::DataError.
ReplayDumpInfo read_replay_dump_info(const std::string& path);

/// Everything read_replay_dump checks, streaming through the file without keeping its arrays
/// (what `check` does with an iql.dataset). Throws fh::DataError.
ReplayDumpInfo verify_replay_dump(const std::string& path);

}  // namespace fh::io
