/// @file profile.cpp
/// @brief What a DQN profile means to the engine and to evaluation: its network, its replay ring's
///        size, its agent constants, and the greedy policy a checkpoint of it is evaluated with.
#include <fmt/format.h>

#include <algorithm>

#include "data/features.hpp"
#include "abi/dqn_step.h"
#include "trainers/dqn/engine.hpp"
#include "util/errors.hpp"

namespace fh::trainers {

QNetworkConfig network_config(const config::Profile& p, int state_dim) {
    QNetworkConfig c;
    // dqn.her: the network sees [observation | goal features] (math/her.h).
    c.state_dim = state_dim + (p.dqn.her ? her::kGoalFeatures : 0);
    for (auto h : p.dqn.hidden) c.hidden.push_back(static_cast<int>(h));
    // The IQN head's rows (one per sample and fraction) are the scalar head's.
    c.head = dqn::HeadParams{
        static_cast<int>(p.num_actions()),    static_cast<int>(p.dqn.num_atoms), p.dqn.dueling ? 1 : 0,
        static_cast<float>(p.dqn.v_min),      static_cast<float>(p.dqn.v_max),   p.dqn.head == "c51" ? 0 : 1,
        static_cast<int>(p.dqn.ensemble_size)};
    if (p.dqn.head == "iqn")
        c.iqn = iqn::Params{static_cast<int>(p.dqn.iqn_quantiles), static_cast<int>(p.dqn.iqn_act_quantiles),
                            static_cast<int>(p.dqn.iqn_embedding)};
    if (p.dqn.attention) {
        // The feature set's groups, then the portfolio features (and HER's goal features) as one more.
        const int market_dim = state_dim - env::kPortfolioFeatures;
        for (const auto& g : data::core42_groups())
            if (g.end <= market_dim) c.attention.push_back(g);
        if (c.attention.empty() || c.attention.back().end != market_dim)
            throw UsageError(
                fmt::format("dqn.attention: the feature set's groups do not cover its {} features", market_dim));
        c.attention.push_back(data::FeatureGroup{"portfolio", market_dim, c.state_dim});
    }
    return c;
}

DqnReplaySteps dqn_replay_steps(const config::Profile& p) {
    const long long n = p.experience.gpu_n_episodes, n_step = p.experience.n_step;
    return {static_cast<int>(std::max<long long>(p.replay_buffer.buffer_size / n, n_step + 1)),
            std::max<long long>((p.replay_buffer.min_replay_size + n - 1) / n, n_step)};
}

dqn::AgentParams dqn_agent_params(const config::Profile& p) {
    const auto& t = p.training;
    dqn::AgentParams a{};
    a.seed = static_cast<std::uint64_t>(p.run.seed);
    a.epsilon_start = t.epsilon_start;
    a.epsilon_end = t.epsilon_end;
    a.epsilon_decay_env_steps = static_cast<double>(t.epsilon_decay_steps);
    a.n_envs = static_cast<int>(p.experience.gpu_n_episodes);
    a.n_step = static_cast<int>(p.experience.n_step);
    a.gamma = static_cast<float>(t.gamma);
    a.mse_alpha = static_cast<float>(p.dqn.mse_blend_alpha);
    a.cql_alpha = static_cast<float>(p.dqn.cql_alpha);
    a.curiosity_coef = p.dqn.curiosity ? static_cast<float>(p.dqn.curiosity_coef) : 0.0f;
    a.bootstrap_prob = static_cast<float>(p.dqn.ensemble_bootstrap);
    a.ucb = static_cast<float>(p.dqn.ensemble_ucb);
    a.tau = static_cast<float>(t.tau);
    a.one_minus_tau = static_cast<float>(1.0 - t.tau);
    a.target_period = t.target_update_period;
    a.min_pushed = dqn_replay_steps(p).before_updates;
    const ops::AdamParams adam;  // the defaults: betas, eps; no weight decay
    a.lr = static_cast<float>(t.learning_rate);
    a.beta1 = adam.beta1;
    a.beta2 = adam.beta2;
    a.adam_eps = adam.eps;
    a.clip_norm = static_cast<float>(t.grad_clip_norm);
    a.weight_decay = adam.weight_decay;
    if (p.dqn.her) {
        a.her_ratio = static_cast<float>(p.dqn.her_ratio);
        a.her_reward = static_cast<float>(p.dqn.her_reward);
        a.her_goal_min = static_cast<float>(p.dqn.her_goal_min);
        a.her_goal_max = static_cast<float>(p.dqn.her_goal_max);
        a.her_horizon = static_cast<int>(p.experience.gpu_timesteps_per_episode);
    }
    return a;
}

void DqnGreedyPolicy::act(ops::Device& ops, ops::View<const float> weights, ops::View<int> actions,
                          ops::View<const float> states, int n) {
    const std::size_t DX = static_cast<std::size_t>(net_.state_dim());
    if (&ops != ws_owner_ || n > ws_.max_batch) {  // evaluation batch sizes vary
        ws_ = net_.make_workspace(ops, n);
        ws_owner_ = &ops;
        if (goal_) {  // dqn.her: the rows with the evaluation goal's features, and the goal
            goal_obs_ = ops.alloc<float>(static_cast<std::size_t>(n) * DX);
            goal_buffer_ = ops.from_host<float>(std::vector<float>{*goal_});
        }
    }
    if (!goal_) return net_.q_values(ops, weights, states, n, ws_, {}, actions);
    const auto obs = goal_obs_.view().subview(0, static_cast<std::size_t>(n) * DX);
    ops::run(ops, ops::DqnGoalStates{obs, states, goal_buffer_.cview(), net_.state_dim() - her::kGoalFeatures});
    net_.q_values(ops, weights, obs, n, ws_, {}, actions);
}

std::optional<float> eval_goal(const config::Profile& p) {
    if (!p.dqn.her) return std::nullopt;
    return static_cast<float>(p.dqn.her_eval_goal);
}

}  // namespace fh::trainers
