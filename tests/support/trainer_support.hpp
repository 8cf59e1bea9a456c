/// @file trainer_support.hpp
/// @brief Trainer tests' helpers: run a trainer as the pipeline does (collecting its log lines)
///        and snapshot its whole state (every state tensor's bytes) for exact comparisons.
#pragma once

#include <catch2/catch.hpp>

#include <cstddef>
#include <memory>
#include <utility>
#include <stdexcept>
#include <string>
#include <vector>

#include "config/profile.hpp"
#include "device/cuda/check.hpp"
#include "data/load.hpp"
#include "env/vec_env.hpp"
#include "io/replay_dump.hpp"
#include "trainers/dqn/engine.hpp"
#include "io/json.hpp"
#include "trainers/setup.hpp"
#include "trainers/trainer.hpp"

namespace fh::test {

/// Each agent's market on the device, loaded from its own profile (as the population driver
/// does): the engines take `views`.
struct AgentMarkets {
    std::vector<std::unique_ptr<env::DeviceMarket>> owned;
    std::vector<const env::DeviceMarket*> views;
    AgentMarkets(ops::Device& ops, const std::vector<config::Profile>& agents) {
        for (const auto& p : agents) {
            owned.push_back(std::make_unique<env::DeviceMarket>(ops, data::load_market(trainers::data_options(p))));
            views.push_back(owned.back().get());
        }
    }
};

/// A small DQN profile (8 environments of 40 steps on 3,000 synthetic bars, a 256-row replay,
/// two 32-wide layers): the agents of the population and search tests.
inline config::Profile small_dqn_profile(const std::vector<std::string>& overrides = {}) {
    const std::string text = R"(
[run]
trainer = "dqn"
seed = 7
[data]
synthetic_bars = 3000
cache_dir = ""
[experience]
gpu_n_episodes = 8
gpu_timesteps_per_episode = 40
[replay_buffer]
buffer_size = 256
min_replay_size = 64
batch_size = 32
[dqn]
hidden = [32, 32]
)";
    return config::resolve_profile_text(text, "test-profile", overrides);
}

/// training_loop over the profile's run.total_steps, one read_log per log interval.
inline std::vector<trainers::LogLine> run_training(trainers::Trainer& t, const config::Profile& p) {
    std::vector<trainers::LogLine> lines;
    trainers::LoopCallbacks cb;
    cb.log = [&](double seconds) { lines.push_back(t.read_log(seconds)); };
    trainers::training_loop(t, p.run.total_steps, p.run.log_interval, cb);
    return lines;
}

/// A number of a metrics line (REQUIREs that it is there and a number).
inline double metric(const trainers::LogLine& line, const char* key) {
    const auto* v = line.json.find(key);
    if (!v || !v->is_number()) throw std::runtime_error(std::string("metrics line has no number ") + key);
    return v->as_double();
}

/// The action histogram of a metrics line.
inline std::vector<long long> histogram(const trainers::LogLine& line) {
    std::vector<long long> h;
    for (const auto& c : line.json.find("charts/action_histogram")->as_array()) h.push_back(c.as_i64());
    return h;
}

/// The bytes of every state tensor, in state_tensors() order.
inline std::vector<std::vector<std::byte>> snapshot(ops::Device& ops, trainers::Trainer& t) {
    std::vector<std::vector<std::byte>> s;
    for (const auto& st : t.state_tensors()) s.push_back(ops.to_host<std::byte>(st.bytes));
    return s;
}

/// While alive, every CUDA op is synchronised on its own: nothing is captured, no two streams
/// overlap (the reference a captured, overlapped run must equal).
struct OneByOne {
    OneByOne() { cuda::set_sync_debug(true); }
    ~OneByOne() { cuda::set_sync_debug(false); }
    OneByOne(const OneByOne&) = delete;
    OneByOne& operator=(const OneByOne&) = delete;
};

/// A trainer run as usual (captured sequences, two streams) and the same run with every op issued
/// alone: their log lines and final state snapshots.
struct CapturedAndOneByOne {
    std::vector<trainers::LogLine> captured_log, one_by_one_log;
    std::vector<std::vector<std::byte>> captured, one_by_one;
    /// The same losses on every log line and the same final state, bit for bit.
    void check_equal() const {
        REQUIRE(captured_log.size() == one_by_one_log.size());
        for (std::size_t i = 0; i < captured_log.size(); ++i) CHECK(captured_log[i].loss == one_by_one_log[i].loss);
        CHECK(captured == one_by_one);
    }
};
template <class MakeTrainer>
CapturedAndOneByOne run_captured_and_one_by_one(ops::Device& ops, const config::Profile& p, MakeTrainer make) {
    CapturedAndOneByOne r;
    {
        auto trainer = make();
        r.captured_log = run_training(*trainer, p);
        r.captured = snapshot(ops, *trainer);
    }
    const OneByOne one_by_one;
    auto trainer = make();
    r.one_by_one_log = run_training(*trainer, p);
    r.one_by_one = snapshot(ops, *trainer);
    return r;
}

/// An uninterrupted run of the profile against one stopped after `first_iterations`, its state
/// copied into a new trainer (as --resume does), restored and run to the end: every state tensor
/// must be equal, byte for byte. `make()` builds a trainer (std::unique_ptr); returns the two.
/// A metrics line without what depends on time (perf/*, rates per second).
inline std::string without_timing(const trainers::LogLine& line) {
    io::json::Object kept;
    for (const auto& [k, v] : line.json.as_object())
        if (k.rfind("perf/", 0) != 0 && k.find("per_s") == std::string::npos) kept.emplace_back(k, v);
    return io::json::serialize(io::json::Value::object(std::move(kept)));
}

/// The first run is stopped between two log lines (as an interrupt stops it), so the resumed
/// run's first line averages over updates on both sides of the checkpoint: every logged quantity
/// after the resume must equal the uninterrupted run's (timing aside).
template <class MakeTrainer>
auto check_resume_equivalence(ops::Device& ops, const config::Profile& p, int first_iterations, MakeTrainer make) {
    auto straight = make();
    const auto straight_log = run_training(*straight, p);
    auto first = make();
    {
        trainers::LoopCallbacks cb;
        cb.log = [&](double seconds) { (void)first->read_log(seconds); };
        cb.after_iteration = [&](long long it) { return it < first_iterations; };
        trainers::training_loop(*first, p.run.total_steps, p.run.log_interval, cb);
    }
    REQUIRE(first->iterations() == first_iterations);
    const auto state = snapshot(ops, *first);
    auto resumed = make();
    const auto tensors = resumed->state_tensors();
    for (std::size_t i = 0; i < tensors.size(); ++i) ops.upload<std::byte>(tensors[i].bytes, state[i]);
    resumed->restore_counter_values(first->counter_values());
    const auto resumed_log = run_training(*resumed, p);
    const auto a = snapshot(ops, *straight), b = snapshot(ops, *resumed);
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
        INFO(tensors[i].name);
        CHECK(a[i] == b[i]);
    }
    REQUIRE(resumed_log.size() <= straight_log.size());
    const std::size_t skip = straight_log.size() - resumed_log.size();
    for (std::size_t i = 0; i < resumed_log.size(); ++i) {
        INFO("metrics line " << i + 1 << " after the resume");
        CHECK(without_timing(resumed_log[i]) == without_timing(straight_log[skip + i]));
    }
    return std::pair{std::move(straight), std::move(resumed)};
}

/// A small DQN run's replay memory written to `path` as a replay dump: 400 transitions (8
/// environments x 50 steps, the ring full) of the 3000-bar synthetic market with seed 4 and the
/// default environment; an offline dataset for the IQL and dt tests.
inline void write_small_dqn_dump(ops::Device& ops, const std::string& path) {
    const auto dqn = config::resolve_profile_text(R"(
[run]
trainer = "dqn"
seed = 4
total_steps = 800
log_interval = 800
[data]
synthetic_bars = 3000
cache_dir = ""
[experience]
gpu_n_episodes = 8
gpu_timesteps_per_episode = 50
[replay_buffer]
buffer_size = 400
min_replay_size = 64
batch_size = 32
save_dump = true
[dqn]
hidden = [16]
)",
                                                  "dqn-dump-profile");
    const auto market = data::load_market(trainers::data_options(dqn));
    const env::DeviceMarket dm(ops, market);
    auto writer_engine = trainers::make_dqn_trainer(ops, dqn, dm);
    auto& writer = *writer_engine;
    run_training(writer, dqn);
    io::write_replay_dump(path, writer.replay_dump());
}

/// The bytes of trainer t's state tensor `name` (its checkpoint's), read to the host.
inline std::vector<std::byte> tensor_bytes(ops::Device& ops, trainers::Trainer& t, const std::string& name) {
    for (const auto& st : t.state_tensors())
        if (st.name == name) return ops.to_host<std::byte>(st.bytes);
    throw std::runtime_error("no state tensor " + name);
}

}  // namespace fh::test
