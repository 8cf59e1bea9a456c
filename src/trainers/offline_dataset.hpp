/// @file offline_dataset.hpp
/// @brief The offline dataset IQL and the Decision Transformer learn from (docs/iql.md, "The
///        dataset"): transitions collected on the training split by the documented behaviour
///        policy, or a DQN run's replay dump (docs/replay-dump.md), held as a replay ring
///        (rows (step % capacity) * n_envs + env: each environment's steps in order).
#pragma once

#include <string>

#include "config/profile.hpp"
#include "env/vec_env.hpp"
#include "device/device.hpp"
#include "trainers/memory_plan.hpp"
#include "trainers/replay_ring.hpp"

namespace fh::trainers {

struct OfflineDataset {
    ReplayRing ring;
    long long transitions = 0;
    double collection_seconds = 0;  ///< the behaviour collection's time (0 for a dump)
};

/// `source` = "behaviour": min(experience.gpu_n_episodes, size) environments act on the training
/// split with the behaviour policy (iql::behaviour_action) for ceil(size / environments) steps.
/// Otherwise `source` is a replay dump's path: its state width and action count must match
/// `params` (DataError, exit 3, naming the file). `key` names the profile table in the logs and
/// messages ("iql", "dt").
OfflineDataset build_offline_dataset(ops::Device& ops, const config::Profile& profile, const env::DeviceMarket& market,
                                     const env::EnvParams& params, const std::string& source, long long size,
                                     const char* key);

/// Declares what `copies` datasets of these (build_offline_dataset's) arguments allocate, as the
/// consumer "offline dataset" (`transient`: freed once read back) and, with a behaviour
/// collection, its environments (freed once collected); a dump's rows are in.dump_rows. Returns
/// the dataset's rows.
std::uint64_t plan_offline_dataset(MemoryPlan& plan, const config::Profile& profile, int state_dim,
                                   const std::string& source, long long size, const char* key, const PlanInputs& in,
                                   std::uint64_t copies, bool transient);

}  // namespace fh::trainers
