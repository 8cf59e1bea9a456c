/// @file vec_env.hpp
/// @brief The vectorized environment's host side: the market uploaded once to a backend, the
///        valid episode starts of each split, and VecEnv, which owns the per-environment buffers
///        and sequences the env ops of one collection step.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "abi/env.h"
#include "math/env.h"
#include "data/market_data.hpp"
#include "device/device.hpp"

namespace fh::env {

enum class Split { train, val, test };

/// Bars where an episode may start, with the exclusive end of the bars it may use.
struct EpisodeStarts {
    std::vector<int> starts;
    std::vector<int> ends;
};

/// The starts of `split`: bars t with t >= split.begin, t >= segment begin + warmup (every
/// feature has its full history), and t + 1 < min(segment end, split.end) (there is a next bar
/// to execute in). An episode never crosses a segment (contract) or split boundary.
EpisodeStarts episode_starts(const data::BarSeries& bars, std::size_t warmup, data::SplitRange split);

/// num_actions of the action space: position_levels * urgency_levels.
inline int num_actions(const EnvParams& p) {
    return p.position_levels * p.urgency_levels;
}

/// The market of one run in a backend's memory (uploaded once).
class DeviceMarket {
public:
    DeviceMarket(ops::Device& ops, const data::MarketData& market);
    /// The view of one split (a split without a valid start throws DataError).
    MarketView view(Split split) const;
    int market_dim() const noexcept { return market_dim_; }
    int n_bars() const noexcept { return n_bars_; }
    /// Host copies of what the market was built from (for trainers that need the data's own
    /// statistics: the supervised forecaster's labels and its adapter's calibration).
    const std::vector<std::string>& feature_names() const noexcept { return feature_names_; }
    const data::NormalizationStats& normalization() const noexcept { return norm_; }
    const std::vector<double>& host_close() const noexcept { return host_close_; }
    /// The valid episode starts of a split (empty for a split without one), on the host.
    const EpisodeStarts& host_starts(Split split) const noexcept { return host_starts_[static_cast<int>(split)]; }

private:
    struct SplitStarts {
        ops::Buffer<int> starts, ends;
        int count = 0;
    };
    int market_dim_ = 0;
    int n_bars_ = 0;
    ops::Buffer<double> open_, high_, low_, close_, atr_;
    ops::Buffer<float> features_;
    SplitStarts splits_[3];
    std::vector<std::string> feature_names_;
    data::NormalizationStats norm_;
    std::vector<double> host_close_;
    EpisodeStarts host_starts_[3];
};

/// n_envs environments stepping in lock-step on one split.
///
/// step(actions) runs, on the backend's stream and without host synchronisation:
///   env_step -> gather next_states (the observation after the step: terminal for finished
///   episodes) -> reset finished environments -> gather states (the next decision's input).
/// A transition is (states before step, action, reward, next_states, done).
class VecEnv {
public:
    VecEnv(ops::Device& ops, const DeviceMarket& market, Split split, const EnvParams& params, int n_envs);
    /// A population's environments in one set of launches: n_envs_per_agent for each agent,
    /// agent a's (rows [a n, (a + 1) n) of every buffer) on markets[a] with episode seed seeds[a]
    /// (params.seed aside, params are every agent's): what agent a's own VecEnv computes.
    VecEnv(ops::Device& ops, const std::vector<const DeviceMarket*>& markets, const std::vector<std::uint64_t>& seeds,
           Split split, const EnvParams& params, int n_envs_per_agent);
    /// The bytes the constructor allocates (a memory plan's count).
    static std::size_t device_bytes(int agents, int n_envs_per_agent, int state_dim);

    /// Starts a fresh episode in every environment and gathers the first states.
    void reset_all();
    /// Agent a's environments (of a population's) start again on `market` with episode seed
    /// `seed`, as a VecEnv of that agent alone starts them (reset_all); the others' untouched.
    void restart_agent(int a, const DeviceMarket& market, std::uint64_t seed);
    /// Advances every environment one bar with actions (n_envs, in [0, num_actions)).
    void step(ops::View<const int> actions);

    int n_envs() const noexcept { return n_envs_; }  ///< every agent's together
    const EnvParams& params() const noexcept { return params_; }
    /// (n_envs, state_dim) each.
    ops::View<const float> states() const noexcept { return observations_.cview().subview(half(), half()); }
    ops::View<const float> next_states() const noexcept { return observations_.cview().subview(0, half()); }
    ops::View<const float> rewards() const noexcept { return reward_.view(); }    ///< (n_envs)
    ops::View<const std::uint8_t> done() const noexcept { return done_.view(); }  ///< (n_envs) DoneFlag
    ops::View<const StepInfo> info() const noexcept { return info_.view(); }      ///< (n_envs)
    ops::View<const EnvState> state() const noexcept { return state_.view(); }    ///< (n_envs)
    const MarketView& market() const noexcept { return market_; }                 ///< the first agent's

    /// The buffers that carry the environments from one step to the next (checkpoints save and
    /// restore them; everything else is rewritten by every step).
    struct Persistent {
        ops::View<EnvState> state;   ///< (n_envs)
        ops::View<float> portfolio;  ///< (n_envs, PORTFOLIO_STRIDE)
        ops::View<float> states;     ///< (n_envs, state_dim)
    };
    Persistent persistent() noexcept { return {state_.view(), portfolio_.view(), states_view()}; }
    /// Rows [i n, (i + 1) n) of `to` (n = n_envs) become n environments of `params` (its seed)
    /// on `market`'s `split` started as a VecEnv of them alone starts them (reset_all); returns
    /// their market and seed. Synchronises (the copies are done before the temporary VecEnv goes).
    static abi::EnvAgent start_into(ops::Device& ops, const Persistent& to, std::size_t i, const DeviceMarket& market,
                                    Split split, const EnvParams& params, int n_envs);

private:
    ops::Device& ops_;
    MarketView market_;
    EnvParams params_;
    Split split_;
    int n_envs_;
    ops::Buffer<EnvState> state_;
    ops::Buffer<float> portfolio_, reward_;
    // [next_states; states] in one allocation.
    ops::Buffer<float> observations_;
    std::size_t half() const noexcept { return observations_.size() / 2; }
    ops::View<float> states_view() noexcept { return observations_.view().subview(half(), half()); }
    ops::View<float> next_states_view() noexcept { return observations_.view().subview(0, half()); }
    ops::Buffer<std::uint8_t> done_;
    ops::Buffer<StepInfo> info_;
    ops::Buffer<abi::EnvAgent> agents_;  ///< several agents' environments: each agent's market and seed
};

}  // namespace fh::env
