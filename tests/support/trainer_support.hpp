/// @file trainer_support.hpp
/// @brief Trainer tests' helpers: run a trainer as the pipeline does (collecting its log lines)
///        and snapshot its whole state (every state tensor's bytes) for exact comparisons.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "config/profile.hpp"
#include "cuda/check.hpp"
#include "trainers/trainer.hpp"

namespace fh::test {

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

}  // namespace fh::test
