/// @file offline_dataset.cpp
#include "trainers/offline_dataset.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "io/replay_dump.hpp"
#include "abi/iql_behaviour.h"
#include "trainers/iql/engine.hpp"
#include "util/errors.hpp"
#include "util/log.hpp"
#include "abi/core_vector.h"

namespace fh::trainers {
namespace {

OfflineDataset collect_behaviour(ops::Device& ops, const config::Profile& profile, const env::DeviceMarket& market,
                                 const env::EnvParams& params, long long size, const char* key) {
    const auto t0 = std::chrono::steady_clock::now();
    const int n_envs = static_cast<int>(std::min<long long>(profile.experience.gpu_n_episodes, size));
    const int steps = static_cast<int>((size + n_envs - 1) / n_envs);
    OfflineDataset ds;
    ds.ring = ReplayRing(ops, n_envs, steps, params.state_dim);

    env::VecEnv venv(ops, market, env::Split::train, params, n_envs);
    venv.reset_all();
    const auto bp = behaviour_params(params, static_cast<std::uint64_t>(profile.run.seed));
    for (int step = 0; step < steps; ++step) {
        const auto slot = ds.ring.next_slot();
        ops::run(ops, ops::BehaviourActions{slot.actions, venv.states(), bp, static_cast<std::uint64_t>(step)});
        ops::run(ops, ops::Copy{slot.states, venv.states()});
        venv.step(slot.actions);
        ops::run(ops, ops::Copy{slot.rewards, venv.rewards()});
        ops::run(ops, ops::Copy{slot.next_states, venv.next_states()});
        ops.copy_raw(slot.done, venv.done());
        ds.ring.commit_slot();
    }
    ops.synchronize();
    ds.transitions = ds.ring.transitions();
    ds.collection_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    log::info("{} dataset: {} transitions from the behaviour policy ({} environments x {} steps) in {:.2f} s", key,
              ds.transitions, n_envs, steps, ds.collection_seconds);
    return ds;
}

OfflineDataset load_dump(ops::Device& ops, const env::EnvParams& params, const std::string& path, const char* key) {
    const auto dump = io::read_replay_dump(path);
    if (dump.state_dim != params.state_dim)
        throw DataError(
            fmt::format("{}: the replay dump's states have {} features, this profile's data gives {} "
                        "(was it written with another feature set or instrument?)",
                        path, dump.state_dim, params.state_dim));
    if (dump.num_actions != env::num_actions(params))
        throw DataError(
            fmt::format("{}: the replay dump has {} actions, this profile's environment has {} (set "
                        "env.position_levels and env.urgency_levels as in the run that wrote it)",
                        path, dump.num_actions, env::num_actions(params)));
    if (dump.pushed_steps < 1) throw DataError(path + ": the replay dump holds no transitions");
    OfflineDataset ds;
    ds.ring = ReplayRing(ops, dump);
    ds.transitions = ds.ring.transitions();
    log::info("{} dataset: {} transitions from the replay dump {} ({}.dataset_size is not used)", key, ds.transitions,
              path, key);
    return ds;
}

}  // namespace

std::uint64_t plan_offline_dataset(MemoryPlan& plan, const config::Profile& profile, int state_dim,
                                   const std::string& source, long long size, const char* key, const PlanInputs& in,
                                   std::uint64_t copies, bool transient) {
    const std::string table(key);
    std::uint64_t rows = in.dump_rows;
    if (source == "behaviour") {
        const int n_envs = static_cast<int>(std::min<long long>(profile.experience.gpu_n_episodes, size));
        rows = static_cast<std::uint64_t>((size + n_envs - 1) / n_envs) * static_cast<std::uint64_t>(n_envs);
        plan.consumer(fmt::format("behaviour-policy environments ({})", n_envs), "experience.gpu_n_episodes", true);
        plan.add<std::uint8_t>(table + " behaviour environments", env::VecEnv::device_bytes(1, n_envs, state_dim), 1,
                               2 * static_cast<std::uint64_t>(n_envs) * static_cast<std::uint64_t>(state_dim));
    } else {
        plan.host("the replay dump, read before it is uploaded", rows * (2 * state_dim * 4 + 9), table + ".dataset");
    }
    const auto D = static_cast<std::uint64_t>(state_dim);
    plan.consumer(fmt::format("offline dataset ({} transitions x {} B)", rows, 2 * D * 4 + 9),
                  table + (source == "behaviour" ? ".dataset_size" : ".dataset"), transient);
    plan.add<float>(table + " dataset states", rows * D, 2 * copies);
    plan.add<float>(table + " dataset rewards", rows, copies);
    plan.add<int>(table + " dataset actions", rows, copies);
    plan.add<std::uint8_t>(table + " dataset done flags", rows, copies);
    return rows;
}

OfflineDataset build_offline_dataset(ops::Device& ops, const config::Profile& profile, const env::DeviceMarket& market,
                                     const env::EnvParams& params, const std::string& source, long long size,
                                     const char* key) {
    if (source == "behaviour") return collect_behaviour(ops, profile, market, params, size, key);
    return load_dump(ops, params, source, key);
}

}  // namespace fh::trainers
