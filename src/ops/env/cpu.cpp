/// @file cpu.cpp
/// @brief CPU twins of the env op family: the shared per-element math (math/env.h) in plain loops.
#include "ops/env/ops.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace fh::ops::cpu_twin {
namespace {

// Environment e's market, parameters and index within its agent (cuda/kernels/env.cu's env_of).
struct EnvOf {
    env::MarketView market;
    env::EnvParams params;
    int index;
};
EnvOf env_of(std::size_t e, std::size_t n, const env::MarketView& market, const env::EnvParams& params,
             View<const abi::EnvAgent> agents) {
    if (agents.empty()) return {market, params, static_cast<int>(e)};
    const std::size_t per = n / agents.size(), agent = e / per;
    EnvOf own{agents.data()[agent].market, params, static_cast<int>(e - agent * per)};
    own.params.seed = agents.data()[agent].seed;
    return own;
}

}  // namespace

void env_reset(View<env::EnvState> state, View<float> portfolio, View<const std::uint8_t> mask,
               const env::MarketView& market, const env::EnvParams& params, View<const abi::EnvAgent> agents) {
    for (std::size_t e = 0; e < state.size(); ++e) {
        if (!mask.empty() && mask.data()[e] == 0) continue;
        const EnvOf own = env_of(e, state.size(), market, params, agents);
        env::reset_env(state.data()[e], own.index, own.market, own.params);
        env::portfolio_features(state.data()[e], own.market, own.params, portfolio.data() + e * env::PORTFOLIO_STRIDE);
    }
}

void env_step(View<env::EnvState> state, View<float> portfolio, View<float> reward, View<std::uint8_t> done,
              View<env::StepInfo> info, View<const int> actions, const env::MarketView& market,
              const env::EnvParams& params, View<const abi::EnvAgent> agents) {
    for (std::size_t e = 0; e < state.size(); ++e) {
        const EnvOf own = env_of(e, state.size(), market, params, agents);
        reward.data()[e] =
            env::step_env(state.data()[e], actions.data()[e], own.market, own.params, info.data()[e], done.data()[e]);
        env::portfolio_features(state.data()[e], own.market, own.params, portfolio.data() + e * env::PORTFOLIO_STRIDE);
    }
}

void env_gather_states(View<float> states, View<const env::EnvState> state, View<const float> portfolio,
                       const env::MarketView& market, const env::EnvParams& params, View<const abi::EnvAgent> agents) {
    const std::size_t dim = static_cast<std::size_t>(params.state_dim);
    const std::size_t mdim = static_cast<std::size_t>(params.market_dim);
    for (std::size_t e = 0; e < state.size(); ++e) {
        float* row = states.data() + e * dim;
        const float* features = env_of(e, state.size(), market, params, agents).market.features +
                                static_cast<std::size_t>(state.data()[e].t) * mdim;
        for (std::size_t c = 0; c < mdim; ++c) row[c] = features[c];
        for (std::size_t c = 0; c < env::kPortfolioFeatures; ++c)
            row[mdim + c] = portfolio.data()[e * env::PORTFOLIO_STRIDE + c];
    }
}

void env_random_actions(View<int> actions, std::uint64_t seed, std::uint64_t step, int num_actions) {
    for (std::size_t e = 0; e < actions.size(); ++e)
        actions.data()[e] = env::random_action(seed, static_cast<int>(e), step, num_actions);
}

}  // namespace fh::ops::cpu_twin
