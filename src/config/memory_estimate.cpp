/// @file memory_estimate.cpp
/// @brief The sizes of a run's allocations; see memory_estimate.hpp.
#include "config/memory_estimate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>

#include "abi/core_network.h"
#include "abi/core_optim.h"
#include "data/features.hpp"
#include "math/backtest.h"
#include "math/ppo.h"
#include "math/dt.h"
#include "math/supervised.h"
#include "util/errors.hpp"

namespace fh::config {
namespace {

constexpr std::uint64_t kF32 = 4;
constexpr std::uint64_t kAlign = 32;  // nn::ParamLayout::kAlignment: every slice starts at a multiple
constexpr std::uint64_t kD = static_cast<std::uint64_t>(kStateDim);

std::uint64_t u(std::int64_t v) {
    return v < 0 ? 0 : static_cast<std::uint64_t>(v);
}
std::uint64_t aligned(std::uint64_t n) {
    return (n + kAlign - 1) / kAlign * kAlign;
}

/// a * b saturating at the largest uint64 (products of profile values cannot wrap).
std::uint64_t mul(std::uint64_t a, std::uint64_t b) {
    if (a != 0 && b > std::numeric_limits<std::uint64_t>::max() / a) return std::numeric_limits<std::uint64_t>::max();
    return a * b;
}
std::uint64_t add(std::uint64_t a, std::uint64_t b) {
    return b > std::numeric_limits<std::uint64_t>::max() - a ? std::numeric_limits<std::uint64_t>::max() : a + b;
}

/// An MLP of `sizes` (in, hidden..., out): its parameter floats in a ParamLayout (weight and bias
/// slices, each aligned), its largest weight matrix, and its workspace floats per row.
struct Mlp {
    std::uint64_t params = 0, largest = 0, per_row = 0, widest = 0;
};
Mlp mlp(std::uint64_t in, const std::vector<std::int64_t>& hidden, std::uint64_t out) {
    std::vector<std::uint64_t> sizes{in};
    for (auto h : hidden) sizes.push_back(u(h));
    sizes.push_back(out);
    Mlp m;
    for (std::size_t l = 1; l < sizes.size(); ++l) {
        const std::uint64_t w = mul(sizes[l - 1], sizes[l]);
        m.params = add(m.params, add(aligned(w), aligned(sizes[l])));
        m.largest = std::max(m.largest, w);
        // nn::Mlp::Workspace: the activations of every layer, the gradients of all but the last
        m.per_row = add(m.per_row, sizes[l] * (l + 1 < sizes.size() ? 2 : 1));
        m.widest = std::max(m.widest, sizes[l]);
    }
    return m;
}

/// The curiosity bonus's forward model (trainers::CuriosityModel): [state | one-hot action] ->
/// the next bar's market features through one layer of the trainer's first hidden width.
Mlp curiosity_model(const std::vector<std::int64_t>& hidden, std::uint64_t actions) {
    return mlp(kD + actions, {hidden.empty() ? 1 : hidden.front()}, kMarketDim);
}

std::string data_key(const Profile& p) {
    return p.data.path.empty() ? "data.synthetic_bars" : "data.path";
}

/// Everything both estimates and the array check derive from.
struct Model {
    std::vector<MemoryItem> device;
    std::vector<ArrayExtent> arrays;
    std::uint64_t checkpoint_bytes = 0;  ///< the state tensors a checkpoint copies to the host
    std::uint64_t dump_read_bytes = 0;   ///< an IQL replay dump read into host memory
    /// dt: the dataset read back to the host and rebuilt into episodes (with a dump: also the dump read)
    std::uint64_t episodes_bytes = 0;
};

Model build(const Profile& p, const SizeInputs& in) {
    Model m;
    const std::uint64_t bars = in.bars > 0 ? in.bars : u(p.data.synthetic_bars);
    const std::uint64_t actions = u(p.num_actions());
    const std::uint64_t envs = u(p.experience.gpu_n_episodes);
    const auto& ex = p.experience;

    // The market on the device: open, high, low, close, ATR (doubles), the features (floats) and
    // the splits' episode starts and ends (ints, at most one pair per bar).
    const std::uint64_t per_bar = 5 * 8 + kMarketDim * kF32 + 2 * 4;
    m.device.push_back({fmt::format("market data ({} bars x {} B)", bars, per_bar), mul(bars, per_bar), data_key(p)});
    if (in.bars_known)
        m.arrays.push_back({fmt::format("the market features ({} bars x {} floats)", bars, kMarketDim),
                            mul(bars, kMarketDim), data_key(p)});

    // Environments: state, portfolio rows, observations and next observations, reward, done,
    // step info, actions.
    const auto env_bytes = [&](std::uint64_t n) {
        return mul(n, sizeof(env::EnvState) + env::PORTFOLIO_STRIDE * kF32 + 2 * kD * kF32 + 4 + 1 +
                          sizeof(env::StepInfo) + 4);
    };
    const std::uint64_t env_state_bytes = sizeof(env::EnvState) + env::PORTFOLIO_STRIDE * kF32 + kD * kF32;
    m.arrays.push_back({fmt::format("the environments' observations ({} x {} floats)", envs, kD), mul(envs, kD),
                        "experience.gpu_n_episodes"});

    // Backtests (validation and test, one at a time): a record per bar of the split.
    const double share = std::max(p.data.val_fraction, p.data.test_fraction);
    const auto split_bars = static_cast<std::uint64_t>(static_cast<double>(bars) * share) + 1;
    m.device.push_back({fmt::format("backtest records ({} bars x {} B)", split_bars, sizeof(backtest::BarRecord)),
                        mul(split_bars, sizeof(backtest::BarRecord)), "data.val_fraction"});

    const std::uint64_t row_bytes = 2 * kD * kF32 + 4 + 4 + 1;  // state, next state, reward, action, done
    if (p.run.trainer == "ppo") {
        const std::uint64_t steps = u(ex.gpu_timesteps_per_episode);
        const std::uint64_t rollout = mul(envs, steps);
        const std::uint64_t mb = rollout / std::max<std::uint64_t>(1, u(p.ppo.minibatches));
        m.device.push_back({fmt::format("environments ({} x {} B)", envs, env_bytes(1)), env_bytes(envs),
                            "experience.gpu_n_episodes"});
        // states; log-prob, value, next value, reward, advantage, return, penalty, curiosity; action; done
        const std::uint64_t per_step = kD * kF32 + 8 * kF32 + 4 + 1;
        m.device.push_back({fmt::format("rollout buffer ({} steps x {} B)", rollout, per_step), mul(rollout, per_step),
                            "experience.gpu_timesteps_per_episode"});
        m.arrays.push_back({fmt::format("the rollout's observations ({} envs x {} steps x {} floats)", envs, steps, kD),
                            mul(rollout, kD), "experience.gpu_timesteps_per_episode"});
        const std::uint64_t window = u(p.ppo.diversity_window);
        m.device.push_back({"action-diversity windows", mul(envs, add(window, actions)) * 4, "ppo.diversity_window"});
        m.arrays.push_back({fmt::format("the action-diversity windows ({} envs x {} steps)", envs, window),
                            mul(envs, window), "ppo.diversity_window"});
        const Mlp actor = mlp(kD, p.ppo.hidden, actions), critic = mlp(kD, p.ppo.hidden, 1);
        std::uint64_t params = add(actor.params, critic.params);
        std::uint64_t net_copies = mul(params, 4 * kF32);  // weights, gradients, Adam m and v
        std::uint64_t curiosity_bytes = 0;
        if (p.ppo.curiosity) {  // a forward model [state | one-hot action] -> the next bar's features
            const Mlp cur = curiosity_model(p.ppo.hidden, actions);
            net_copies = add(net_copies, mul(cur.params, 4 * kF32));
            curiosity_bytes = mul(envs, (kD + actions + kMarketDim + cur.per_row) * kF32);
            m.checkpoint_bytes = add(m.checkpoint_bytes, mul(cur.params, 3 * kF32));
        }
        m.device.push_back({fmt::format("networks ({} parameters, with gradients and Adam moments)", params),
                            net_copies, "ppo.hidden"});
        m.arrays.push_back({"the actor's and critic's parameters", params, "ppo.hidden"});
        const std::uint64_t ws_row = actor.per_row + critic.per_row;
        const std::uint64_t mb_row = kD + 5 + static_cast<std::uint64_t>(ppo::kPpoLossStats) + actions + 1;
        // per environment, beside the acting workspaces: the critic's on truncated episodes and the
        // step's actions and log-probabilities (two steps), reward and penalty
        const std::uint64_t env_row = ws_row + critic.per_row + 6;
        m.device.push_back(
            {fmt::format("minibatch and workspaces ({} rows per minibatch)", mb),
             add(add(mul(envs, env_row * kF32), mul(mb, ws_row * kF32)), add(mul(mb, mb_row * kF32), curiosity_bytes)),
             "ppo.minibatches"});
        // the advantages' normalisation and the gradient norm's partials; the monitor's sums, the
        // agent's parameters, guard, counters and action histogram (under 1 KiB)
        m.device.push_back({"reductions' scratch and counters",
                            (static_cast<std::uint64_t>(ppo::kNormalizeScratch + abi::kNormGuardScratch) + 256) * kF32,
                            ""});
        // Truncated episodes: up to one per rollout row (row, bar, portfolio features), and the
        // observations of n of them at a time.
        m.device.push_back({fmt::format("truncated episodes ({} x {} B)", rollout, (2 + kD - kMarketDim) * kF32),
                            add(mul(rollout, (2 + kD - kMarketDim) * kF32), mul(envs, kD * kF32)),
                            "experience.gpu_timesteps_per_episode"});
        m.arrays.push_back({fmt::format("a minibatch ({} rows x {} floats)", mb, std::max({kD, actions, actor.widest})),
                            mul(mb, std::max({kD, actions, actor.widest})), "ppo.minibatches"});
        m.checkpoint_bytes =
            add(m.checkpoint_bytes, add(mul(params, 3 * kF32), mul(envs, env_state_bytes + 4 * (window + actions))));
    } else if (p.run.trainer == "iql") {
        const bool from_dump = p.iql.dataset != "behaviour";
        std::uint64_t rows = 0, ds_envs = 0;
        if (from_dump) {
            rows = in.dump_rows;
        } else {
            const std::uint64_t size = u(p.iql.dataset_size);
            ds_envs = std::max<std::uint64_t>(1, std::min(envs, size));
            rows = (size + ds_envs - 1) / ds_envs * ds_envs;
            m.device.push_back({fmt::format("behaviour-policy environments ({} x {} B)", ds_envs, env_bytes(1)),
                                env_bytes(ds_envs), "experience.gpu_n_episodes"});
        }
        const std::string ds_key = from_dump ? "iql.dataset" : "iql.dataset_size";
        m.device.push_back(
            {fmt::format("offline dataset ({} transitions x {} B)", rows, row_bytes), mul(rows, row_bytes), ds_key});
        m.arrays.push_back({fmt::format("the dataset's states ({} x {} floats)", rows, kD), mul(rows, kD), ds_key});
        if (from_dump) m.dump_read_bytes = mul(rows, row_bytes);
        const Mlp q = mlp(kD, p.iql.hidden, actions), v = mlp(kD, p.iql.hidden, 1), pi = mlp(kD, p.iql.hidden, actions);
        const std::uint64_t params = add(add(mul(q.params, 2), v.params), pi.params);
        m.device.push_back({fmt::format("networks ({} parameters, with gradients, Adam moments, target)", params),
                            mul(params, 5 * kF32), "iql.hidden"});
        m.arrays.push_back({"the Q, V and policy parameters", params, "iql.hidden"});
        const std::uint64_t batch = u(p.replay_buffer.batch_size);
        const std::uint64_t ws_row = 4 * q.per_row + 2 * v.per_row + pi.per_row + 2 * kD + 8 + 3 * actions;
        m.device.push_back({fmt::format("batch and workspaces ({} rows)", batch), mul(batch, ws_row * kF32),
                            "replay_buffer.batch_size"});
        m.arrays.push_back({fmt::format("a batch ({} rows x {} floats)", batch, std::max({kD, actions, q.widest})),
                            mul(batch, std::max({kD, actions, q.widest})), "replay_buffer.batch_size"});
        m.checkpoint_bytes = mul(params, 4 * kF32);
    } else if (p.run.trainer == "dt") {
        // The offline dataset as IQL's (a replay ring), then its episodes in order on the device
        // (states, return-to-go token, action, episode start per transition); the shapes of
        // src/trainers/dt/network.cpp (DtNetwork: parameters, Workspace, ActWorkspace).
        const bool from_dump = p.dt.dataset != "behaviour";
        std::uint64_t rows = 0;
        if (from_dump) {
            rows = in.dump_rows;
        } else {
            const std::uint64_t size = u(p.dt.dataset_size);
            const std::uint64_t ds_envs = std::max<std::uint64_t>(1, std::min(envs, size));
            rows = (size + ds_envs - 1) / ds_envs * ds_envs;
            m.device.push_back({fmt::format("behaviour-policy environments ({} x {} B)", ds_envs, env_bytes(1)),
                                env_bytes(ds_envs), "experience.gpu_n_episodes"});
        }
        const std::string ds_key = from_dump ? "dt.dataset" : "dt.dataset_size";
        m.device.push_back({fmt::format("offline dataset ({} transitions x {} B, and its episodes in order)", rows,
                                        row_bytes + (kD + 3) * kF32),
                            mul(rows, row_bytes + (kD + 3) * kF32), ds_key});
        m.arrays.push_back({fmt::format("the dataset's states ({} x {} floats)", rows, kD), mul(rows, kD), ds_key});
        if (from_dump) m.dump_read_bytes = mul(rows, row_bytes);
        // DtEpisodes: the states, action, episode start, reward and rate (double) of every step.
        m.episodes_bytes = add(m.dump_read_bytes, mul(rows, row_bytes + kD * kF32 + 24));
        const std::uint64_t D = u(p.dt.embedding), L = u(p.dt.layers), H = u(p.dt.heads), K = u(p.dt.context);
        const std::uint64_t A = actions, T = 3 * K, B = u(p.dt.batch_size);
        // Each slice is padded to 32 floats (nn::ParamLayout::kAlignment): at most 31 per slice.
        const std::uint64_t slices = 9 + 12 * L;
        const std::uint64_t params =
            add(add(D * kD + 3 * D + A * D + 2 * D + A * D + A + aligned(dt::kCalibrationFloats),
                    mul(L, 4 * D + 3 * D * D + 3 * D + D * D + D + 4 * D * D + 4 * D + 4 * D * D + D)),
                31 * slices);
        m.device.push_back({fmt::format("transformer ({} parameters, with gradients and Adam moments)", params),
                            mul(params, 4 * kF32), "dt.embedding"});
        m.arrays.push_back({"the transformer's parameters", params, "dt.embedding"});
        // Per token row: each layer's activations (18 D + 4 floats) and attention weights (H T),
        // the final norm and logits, the backward's scratch (13 D + A) and the scores' gradient.
        const std::uint64_t row = add(mul(L, 18 * D + 4 + H * T), 14 * D + 2 + 2 * A + H * T);
        const std::uint64_t per_window = add(mul(T, row), K * (2 * kD + 2 * D + 2) + 1);
        m.device.push_back({fmt::format("batch and workspaces ({} windows of {} tokens)", B, T),
                            mul(mul(B, per_window), kF32), "dt.batch_size"});
        m.arrays.push_back({fmt::format("the attention weights ({} windows x {} heads x {} x {})", B, H, T, T),
                            mul(mul(B, H), T * T), "dt.batch_size"});
        // Acting: three token rows per backtest segment and each layer's cache of 3 (K + 1) tokens.
        const std::uint64_t segs = u(p.eval.segments);
        m.device.push_back({fmt::format("acting workspace and KV cache ({} segments)", segs),
                            mul(segs, (3 * (12 * D + 2 + A) + L * 3 * (K + 1) * 2 * D + 2 * D + 2 + kD) * kF32),
                            "eval.segments"});
        m.checkpoint_bytes = mul(params, 3 * kF32);
    } else if (p.run.trainer == "supervised") {
        // Per bar of the training and validation splits (at most every bar): its sample index and
        // label, and the validation loss per sample.
        m.device.push_back(
            {fmt::format("training and validation samples ({} bars x 12 B)", bars), mul(bars, 12), data_key(p)});
        const std::uint64_t kM = static_cast<std::uint64_t>(kMarketDim);
        const Mlp f = mlp(kM, p.supervised.hidden, 1);
        const std::uint64_t params = f.params + aligned(supervised::kCalibrationFloats);
        m.device.push_back({fmt::format("forecaster ({} parameters, with gradients and Adam moments)", params),
                            mul(params, 4 * kF32), "supervised.hidden"});
        m.arrays.push_back({"the forecaster's parameters", params, "supervised.hidden"});
        const std::uint64_t batch = u(p.supervised.batch_size);
        // the validation loss runs over the validation split's bars in chunks
        const auto val_bars = static_cast<std::uint64_t>(static_cast<double>(bars) * p.data.val_fraction) + 1;
        const std::uint64_t chunk =
            std::min<std::uint64_t>(static_cast<std::uint64_t>(kSupervisedValidationChunk), val_bars);
        // a batch (features, labels, predictions' loss and gradient) and its workspace; the
        // validation chunk's the same; the evaluation policy's (one row per backtest segment)
        const std::uint64_t row = kM + 3 + f.per_row;
        m.device.push_back({fmt::format("batch and workspaces ({} rows, validation chunks of {})", batch, chunk),
                            mul(add(batch, add(chunk, u(p.eval.segments))), row * kF32), "supervised.batch_size"});
        m.arrays.push_back({fmt::format("a batch ({} rows x {} floats)", batch, std::max(kM, f.widest)),
                            mul(batch, std::max(kM, f.widest)), "supervised.batch_size"});
        m.checkpoint_bytes = mul(params, 3 * kF32);
    } else {  // dqn, and a profile without a trainer (resolution reports that separately)
        const std::uint64_t rows = dqn_replay_rows(p);
        m.device.push_back({fmt::format("environments ({} x {} B)", envs, env_bytes(1)), env_bytes(envs),
                            "experience.gpu_n_episodes"});
        m.device.push_back({fmt::format("replay buffer ({} transitions x {} B)", rows, row_bytes), mul(rows, row_bytes),
                            "replay_buffer.buffer_size"});
        m.arrays.push_back({fmt::format("the replay buffer's states ({} transitions x {} floats)", rows, kD),
                            mul(rows, kD), "replay_buffer.buffer_size"});
        if (p.dqn.her)  // the goal of every stored transition; the network's inputs are 2 features wider (below)
            m.device.push_back({fmt::format("HER goals ({} transitions x 4 B)", rows), mul(rows, kF32), "dqn.her"});
        // The scalar head (dqn.head = "mse") has one output per action, and so has the IQN head per fraction.
        const std::uint64_t atoms = p.dqn.head == "c51" ? u(p.dqn.num_atoms) : 1;
        // An ensemble's K heads sit side by side in the output layer: every head term times K.
        const std::uint64_t heads = u(p.dqn.ensemble_size);
        const std::uint64_t az = mul(mul(actions, atoms), heads);
        const Mlp trunk = mlp(
            kD, std::vector<std::int64_t>(p.dqn.hidden.begin(), p.dqn.hidden.end() - (p.dqn.hidden.empty() ? 0 : 1)),
            p.dqn.hidden.empty() ? 1 : u(p.dqn.hidden.back()));
        const std::uint64_t last = p.dqn.hidden.empty() ? kD : u(p.dqn.hidden.back());
        const Mlp value = mlp(last, {}, mul(atoms, heads)), adv = mlp(last, {}, az);
        const std::uint64_t params = add(add(trunk.params, value.params), adv.params);
        m.device.push_back({fmt::format("networks ({} parameters, with target, gradients and Adam moments)", params),
                            mul(params, 5 * kF32), "dqn.hidden"});
        m.arrays.push_back({"the Q network's parameters", params, "dqn.hidden"});
        // QNetwork::Workspace per row: trunk, value and advantage layers, logits, probabilities,
        // Q, and the gradients of the value, advantage and trunk outputs.
        std::uint64_t ws_row = trunk.per_row + heads * (2 * atoms + actions) + 4 * az + 2 * last;
        if (p.dqn.attention) {  // the attended state and its gradient, the scores, weights and their gradient
            const std::uint64_t groups = data::core42_groups().size() + 1;  // + the portfolio features
            ws_row = add(ws_row, 2 * kD + 3 * groups);
        }
        const std::uint64_t batch = u(p.replay_buffer.batch_size);
        // the acting workspace (one row per environment), three batch workspaces (online on s
        // and s', target on s'), the sampled batch and the two loss gradients
        const std::uint64_t ws = add(mul(envs, ws_row), mul(batch, 3 * ws_row + 2 * kD + 6 + 2 * az));
        m.device.push_back({fmt::format("batch and workspaces ({} rows, {} environments)", batch, envs), mul(ws, kF32),
                            "replay_buffer.batch_size"});
        m.arrays.push_back({fmt::format("a batch's C51 logits ({} rows x {} actions x {} atoms x {} heads)", batch,
                                        actions, atoms, heads),
                            mul(batch, az), "replay_buffer.batch_size"});
        m.arrays.push_back({fmt::format("the acting C51 logits ({} environments x {} actions x {} atoms x {} heads)",
                                        envs, actions, atoms, heads),
                            mul(envs, az), "experience.gpu_n_episodes"});
        // The replay memory, unless checkpoint.keep_replay = false leaves it out.
        const std::uint64_t replay_bytes = p.checkpoint.keep_replay ? mul(rows, row_bytes) : 0;
        if (p.dqn.head == "iqn") {
            // The IQN head (docs/dqn.md) instead of the C51 layers: the fraction embedding (n_cos ->
            // H) and the head layer (H -> W); every sample has N fractions in an update and K when
            // acting. Per update (both networks on [s; s'], 4B samples): the features and
            // fractions, the embedding's and the head layer's activations and the products x
            // (rows = batch * N); then the backward's dx, d psi (B * N rows) and d phi. Acting embeds
            // its K midpoints once and runs one row per environment (their mean embedding).
            const std::uint64_t N = u(p.dqn.iqn_quantiles), K = u(p.dqn.iqn_act_quantiles), C = u(p.dqn.iqn_embedding);
            const std::uint64_t W = (p.dqn.dueling ? 1 : 0) + actions;
            const Mlp embed = mlp(C, {}, last), head = mlp(last, {}, W);
            const std::uint64_t iqn_params = add(add(trunk.params, embed.params), head.params);
            m.device.push_back({fmt::format("the IQN fraction embedding ({} parameters, with target, gradients and "
                                            "Adam moments)",
                                            embed.params),
                                mul(embed.params, 5 * kF32), "dqn.iqn_embedding"});
            const std::uint64_t upd_rows = mul(batch, N);  // one network's samples' fraction rows
            // The backward's dx and d psi cover the workspace's rows (both networks on [s; s'], 4B
            // samples); d phi one row per sample; the loss's gradient the online rows at s.
            const std::uint64_t iqn_ws =
                add(add(mul(mul(2, upd_rows), C + 1), mul(mul(4, upd_rows), 2 * last + W)),
                    add(add(mul(mul(4, upd_rows), 2 * last), mul(mul(4, batch), last) + mul(upd_rows, W)),
                        add(mul(envs, last + W), mul(K, C + last + 1) + last)));
            m.device.push_back({fmt::format("IQN fractions and workspaces ({} rows per network of an update, {} "
                                            "midpoints when acting)",
                                            mul(2, upd_rows), K),
                                mul(iqn_ws, kF32), "dqn.iqn_quantiles"});
            m.arrays.push_back({fmt::format("an update's IQN rows ({} x {} fractions x {} floats, both networks)",
                                            mul(4, batch), N, last),
                                mul(mul(4, upd_rows), last), "dqn.iqn_quantiles"});
            m.checkpoint_bytes = add(add(mul(iqn_params, 4 * kF32), replay_bytes), mul(envs, env_state_bytes));
        } else {
            m.checkpoint_bytes = add(add(mul(params, 4 * kF32), replay_bytes), mul(envs, env_state_bytes));
        }
        if (p.dqn.curiosity) {
            // its parameters with gradients and Adam moments; per environment: its input, the
            // next bar's features, the error, the prediction's gradient and its workspace
            const Mlp cur = curiosity_model(p.dqn.hidden, actions);
            m.device.push_back(
                {fmt::format("curiosity model ({} parameters, {} rows per step)", cur.params, envs),
                 add(mul(cur.params, 4 * kF32), mul(envs, (kD + actions + 2 * kMarketDim + 1 + cur.per_row) * kF32)),
                 "dqn.curiosity"});
            m.checkpoint_bytes = add(m.checkpoint_bytes, mul(cur.params, 3 * kF32));
        }
    }
    if (!in.host_backend)
        m.device.push_back(
            {"CUDA context, cuBLAS workspaces and the streams' scratch (approximate, fixed)", 600ull << 20, ""});
    if (!in.host_backend && p.gpu.precision == "bf16")  // two regions of BF16 operands per stream
        m.device.push_back({"BF16 operands of the matrix products (every stream's scratch)",
                            mul(static_cast<std::uint64_t>(abi::kBf16ScratchStreams),
                                2 * static_cast<std::uint64_t>(abi::kBf16RegionElements) * 2),
                            "gpu.precision"});
    const auto by_size = [](const MemoryItem& a, const MemoryItem& b) { return a.bytes > b.bytes; };
    std::stable_sort(m.device.begin(), m.device.end(), by_size);
    return m;
}

}  // namespace

std::uint64_t dqn_replay_rows(const Profile& p) {
    const std::uint64_t envs = std::max<std::uint64_t>(1, u(p.experience.gpu_n_episodes));
    const std::uint64_t steps = std::max(u(p.replay_buffer.buffer_size) / envs, u(p.experience.n_step) + 1);
    return mul(steps, envs);
}

std::vector<MemoryItem> estimate_device_memory(const Profile& p, const SizeInputs& in) {
    return build(p, in).device;
}

std::vector<MemoryItem> estimate_device_memory(const Profile& p, std::uint64_t bars) {
    SizeInputs in;
    in.bars = bars;
    return estimate_device_memory(p, in);
}

std::vector<MemoryItem> estimate_host_memory(const Profile& p, const SizeInputs& in) {
    const Model m = build(p, in);
    std::vector<MemoryItem> items;
    const std::uint64_t bars = in.bars > 0 ? in.bars : u(p.data.synthetic_bars);
    // The bars (time, OHLCV, ATR) and their features (224 B a bar); as much again for the fxcache
    // image while it is written (CSV data, or a synthetic market with a cache_dir); about 64 B a
    // bar of CSV text while it is parsed.
    const std::uint64_t bar_bytes = 8 + 6 * 8 + kMarketDim * kF32;
    const bool cached = !p.data.path.empty() || !p.data.cache_dir.empty();
    const std::uint64_t per_bar = bar_bytes * (cached ? 2 : 1) + (p.data.path.empty() ? 0 : 64);
    items.push_back(
        {fmt::format("market data{} ({} bars x {} B)", cached ? " and its fxcache image" : "", bars, per_bar),
         mul(bars, per_bar), data_key(p)});
    if (m.episodes_bytes > 0)
        items.push_back({"the dataset read back and rebuilt into episodes", m.episodes_bytes,
                         p.dt.dataset != "behaviour" ? "dt.dataset" : "dt.dataset_size"});
    else if (m.dump_read_bytes > m.checkpoint_bytes)
        items.push_back({"the replay dump, read before it is uploaded", m.dump_read_bytes, "iql.dataset"});
    else
        items.push_back({"the host copy a checkpoint is written from", m.checkpoint_bytes,
                         p.run.trainer == "dqn" || p.run.trainer.empty()
                             ? (p.checkpoint.keep_replay ? "replay_buffer.buffer_size" : "dqn.hidden")
                         : p.run.trainer == "ppo"        ? "ppo.hidden"
                         : p.run.trainer == "supervised" ? "supervised.hidden"
                         : p.run.trainer == "dt"         ? "dt.embedding"
                                                         : "iql.hidden"});
    if (in.host_backend)
        for (auto item : m.device) {
            item.consumer += " (CPU backend)";
            items.push_back(item);
        }
    std::stable_sort(items.begin(), items.end(),
                     [](const MemoryItem& a, const MemoryItem& b) { return a.bytes > b.bytes; });
    return items;
}

std::vector<ArrayExtent> array_extents(const Profile& p, const SizeInputs& in) {
    return build(p, in).arrays;
}

std::vector<IndexProblem> index_range_problems(const Profile& p, const SizeInputs& in) {
    std::vector<IndexProblem> out;
    for (const auto& a : array_extents(p, in))
        if (a.elements > kMaxArrayElements)
            out.push_back({a.key, fmt::format("{}: {} elements in one array, more than the kernels' int index "
                                              "range ({}); lower {}",
                                              a.what, a.elements, kMaxArrayElements, a.key)});
    return out;
}

std::uint64_t total_bytes(const std::vector<MemoryItem>& items) {
    std::uint64_t t = 0;
    for (const auto& i : items) t = add(t, i.bytes);
    return t;
}

std::string format_bytes(std::uint64_t b) {
    const double x = static_cast<double>(b);
    if (b >= (1ull << 30)) return fmt::format("{:.2f} GiB", x / (1ull << 30));
    if (b >= (1ull << 20)) return fmt::format("{:.1f} MiB", x / (1ull << 20));
    if (b >= (1ull << 10)) return fmt::format("{:.1f} KiB", x / (1ull << 10));
    return fmt::format("{} B", b);
}

void require_memory(const std::vector<MemoryItem>& items, std::uint64_t available, const std::string& what,
                    const std::string& where) {
    const std::uint64_t need = total_bytes(items);
    if (need <= available) return;
    std::string top;
    for (std::size_t i = 0; i < std::min<std::size_t>(3, items.size()); ++i)
        top += fmt::format("\n  {:>10}  {}{}", format_bytes(items[i].bytes), items[i].consumer,
                           items[i].key.empty() ? "" : fmt::format(" (change {})", items[i].key));
    throw DeviceError(
        fmt::format("the run needs about {} of {} but {} is available ({}); the biggest consumers:{}\n"
                    "Lower the sizes named above (`foxhunt-train check PROFILE` prints the whole estimate).",
                    format_bytes(need), what, format_bytes(available), where, top));
}

std::uint64_t available_host_memory() {
    std::uint64_t avail = 0;
    if (std::ifstream in("/proc/meminfo"); in) {
        std::string key;
        std::uint64_t kb = 0;
        std::string unit;
        while (in >> key >> kb) {
            std::getline(in, unit);
            if (key == "MemAvailable:") {
                avail = kb * 1024;
                break;
            }
        }
    }
    // cgroup v2: the limit of this process's group, less what it uses already.
    std::string group;
    if (std::ifstream cg("/proc/self/cgroup"); cg) {
        std::string line;
        while (std::getline(cg, line))
            if (line.rfind("0::", 0) == 0) group = line.substr(3);
    }
    const std::string base = "/sys/fs/cgroup" + (group == "/" ? std::string() : group);
    std::string max_text;
    std::uint64_t current = 0;
    if (std::ifstream mx(base + "/memory.max"); mx) mx >> max_text;
    if (std::ifstream cur(base + "/memory.current"); cur) cur >> current;
    if (!max_text.empty() && max_text != "max") {
        std::uint64_t limit = 0;
        try {
            limit = std::stoull(max_text);
        } catch (const std::exception&) {
            limit = 0;
        }
        if (limit > 0) {
            const std::uint64_t left = limit > current ? limit - current : 0;
            avail = avail == 0 ? left : std::min(avail, left);
        }
    }
    return avail;
}

}  // namespace fh::config
