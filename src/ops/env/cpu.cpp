/// @file cpu.cpp
/// @brief CPU twins of the env op family: the shared per-element math (math/env.h) in plain loops.
#include "abi/env.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace fh::ops {
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

void cpu(const EnvReset& a) {
    const auto& [state, portfolio, mask, market, params, agents] = a;
    for (std::size_t e = 0; e < state.size(); ++e) {
        if (!mask.empty() && mask.data()[e] == 0) continue;
        const EnvOf own = env_of(e, state.size(), market, params, agents);
        env::reset_env(state.data()[e], own.index, own.market, own.params);
        env::portfolio_features(state.data()[e], own.market, own.params, portfolio.data() + e * env::PORTFOLIO_STRIDE);
    }
}

void cpu(const EnvStep& a) {
    const auto& [state, portfolio, reward, done, info, actions, market, params, agents] = a;
    for (std::size_t e = 0; e < state.size(); ++e) {
        const EnvOf own = env_of(e, state.size(), market, params, agents);
        reward.data()[e] =
            env::step_env(state.data()[e], actions.data()[e], own.market, own.params, info.data()[e], done.data()[e]);
        env::portfolio_features(state.data()[e], own.market, own.params, portfolio.data() + e * env::PORTFOLIO_STRIDE);
    }
}

void cpu(const EnvGatherStates& a) {
    const auto& [states, state, portfolio, market, params, agents] = a;
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

void cpu(const EnvRandomActions& a) {
    const auto& [actions, seed, step, num_actions] = a;
    for (std::size_t e = 0; e < actions.size(); ++e)
        actions.data()[e] = env::random_action(seed, static_cast<int>(e), step, num_actions);
}

}  // namespace fh::ops
