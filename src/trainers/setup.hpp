/// @file setup.hpp
/// @brief What every trainer derives from the profile: the data options, the environment's
///        parameters and a quick policy evaluation on a split.
#pragma once

#include <functional>

#include "math/env.h"
#include "config/profile.hpp"
#include "data/load.hpp"
#include "env/vec_env.hpp"
#include "ops/device.hpp"

namespace fh::trainers {

/// [data], [instrument] bars_per_year and [run] seed -> the data layer's options.
data::DataOptions data_options(const config::Profile& profile);

/// [instrument], [env], [experience] and the run seed -> the environment's parameters.
env::EnvParams env_params(const config::Profile& profile, int market_dim);

/// Refuses eval.deterministic = false (exit 2): every trainer evaluates its greedy / most likely
/// action; sampled evaluation is not built.
void require_greedy_evaluation(const config::Profile& profile);

/// A policy for evaluation: writes actions (n_envs) for states (n_envs, state_dim).
using Policy = std::function<void(ops::View<int> actions, ops::View<const float> states, int n_envs)>;

/// Mean reward per environment step of `policy` over `steps` steps of `n_envs` environments on
/// `split`. The episode starts depend only on the seed in `params`, so policies evaluated with
/// the same arguments see the same episodes (a fair comparison).
double mean_step_reward(ops::Device& ops, const env::DeviceMarket& market, env::Split split,
                        const env::EnvParams& params, int n_envs, int steps, const Policy& policy);

}  // namespace fh::trainers
