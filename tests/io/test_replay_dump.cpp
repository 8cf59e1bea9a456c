/// @file test_replay_dump.cpp
/// @brief Replay dumps (docs/replay-dump.md): a round trip, the documented byte layout, and every
///        corruption refused with an fh::DataError that names the file and the problem.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "io/replay_dump.hpp"
#include "util/errors.hpp"
#include "util/xxh64.hpp"

using fh::io::ReplayDump;
namespace fs = std::filesystem;

namespace {

struct TempDir {
    fs::path path;
    TempDir() {
        static int counter = 0;
        path = fs::temp_directory_path() /
               ("fh-replay-test-" + std::to_string(::getpid()) + "-" + std::to_string(++counter));
        fs::remove_all(path);
        fs::create_directories(path);
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
};

using Bytes = std::vector<unsigned char>;

Bytes read_bytes(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return Bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_bytes(const fs::path& p, const Bytes& b) {
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

void put_u32(Bytes& b, std::size_t at, std::uint32_t v) {
    for (int i = 0; i < 4; ++i) b[at + i] = static_cast<unsigned char>((v >> (8 * i)) & 0xFF);
}
void put_u64(Bytes& b, std::size_t at, std::uint64_t v) {
    for (int i = 0; i < 8; ++i) b[at + i] = static_cast<unsigned char>((v >> (8 * i)) & 0xFF);
}
std::uint64_t get_u64(const Bytes& b, std::size_t at) {
    std::uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | b[at + i];
    return v;
}

/// Recomputes the trailing checksum, so that a test reaches the check after it.
void reseal(Bytes& b) {
    put_u64(b, b.size() - 8, fh::util::xxh64(b.data(), b.size() - 8));
}

ReplayDump sample_dump() {
    ReplayDump d;
    d.state_dim = 5;
    d.n_envs = 3;
    d.capacity_steps = 4;
    d.num_actions = 9;
    d.pushed_steps = 6;  // the ring has wrapped
    const std::size_t rows = 12;
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-3.f, 3.f);
    for (std::size_t i = 0; i < rows * 5; ++i) {
        d.states.push_back(u(rng));
        d.next_states.push_back(u(rng));
    }
    for (std::size_t i = 0; i < rows; ++i) {
        d.rewards.push_back(u(rng));
        d.actions.push_back(static_cast<int>(i * 5 % 9));
        d.done.push_back(static_cast<std::uint8_t>(i % 5 == 0 ? 1 : i % 7 == 0 ? 2 : 0));
    }
    return d;
}

/// Header offsets of docs/replay-dump.md.
constexpr std::size_t kVersion = 8, kHeaderSize = 12, kStateDim = 16, kEnvs = 20, kCapacity = 24, kActions = 28,
                      kPushed = 32, kReserved = 40, kData = 64;

/// Reading `p` throws fh::DataError (exit code 3) "replay dump <p>: ..." containing `what`.
void require_refused(const fs::path& p, const std::string& what) {
    INFO("expecting: " << what);
    try {
        (void)fh::io::read_replay_dump(p.string());
        FAIL("the file was accepted");
    } catch (const fh::DataError& e) {
        const std::string m = e.what();
        INFO("message: " << m);
        CHECK(e.code() == fh::ExitCode::data);
        CHECK(m.rfind("replay dump " + p.string() + ": ", 0) == 0);
        CHECK(m.find(what) != std::string::npos);
    }
}

}  // namespace

TEST_CASE("replay dump: round trip and the documented layout", "[replay]") {
    TempDir dir;
    const fs::path p = dir.path / "replay.fhreplay";
    const ReplayDump d = sample_dump();
    fh::io::write_replay_dump(p.string(), d);
    const ReplayDump r = fh::io::read_replay_dump(p.string());
    CHECK(r.state_dim == d.state_dim);
    CHECK(r.n_envs == d.n_envs);
    CHECK(r.capacity_steps == d.capacity_steps);
    CHECK(r.num_actions == d.num_actions);
    CHECK(r.pushed_steps == d.pushed_steps);
    CHECK(r.states == d.states);
    CHECK(r.next_states == d.next_states);
    CHECK(r.rewards == d.rewards);
    CHECK(r.actions == d.actions);
    CHECK(r.done == d.done);

    // Layout: 64-byte header, arrays in order, trailing XXH64 of everything before it.
    const Bytes b = read_bytes(p);
    const std::size_t rows = 12;
    REQUIRE(b.size() == 64 + rows * (2 * 5 * 4 + 4 + 4 + 1) + 8);
    CHECK(std::memcmp(b.data(), "FHREPLAY", 8) == 0);
    CHECK(b[kVersion] == 1);
    CHECK(b[kHeaderSize] == 64);
    CHECK(b[kStateDim] == 5);
    CHECK(b[kEnvs] == 3);
    CHECK(b[kCapacity] == 4);
    CHECK(b[kActions] == 9);
    CHECK(get_u64(b, kPushed) == 6);
    for (std::size_t i = kReserved; i < kData; ++i) CHECK(b[i] == 0);
    float first_state = 0, first_next = 0, first_reward = 0;
    int last_action = 0;
    std::memcpy(&first_state, &b[kData], 4);
    std::memcpy(&first_next, &b[kData + rows * 5 * 4], 4);
    std::memcpy(&first_reward, &b[kData + 2 * rows * 5 * 4], 4);
    std::memcpy(&last_action, &b[kData + 2 * rows * 5 * 4 + rows * 4 + (rows - 1) * 4], 4);
    CHECK(first_state == d.states[0]);
    CHECK(first_next == d.next_states[0]);
    CHECK(first_reward == d.rewards[0]);
    CHECK(last_action == d.actions[rows - 1]);
    CHECK(b[b.size() - 9] == d.done[rows - 1]);
    CHECK(get_u64(b, b.size() - 8) == fh::util::xxh64(b.data(), b.size() - 8));

    // Overwriting is atomic and leaves no temporary behind.
    ReplayDump d2 = d;
    d2.pushed_steps = 100;
    fh::io::write_replay_dump(p.string(), d2);
    CHECK(fh::io::read_replay_dump(p.string()).pushed_steps == 100);
    int files = 0;
    for (const auto& entry : fs::directory_iterator(dir.path)) {
        (void)entry;
        ++files;
    }
    CHECK(files == 1);
}

TEST_CASE("replay dump: every corruption is refused with a DataError naming the file and the problem", "[replay]") {
    TempDir dir;
    const fs::path good = dir.path / "good.fhreplay", bad = dir.path / "bad.fhreplay";
    fh::io::write_replay_dump(good.string(), sample_dump());
    const Bytes ok = read_bytes(good);
    auto refused = [&](Bytes b, const std::string& what) {
        write_bytes(bad, b);
        require_refused(bad, what);
    };

    SECTION("a flipped byte in the data or in the checksum") {
        for (std::size_t at : {kData, kData + 100, ok.size() - 9, ok.size() - 1}) {
            INFO("byte " << at);
            Bytes b = ok;
            b[at] ^= 0x10;
            refused(b, "checksum mismatch");
        }
    }
    SECTION("truncation") {
        refused(Bytes(ok.begin(), ok.end() - 1), "truncated");
        refused(Bytes(ok.begin(), ok.begin() + static_cast<long>(ok.size() / 2)), "truncated");
        refused(Bytes(ok.begin(), ok.begin() + 70), "too short");
        refused(Bytes(ok.begin(), ok.begin() + 10), "too short");
    }
    SECTION("trailing bytes") {
        Bytes b = ok;
        b.push_back(0);
        refused(b, "longer than its content");
    }
    SECTION("wrong magic") {
        Bytes b = ok;
        b[2] = 'X';
        refused(b, "magic");
    }
    SECTION("unknown version") {
        Bytes b = ok;
        put_u32(b, kVersion, 2);
        reseal(b);
        refused(b, "format version 2 is not supported");
    }
    SECTION("bad header fields") {
        struct Field {
            std::size_t at;
            std::uint32_t value;
            const char* message;
        };
        for (const Field& f :
             {Field{kHeaderSize, 32, "header size 32"}, Field{kStateDim, 0, "state_dim is 0"},
              Field{kEnvs, 0, "n_envs is 0"}, Field{kCapacity, 0, "capacity_steps is 0"},
              Field{kActions, 0, "num_actions is 0"}, Field{kStateDim, 0xFFFFFFFFu, "state_dim is -1"},
              Field{kStateDim, 1u << 30, "state_dim is 1073741824"}, Field{kEnvs, 0x7FFFFFFFu, "n_envs is 2147483647"},
              Field{kCapacity, 5, "describes"},  // consistent numbers, wrong length
              Field{kReserved + 3, 1, "reserved byte 43"}}) {
            INFO("offset " << f.at);
            Bytes b = ok;
            put_u32(b, f.at, f.value);
            reseal(b);
            refused(b, f.message);
        }
        Bytes b = ok;
        put_u64(b, kPushed, static_cast<std::uint64_t>(-1));
        reseal(b);
        refused(b, "pushed_steps is -1");
        // The largest dimensions that pass the range checks describe far more bytes than the file
        // holds: refused on the length, before anything is allocated.
        b = ok;
        put_u32(b, kStateDim, 1u << 20);
        put_u32(b, kEnvs, 1u << 24);
        put_u32(b, kCapacity, 0x7FFFFFFFu);
        reseal(b);
        refused(b, "describe more than 2^64 bytes");
    }
    SECTION("an action or a done flag out of range (with a valid checksum)") {
        const std::size_t rows = 12, actions_at = kData + 2 * rows * 5 * 4 + rows * 4, done_at = actions_at + rows * 4;
        Bytes b = ok;
        put_u32(b, actions_at + 4 * 3, 9);
        reseal(b);
        refused(b, "action 9 at row 3 is outside [0, 9)");
        b = ok;
        put_u32(b, actions_at, 0xFFFFFFFFu);
        reseal(b);
        refused(b, "action -1 at row 0");
        b = ok;
        b[done_at + 5] = 3;
        reseal(b);
        refused(b, "done flag 3 at row 5");
    }
    SECTION("an empty file, a missing file, a directory") {
        refused(Bytes{}, "empty");
        require_refused(dir.path / "missing.fhreplay", "cannot open");
        require_refused(dir.path, "not a regular file");
    }
    SECTION("random garbage never crashes and is always refused") {
        std::mt19937 rng(123);
        for (std::size_t n : {1u, 7u, 63u, 64u, 72u, 73u, 500u, 4096u, 20000u}) {
            for (int rep = 0; rep < 5; ++rep) {
                Bytes b(n);
                for (auto& x : b) x = static_cast<unsigned char>(rng());
                write_bytes(bad, b);
                CHECK_THROWS_AS(fh::io::read_replay_dump(bad.string()), fh::DataError);
                if (n >= 8) {  // the right magic and version, garbage after them
                    std::memcpy(b.data(), "FHREPLAY", 8);
                    if (n >= 16) {
                        put_u32(b, kVersion, 1);
                        put_u32(b, kHeaderSize, 64);
                    }
                    write_bytes(bad, b);
                    CHECK_THROWS_AS(fh::io::read_replay_dump(bad.string()), fh::DataError);
                }
            }
        }
        // Random bytes in the data section of a good header: a checksum mismatch.
        Bytes b = ok;
        for (std::size_t i = kData; i < b.size(); ++i) b[i] = static_cast<unsigned char>(rng());
        refused(b, "checksum mismatch");
    }
}

TEST_CASE("replay dump: the writer refuses an inconsistent dump and reports I/O failures", "[replay]") {
    TempDir dir;
    const fs::path p = dir.path / "x.fhreplay";
    auto refuses = [&](ReplayDump d) {
        CHECK_THROWS_AS(fh::io::write_replay_dump(p.string(), d), std::invalid_argument);
        CHECK_FALSE(fs::exists(p));
    };
    ReplayDump d = sample_dump();
    d.states.pop_back();
    refuses(d);
    d = sample_dump();
    d.actions[2] = 9;
    refuses(d);
    d = sample_dump();
    d.done[0] = 7;
    refuses(d);
    d = sample_dump();
    d.n_envs = 0;
    refuses(d);
    d = sample_dump();
    d.pushed_steps = -3;
    refuses(d);
    const std::string missing = (dir.path / "no-such-dir" / "x.fhreplay").string();
    try {
        fh::io::write_replay_dump(missing, sample_dump());
        FAIL("written into a missing directory");
    } catch (const fh::DataError& e) {
        CHECK(std::string(e.what()).find("cannot create") != std::string::npos);
    }
}

TEST_CASE("replay dump: non-finite values are refused whatever the checksum; unwritten rows are not read", "[replay]") {
    TempDir dir;
    const fs::path p = dir.path / "d.fhreplay";
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    // A dump written by a diverged run: the writer does not judge values, the reader must.
    auto with = [&](auto edit) {
        ReplayDump d = sample_dump();
        edit(d);
        fh::io::write_replay_dump(p.string(), d);  // a valid file with a matching checksum
    };
    with([&](ReplayDump& d) { d.states[7] = nan; });
    require_refused(p, "the state of row 1 (feature 2) is nan");
    CHECK_THROWS_AS(fh::io::verify_replay_dump(p.string()), fh::DataError);  // the streaming check too
    CHECK(fh::io::read_replay_dump_info(p.string()).n_envs == 3);            // the header alone is fine
    with([&](ReplayDump& d) { d.next_states[59] = -inf; });
    require_refused(p, "the next state of row 11 (feature 4) is -inf");
    with([&](ReplayDump& d) { d.rewards[4] = inf; });
    require_refused(p, "the reward of row 4 is inf");

    // pushed_steps 2 of capacity 4 (3 environments): rows 6.. were never written, whatever
    // they hold (device memory is not cleared), and are not judged.
    with([&](ReplayDump& d) {
        d.pushed_steps = 2;
        for (std::size_t i = 6 * 5; i < d.states.size(); ++i) d.states[i] = nan;
        d.rewards[11] = nan;
    });
    const auto d = fh::io::read_replay_dump(p.string());
    CHECK(d.pushed_steps == 2);
    const auto info = fh::io::verify_replay_dump(p.string());
    CHECK(info.transitions() == 6);
    with([&](ReplayDump& dd) {
        dd.pushed_steps = 2;
        dd.states[5 * 5 + 1] = nan;  // row 5 was written
    });
    require_refused(p, "the state of row 5");
}

TEST_CASE("replay dump: the streaming check reads a large dump in bounded chunks", "[replay]") {
    TempDir dir;
    const fs::path p = dir.path / "big.fhreplay";
    ReplayDump d;
    d.state_dim = 50;
    d.n_envs = 64;
    d.capacity_steps = 200;  // 12,800 rows: 5 MB of states, several chunks per array
    d.num_actions = 9;
    d.pushed_steps = 500;
    const std::size_t rows = 12800;
    d.states.assign(rows * 50, 0.5f);
    d.next_states.assign(rows * 50, 0.25f);
    d.rewards.assign(rows, 1.f);
    d.actions.assign(rows, 3);
    d.done.assign(rows, 0);
    d.next_states[rows * 50 - 1] = std::numeric_limits<float>::quiet_NaN();  // in the last chunk
    fh::io::write_replay_dump(p.string(), d);
    CHECK_THROWS_WITH(fh::io::verify_replay_dump(p.string()),
                      Catch::Contains("the next state of row 12799 (feature 49) is nan"));
    d.next_states[rows * 50 - 1] = 0;
    fh::io::write_replay_dump(p.string(), d);
    CHECK(fh::io::verify_replay_dump(p.string()).transitions() == rows);
}
