/// @file policy_eval.hpp
/// @brief Learning tests' yardstick: the per-bar Sharpe ratio of a policy's rewards on the
///        validation split (n environments x steps), comparable with data::planted_oracle.
#pragma once

#include <cmath>
#include <numeric>
#include <vector>

#include "env/vec_env.hpp"
#include "trainers/setup.hpp"

namespace fh::test {

/// Mean / standard deviation of every environment step's reward of `policy` on the validation
/// split (or `split`).
inline double validation_sharpe(ops::Device& ops, const env::DeviceMarket& dm, const env::EnvParams& params,
                                const trainers::Policy& policy, int n = 64, int steps = 1000,
                                env::Split split = env::Split::val) {
    env::VecEnv venv(ops, dm, split, params, n);
    venv.reset_all();
    auto actions = ops.alloc<int>(static_cast<std::size_t>(n));
    std::vector<double> r;
    for (int s = 0; s < steps; ++s) {
        policy(actions.view(), venv.states(), n);
        venv.step(actions.cview());
        for (float x : ops.to_host(venv.rewards())) r.push_back(x);
    }
    const double mean = std::accumulate(r.begin(), r.end(), 0.0) / static_cast<double>(r.size());
    double var = 0;
    for (double x : r) var += (x - mean) * (x - mean);
    return mean / std::sqrt(var / static_cast<double>(r.size()));
}

}  // namespace fh::test
