/// @file setup.cpp
#include "trainers/setup.hpp"

#include "util/errors.hpp"

namespace fh::trainers {

data::DataOptions data_options(const config::Profile& p) {
    data::DataOptions o;
    o.path = p.data.path;
    o.format = p.data.format;
    o.train_fraction = p.data.train_fraction;
    o.val_fraction = p.data.val_fraction;
    o.test_fraction = p.data.test_fraction;
    o.feature_set = p.data.feature_set;
    o.cache_dir = p.data.cache_dir;
    o.synthetic_bars = p.data.synthetic_bars;
    o.planted_signal = p.data.planted_signal;
    o.seed = static_cast<std::uint64_t>(config::data_seed(p));  // the synthetic market's
    o.bars_per_year = p.instrument.bars_per_year;
    o.use_cache = true;  // data.cache_dir "" puts the cache next to the data (the synthetic market is never cached)
    o.walk_forward_folds = static_cast<int>(p.walk_forward.folds);
    o.walk_forward_fold = static_cast<int>(p.walk_forward.fold);
    o.walk_forward_sliding = p.walk_forward.window == "sliding";
    o.episode_length = static_cast<std::size_t>(p.experience.gpu_timesteps_per_episode);
    return o;
}

void require_greedy_evaluation(const config::Profile& p) {
    if (!p.eval.deterministic)
        throw UsageError("the " + p.run.trainer +
                         " trainer does not implement eval.deterministic = false yet "
                         "(evaluation uses the greedy / most likely action); set it to true to train");
}

env::EnvParams env_params(const config::Profile& p, int market_dim) {
    env::EnvParams e{};
    e.multiplier = p.instrument.multiplier;
    e.tick_size = p.instrument.tick_size;
    e.commission = p.instrument.commission;
    e.slippage_ticks = p.instrument.slippage_ticks;
    e.initial_equity = p.instrument.initial_equity;
    e.reward_scale = p.env.reward_scale;
    e.drawdown_penalty = p.env.drawdown_penalty;
    e.bankruptcy_fraction = p.env.bankruptcy_fraction;
    e.limit_offset_ticks = p.env.limit_offset_ticks;
    e.limit_atr_mult = p.env.limit_atr_mult;
    e.seed = static_cast<std::uint64_t>(p.run.seed);
    e.max_contracts = static_cast<int>(p.instrument.max_contracts);
    e.position_levels = static_cast<int>(p.env.position_levels);
    e.urgency_levels = static_cast<int>(p.env.urgency_levels);
    e.episode_length = static_cast<int>(p.experience.gpu_timesteps_per_episode);
    e.market_dim = market_dim;
    e.state_dim = market_dim + env::kPortfolioFeatures;
    return e;
}

}  // namespace fh::trainers
