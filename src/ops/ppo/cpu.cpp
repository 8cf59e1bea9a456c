/// @file cpu.cpp
/// @brief CPU twins of the ppo op family: the shared per-element math (math/ppo.h) in plain loops.
#include "ops/ppo/ops.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace fh::ops::cpu_twin {

void ppo_sample(View<int> actions, View<float> log_probs, View<const float> logits, int num_actions, std::uint64_t seed,
                CounterValue step_value, View<const std::uint64_t> agent_seeds) {
    const auto step = static_cast<std::uint64_t>(step_value.value());
    const std::size_t per = agent_seeds.empty() ? actions.size() : actions.size() / agent_seeds.size();
    for (std::size_t e = 0; e < actions.size(); ++e) {
        const std::size_t g = e / per;
        actions.data()[e] = ppo::sample_action(logits.data() + e * num_actions, num_actions,
                                               agent_seeds.empty() ? seed : agent_seeds.data()[g],
                                               static_cast<int>(e - g * per), step, log_probs.data()[e]);
    }
}

void ppo_diversity(View<int> window, View<int> counts, View<float> penalty, View<const int> actions, int num_actions,
                   int diversity_window, float coef, CounterValue step_value, View<const float> agent_coef) {
    const auto step = static_cast<std::uint64_t>(step_value.value());
    const std::size_t W = static_cast<std::size_t>(diversity_window), A = static_cast<std::size_t>(num_actions);
    const std::size_t per = agent_coef.empty() ? actions.size() : actions.size() / agent_coef.size();
    for (std::size_t e = 0; e < actions.size(); ++e)
        penalty.data()[e] =
            ppo::diversity_update(window.data() + e * W, counts.data() + e * A, actions.data()[e], num_actions,
                                  diversity_window, agent_coef.empty() ? coef : agent_coef.data()[e / per], step);
}

void ppo_gae(View<float> advantages, View<float> returns, View<const float> rewards, View<const float> values,
             View<const float> next_values, View<const std::uint8_t> done, float gamma, float lambda, int T,
             View<const float> agent_gamma_lambda) {
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

void ppo_collect_truncated(View<int> rows, View<int> bars, View<float> portfolio, View<int> count,
                           View<const float> next_states, View<const env::StepInfo> info, View<const std::uint8_t> done,
                           int market_dim, int row_base, bool restart, int agents) {
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

void ppo_terminal_observations(View<float> observations, View<const int> bars, View<const float> portfolio,
                               View<const float> features, int market_dim) {
    const std::size_t r = bars.size(), state_dim = observations.size() / r;
    const std::size_t P = state_dim - static_cast<std::size_t>(market_dim);
    const int n_bars = static_cast<int>(features.size() / static_cast<std::size_t>(market_dim));
    for (std::size_t k = 0; k < r; ++k)
        for (std::size_t c = 0; c < state_dim; ++c)
            observations.data()[k * state_dim + c] = ppo::terminal_observation_value(
                features.data(), n_bars, bars.data()[k], market_dim, portfolio.data() + k * P, static_cast<int>(c));
}

void ppo_scatter_values(View<float> dst, View<const float> values, View<const int> rows) {
    for (std::size_t i = 0; i < values.size(); ++i) {
        const int row = rows.data()[i];
        if (row >= 0 && static_cast<std::size_t>(row) < dst.size()) dst.data()[row] = values.data()[i];
    }
}

void normalize(View<float> x, View<float> /*scratch*/) {
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

void ppo_gather(View<float> states, View<int> actions, View<float> old_log_probs, View<float> advantages,
                View<float> returns, View<float> old_values, const ppo::RolloutView& rollout, std::uint64_t seed,
                CounterValue epoch_value, int offset, View<const std::uint64_t> agent_seeds) {
    const auto epoch = static_cast<std::uint64_t>(epoch_value.value());
    const std::size_t N = agent_seeds.empty() ? 1 : agent_seeds.size(), B = actions.size() / N;
    const std::size_t D = static_cast<std::size_t>(rollout.state_dim);
    for (std::size_t g = 0; g < N; ++g) {  // agent g's minibatch from its rollout, into its rows
        const ppo::RolloutView own = ppo::agent_rollout(rollout, static_cast<int>(g));
        const std::uint64_t own_seed = agent_seeds.empty() ? seed : agent_seeds.data()[g];
        for (std::size_t i = 0; i < B; ++i)
            ppo::gather_row(static_cast<int>(i), own, own_seed, epoch, offset, states.data() + g * B * D,
                            actions.data() + g * B, old_log_probs.data() + g * B, advantages.data() + g * B,
                            returns.data() + g * B, old_values.data() + g * B);
    }
}

void ppo_learning_rate(View<float> lr, double base_lr, bool linear, double total_rollouts, CounterValue rollouts) {
    lr.data()[0] = ppo::scheduled_learning_rate(base_lr, linear ? 1 : 0, total_rollouts, rollouts.value());
}

void ppo_loss(View<float> stats, View<float> d_logits, View<float> d_values, View<const float> logits,
              View<const float> values, View<const int> actions, View<const float> old_log_probs,
              View<const float> advantages, View<const float> returns, View<const float> old_values,
              const ppo::LossParams& p, View<const ppo::LossParams> agent_params) {
    const int B = static_cast<int>(actions.size());
    const int A = static_cast<int>(logits.size() / actions.size());
    const int rows = agent_params.empty() ? B : B / static_cast<int>(agent_params.size());  // each agent's
    for (int i = 0; i < B; ++i)
        ppo::loss_sample(i, B, rows, A, logits.data(), values.data(), actions.data(), old_log_probs.data(),
                         advantages.data(), returns.data(), old_values.data(),
                         agent_params.empty() ? p : agent_params.data()[i / rows], stats.data(), d_logits.data(),
                         d_values.data());
}

void curiosity_input(View<float> input, View<const float> states, View<const int> actions, int num_actions) {
    const std::size_t n = actions.size(), D = states.size() / n, width = D + static_cast<std::size_t>(num_actions);
    for (std::size_t e = 0; e < n; ++e)
        ppo::curiosity_input_row(input.data() + e * width, states.data() + e * D, actions.data()[e],
                                 static_cast<int>(D), num_actions);
}

void curiosity_error(View<float> error, View<float> d_pred, View<const float> pred, View<const float> next_states,
                     int state_dim) {
    const std::size_t n = error.size(), P = pred.size() / n, S = static_cast<std::size_t>(state_dim);
    for (std::size_t e = 0; e < n; ++e)
        error.data()[e] =
            ppo::curiosity_error_row(d_pred.data() + e * P, pred.data() + e * P, next_states.data() + e * S,
                                     static_cast<int>(P), static_cast<int>(n));
}

}  // namespace fh::ops::cpu_twin
