/// @file bench.cpp
/// @brief `bench`: the throughput of the profile's trainer, its phases timed alone and together.
#include <algorithm>
#include <chrono>

#include "io/json.hpp"
#include "run/run.hpp"
#include "run/session.hpp"
#include "trainers/trainer.hpp"

namespace fh::run {

namespace json = io::json;
using clock = std::chrono::steady_clock;

std::string bench(const config::Profile& p) {
    const auto t_start = clock::now();
    Session session(p);
    auto& ops = session.ops;
    auto trainer = trainers::make_trainer(*ops, p, *session.device_market);
    ops->synchronize();
    const double first_kernel_s = std::chrono::duration<double>(clock::now() - t_start).count();
    const long long per = trainer->progress_per_iteration();
    // Iterations per timed phase: the run's length, at most 500 and at most ~5M progress units
    // (a PPO iteration is a whole rollout), at least 20 (fewer when that cap is lower).
    const long long cap = std::clamp<long long>(5'000'000 / per, 3, 500);
    const long long phase = std::clamp<long long>(p.run.total_steps / per, std::min<long long>(20, cap), cap);
    const trainers::BenchFigures f = trainer->bench(phase);
    return json::serialize(json::object({{"trainer", p.run.trainer},
                                         {"device", ops->description()},
                                         {"n_envs", p.experience.gpu_n_episodes},
                                         {"batch_size", f.batch_rows},
                                         {"iterations_per_phase", f.iterations},
                                         {"collection_env_steps_per_s", f.collection_env_steps_per_s},
                                         {"updates_per_s", f.updates_per_s},
                                         {"end_to_end_env_steps_per_s", f.end_to_end_env_steps_per_s},
                                         {"time_to_first_kernel_s", first_kernel_s},
                                         {"peak_device_memory_bytes", ops->peak_bytes()}}));
}

}  // namespace fh::run
