/// @file learning_table.hpp
/// @brief What the learning tables of docs/learning.md share (the hidden "[.learning]" tests):
///        train one seed while validating at a fixed interval, keep the best validation's
///        weights, measure them on the test split against the planted oracle; and the
///        environment knobs that pick rows and scale the runs.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include <catch2/catch.hpp>

#include "config/profile.hpp"
#include "data/market_data.hpp"
#include "data/synthetic_market.hpp"
#include "env/vec_env.hpp"
#include "support/policy_eval.hpp"
#include "trainers/trainer.hpp"

namespace fh::test {

/// One seed of a learning table.
struct VariantRun {
    double test_ratio;   ///< test Sharpe of the best-validation weights / the test oracle's
    double peak_ratio;   ///< best validation Sharpe / the validation oracle's
    double final_ratio;  ///< validation Sharpe at the end / the validation oracle's
    double seconds;
    /// The final weights' action entropy on the validation split (action_entropy: 0 = one action).
    double final_entropy;
};

/// Trains `trainer` to `total` progress units (env steps, or updates for the offline trainers),
/// validating every `every` units with the yardstick (validation_sharpe), keeps the best
/// validation's weights and measures them on the test split. Ratios are against the planted
/// oracle of strength `k` on each split.
inline VariantRun train_selecting_on_validation(ops::Device& ops, const env::DeviceMarket& dm,
                                                const data::MarketData& market, double k, trainers::Trainer& trainer,
                                                long long total, long long every) {
    const double val_oracle = data::planted_oracle(market.bars, market.val, k, market.bars_per_year).sharpe_per_bar;
    const double test_oracle = data::planted_oracle(market.bars, market.test, k, market.bars_per_year).sharpe_per_bar;
    auto validate = [&] {
        return validation_sharpe(ops, dm, trainer.env_params(),
                                 [&](ops::View<int> a, ops::View<const float> s, int n) { trainer.act(ops, a, s, n); });
    };
    const auto t0 = std::chrono::steady_clock::now();
    double best = -std::numeric_limits<double>::infinity(), last = 0;
    std::vector<float> best_weights;
    long long next = every;
    while (trainer.progress() < total) {
        trainer.iterate();
        if (trainer.progress() >= next || trainer.progress() >= total) {
            while (next <= trainer.progress()) next += every;
            last = validate();
            if (last > best) {
                best = last;
                best_weights = ops.to_host(ops::View<const float>(trainer.policy_weights()));
            }
        }
    }
    auto weights = ops.from_host<float>(best_weights);
    const double test = validation_sharpe(
        ops, dm, trainer.env_params(),
        [&](ops::View<int> a, ops::View<const float> s, int n) { trainer.policy().act(ops, weights.cview(), a, s, n); },
        64, 1000, env::Split::test);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double entropy =
        action_entropy(ops, dm, trainer.env_params(),
                       [&](ops::View<int> a, ops::View<const float> s, int n) { trainer.act(ops, a, s, n); });
    return {test / test_oracle, best / val_oracle, last / val_oracle, seconds, entropy};
}

/// The DQN options of profiles/dqn-full.toml as overrides: its algorithm (head, atoms, losses,
/// CQL, ensemble, dueling, double DQN, curiosity, attention), not its GPU sizes.
inline std::vector<std::string> shipped_dqn_options() {
    const auto full = config::resolve_profile_file(config::locate_profile("dqn-full"));
    const auto flag = [](bool b) { return std::string(b ? "true" : "false"); };
    return {"dqn.head=\"" + full.dqn.head + "\"",
            fmt::format("dqn.num_atoms={}", full.dqn.num_atoms),
            fmt::format("dqn.mse_blend_alpha={}", full.dqn.mse_blend_alpha),
            fmt::format("dqn.cql_alpha={}", full.dqn.cql_alpha),
            fmt::format("dqn.ensemble_size={}", full.dqn.ensemble_size),
            "dqn.double_dqn=" + flag(full.dqn.double_dqn),
            "dqn.dueling=" + flag(full.dqn.dueling),
            "dqn.curiosity=" + flag(full.dqn.curiosity),
            "dqn.attention=" + flag(full.dqn.attention)};
}

/// Whether `name` is one of the comma-separated names of `list`.
inline bool listed(std::string_view list, std::string_view name) {
    while (!list.empty()) {
        const auto comma = list.find(',');
        if (list.substr(0, comma) == name) return true;
        if (comma == std::string_view::npos) break;
        list.remove_prefix(comma + 1);
    }
    return false;
}

inline double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

/// FH_LEARNING_STEPS (the runs' length; `fallback` without it).
inline long long learning_steps(long long fallback) {
    const char* e = std::getenv("FH_LEARNING_STEPS");
    return e ? std::atoll(e) : fallback;
}

/// FH_LEARNING_EXTRA: profile overrides for every row of a table, separated by ';' (sweeps of one
/// setting).
inline std::vector<std::string> learning_extra_overrides() {
    std::vector<std::string> extra;
    if (const char* e = std::getenv("FH_LEARNING_EXTRA")) {
        std::string_view list = e;
        while (!list.empty()) {
            const auto semi = list.find(';');
            if (!list.substr(0, semi).empty()) extra.emplace_back(list.substr(0, semi));
            if (semi == std::string_view::npos) break;
            list.remove_prefix(semi + 1);
        }
    }
    return extra;
}

/// A learning run's device in its profile's gpu.precision (FH_LEARNING_EXTRA="gpu.precision=bf16"
/// sets it for every row): what a run's Session sets, which these tests bypass by making their
/// own device. fp32 again when the run ends.
class ProfilePrecision {
public:
    ProfilePrecision(ops::Device& ops, const config::Profile& p) : ops_(ops) {
        const auto precision = ops::parse_precision(p.gpu.precision);
        REQUIRE(precision.has_value());
        ops_.set_precision(*precision);
    }
    ~ProfilePrecision() { ops_.set_precision(ops::Precision::fp32); }
    ProfilePrecision(const ProfilePrecision&) = delete;
    ProfilePrecision& operator=(const ProfilePrecision&) = delete;

private:
    ops::Device& ops_;
};

/// Whether FH_LEARNING_VARIANTS (a comma-separated list; unset = every row) picks `name`.
inline bool variant_picked(std::string_view name) {
    const char* pick = std::getenv("FH_LEARNING_VARIANTS");
    return !pick || listed(pick, name);
}

}  // namespace fh::test
