/// @file schema.cpp
/// @brief The schema table (every profile key) and the helpers built on it, the resolved
///        profile's TOML text (to_toml) among them.
#include "config/schema.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>

#include "util/json_string.hpp"

namespace fh::config {
namespace {

/// A key's section, name and Profile field, all from one spelling: FH_KEY(training, gamma) is
/// training.gamma, bound to Profile::training.gamma.
struct Key {
    // A constructor, not aggregate initialisation: FH_KEY's parentheses would need C++20's
    // parenthesised aggregates, which clang 14 (the fuzzer's compiler) lacks.
    Key(std::string_view s, std::string_view k, FieldPtr (*f)(Profile&)) : section(s), key(k), field(f) {}
    std::string_view section, key;
    FieldPtr (*field)(Profile&);
};
#define FH_KEY(s, k) Key(#s, #k, [](Profile& p) -> FieldPtr { return &p.s.k; })

Bounds closed(double lo, double hi) {
    return {lo, hi, false, false};
}
Bounds open(double lo, double hi) {
    return {lo, hi, true, true};
}
Bounds open_closed(double lo, double hi) {
    return {lo, hi, true, false};
}
Bounds closed_open(double lo, double hi) {
    return {lo, hi, false, true};
}

KeyDescriptor integer(Key k, Bounds b, std::string_view doc, Rule rule = Rule::none) {
    return {k.section, k.key, KeyType::integer, b, "", rule, 0, 0, false, doc, k.field};
}
KeyDescriptor number(Key k, Bounds b, std::string_view doc) {
    return {k.section, k.key, KeyType::number, b, "", Rule::none, 0, 0, false, doc, k.field};
}
KeyDescriptor boolean(Key k, std::string_view doc) {
    return {k.section, k.key, KeyType::boolean, {}, "", Rule::none, 0, 0, false, doc, k.field};
}
KeyDescriptor text(Key k, std::string_view choices, std::string_view doc, Rule rule = Rule::no_newline) {
    return {k.section, k.key, KeyType::string, {}, choices, rule, 0, 0, false, doc, k.field};
}
KeyDescriptor layers(Key k, std::string_view doc) {
    return {k.section, k.key, KeyType::int_array, closed(1, 16384), "", Rule::none, 1, 16, false, doc, k.field};
}
KeyDescriptor required(KeyDescriptor k) {
    k.required = true;
    return k;
}

constexpr double kMaxCount = 9.0e15;  // integers stay exact in a double below 2^53
// Transitions of a replay buffer or dataset: rows x 50 floats of states must stay within the
// kernels' int index range (2^31 - 1 elements).
constexpr double kMaxRows = 40'000'000;
// Floats that reach float32 device math or double accounting are bounded far from overflow.

std::vector<KeyDescriptor> build_schema() {
    return {
        // [run]
        text(FH_KEY(run, name), "", "run name: the run directory's name under output_dir; \"\" = TRAINER-DATE-TIME",
             Rule::run_name),
        required(text(FH_KEY(run, trainer), "dqn|ppo|iql|supervised|dt", "the trainer (required)")),
        integer(FH_KEY(run, seed), closed(0, kMaxCount),
                "master seed: same profile, seed and device give identical results"),
        integer(FH_KEY(run, population), closed(1, 256),
                "agents trained together in one process, agent i with seed run.seed + i, each in its own run directory "
                "under the population's (docs/sweeps.md); 1 = a single run"),
        text(FH_KEY(run, population_batching), "auto|on|off",
             "a DQN, IQL or PPO population as one batched engine (every op one launch for all agents) where its agents "
             "allow it: auto for IQL always, for PPO when the widest ppo.hidden layer <= 256 and a rollout "
             "(experience.gpu_n_episodes x gpu_timesteps_per_episode) >= 1024 transitions, for DQN when "
             "replay_buffer.batch_size x the widest dqn.hidden layer >= 32768 (smaller agents run faster with their "
             "own launches), on always, off never (docs/sweeps.md)"),
        text(FH_KEY(run, device), "",
             "compute device: auto (GPU if present, else CPU with a warning), cpu, cuda, cuda:N", Rule::device),
        text(FH_KEY(run, output_dir), "", "root directory of run directories"),
        integer(FH_KEY(run, total_steps), closed(1, kMaxCount),
                "training budget: environment steps (DQN, PPO) or gradient updates (IQL, supervised, dt)"),
        integer(FH_KEY(run, log_interval), closed(1, kMaxCount),
                "env steps (IQL, supervised, dt: updates) between metrics.jsonl lines"),
        integer(FH_KEY(run, eval_interval), closed(0, kMaxCount),
                "env steps (IQL, supervised, dt: updates) between validation backtests; 0 = none (the test backtest at "
                "the end uses the last weights)"),
        integer(FH_KEY(run, checkpoint_interval), closed(0, kMaxCount),
                "env steps (IQL, supervised, dt: updates) between checkpoints; 0 = only at the end"),
        text(FH_KEY(run, on_exists), "new|skip|resume|error",
             "when the run directory exists: new makes NAME-2; skip does nothing; resume continues an unfinished run "
             "and skips a finished one; error stops (docs/sweeps.md)"),
        text(
            FH_KEY(run, search), "none|pbt|halving",
            "a search inside a population (docs/sweeps.md): pbt = population-based training, the bottom agents copying "
            "the top ones every search.interval and perturbing their keys; halving = successive halving (ASHA), the "
            "worst agents at each rung stopped and their slots given new points; none = each agent trains alone"),
        // [data]
        text(FH_KEY(data, path), "", "CSV file or directory of bars; \"\" = the embedded synthetic market"),
        text(FH_KEY(data, format), "auto|csv", "format of data.path; auto = from the file name"),
        number(FH_KEY(data, train_fraction), open_closed(0, 1), "leading share of the bars used for training"),
        number(FH_KEY(data, val_fraction), closed_open(0, 1), "following share used for validation (early stopping)"),
        number(FH_KEY(data, test_fraction), closed_open(0, 1),
               "following share used for the final test; the three sum to at most 1"),
        text(FH_KEY(data, feature_set), "core42", "market features per bar (docs/features.md)"),
        text(FH_KEY(data, cache_dir), "",
             "fxcache directory for computed features; \"\" = next to the data (the synthetic market is not cached)"),
        integer(FH_KEY(data, synthetic_bars), closed(1000, 1'000'000),
                "bars of the synthetic market (when data.path is \"\"); more would drift its price far from the "
                "instrument's scale"),
        number(FH_KEY(data, planted_signal), closed_open(0, 1),
               "strength of the synthetic market's planted predictable component; 0 = none"),
        integer(FH_KEY(data, seed), closed(-1, kMaxCount),
                "seed of the synthetic market (when data.path is \"\"); -1 = run.seed, so each seed draws its own "
                "market; set it to hold the market fixed across seeds (docs/data.md)"),
        // [instrument]
        number(FH_KEY(instrument, multiplier), open_closed(0, 1e9), "currency per point per contract"),
        number(FH_KEY(instrument, tick_size), open_closed(0, 1e9), "minimum price increment, in points"),
        number(FH_KEY(instrument, commission), closed(0, 1e9), "commission per contract per side, currency"),
        number(FH_KEY(instrument, slippage_ticks), closed(0, 1e6),
               "ticks against the trader on every market-order fill"),
        number(
            FH_KEY(instrument, initial_equity), closed(1, 1e15),
            "starting account equity, currency (at least 1: rewards divide by it, and a smaller one overflows them)"),
        integer(FH_KEY(instrument, max_contracts), closed(1, 100000), "contracts held at the extreme position level"),
        number(FH_KEY(instrument, bars_per_year), closed(0, 1e8),
               "bars per year for annualised metrics; 0 = infer from timestamps"),
        // [env]
        integer(FH_KEY(env, position_levels), closed(3, 101),
                "target position levels -(L-1)/2 .. (L-1)/2, scaled to max_contracts", Rule::odd),
        integer(FH_KEY(env, urgency_levels), closed(1, 3), "order types: market, + passive limit, + far limit"),
        number(FH_KEY(env, reward_scale), open_closed(0, 1e6),
               "reward = equity change / initial_equity * reward_scale"),
        number(FH_KEY(env, drawdown_penalty), closed(0, 1e6),
               "weight of the increase in drawdown subtracted from the reward"),
        number(FH_KEY(env, bankruptcy_fraction), closed_open(0, 1),
               "an episode ends when equity < this * initial_equity"),
        number(FH_KEY(env, limit_offset_ticks), closed(0, 1e6),
               "passive limit order distance from the close, in ticks"),
        number(FH_KEY(env, limit_atr_mult), closed(0, 1e6),
               "far limit order distance from the close, in multiples of ATR(14)"),
        // [experience]
        integer(FH_KEY(experience, gpu_n_episodes), closed(1, 1 << 20), "environments stepped in parallel"),
        integer(FH_KEY(experience, gpu_timesteps_per_episode), closed(1, 10'000'000),
                "bars per episode (shorter at the data end or on bankruptcy)"),
        integer(FH_KEY(experience, n_step), closed(1, 64), "n of the n-step return"),
        // [replay_buffer]
        integer(FH_KEY(replay_buffer, buffer_size), closed(1, kMaxRows),
                "transitions kept in the device replay buffer"),
        integer(FH_KEY(replay_buffer, min_replay_size), closed(1, kMaxRows),
                "transitions collected before the first update"),
        integer(FH_KEY(replay_buffer, batch_size), closed(1, 1 << 20), "transitions per gradient update"),
        boolean(FH_KEY(replay_buffer, save_dump),
                "DQN: write the replay memory to replay.fhreplay in the run directory at the end (an iql.dataset)"),
        // [training]
        number(FH_KEY(training, learning_rate), open_closed(0, 1), "Adam step size"),
        number(FH_KEY(training, gamma), closed(0, 1), "discount factor per bar"),
        number(FH_KEY(training, grad_clip_norm), closed(0, 1e6), "global gradient-norm clip; 0 = off"),
        integer(FH_KEY(training, updates_per_iteration), closed(1, 1024), "gradient updates per collection step"),
        integer(FH_KEY(training, buffer_size), closed(0, kMaxRows),
                "alias of replay_buffer.buffer_size (both set and different = error); 0 = unset"),
        number(FH_KEY(training, tau), closed(0, 1),
               "soft target update rate per update; 0 = copy every target_update_period updates"),
        integer(FH_KEY(training, target_update_period), closed(1, kMaxCount),
                "updates between target-network copies when tau = 0"),
        number(FH_KEY(training, epsilon_start), closed(0, 1), "initial epsilon-greedy exploration rate"),
        number(FH_KEY(training, epsilon_end), closed(0, 1), "final exploration rate (at most epsilon_start)"),
        integer(FH_KEY(training, epsilon_decay_steps), closed(0, kMaxCount),
                "environment steps of the linear decay; 0 = epsilon_end from the start"),
        integer(FH_KEY(training, max_bad_updates), closed(1, kMaxCount),
                "training guard: skipped non-finite updates before the run stops (exit 5)"),
        // [dqn]
        layers(FH_KEY(dqn, hidden), "widths of the MLP trunk's hidden layers"),
        boolean(FH_KEY(dqn, dueling), "separate value and advantage heads"),
        integer(FH_KEY(dqn, num_atoms), closed(2, 1001), "atoms of the C51 support (51 or 101 typical)"),
        number(FH_KEY(dqn, v_min), closed(-1e6, 1e6), "lowest value of the C51 support (below v_max)"),
        number(FH_KEY(dqn, v_max), closed(-1e6, 1e6), "highest value of the C51 support"),
        number(FH_KEY(dqn, mse_blend_alpha), closed(0, 1),
               "weight of the C51 loss; the MSE loss on the expected Q gets 1 - alpha"),
        boolean(FH_KEY(dqn, double_dqn), "double-DQN targets: the online net selects, the target net evaluates"),
        number(
            FH_KEY(dqn, cql_alpha), closed(0, 1e6),
            "weight of the CQL term (logsumexp of Q over actions minus Q of the taken action, docs/dqn.md); 0 = off"),
        integer(FH_KEY(dqn, ensemble_size), closed(1, 32),
                "Q heads on the shared trunk (bootstrapped DQN, docs/dqn.md); 1 = one head. The heads' mean Q acts and "
                "picks the target action; q/ensemble_spread logs their disagreement"),
        number(FH_KEY(dqn, ensemble_bootstrap), open_closed(0, 1),
               "ensemble: probability that a head trains on a replayed transition (its bootstrap mask, fixed per "
               "transition); 1 = every head on every transition"),
        number(FH_KEY(dqn, ensemble_ucb), closed(0, 1e6),
               "ensemble: collection acts on the heads' mean Q plus this times their spread (a UCB bonus); 0 = the "
               "mean. Evaluation always uses the mean"),
        text(FH_KEY(dqn, head), "c51|iqn|mse",
             "output head: c51 = C51 distribution; mse = one Q per action regressed by the MSE (num_atoms, v_min, "
             "v_max, mse_blend_alpha unused); iqn = implicit quantile network, the quantile Huber loss over sampled "
             "fractions, acting on the mean of iqn_act_quantiles fixed midpoints (num_atoms, v_min, v_max, "
             "mse_blend_alpha unused; docs/dqn.md)"),
        integer(FH_KEY(dqn, iqn_quantiles), closed(1, 64),
                "head = iqn: quantile fractions sampled per transition at s and at s' (N = N'); the loss sums N x N "
                "pairs and the update's head rows are batch_size x N"),
        integer(FH_KEY(dqn, iqn_act_quantiles), closed(1, 256),
                "head = iqn: acting's Q is the mean over this many fixed fractions (k + 1/2) / K (deterministic)"),
        integer(FH_KEY(dqn, iqn_embedding), closed(1, 1024),
                "head = iqn: cosine features cos(pi i tau), i < iqn_embedding, of the fraction embedding"),
        boolean(FH_KEY(dqn, attention),
                "feature-group attention before the trunk: a per-sample softmax over the state's feature groups scales "
                "each group (weights logged as attention/<group>, docs/dqn.md)"),
        boolean(FH_KEY(dqn, curiosity),
                "curiosity bonus: a forward model's prediction error of the next bar's features, added to each "
                "collected transition's reward (docs/dqn.md)"),
        number(FH_KEY(dqn, curiosity_coef), closed(0, 1e6), "weight of the curiosity bonus in the stored reward"),
        boolean(FH_KEY(dqn, her),
                "hindsight experience replay: every episode gets a goal, a target return, as two more state features; "
                "the reward adds her_reward at each step at or above it; replayed transitions are relabelled with "
                "returns their episode achieved later (docs/dqn.md)"),
        number(FH_KEY(dqn, her_ratio), closed(0, 1),
               "her: share of replayed transitions whose goal is replaced by a return the same episode achieved later "
               "(the \"future\" strategy); 0 = the episodes' own goals only"),
        number(FH_KEY(dqn, her_reward), open_closed(0, 1e6),
               "her: reward added at every step whose episode return (percent of initial equity) is at or above the "
               "goal; keep her_reward / (1 - gamma) within the value support"),
        number(FH_KEY(dqn, her_goal_min), closed(-100, 1e4),
               "her: lowest episode goal, a target return in percent of instrument.initial_equity (negative: a loss "
               "budget)"),
        number(FH_KEY(dqn, her_goal_max), closed(-100, 1e4),
               "her: highest episode goal, percent; each episode's goal is uniform in [her_goal_min, her_goal_max]"),
        number(FH_KEY(dqn, her_eval_goal), closed(-100, 1e4),
               "her: the target return (percent) evaluation and the backtests condition the policy on; within "
               "[her_goal_min, her_goal_max]"),
        // [ppo]
        layers(FH_KEY(ppo, hidden), "widths of the actor's and critic's hidden layers"),
        number(FH_KEY(ppo, clip), open_closed(0, 1), "clip range of the surrogate objective"),
        number(FH_KEY(ppo, gae_lambda), closed(0, 1), "lambda of GAE"),
        integer(FH_KEY(ppo, epochs), closed(1, 100), "passes over each rollout"),
        integer(FH_KEY(ppo, minibatches), closed(1, 1 << 20), "minibatches per epoch"),
        number(FH_KEY(ppo, entropy_coef), closed(0, 1e6), "weight of the entropy bonus"),
        number(FH_KEY(ppo, value_coef), closed(0, 1e6), "weight of the value loss"),
        integer(FH_KEY(ppo, diversity_window), closed(1, 1'000'000), "steps over which action diversity is measured"),
        number(FH_KEY(ppo, diversity_coef), closed(0, 1e6), "weight of the low-action-diversity penalty; 0 = off"),
        boolean(FH_KEY(ppo, clip_value), "clip the value loss around the rollout's values by ppo.clip"),
        text(FH_KEY(ppo, lr_schedule), "linear|constant",
             "learning-rate schedule: linear decay to 0 over the run, or constant"),
        boolean(FH_KEY(ppo, curiosity),
                "curiosity bonus: a forward model's prediction error of the next bar's features"),
        number(FH_KEY(ppo, curiosity_coef), closed(0, 1e6), "weight of the curiosity bonus in the reward"),
        // [iql]
        layers(FH_KEY(iql, hidden), "widths of the Q, V and policy networks' hidden layers"),
        number(FH_KEY(iql, expectile), open(0, 1), "expectile of the V regression (0.5 = mean)"),
        number(FH_KEY(iql, beta), open_closed(0, 1e6),
               "inverse temperature of the advantage-weighted policy extraction"),
        text(FH_KEY(iql, dataset), "",
             "\"behaviour\" (collect with a behaviour policy on the training split) or the path of a replay dump"),
        integer(FH_KEY(iql, dataset_size), closed(1, kMaxRows), "transitions in the offline dataset"),
        number(FH_KEY(iql, max_weight), open_closed(0, 1e6), "cap of the advantage weights exp(beta * advantage)"),
        // [supervised]
        layers(FH_KEY(supervised, hidden), "widths of the forecaster's hidden layers"),
        text(FH_KEY(supervised, target), "return|direction",
             "what the forecaster predicts: return = the next horizon bars' log return (regression, squared error on "
             "the return over the training labels' RMS); direction = whether it is positive (classification, binary "
             "cross-entropy)"),
        integer(FH_KEY(supervised, horizon), closed(1, 10000),
                "bars ahead of the forecast: the label of bar t is ln(close[t + horizon] / close[t])"),
        integer(FH_KEY(supervised, batch_size), closed(1, 1'000'000),
                "samples of the training split per gradient update"),
        number(FH_KEY(supervised, entry_threshold), closed(0, 1e6),
               "signal adapter: the score magnitude that opens, resizes or reverses a position (score: the forecast "
               "return in units of the labels' RMS, or P(up) - P(down))"),
        number(FH_KEY(supervised, exit_threshold), closed(0, 1e6),
               "signal adapter: below entry_threshold, a position of the score's sign is kept while the score "
               "magnitude is at least this, else closed; at most entry_threshold"),
        text(FH_KEY(supervised, sizing), "fixed|magnitude",
             "signal adapter: fixed = the full position (max_contracts); magnitude = min(1, abs(score) / full_score) "
             "of it, rounded to a position level"),
        number(FH_KEY(supervised, full_score), open_closed(0, 1e6),
               "signal adapter, magnitude sizing: the score magnitude that takes the full position"),
        boolean(FH_KEY(supervised, volatility_sizing),
                "signal adapter: divide the size by the volatility ratio (rv_32 over its training mean; capped at the "
                "full position)"),
        number(FH_KEY(supervised, volatility_floor), open_closed(0, 1e6),
               "signal adapter: the volatility ratio is at least this (limits the size in very quiet markets)"),
        text(FH_KEY(supervised, order_type), "market|passive_limit|far_limit",
             "signal adapter: the order type of every order (urgency 0, 1, 2; needs env.urgency_levels above it)"),
        // [dt]
        integer(FH_KEY(dt, context), closed(1, 256),
                "K: timesteps of a training window (3 K tokens: return-to-go, state, action) and of the acting KV "
                "cache; each token attends over the last K timesteps"),
        integer(FH_KEY(dt, layers), closed(1, 16),
                "transformer blocks (pre-norm: attention, then a GELU MLP of 4 x embedding)"),
        integer(FH_KEY(dt, heads), closed(1, 64), "attention heads; embedding / heads per head (at most 128)"),
        integer(FH_KEY(dt, embedding), closed(4, 1024), "token width (a multiple of dt.heads)"),
        integer(FH_KEY(dt, batch_size), closed(1, 65536), "windows of dt.context timesteps per gradient update"),
        integer(FH_KEY(dt, warmup_updates), closed(0, kMaxCount),
                "the learning rate rises linearly from 0 to training.learning_rate over this many updates; 0 = none"),
        number(FH_KEY(dt, target_quantile), closed(0, 1),
               "the target return the policy acts with: this quantile of the dataset's episodes' mean reward per step "
               "(0.9: a good episode of the data, not an unseen one)"),
        text(FH_KEY(dt, dataset), "",
             "\"behaviour\" (collect with IQL's behaviour policy on the training split) or the path of a replay dump"),
        integer(FH_KEY(dt, dataset_size), closed(1, kMaxRows), "transitions in a behaviour dataset"),
        // [eval]
        integer(FH_KEY(eval, segments), closed(1, 4096), "equal parts of the split backtested in parallel"),
        boolean(FH_KEY(eval, deterministic), "greedy actions in backtests (false is not implemented yet: refused)"),
        integer(FH_KEY(eval, bootstrap_resamples), closed(100, 1'000'000),
                "resamples of the stationary block bootstrap behind every backtest's confidence intervals "
                "(docs/metrics.md)"),
        integer(FH_KEY(eval, bootstrap_block), closed(0, kMaxCount),
                "mean block length (bars) of the block bootstrap; 0 = ceil(n^(1/3)) of the backtest's n returns; "
                "longer than the series: refused"),
        integer(FH_KEY(eval, bootstrap_seed), closed(0, kMaxCount),
                "seed of the block bootstrap (Philox): the same seed gives the same resamples"),
        number(FH_KEY(eval, confidence), open(0.5, 1), "coverage of the bootstrap's percentile intervals"),
        integer(FH_KEY(eval, collapse_window), closed(1, 1'000'000),
                "the collapse monitor (docs/metrics.md): validations in a row whose greedy policy takes one action on "
                "at least 99% of the bars before the run warns and records it in summary.json"),
        // [walk_forward]
        integer(FH_KEY(walk_forward, folds), closed(0, 1000),
                "K folds of a walk-forward (docs/walk-forward.md): the span of data.test_fraction cut into K test "
                "blocks, each fold trained on the bars before its block; 0 = an ordinary run; 1 is refused"),
        integer(FH_KEY(walk_forward, fold), closed(0, 999),
                "the fold this run trains (0 = the earliest); the walk-forward command sets it for each fold"),
        text(FH_KEY(walk_forward, window), "expanding|sliding",
             "a fold's training window: expanding (every bar from the first to its validation block) or sliding (the "
             "first fold's training length, moved forward)"),
        // [search]
        integer(FH_KEY(search, interval), closed(0, kMaxCount),
                "run.search: progress units (env steps; updates for IQL) between rounds, a multiple of "
                "run.eval_interval; 0 = run.eval_interval (docs/sweeps.md); halving: the first rung's budget"),
        integer(FH_KEY(search, eta), closed(2, 100),
                "halving: the rungs stand at search.interval x eta^k progress units of each agent's own training, and "
                "at each one the worst (1 - 1/eta) of the agents that reached it stop"),
        integer(FH_KEY(search, max_points), closed(0, 4096),
                "halving: the points the search trains in all, the population's first agents included (a stopped "
                "agent's slot starts a new point while any are left); 0 = eta x the population's agents"),
        number(FH_KEY(search, fraction), closed(0.01, 0.5),
               "PBT: the share of the ranked agents (at least one) that copies an agent drawn from the same share at "
               "the top"),
        number(FH_KEY(search, perturb_down), open_closed(0, 1),
               "PBT: a perturbed key is multiplied by perturb_down or perturb_up (a seeded coin decides)"),
        number(FH_KEY(search, perturb_up), closed(1, 100), "PBT: see perturb_down"),
        number(FH_KEY(search, resample_probability), closed(0, 1),
               "PBT: the probability that a key of an exploiting agent is drawn again from its distribution instead of "
               "perturbed"),
        boolean(FH_KEY(search, copy_replay),
                "PBT, DQN: the exploiting agent copies the replay memory of the agent it copies besides its weights, "
                "target network and Adam state; false: it keeps its own"),
        // [early_stopping]
        text(FH_KEY(early_stopping, metric), "val_sharpe|val_return|val_sortino|val_loss",
             "validation metric that decides the best checkpoint (val_loss: the supervised forecaster's loss on the "
             "validation split, lower is better)"),
        integer(FH_KEY(early_stopping, patience), closed(0, 1'000'000),
                "evaluations without improvement before stopping; 0 = never stop early"),
        number(FH_KEY(early_stopping, min_delta), closed(0, 1e6), "smallest improvement of the metric that counts"),
        integer(FH_KEY(early_stopping, min_steps), closed(0, kMaxCount), "no early stop before this many steps"),
        // [checkpoint]
        boolean(FH_KEY(checkpoint, keep_replay),
                "DQN: write the replay memory into checkpoints/last.safetensors and best.safetensors (an exact "
                "resume); false: checkpoints without it (dqn-full's replay is about 780 of its 790 MiB), a resume "
                "refills the replay from empty, which is not exact (docs/checkpoints.md); no effect for PPO, IQL, "
                "supervised and dt, which keep no replay in their checkpoints"),
        // [gpu]
        text(FH_KEY(gpu, profile), "",
             "\"auto\" (read the device) or a named device class such as rtx3050, a100, h100 (classes are not "
             "implemented yet: warned, the device is read)",
             Rule::device_class),
        boolean(FH_KEY(gpu, cuda_graphs),
                "capture the repeated steps in CUDA Graphs: each DQN iteration (the collection step beside its "
                "updates), each IQL update, each PPO rollout and each rollout's minibatch updates (false: the same "
                "kernels launch one by one, still on several streams, same results)"),
        text(FH_KEY(gpu, precision), "fp32|tf32|bf16",
             "the arithmetic of the linear layers' matrix products: fp32 (FP32 operands and sums), tf32 (TF32 tensor "
             "cores, FP32 sums; the CPU backend computes FP32), bf16 (operands rounded to BF16 on both backends, FP32 "
             "sums); weights, Adam, losses, environment and returns stay FP32 (docs/performance.md, Precision)"),
        number(FH_KEY(gpu, memory_fraction), open_closed(0, 1), "share of device memory the run may use"),
    };
}

#undef FH_KEY

std::string number_text(double x, bool integral) {
    if (integral) return fmt::format("{}", static_cast<std::int64_t>(x));
    return fmt::format("{}", x);
}

std::vector<std::string> split_choices(std::string_view s) {
    std::vector<std::string> out;
    while (!s.empty()) {
        const auto bar = s.find('|');
        out.emplace_back(s.substr(0, bar));
        if (bar == std::string_view::npos) break;
        s.remove_prefix(bar + 1);
    }
    return out;
}

std::string bounds_text(const Bounds& b, bool integral) {
    const bool has_lo = !std::isinf(b.lo), has_hi = !std::isinf(b.hi);
    if (has_lo && has_hi)
        return fmt::format("{}{}, {}{}", b.lo_open ? '(' : '[', number_text(b.lo, integral),
                           number_text(b.hi, integral), b.hi_open ? ')' : ']');
    if (has_lo) return fmt::format("{} {}", b.lo_open ? ">" : ">=", number_text(b.lo, integral));
    if (has_hi) return fmt::format("{} {}", b.hi_open ? "<" : "<=", number_text(b.hi, integral));
    return "any";
}

/// Whether x lies within b (NaN never does: every comparison with it is false).
bool in_bounds(const Bounds& b, double x) {
    return (b.lo_open ? x > b.lo : x >= b.lo) && (b.hi_open ? x < b.hi : x <= b.hi);
}

bool valid_device(std::string_view s) {
    if (s == "auto" || s == "cpu" || s == "cuda") return true;
    if (s.substr(0, 5) != "cuda:" || s.size() == 5 || s.size() > 8) return false;
    return std::all_of(s.begin() + 5, s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::string lower(std::string_view s) {
    std::string out(s);
    for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        cur[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const std::size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
            cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
        }
        std::swap(prev, cur);
    }
    return prev[b.size()];
}

}  // namespace

std::string_view type_name(KeyType t) {
    static constexpr std::string_view kNames[] = {"integer", "float", "bool", "string", "array of integers"};
    static_assert(std::size(kNames) == static_cast<std::size_t>(KeyType::int_array) + 1, "one per KeyType");
    const auto i = static_cast<std::size_t>(t);
    return i < std::size(kNames) ? kNames[i] : "?";
}

std::string KeyDescriptor::full_name() const {
    return fmt::format("{}.{}", section, key);
}

std::string KeyDescriptor::range_text() const {
    switch (type) {
        case KeyType::integer:
            return (rule == Rule::odd ? "odd, " : "") + bounds_text(bounds, true);
        case KeyType::number:
            return bounds_text(bounds, false) + ", finite";
        case KeyType::boolean:
            return "true, false";
        case KeyType::int_array:
            return fmt::format("{} to {} values, each {}", min_items, max_items, bounds_text(bounds, true));
        case KeyType::string:
            if (rule == Rule::device) return "auto, cpu, cuda, cuda:N";
            if (rule == Rule::run_name) return "a directory name (no /, not . or ..)";
            if (rule == Rule::device_class) return "auto, or a name of a-z 0-9 _ -";
            return choices.empty() ? "any text" : fmt::format("{}", fmt::join(split_choices(choices), ", "));
    }
    return "";
}

std::string KeyDescriptor::check(const KeyValue& value) const {
    switch (type) {
        case KeyType::integer: {
            const auto v = std::get<std::int64_t>(value);
            if (!in_bounds(bounds, static_cast<double>(v)))
                return fmt::format("{} must be {}, got {}", full_name(), range_text(), v);
            if (rule == Rule::odd && v % 2 == 0)
                return fmt::format("{} must be odd (a flat level in the middle), got {}; try {}", full_name(), v,
                                   v + 1);
            return "";
        }
        case KeyType::number: {
            const auto v = std::get<double>(value);
            if (!std::isfinite(v) || !in_bounds(bounds, v))
                return fmt::format("{} must be {}, got {}", full_name(), range_text(), v);
            // The kernels receive the value as a 32-bit float: the range holds for that value
            // too, and a nonzero value must stay a normal float (not rounded to 0, 1 or a
            // denormal the GPU flushes to zero).
            const auto f = static_cast<float>(v);
            if (!in_bounds(bounds, static_cast<double>(f)))
                return fmt::format("{} = {} becomes {} as the 32-bit float the kernels compute with, which is not {}",
                                   full_name(), v, f, range_text());
            if (v != 0 && std::fabs(f) < std::numeric_limits<float>::min())
                return fmt::format(
                    "{} = {} is below the smallest normal 32-bit float ({:g}) the kernels compute "
                    "with: use 0 or a value of at least that size",
                    full_name(), v, std::numeric_limits<float>::min());
            return "";
        }
        case KeyType::boolean:
            return "";
        case KeyType::int_array: {
            const auto& v = std::get<std::vector<std::int64_t>>(value);
            const auto n = static_cast<std::int64_t>(v.size());
            if (n < min_items || n > max_items)
                return fmt::format("{} must have {} to {} values, got {}", full_name(), min_items, max_items, n);
            for (std::size_t i = 0; i < v.size(); ++i)
                if (!in_bounds(bounds, static_cast<double>(v[i])))
                    return fmt::format("{}[{}] must be {}, got {}", full_name(), i, bounds_text(bounds, true), v[i]);
            return "";
        }
        case KeyType::string: {
            const auto& s = std::get<std::string>(value);
            for (unsigned char c : s)
                if (c < 0x20 || c == 0x7f) return fmt::format("{} must not contain control characters", full_name());
            if (rule == Rule::device && !valid_device(s))
                return fmt::format("{} must be one of auto, cpu, cuda, cuda:N; got {}", full_name(), toml_quote(s));
            if (rule == Rule::run_name && !s.empty()) {
                if (s == "." || s == ".." || s.find('/') != std::string::npos)
                    return fmt::format(
                        "{} = {} is not a directory name: it must not be \".\" or \"..\" or contain '/' (the run "
                        "directory is output_dir/name; set run.output_dir or --output for another place)",
                        full_name(), toml_quote(s));
                if (s.size() > 200)
                    return fmt::format(
                        "{} is {} bytes long; at most 200 (a directory name, with room for a \"-2\" suffix)",
                        full_name(), s.size());
            }
            if (rule == Rule::device_class) {
                const bool ok = !s.empty() && s.size() <= 64 && std::all_of(s.begin(), s.end(), [](char c) {
                    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
                });
                if (!ok)
                    return fmt::format("{} must be \"auto\" or a device class name of a-z 0-9 _ -; got {}", full_name(),
                                       toml_quote(s));
            }
            if (!choices.empty()) {
                const auto options = split_choices(choices);
                if (std::find(options.begin(), options.end(), s) == options.end()) {
                    const auto guess = closest(s, options);
                    return fmt::format("{} must be one of {}; got {}{}", full_name(), range_text(), toml_quote(s),
                                       guess ? fmt::format(" (did you mean \"{}\"?)", *guess) : "");
                }
            }
            return "";
        }
    }
    return "";
}

const std::vector<KeyDescriptor>& schema() {
    static const std::vector<KeyDescriptor> table = build_schema();
    return table;
}

const std::vector<SectionDescriptor>& sections() {
    static const std::vector<SectionDescriptor> table = {
        {"run", "what to train, on which device, for how long"},
        {"data", "the bars, their features and the time splits"},
        {"instrument", "the futures contract (defaults: CME E-mini S&P 500)"},
        {"env", "the trading environment and its action space"},
        {"experience", "parallel environments and n-step returns"},
        {"replay_buffer", "uniform replay on the device (DQN)"},
        {"training", "optimisation shared by the trainers"},
        {"dqn", "distributional DQN"},
        {"ppo", "PPO actor-critic"},
        {"iql", "implicit Q-learning from a fixed dataset"},
        {"supervised", "the supervised forecaster baseline and its signal adapter"},
        {"dt", "the Decision Transformer, offline"},
        {"eval", "validation and test backtests"},
        {"walk_forward", "rolling-origin (walk-forward) evaluation"},
        {"search", "a search inside a population: population-based training and successive halving (run.search)"},
        {"early_stopping", "stopping on a validation metric"},
        {"checkpoint", "what the checkpoints keep"},
        {"gpu", "device settings"},
    };
    return table;
}

const KeyDescriptor* find_key(std::string_view section, std::string_view key) {
    for (const auto& k : schema())
        if (k.section == section && k.key == key) return &k;
    return nullptr;
}

bool is_section(std::string_view section) {
    return std::any_of(sections().begin(), sections().end(), [&](const auto& s) { return s.name == section; });
}

KeyValue get_value(const Profile& p, const KeyDescriptor& k) {
    // The binding needs a mutable Profile; reading through it does not modify anything.
    return std::visit([](auto* ptr) -> KeyValue { return *ptr; }, k.field(const_cast<Profile&>(p)));
}

void set_value(Profile& p, const KeyDescriptor& k, const KeyValue& v) {
    std::visit(
        [&](auto* ptr) {
            using T = std::remove_pointer_t<decltype(ptr)>;
            *ptr = std::get<T>(v);
        },
        k.field(p));
}

// A JSON string literal is a TOML basic string (the same escapes), but for DEL, which TOML wants escaped.
std::string toml_quote(std::string_view s) {
    std::string out;
    for (const char ch : util::json_quote(s))
        if (ch == '\x7f')
            out += "\\u007F";
        else
            out += ch;
    return out;
}

std::string toml_value_text(const KeyValue& v) {
    struct Visitor {
        std::string operator()(std::int64_t x) const { return fmt::format("{}", x); }
        std::string operator()(double x) const {
            if (std::isnan(x)) return "nan";
            if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
            std::string s = fmt::format("{}", x);  // shortest form that reads back exactly
            if (s.find_first_of(".eE") == std::string::npos) s += ".0";
            return s;
        }
        std::string operator()(bool x) const { return x ? "true" : "false"; }
        std::string operator()(const std::string& x) const { return toml_quote(x); }
        std::string operator()(const std::vector<std::int64_t>& x) const {
            return fmt::format("[{}]", fmt::join(x, ", "));
        }
    };
    return std::visit(Visitor{}, v);
}

// The resolved profile as TOML is written by hand: toml++ 3.3.0's printer prints floats with 17
// digits and has undefined behaviour on long arrays of small numbers.
std::string to_toml(const Profile& profile) {
    std::string out = std::string(kResolvedProfileHeader) + "# Every key is listed; docs/profiles.md explains each.\n";
    for (const auto& section : sections()) {
        out += fmt::format("\n[{}]  # {}\n", section.name, section.doc);
        std::size_t width = 0;
        std::vector<std::pair<std::string, const KeyDescriptor*>> lines;
        for (const auto& k : schema()) {
            if (k.section != section.name) continue;
            lines.emplace_back(fmt::format("{} = {}", k.key, toml_value_text(get_value(profile, k))), &k);
            width = std::max(width, lines.back().first.size());
        }
        for (const auto& [line, k] : lines) out += fmt::format("{:<{}}  # {}\n", line, width, k->doc);
    }
    return out;
}

std::optional<std::string> closest(std::string_view word, const std::vector<std::string>& candidates) {
    const std::string w = lower(word);
    std::optional<std::string> best;
    std::size_t best_d = 0;
    for (const auto& c : candidates) {
        const std::string lc = lower(c);
        std::size_t d = edit_distance(w, lc);
        // A prefix or containment match ("lr" vs "learning_rate" is not; "buffer" vs
        // "buffer_size" is) counts as close.
        if (w.size() >= 4 && lc.find(w) != std::string::npos) d = std::min<std::size_t>(d, 2);
        if (!best || d < best_d) {
            best = c;
            best_d = d;
        }
    }
    const std::size_t limit = std::max<std::size_t>(2, w.size() / 3);
    if (best && best_d <= limit && !w.empty()) return best;
    return std::nullopt;
}

bool is_placement_key(std::string_view k) {
    return k == "run.name" || k == "run.output_dir" || k == "run.device" || k == "run.on_exists" || k == "run.seed" ||
           k == "run.population" || k == "run.population_batching";
}

}  // namespace fh::config
