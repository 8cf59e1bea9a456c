/// @file policy_eval.hpp
/// @brief Learning tests' yardstick: the per-bar Sharpe ratio of a policy's rewards on the
///        validation split (n environments x steps), comparable with data::planted_oracle.
#pragma once

#include <cmath>
#include <numeric>
#include <vector>

#include "data/market_data.hpp"
#include "env/vec_env.hpp"
#include "backtest/backtest.hpp"
#include "trainers/setup.hpp"

namespace fh::test {

/// Runs `policy` on n environments of `split` for `steps` steps; after each step
/// `seen(actions, rewards)` gets that step's actions and rewards on the host.
template <class Seen>
void roll_policy(ops::Device& ops, const env::DeviceMarket& dm, const env::EnvParams& params,
                 const trainers::Policy& policy, int n, int steps, env::Split split, Seen&& seen) {
    env::VecEnv venv(ops, dm, split, params, n);
    venv.reset_all();
    auto actions = ops.alloc<int>(static_cast<std::size_t>(n));
    for (int s = 0; s < steps; ++s) {
        policy(actions.view(), venv.states(), n);
        venv.step(actions.cview());
        seen(ops.to_host(actions.cview()), ops.to_host(venv.rewards()));
    }
}

/// Mean / standard deviation of every environment step's reward of `policy` on the validation
/// split (or `split`).
inline double validation_sharpe(ops::Device& ops, const env::DeviceMarket& dm, const env::EnvParams& params,
                                const trainers::Policy& policy, int n = 64, int steps = 1000,
                                env::Split split = env::Split::val) {
    std::vector<double> r;
    roll_policy(ops, dm, params, policy, n, steps, split, [&](const std::vector<int>&, const std::vector<float>& rew) {
        for (float x : rew) r.push_back(x);
    });
    const double mean = std::accumulate(r.begin(), r.end(), 0.0) / static_cast<double>(r.size());
    double var = 0;
    for (double x : r) var += (x - mean) * (x - mean);
    return mean / std::sqrt(var / static_cast<double>(r.size()));
}

/// The entropy of `policy`'s action histogram over n environments x steps of `split`, divided by
/// log(actions): 0 when it always takes one action, 1 when it takes every action equally often.
inline double action_entropy(ops::Device& ops, const env::DeviceMarket& dm, const env::EnvParams& params,
                             const trainers::Policy& policy, int n = 64, int steps = 1000,
                             env::Split split = env::Split::val) {
    const int num_actions = env::num_actions(params);
    std::vector<double> count(static_cast<std::size_t>(num_actions), 0.0);
    roll_policy(ops, dm, params, policy, n, steps, split, [&](const std::vector<int>& acts, const std::vector<float>&) {
        for (int a : acts) count[static_cast<std::size_t>(a)] += 1;
    });
    const double total = static_cast<double>(n) * steps;
    double h = 0;
    for (double c : count)
        if (c > 0) h -= c / total * std::log(c / total);
    return num_actions > 1 ? h / std::log(static_cast<double>(num_actions)) : 0.0;
}

/// The planted oracle's rule (long when ret_1 >= 0, else short; ret_1 is feature 0, de-normalised
/// with the market's statistics) through the backtest of the test split: the annualised Sharpe a
/// perfect forecaster reaches there, with 3 position levels and one urgency (actions 2 and 0).
inline double oracle_rule_backtest_sharpe(ops::Device& ops, const env::DeviceMarket& dm, const data::MarketData& market,
                                          const env::EnvParams& params) {
    const std::vector<float> norm{market.norm.mean[0], market.norm.stddev[0]};
    auto oracle = [&](ops::View<int> a, ops::View<const float> s, int n) {
        const auto states = ops.to_host(s);
        std::vector<int> actions(static_cast<std::size_t>(n));
        const auto D = static_cast<std::size_t>(params.state_dim);
        for (std::size_t i = 0; i < actions.size(); ++i) actions[i] = norm[0] + norm[1] * states[i * D] >= 0 ? 2 : 0;
        ops.upload<int>(a.subview(0, actions.size()), actions);
    };
    return backtest::backtest(ops, dm, market, env::Split::test, params, oracle, 1, false).strategy.sharpe;
}

}  // namespace fh::test
