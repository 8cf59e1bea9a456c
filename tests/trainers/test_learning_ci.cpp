/// @file test_learning_ci.cpp
/// @brief The CI learning tests of DQN, PPO and IQL (CPU backend, sized for CI's two cores): on
///        the planted-signal market, the trained policy's yardstick Sharpe on the validation
///        split (tests/support/policy_eval.hpp) over the planted oracle's, the median of seeds
///        1, 2 and 3 (not chosen for being good), held to a fraction of the oracle
///        (docs/learning.md, "CI learning tests", gives the measured ratios and the thresholds);
///        and dqn-full's DQN options at the same sizes keep the greedy policy's action entropy on
///        the test split above a floor (seed 1 in CI; seeds 1-5 hidden, "[.learning]", for the
///        docs/learning.md table the floor comes from).
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "config/profile.hpp"
#include "data/load.hpp"
#include "data/synthetic_market.hpp"
#include "env/vec_env.hpp"
#include "device/cpu_device.hpp"
#include "support/learning_table.hpp"
#include "support/policy_eval.hpp"
#include "support/trainer_support.hpp"
#include "trainers/dqn/engine.hpp"
#include "trainers/setup.hpp"

using namespace fh;

namespace {

/// The planted market of the CI tests: a strong signal (k = 0.5), no trading costs, one urgency
/// (the trainers' texts set the number of bars).
const std::vector<std::string> kMarket{"data.planted_signal=0.5", "data.cache_dir=\"\"", "instrument.commission=0.0",
                                       "instrument.slippage_ticks=0.0", "env.urgency_levels=1"};

/// The DQN of the CI tests (CI's sizes; the planted market's bars and episodes).
constexpr const char* kDqnCi = R"(
[run]
trainer = "dqn"
total_steps = 48000
[data]
synthetic_bars = 6000
[experience]
gpu_n_episodes = 16
gpu_timesteps_per_episode = 50
n_step = 1
[replay_buffer]
buffer_size = 8000
min_replay_size = 512
batch_size = 64
[training]
epsilon_decay_steps = 20000
learning_rate = 0.001
gamma = 0.9
[dqn]
hidden = [64]
v_min = -5.0
v_max = 5.0
)";

struct SeedResult {
    double ratio, seconds;
    double test_entropy = 0;  ///< with test_entropy: the greedy actions' entropy on the test split
};

/// Trains run.trainer's trainer (make_trainer) from `settings` (with kMarket, `extra` and
/// run.seed = seed) and measures its greedy policy on the validation split against the planted
/// oracle; with `test_entropy` also its action entropy on the test split (action_entropy: 64
/// environments x 1000 steps, 0 = one action, 1 = every action equally often).
SeedResult train_seed(const std::string& settings, int seed, const std::vector<std::string>& extra = {},
                      bool test_entropy = false) {
    ops::CpuDevice ops;
    auto overrides = kMarket;
    overrides.insert(overrides.end(), extra.begin(), extra.end());
    overrides.push_back("run.seed=" + std::to_string(seed));
    overrides.push_back("run.log_interval=100000000");
    const auto p = config::resolve_profile_text(settings, "learning-ci", overrides);
    const auto market = data::load_market(trainers::data_options(p));
    env::DeviceMarket dm(ops, market);
    const auto owner = trainers::make_trainer(ops, p, dm);
    trainers::Trainer& trainer = *owner;
    const auto t0 = std::chrono::steady_clock::now();
    test::run_training(trainer, p);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double sharpe =
        test::validation_sharpe(ops, dm, trainer.env_params(),
                                [&](ops::View<int> a, ops::View<const float> s, int n) { trainer.act(ops, a, s, n); });
    const double oracle =
        data::planted_oracle(market.bars, market.val, p.data.planted_signal, market.bars_per_year).sharpe_per_bar;
    SeedResult r{sharpe / oracle, seconds};
    if (test_entropy)
        r.test_entropy = test::action_entropy(
            ops, dm, trainer.env_params(),
            [&](ops::View<int> a, ops::View<const float> s, int n) { trainer.act(ops, a, s, n); }, 64, 1000,
            env::Split::test);
    return r;
}

/// The floor of dqn-full's options' test-split action entropy (docs/learning.md, "Action entropy of
/// dqn-full's options").
constexpr double kShippedEntropyFloor = 0.4;

/// dqn-full's DQN options (shipped_dqn_options) at the CI's sizes, one seed: prints its row of the
/// docs/learning.md table and returns the test split's action entropy.
double shipped_entropy(int seed) {
    const auto r = train_seed(kDqnCi, seed, test::shipped_dqn_options(), true);
    std::printf("| %d | %.3f | %.3f | %.1f |\n", seed, r.test_entropy, r.ratio, r.seconds);
    std::fflush(stdout);
    return r.test_entropy;
}

/// Seeds 1, 2, 3: prints each and returns the median ratio.
double median_of_three(const char* name, const std::string& settings) {
    std::vector<double> ratios;
    for (int seed = 1; seed <= 3; ++seed) {
        const auto r = train_seed(settings, seed);
        std::printf("learning-ci %s seed %d: validation Sharpe / oracle %.3f (%.1f s of training)\n", name, seed,
                    r.ratio, r.seconds);
        std::fflush(stdout);
        ratios.push_back(r.ratio);
    }
    const double m = test::median(ratios);
    std::printf("learning-ci %s: median %.3f\n", name, m);
    return m;
}

}  // namespace

TEST_CASE("DQN learns the planted signal: median of three seeds reaches 0.65 of the oracle on validation",
          "[trainers][dqn][learning]") {
    const double m = median_of_three("dqn", kDqnCi);
    CHECK(m >= 0.65);
}

TEST_CASE("PPO learns the planted signal: median of three seeds reaches 0.75 of the oracle on validation",
          "[trainers][ppo][learning]") {
    const double m = median_of_three("ppo", R"(
[run]
trainer = "ppo"
total_steps = 96000
[data]
synthetic_bars = 20000
[env]
position_levels = 15
[experience]
gpu_n_episodes = 16
gpu_timesteps_per_episode = 64
[training]
learning_rate = 1e-3
gamma = 0.9
grad_clip_norm = 0.5
[ppo]
hidden = [64, 64]
epochs = 4
minibatches = 4
entropy_coef = 0.003
diversity_coef = 0.0
lr_schedule = "constant"
)");
    CHECK(m >= 0.75);
}

TEST_CASE(
    "IQL learns the planted signal from the behaviour dataset: median of three seeds reaches 0.75 of the oracle "
    "on validation",
    "[trainers][iql][learning]") {
    const double m = median_of_three("iql", R"(
[run]
trainer = "iql"
total_steps = 3000
[data]
synthetic_bars = 6000
[experience]
gpu_n_episodes = 16
gpu_timesteps_per_episode = 50
[replay_buffer]
batch_size = 128
[training]
learning_rate = 0.001
gamma = 0.9
[iql]
hidden = [64, 64]
dataset = "behaviour"
dataset_size = 20000
)");
    CHECK(m >= 0.75);
}

TEST_CASE("dqn-full's DQN options keep the greedy policy's action entropy on the test split above the floor: seed 1",
          "[trainers][dqn][learning]") {
    std::printf("| seed | test action entropy | validation Sharpe / oracle | seconds |\n|---|---|---|---|\n");
    CHECK(shipped_entropy(1) > kShippedEntropyFloor);
}

TEST_CASE(
    "dqn-full's DQN options keep the greedy policy's action entropy on the test split above the floor: "
    "five seeds (the docs/learning.md table)",
    "[.learning]") {
    std::printf("| seed | test action entropy | validation Sharpe / oracle | seconds |\n|---|---|---|---|\n");
    for (int seed = 1; seed <= 5; ++seed) CHECK(shipped_entropy(seed) > kShippedEntropyFloor);
}
