/// @file rng.h
/// @brief Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11):
///        a counter-based generator, so a random number is a pure function of (seed, purpose,
///        stream, counter). The CPU and CUDA backends compute identical numbers in any order,
///        which is what makes the same seed give the same episodes and exploration on both.
#pragma once

#include <cstdint>

#include "math/host_device.h"

namespace fh::rng {

struct U32x4 {
    std::uint32_t v[4];
};

FH_HD void mulhilo32(std::uint32_t a, std::uint32_t b, std::uint32_t& hi, std::uint32_t& lo) {
    const std::uint64_t p = static_cast<std::uint64_t>(a) * b;
    hi = static_cast<std::uint32_t>(p >> 32);
    lo = static_cast<std::uint32_t>(p);
}

/// The raw Philox4x32-10 bijection of a 128-bit counter under a 64-bit key.
FH_HD U32x4 philox4x32_10(U32x4 ctr, std::uint32_t k0, std::uint32_t k1) {
    for (int round = 0; round < 10; ++round) {
        std::uint32_t hi0, lo0, hi1, lo1;
        mulhilo32(0xD2511F53u, ctr.v[0], hi0, lo0);
        mulhilo32(0xCD9E8D57u, ctr.v[2], hi1, lo1);
        ctr = U32x4{{hi1 ^ ctr.v[1] ^ k0, lo1, hi0 ^ ctr.v[3] ^ k1, lo0}};
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    return ctr;
}

/// What a random draw is for; each purpose is an independent stream family.
enum class Purpose : std::uint32_t {
    episode_start = 1,      ///< stream = environment index, counter = its episode number
    random_action = 2,      ///< stream = environment index, counter = global step
    exploration = 3,        ///< epsilon-greedy coin flips
    replay_sample = 4,      ///< stream = batch row, counter = update number
    init = 5,               ///< parameter initialisation
    minibatch = 6,          ///< shuffles: stream = epoch, counter = permutation round
    policy_sample = 7,      ///< PPO action sampling: stream = environment index, counter = global step
    behaviour = 8,          ///< IQL behaviour policy: stream = environment index, counter = global step
    supervised_sample = 9,  ///< supervised batches: stream = batch row, counter = update number
    dt_sample = 10,         ///< Decision Transformer windows: stream = batch row, counter = update number
    iqn_tau = 11,           ///< IQN quantile fractions: stream = batch row, counter = (update << 8) | tau / 4
    bootstrap_mask = 12,    ///< DQN ensemble masks: stream = environment index, counter = step * 8 + head / 4
    her_goal = 13,          ///< DQN HER episode goals: stream = environment index, counter = its episode number
    her_relabel = 14,       ///< DQN HER relabelling: stream = batch row, counter = update number
    bootstrap = 15,         ///< backtest block bootstrap (host): stream = resample, counter = block number
    audit = 16,             ///< look-ahead audit (host): stream 0 the random cuts (counter = cut number),
                            ///< stream 1 + cut bar the replacement bars (counter = bar)
    search = 17,            ///< population search (host, src/run/search.cpp): stream = what is drawn, counter = draw
};

/// Four independent 32-bit words for (seed, purpose, stream, counter).
FH_HD U32x4 draw(std::uint64_t seed, Purpose purpose, std::uint32_t stream, std::uint64_t counter) {
    const U32x4 ctr{{static_cast<std::uint32_t>(counter), static_cast<std::uint32_t>(counter >> 32), stream,
                     static_cast<std::uint32_t>(purpose)}};
    return philox4x32_10(ctr, static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32));
}

/// Maps a 32-bit word to [0, n) by multiply-shift (exact integer arithmetic on both backends;
/// bias below n / 2^32).
FH_HD std::uint32_t below(std::uint32_t word, std::uint32_t n) {
    return static_cast<std::uint32_t>((static_cast<std::uint64_t>(word) * n) >> 32);
}

/// A double in [0, 1) from two words (53 random bits; exact on both backends).
FH_HD double unit_double(std::uint32_t hi, std::uint32_t lo) {
    const std::uint64_t bits = ((static_cast<std::uint64_t>(hi) << 32) | lo) >> 11;
    return static_cast<double>(bits) * (1.0 / 9007199254740992.0);
}

/// A float in [0, 1) from one word (24 random bits).
FH_HD float unit_float(std::uint32_t w) {
    return static_cast<float>(w >> 8) * (1.0f / 16777216.0f);
}

}  // namespace fh::rng
