/// @file memory_estimate.cpp
/// @brief Napkin math for the device memory of a run; see memory_estimate.hpp.
#include "config/memory_estimate.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace fh::config {
namespace {

constexpr std::uint64_t kF32 = 4;

/// Parameters of an MLP in -> hidden... -> out (weights and biases).
std::uint64_t mlp_params(std::int64_t in, const std::vector<std::int64_t>& hidden, std::int64_t out) {
    std::uint64_t n = 0;
    std::int64_t prev = in;
    for (auto h : hidden) {
        n += static_cast<std::uint64_t>(prev * h + h);
        prev = h;
    }
    return n + static_cast<std::uint64_t>(prev * out + out);
}

std::uint64_t sum(const std::vector<std::int64_t>& v) {
    std::uint64_t s = 0;
    for (auto x : v) s += static_cast<std::uint64_t>(x);
    return s;
}

}  // namespace

std::vector<MemoryItem> estimate_device_memory(const Profile& p, std::uint64_t bars) {
    std::vector<MemoryItem> items;
    const auto actions = p.num_actions();
    const auto& ex = p.experience;
    const std::uint64_t envs = static_cast<std::uint64_t>(ex.gpu_n_episodes);

    // Market data: features (f32) plus OHLCV, ATR and time (8 bytes each) per bar.
    if (bars == 0) bars = static_cast<std::uint64_t>(p.data.synthetic_bars);
    const std::uint64_t per_bar = kMarketDim * kF32 + 7 * 8;
    items.push_back({fmt::format("market data ({} bars x {} B)", bars, per_bar), bars * per_bar,
                     p.data.path.empty() ? "data.synthetic_bars" : "data.path"});

    // Environments: portfolio state (20 doubles), observation, RNG, n-step staging.
    const std::uint64_t per_env = 20 * 8 + kStateDim * kF32 + 16 +
                                  static_cast<std::uint64_t>(ex.n_step) * (kStateDim + 4) * kF32;
    items.push_back({fmt::format("environments ({} x {} B)", envs, per_env), envs * per_env,
                     "experience.gpu_n_episodes"});

    // Transitions: state, next state, action, reward, done, discount.
    const std::uint64_t per_transition = (2 * kStateDim + 4) * kF32;
    std::uint64_t params = 0;      // all networks, one copy
    std::uint64_t copies_bytes = 0;
    std::uint64_t activation_rows = 0, activation_width = 0;
    std::string net_key, act_key;
    if (p.run.trainer == "ppo") {
        const std::uint64_t rollout = envs * static_cast<std::uint64_t>(ex.gpu_timesteps_per_episode);
        // obs, action, done, logp, value, next value, reward, advantage, return, penalty, curiosity
        const std::uint64_t per_step = (kStateDim + 10) * kF32;
        items.push_back({fmt::format("rollout buffer ({} steps x {} B)", rollout, per_step),
                         rollout * per_step, "experience.gpu_timesteps_per_episode"});
        items.push_back({"action-diversity windows", envs * static_cast<std::uint64_t>(p.ppo.diversity_window + actions) * 4,
                         "ppo.diversity_window"});
        const auto actor = mlp_params(kStateDim, p.ppo.hidden, actions);
        const auto critic = mlp_params(kStateDim, p.ppo.hidden, 1);
        params = actor + critic;
        if (p.ppo.curiosity)  // the forward model: [state | one-hot action] -> market features
            params += mlp_params(kStateDim + actions, {p.ppo.hidden.front()}, kMarketDim);
        copies_bytes = params * kF32 * 4;  // weights, grads, Adam m and v
        activation_rows = rollout / static_cast<std::uint64_t>(std::max<std::int64_t>(1, p.ppo.minibatches));
        activation_width = 2 * sum(p.ppo.hidden) + static_cast<std::uint64_t>(actions) + 1;
        net_key = "ppo.hidden";
        act_key = "ppo.minibatches";
    } else if (p.run.trainer == "iql") {
        const std::uint64_t n = static_cast<std::uint64_t>(p.iql.dataset_size);
        items.push_back({fmt::format("offline dataset ({} transitions x {} B)", n, per_transition),
                         n * per_transition, "iql.dataset_size"});
        const auto q = mlp_params(kStateDim, p.iql.hidden, actions);
        const auto v = mlp_params(kStateDim, p.iql.hidden, 1);
        const auto pi = mlp_params(kStateDim, p.iql.hidden, actions);
        params = 2 * q + v + pi;
        copies_bytes = params * kF32 * 5;  // weights, grads, Adam m and v, target copy
        activation_rows = static_cast<std::uint64_t>(p.replay_buffer.batch_size);
        activation_width = 5 * sum(p.iql.hidden) + 3 * static_cast<std::uint64_t>(actions) + 1;
        net_key = "iql.hidden";
        act_key = "replay_buffer.batch_size";
    } else {  // dqn, and a profile without a trainer (check reports that separately)
        const std::uint64_t n = static_cast<std::uint64_t>(p.replay_buffer.buffer_size);
        items.push_back({fmt::format("replay buffer ({} transitions x {} B)", n, per_transition),
                         n * per_transition, "replay_buffer.buffer_size"});
        const std::int64_t atoms = p.dqn.head == "c51" ? p.dqn.num_atoms : 1;
        const std::int64_t last = p.dqn.hidden.empty() ? kStateDim : p.dqn.hidden.back();
        std::uint64_t head = static_cast<std::uint64_t>(last * actions * atoms + actions * atoms);
        if (p.dqn.dueling) head += static_cast<std::uint64_t>(last * atoms + atoms);
        if (p.dqn.head == "iqn") head += 64 * static_cast<std::uint64_t>(last);  // cosine embedding
        std::vector<std::int64_t> trunk(p.dqn.hidden);
        params = mlp_params(kStateDim, trunk, 0) +
                 head * static_cast<std::uint64_t>(p.dqn.ensemble_size);
        if (p.dqn.attention) params += static_cast<std::uint64_t>(kStateDim * kStateDim * 3);
        if (p.dqn.curiosity) params += 2 * mlp_params(2 * kStateDim, {256}, kStateDim);
        copies_bytes = params * kF32 * 6;  // weights, grads, Adam m and v, target, last good
        activation_rows = static_cast<std::uint64_t>(p.replay_buffer.batch_size) *
                          (p.dqn.head == "iqn" ? 32 : 1);  // IQN: 32 quantile samples per row
        // online (s), online (s') for double DQN, target (s'); C51 distributions and gradients
        activation_width = 3 * sum(p.dqn.hidden) +
                           4 * static_cast<std::uint64_t>(actions * atoms * p.dqn.ensemble_size);
        net_key = "dqn.hidden";
        act_key = "replay_buffer.batch_size";
    }
    items.push_back({fmt::format("networks ({} parameters, with gradients, Adam moments, copies)", params),
                     copies_bytes, net_key});
    // Forward activations, their gradients, and pre-activations: 3 floats per unit per row.
    items.push_back({fmt::format("batch activations ({} rows)", activation_rows),
                     activation_rows * activation_width * kF32 * 3, act_key});
    items.push_back({"CUDA context and cuBLAS workspace (approximate, fixed)", 400ull << 20, ""});
    std::stable_sort(items.begin(), items.end(),
                     [](const MemoryItem& a, const MemoryItem& b) { return a.bytes > b.bytes; });
    return items;
}

std::uint64_t total_bytes(const std::vector<MemoryItem>& items) {
    std::uint64_t t = 0;
    for (const auto& i : items) t += i.bytes;
    return t;
}

std::string format_bytes(std::uint64_t b) {
    const double x = static_cast<double>(b);
    if (b >= (1ull << 30)) return fmt::format("{:.2f} GiB", x / (1ull << 30));
    if (b >= (1ull << 20)) return fmt::format("{:.1f} MiB", x / (1ull << 20));
    if (b >= (1ull << 10)) return fmt::format("{:.1f} KiB", x / (1ull << 10));
    return fmt::format("{} B", b);
}

}  // namespace fh::config
