/// @file setup.hpp
/// @brief What every trainer derives from the profile: the data options, the environment's
///        parameters and a quick policy evaluation on a split.
#pragma once

#include <functional>
#include <tuple>

#include "math/env.h"
#include "config/profile.hpp"
#include "data/load.hpp"
#include "env/vec_env.hpp"
#include "device/device.hpp"

namespace fh::trainers {

/// [data], [instrument] bars_per_year and [run] seed -> the data layer's options.
data::DataOptions data_options(const config::Profile& profile);

/// [instrument], [env], [experience] and the run seed -> the environment's parameters.
env::EnvParams env_params(const config::Profile& profile, int market_dim);

/// The environment's parameters but the seed (env::EnvParams's fields, in order): what the agents
/// of a batched population must share.
inline auto env_without_seed(const env::EnvParams& e) {
    return std::tie(e.multiplier, e.tick_size, e.commission, e.slippage_ticks, e.initial_equity, e.reward_scale,
                    e.drawdown_penalty, e.bankruptcy_fraction, e.limit_offset_ticks, e.limit_atr_mult, e.max_contracts,
                    e.position_levels, e.urgency_levels, e.episode_length, e.market_dim, e.state_dim);
}

/// Refuses eval.deterministic = false (exit 2): every trainer evaluates its greedy / most likely
/// action; sampled evaluation is not built.
void require_greedy_evaluation(const config::Profile& profile);

/// A policy for evaluation: writes actions (n_envs) for states (n_envs, state_dim).
using Policy = std::function<void(ops::View<int> actions, ops::View<const float> states, int n_envs)>;

}  // namespace fh::trainers
