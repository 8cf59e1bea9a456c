/// @file cpu.cpp
/// @brief CPU twins of the ppo op family: the shared per-element math (math/ppo.h) in plain loops.
#include "ops/ppo/ops.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace fh::ops {

void cpu(const PpoSample& a) {
    const auto& [actions, log_probs, logits, num_actions, seed, step_value, agent_seeds] = a;
    const std::size_t per = agent_seeds.empty() ? actions.size() : actions.size() / agent_seeds.size();
    for (std::size_t e = 0; e < actions.size(); ++e) {
        const std::size_t g = e / per;
        const auto step = static_cast<std::uint64_t>(step_value.agent(static_cast<long long>(g)).value());
        actions.data()[e] = ppo::sample_action(logits.data() + e * num_actions, num_actions,
                                               agent_seeds.empty() ? seed : agent_seeds.data()[g],
                                               static_cast<int>(e - g * per), step, log_probs.data()[e]);
    }
}

void cpu(const PpoDiversity& a) {
    const auto& [window, counts, penalty, actions, num_actions, diversity_window, coef, step_value, agent_coef] = a;
    const std::size_t W = static_cast<std::size_t>(diversity_window), A = static_cast<std::size_t>(num_actions);
    const std::size_t per = agent_coef.empty() ? actions.size() : actions.size() / agent_coef.size();
    for (std::size_t e = 0; e < actions.size(); ++e) {
        const auto step = static_cast<std::uint64_t>(step_value.agent(static_cast<long long>(e / per)).value());
        penalty.data()[e] =
            ppo::diversity_update(window.data() + e * W, counts.data() + e * A, actions.data()[e], num_actions,
                                  diversity_window, agent_coef.empty() ? coef : agent_coef.data()[e / per], step);
    }
}

void cpu(const PpoGae& a) {
    const auto& [advantages, returns, rewards, values, next_values, done, gamma, lambda, T, agent_gamma_lambda] = a;
    const std::size_t agents = std::max<std::size_t>(1, agent_gamma_lambda.size() / 2);
    const std::size_t M = rewards.size() / agents;  // an agent's (T, n) rows
    const int n = static_cast<int>(M / static_cast<std::size_t>(T));
    for (std::size_t g = 0; g < agents; ++g) {
        const float own_gamma = agent_gamma_lambda.empty() ? gamma : agent_gamma_lambda.data()[2 * g];
        const float own_lambda = agent_gamma_lambda.empty() ? lambda : agent_gamma_lambda.data()[2 * g + 1];
        for (int e = 0; e < n; ++e)
            ppo::gae_env(e, n, T, rewards.data() + g * M, values.data() + g * M, next_values.data() + g * M,
                         done.data() + g * M, own_gamma, own_lambda, advantages.data() + g * M, returns.data() + g * M);
    }
}

void cpu(const PpoCollectTruncated& a) {
    const auto& [rows, bars, portfolio, count, next_states, info, done, market_dim, row_base, restart, agents] = a;
    const std::size_t N = static_cast<std::size_t>(agents);
    const std::size_t n = done.size() / N, state_dim = next_states.size() / done.size(), capacity = rows.size() / N;
    const std::size_t md = static_cast<std::size_t>(market_dim), P = state_dim - md;
    for (std::size_t g = 0; g < N; ++g) {  // agent g: its environments [g n, (g + 1) n), its lists
        long long entry = restart ? 0 : count.data()[g];
        for (std::size_t e = 0; e < n; ++e) {
            const std::size_t env = g * n + e;
            if (done.data()[env] != env::kTruncated) continue;
            if (entry >= 0 && static_cast<std::size_t>(entry) < capacity) {
                const std::size_t k = g * capacity + static_cast<std::size_t>(entry);
                rows.data()[k] = row_base + static_cast<int>(e);
                bars.data()[k] = info.data()[env].bar;
                std::memcpy(portfolio.data() + k * P, next_states.data() + env * state_dim + md, P * sizeof(float));
            }
            ++entry;
        }
        count.data()[g] = static_cast<int>(entry);
    }
}

void cpu(const PpoTerminalObservations& a) {
    const auto& [observations, bars, portfolio, features, market_dim] = a;
    const std::size_t r = bars.size(), state_dim = observations.size() / r;
    const std::size_t P = state_dim - static_cast<std::size_t>(market_dim);
    const int n_bars = static_cast<int>(features.size() / static_cast<std::size_t>(market_dim));
    for (std::size_t k = 0; k < r; ++k)
        for (std::size_t c = 0; c < state_dim; ++c)
            observations.data()[k * state_dim + c] = ppo::terminal_observation_value(
                features.data(), n_bars, bars.data()[k], market_dim, portfolio.data() + k * P, static_cast<int>(c));
}

void cpu(const PpoScatterValues& a) {
    const auto& [dst, values, rows] = a;
    for (std::size_t i = 0; i < values.size(); ++i) {
        const int row = rows.data()[i];
        if (row >= 0 && static_cast<std::size_t>(row) < dst.size()) dst.data()[row] = values.data()[i];
    }
}

void cpu(const Normalize& a) {
    const auto& [x, _unnamed] = a;
    // The same moments as the kernels (shifted by x[0], double sums), summed sequentially.
    float* v = x.data();
    const float shift = v[0];
    double s1 = 0.0, s2 = 0.0;
    for (std::size_t i = 0; i < x.size(); ++i) {
        const double d = static_cast<double>(v[i]) - static_cast<double>(shift);
        s1 += d;
        s2 += d * d;
    }
    float mean = 0.f, denom = 1.f;
    ppo::normalize_moments(s1, s2, static_cast<long long>(x.size()), shift, mean, denom);
    for (std::size_t i = 0; i < x.size(); ++i) v[i] = ppo::normalize_element(v[i], mean, denom);
}

void cpu(const PpoGather& a) {
    const auto& [states, actions, old_log_probs, advantages, returns, old_values, rollout, seed, epoch_value, offset,
                 agent_seeds] = a;
    const std::size_t N = agent_seeds.empty() ? 1 : agent_seeds.size(), B = actions.size() / N;
    const std::size_t D = static_cast<std::size_t>(rollout.state_dim);
    for (std::size_t g = 0; g < N; ++g) {  // agent g's minibatch from its rollout, into its rows
        const auto epoch = static_cast<std::uint64_t>(epoch_value.agent(static_cast<long long>(g)).value());
        const ppo::RolloutView own = ppo::agent_rollout(rollout, static_cast<int>(g));
        const std::uint64_t own_seed = agent_seeds.empty() ? seed : agent_seeds.data()[g];
        for (std::size_t i = 0; i < B; ++i)
            ppo::gather_row(static_cast<int>(i), own, own_seed, epoch, offset, states.data() + g * B * D,
                            actions.data() + g * B, old_log_probs.data() + g * B, advantages.data() + g * B,
                            returns.data() + g * B, old_values.data() + g * B);
    }
}

void cpu(const PpoLearningRate& a) {
    const auto& [lr, base_lr, linear, total_rollouts, rollouts] = a;
    lr.data()[0] = ppo::scheduled_learning_rate(base_lr, linear ? 1 : 0, total_rollouts, rollouts.value());
}

void cpu(const PpoLoss& a) {
    const auto& [stats, d_logits, d_values, logits, values, actions, old_log_probs, advantages, returns, old_values, p,
                 agent_params] = a;
    const int B = static_cast<int>(actions.size());
    const int A = static_cast<int>(logits.size() / actions.size());
    const int rows = agent_params.empty() ? B : B / static_cast<int>(agent_params.size());  // each agent's
    for (int i = 0; i < B; ++i)
        ppo::loss_sample(i, B, rows, A, logits.data(), values.data(), actions.data(), old_log_probs.data(),
                         advantages.data(), returns.data(), old_values.data(),
                         agent_params.empty() ? p : agent_params.data()[i / rows], stats.data(), d_logits.data(),
                         d_values.data());
}

void cpu(const CuriosityInput& a) {
    const auto& [input, states, actions, num_actions] = a;
    const std::size_t n = actions.size(), D = states.size() / n, width = D + static_cast<std::size_t>(num_actions);
    for (std::size_t e = 0; e < n; ++e)
        ppo::curiosity_input_row(input.data() + e * width, states.data() + e * D, actions.data()[e],
                                 static_cast<int>(D), num_actions);
}

void cpu(const CuriosityError& a) {
    const auto& [error, d_pred, pred, next_states, state_dim] = a;
    const std::size_t n = error.size(), P = pred.size() / n, S = static_cast<std::size_t>(state_dim);
    for (std::size_t e = 0; e < n; ++e)
        error.data()[e] =
            ppo::curiosity_error_row(d_pred.data() + e * P, pred.data() + e * P, next_states.data() + e * S,
                                     static_cast<int>(P), static_cast<int>(n));
}

}  // namespace fh::ops
