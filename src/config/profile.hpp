/// @file profile.hpp
/// @brief The training profile: one typed struct per TOML table, defaults in
///        code, and the functions that resolve a profile (defaults < profile < command line).
///
/// The schema table in schema.cpp is the single source of truth for every key's type, range,
/// meaning and binding to these fields; docs/profiles.md is checked against it by a test.
/// Integers are std::int64_t throughout (TOML integers are 64-bit).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/errors.hpp"

namespace fh::config {

/// [run]: what to train, where, and for how long.
struct RunConfig {
    std::string name;             ///< run name; "" = "<trainer>-<timestamp>"
    std::string trainer;          ///< dqn | ppo | iql | supervised | dt (required)
    std::int64_t seed = 0;        ///< master RNG seed
    std::int64_t population = 1;  ///< agents trained together in one process (docs/sweeps.md)
    std::string population_batching =
        "auto";  ///< auto | on | off: a DQN, IQL or PPO population as one batched engine (docs/sweeps.md)
    std::string device = "auto";                 ///< auto | cpu | cuda | cuda:N
    std::string output_dir = "runs";             ///< root of run directories
    std::int64_t total_steps = 1'000'000;        ///< budget: env steps (DQN, PPO) or updates (IQL, supervised, dt)
    std::int64_t log_interval = 1'000;           ///< steps between metrics lines
    std::int64_t eval_interval = 50'000;         ///< steps between validation backtests; 0 = end
    std::int64_t checkpoint_interval = 100'000;  ///< steps between checkpoints; 0 = end only
    std::string on_exists = "new";               ///< new | skip | resume | error (docs/sweeps.md)
    std::string search = "none";  ///< none | pbt | halving: a search inside the population (docs/sweeps.md)
    bool operator==(const RunConfig&) const = default;
};

/// [data]: the bars and their features.
struct DataConfig {
    std::string path;                      ///< CSV file or directory; "" = embedded synthetic market
    std::string format = "auto";           ///< auto | csv
    double train_fraction = 0.70;          ///< leading share of bars for training
    double val_fraction = 0.15;            ///< following share for validation
    double test_fraction = 0.15;           ///< following share for the final test
    std::string feature_set = "core42";    ///< feature set (docs/features.md)
    std::string cache_dir;                 ///< fxcache directory; "" = next to the data
    std::int64_t synthetic_bars = 20'000;  ///< bars of the synthetic market
    double planted_signal = 0.0;           ///< strength of the synthetic market's predictable part
    std::int64_t seed = -1;                ///< the synthetic market's seed; -1 = run.seed (data_seed())
    bool operator==(const DataConfig&) const = default;
};

/// [instrument]: the futures contract (defaults: CME E-mini S&P 500).
struct InstrumentConfig {
    double multiplier = 50.0;           ///< currency per point per contract
    double tick_size = 0.25;            ///< minimum price increment, in points
    double commission = 2.5;            ///< per contract per side, currency
    double slippage_ticks = 1.0;        ///< ticks against the trader on market orders
    double initial_equity = 100'000.0;  ///< starting account equity, currency
    std::int64_t max_contracts = 1;     ///< contracts at the extreme position level
    double bars_per_year = 0.0;         ///< for annualisation; 0 = infer from timestamps
    bool operator==(const InstrumentConfig&) const = default;
};

/// [env]: the trading environment and its action space.
struct EnvConfig {
    std::int64_t position_levels = 3;  ///< odd number of target positions, symmetric around 0
    std::int64_t urgency_levels = 3;   ///< 1 market only, 2 + passive limit, 3 + far limit
    double reward_scale = 100.0;       ///< reward = equity change / initial equity * this
    double drawdown_penalty = 0.0;     ///< times the increase in drawdown, subtracted
    double bankruptcy_fraction = 0.5;  ///< episode ends when equity < this * initial
    double limit_offset_ticks = 1.0;   ///< passive limit distance from the close, ticks
    double limit_atr_mult = 0.5;       ///< far limit distance, multiples of ATR(14)
    bool operator==(const EnvConfig&) const = default;
};

/// [experience]: parallel environments and returns.
struct ExperienceConfig {
    std::int64_t gpu_n_episodes = 1024;             ///< environments stepped in parallel
    std::int64_t gpu_timesteps_per_episode = 1000;  ///< bars per episode
    std::int64_t n_step = 3;                        ///< n of the n-step return
    bool operator==(const ExperienceConfig&) const = default;
};

/// [replay_buffer]: uniform replay on the device.
struct ReplayBufferConfig {
    std::int64_t buffer_size = 1'000'000;   ///< transitions kept
    std::int64_t min_replay_size = 10'000;  ///< transitions before the first update
    std::int64_t batch_size = 256;          ///< transitions per update
    bool save_dump = false;                 ///< DQN: write replay.fhreplay at the end
    bool operator==(const ReplayBufferConfig&) const = default;
};

/// [training]: optimisation shared by the trainers.
struct TrainingConfig {
    double learning_rate = 1e-4;                 ///< Adam step size
    double gamma = 0.99;                         ///< discount per bar
    double grad_clip_norm = 10.0;                ///< global gradient-norm clip; 0 = off
    std::int64_t updates_per_iteration = 1;      ///< gradient updates per collection step
    std::int64_t buffer_size = 0;                ///< alias of replay_buffer.buffer_size; 0 = unset
    double tau = 0.005;                          ///< soft target update rate; 0 = periodic copies
    std::int64_t target_update_period = 1000;    ///< updates between copies when tau = 0
    double epsilon_start = 1.0;                  ///< initial exploration rate
    double epsilon_end = 0.05;                   ///< final exploration rate
    std::int64_t epsilon_decay_steps = 100'000;  ///< env steps of the linear decay
    std::int64_t max_bad_updates = 100;          ///< guard: skipped non-finite updates before exit 5
    bool operator==(const TrainingConfig&) const = default;
};

/// [dqn]: distributional DQN.
struct DqnConfig {
    std::vector<std::int64_t> hidden{256, 256};  ///< widths of the MLP trunk's layers
    bool dueling = true;                         ///< separate value and advantage heads
    std::int64_t num_atoms = 51;                 ///< C51 support size
    double v_min = -10.0;                        ///< lowest support value
    double v_max = 10.0;                         ///< highest support value
    double mse_blend_alpha = 0.8;                ///< weight of the C51 loss; MSE gets 1 - alpha
    bool double_dqn = true;                      ///< online net selects, target net evaluates
    double cql_alpha = 0.0;                      ///< CQL regulariser weight; 0 = off
    std::int64_t ensemble_size = 1;              ///< Q heads on the shared trunk
    double ensemble_bootstrap = 0.5;             ///< probability that a head trains on a transition
    double ensemble_ucb = 0.0;                   ///< collection's UCB bonus on the heads' spread
    std::string head = "c51";                    ///< c51 | iqn | mse
    std::int64_t iqn_quantiles = 8;              ///< IQN: fractions per sample at s and at s' (N = N')
    std::int64_t iqn_act_quantiles = 32;         ///< IQN: the fixed midpoints acting averages over (K)
    std::int64_t iqn_embedding = 64;             ///< IQN: cosine features of the fraction embedding (n_cos)
    bool attention = false;                      ///< feature attention before the trunk
    bool curiosity = false;                      ///< forward-model curiosity bonus in the stored rewards
    double curiosity_coef = 0.01;                ///< weight of the curiosity bonus
    bool her = false;                            ///< hindsight experience replay: goal-conditioned Q, relabelled replay
    double her_ratio = 0.8;      ///< HER: share of replayed rows relabelled with a future achieved return
    double her_reward = 0.05;    ///< HER: reward per step whose return is at or above the goal
    double her_goal_min = -2.0;  ///< HER: episode goals (target returns, percent) drawn uniformly from
    double her_goal_max = 4.0;   ///<      [her_goal_min, her_goal_max]
    double her_eval_goal = 1.0;  ///< HER: the target return (percent) backtests and evaluation ask for
    bool operator==(const DqnConfig&) const = default;
};

/// [ppo]: actor-critic with a clipped surrogate.
struct PpoConfig {
    std::vector<std::int64_t> hidden{256, 256};  ///< widths of actor and critic layers
    double clip = 0.2;                           ///< surrogate clip range
    double gae_lambda = 0.95;                    ///< GAE lambda
    std::int64_t epochs = 4;                     ///< passes over each rollout
    std::int64_t minibatches = 4;                ///< minibatches per epoch
    double entropy_coef = 0.01;                  ///< entropy bonus weight
    double value_coef = 0.5;                     ///< value loss weight
    std::int64_t diversity_window = 100;         ///< steps of the action-diversity window
    double diversity_coef = 0.01;                ///< low-diversity penalty weight; 0 = off
    bool clip_value = true;                      ///< clip the value loss around the rollout's values
    std::string lr_schedule = "linear";          ///< linear | constant
    bool curiosity = false;                      ///< forward-model curiosity bonus
    double curiosity_coef = 0.01;                ///< weight of the curiosity bonus
    bool operator==(const PpoConfig&) const = default;
};

/// [iql]: implicit Q-learning from a fixed dataset.
struct IqlConfig {
    std::vector<std::int64_t> hidden{256, 256};  ///< widths of Q, V and policy layers
    double expectile = 0.7;                      ///< expectile of the V regression
    double beta = 3.0;                           ///< inverse temperature of advantage weighting
    std::string dataset = "behaviour";           ///< "behaviour" or the path of a replay dump
    std::int64_t dataset_size = 1'000'000;       ///< transitions in the dataset
    double max_weight = 100.0;                   ///< cap of the advantage weights
    bool operator==(const IqlConfig&) const = default;
};

/// [supervised]: the supervised forecaster baseline and its signal adapter (docs/supervised.md).
struct SupervisedConfig {
    std::vector<std::int64_t> hidden{256, 256};  ///< widths of the forecaster's hidden layers
    std::string target = "return";               ///< return (regression) | direction (classification)
    std::int64_t horizon = 1;                    ///< bars ahead of the forecast log return
    std::int64_t batch_size = 256;               ///< samples per gradient update
    double entry_threshold = 0.0;                ///< |score| that opens or resizes a position
    double exit_threshold = 0.0;                 ///< |score| that keeps a position of the score's sign
    std::string sizing = "fixed";                ///< fixed | magnitude
    double full_score = 1.0;                     ///< magnitude sizing: |score| of the full position
    bool volatility_sizing = false;              ///< divide the size by the volatility ratio (rv_32 / its mean)
    double volatility_floor = 0.25;              ///< the volatility ratio is at least this
    std::string order_type = "market";           ///< market | passive_limit | far_limit
    bool operator==(const SupervisedConfig&) const = default;
};

/// [dt]: the Decision Transformer, offline (docs/dt.md).
struct DtConfig {
    std::int64_t context = 20;            ///< K: timesteps of a training window and of the acting cache
    std::int64_t layers = 2;              ///< transformer blocks
    std::int64_t heads = 2;               ///< attention heads (embedding / heads per head)
    std::int64_t embedding = 64;          ///< token width
    std::int64_t batch_size = 64;         ///< windows per gradient update
    std::int64_t warmup_updates = 200;    ///< linear learning-rate warm-up
    double target_quantile = 0.9;         ///< the target return: this quantile of the dataset's episode reward rates
    std::string dataset = "behaviour";    ///< "behaviour" or the path of a replay dump
    std::int64_t dataset_size = 200'000;  ///< transitions in a behaviour dataset
    bool operator==(const DtConfig&) const = default;
};

/// [eval]: validation and test backtests.
struct EvalConfig {
    std::int64_t segments = 1;                ///< equal parts of the split backtested in parallel
    bool deterministic = true;                ///< greedy actions
    std::int64_t bootstrap_resamples = 2000;  ///< resamples of the block bootstrap (docs/metrics.md)
    std::int64_t bootstrap_block = 0;         ///< mean block length; 0 = ceil(n^(1/3))
    std::int64_t bootstrap_seed = 1;          ///< the bootstrap's Philox seed
    double confidence = 0.95;                 ///< the intervals' coverage
    std::int64_t collapse_window = 3;         ///< validations in a row on one action before the collapse monitor warns
    bool operator==(const EvalConfig&) const = default;
};

/// [walk_forward]: rolling-origin evaluation (docs/walk-forward.md).
struct WalkForwardConfig {
    std::int64_t folds = 0;            ///< K folds; 0 = an ordinary run on the data.*_fraction splits
    std::int64_t fold = 0;             ///< the fold this run trains (0 .. folds - 1)
    std::string window = "expanding";  ///< expanding | sliding training window
    bool operator==(const WalkForwardConfig&) const = default;
};

/// [search]: population-based training and successive halving inside a population (run.search, docs/sweeps.md).
struct SearchConfig {
    std::int64_t interval = 0;           ///< progress units between PBT rounds; 0 = run.eval_interval
    double fraction = 0.25;              ///< the bottom (and top) share of the agents ranked at a round
    double perturb_down = 0.8;           ///< a perturbed key is multiplied by this or by perturb_up
    double perturb_up = 1.25;            ///< (a coin decides which)
    double resample_probability = 0.25;  ///< a key drawn again from its distribution instead
    bool copy_replay = true;             ///< DQN: the exploiting agent copies the replay memory too
    std::int64_t eta = 3;                ///< halving: rungs at interval x eta^k; the worst (1 - 1/eta) stop there
    std::int64_t max_points = 0;         ///< halving: points trained in all; 0 = eta x the population
    bool operator==(const SearchConfig&) const = default;
};

/// [early_stopping]
struct EarlyStoppingConfig {
    std::string metric = "val_sharpe";  ///< val_sharpe | val_return | val_sortino | val_loss (supervised)
    std::int64_t patience = 10;         ///< evaluations without improvement; 0 = off
    double min_delta = 0.0;             ///< smallest improvement that counts
    std::int64_t min_steps = 0;         ///< never stop before this step
    bool operator==(const EarlyStoppingConfig&) const = default;
};

/// [checkpoint]: what the run's checkpoints keep (docs/checkpoints.md).
struct CheckpointConfig {
    bool keep_replay = true;  ///< DQN: the replay memory in the checkpoints (false: smaller files, a resume refills it)
    bool operator==(const CheckpointConfig&) const = default;
};

/// [gpu]
struct GpuConfig {
    std::string profile = "auto";    ///< "auto" or a named device class
    bool cuda_graphs = true;         ///< capture repeated kernel sequences
    std::string precision = "fp32";  ///< the linear layers' matrix products: fp32, tf32 or bf16 (ops::Precision)
    double memory_fraction = 0.9;    ///< share of device memory the run may use
    bool operator==(const GpuConfig&) const = default;
};

/// A whole profile. Default-constructed: every key at its documented default (no trainer).
struct Profile {
    RunConfig run;
    DataConfig data;
    InstrumentConfig instrument;
    EnvConfig env;
    ExperienceConfig experience;
    ReplayBufferConfig replay_buffer;
    TrainingConfig training;
    DqnConfig dqn;
    PpoConfig ppo;
    IqlConfig iql;
    SupervisedConfig supervised;
    DtConfig dt;
    EvalConfig eval;
    WalkForwardConfig walk_forward;
    SearchConfig search;
    EarlyStoppingConfig early_stopping;
    CheckpointConfig checkpoint;
    GpuConfig gpu;
    bool operator==(const Profile&) const = default;

    /// Actions of the environment: position_levels * urgency_levels.
    std::int64_t num_actions() const { return env.position_levels * env.urgency_levels; }
};

/// A profile error: exit code 2, every problem found (not just the first), each formatted
/// as `file:line:col: message` (or `--set KEY=VALUE: message` for command-line overrides).
class ProfileError : public UsageError {
public:
    explicit ProfileError(std::vector<std::string> problems);
    const std::vector<std::string>& problems() const noexcept { return problems_; }

private:
    std::vector<std::string> problems_;
};

/// Largest profile file accepted (bytes).
inline constexpr std::size_t kMaxProfileBytes = 1u << 20;

/// The first line of config::to_toml's text: what marks a profile written by foxhunt-train (a run's
/// config.toml, a checkpoint's profile) rather than by a person. Such a profile from a version
/// before gpu.precision has `tf32 = true|false` under [gpu], which resolves as gpu.precision =
/// "tf32"|"fp32" (so that earlier runs still evaluate, export, report and resume); anywhere else
/// gpu.tf32 is refused, naming gpu.precision.
inline constexpr std::string_view kResolvedProfileHeader =
    "# Resolved foxhunt-train profile: defaults < profile < command line.\n";

/// Resolves a profile given as text: defaults < `text` < `overrides`.
/// @param origin     the name used in messages (normally the file path)
/// @param overrides  "section.key=value" strings, in command-line order (a later one wins); the
///                   value is parsed as TOML, and a bare word is taken as a string when the key
///                   is a string key (`--set run.trainer=dqn`)
/// @throws ProfileError (a UsageError, exit 2) listing every problem found.
Profile resolve_profile_text(std::string_view text, std::string_view origin,
                             const std::vector<std::string>& overrides = {});

/// Reads the file at `path` (at most kMaxProfileBytes) and resolves it as above.
/// @throws ProfileError / UsageError (exit 2) for unreadable files and every profile problem.
Profile resolve_profile_file(const std::string& path, const std::vector<std::string>& overrides = {});

/// `--profile PATH|NAME`: an existing file, else a shipped profile by name (with or without
/// `.toml`) from FH_SOURCE_DIR/profiles, FH_INSTALL_DATADIR/profiles, or next to the executable
/// (../share/foxhunt-train/profiles, ../profiles). Throws UsageError naming the places looked in
/// and the shipped profiles when nothing matches. Defined in locate.cpp.
std::string locate_profile(const std::string& path_or_name);

/// The names of the shipped profiles found (sorted, without `.toml`).
std::vector<std::string> shipped_profile_names();

/// The seed the synthetic market is drawn from: data.seed, or run.seed when data.seed is -1.
std::int64_t data_seed(const Profile& profile);

/// The resolved profile as TOML, every key, with our own emitter (shortest round-trip floats).
/// Feeding the text back to resolve_profile_text gives the same Profile.
std::string to_toml(const Profile& profile);

}  // namespace fh::config
