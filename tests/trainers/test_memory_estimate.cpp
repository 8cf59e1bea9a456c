/// @file test_memory_estimate.cpp
/// @brief `check`'s device-memory estimate against what each trainer really allocates, for every
///        trainer and the options that add buffers: the estimate must cover the peak (a run that
///        `check` passes fits) without overstating it by more than half.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "config/memory_estimate.hpp"
#include "config/profile.hpp"
#include "data/load.hpp"
#include "env/vec_env.hpp"
#include "device/cpu_device.hpp"
#include "trainers/setup.hpp"
#include "trainers/trainer.hpp"

using namespace fh;

namespace {

struct Case {
    const char* profile;
    std::vector<std::string> overrides;
};

/// Peak CPU-backend bytes of the market, the trainer, a few iterations, a validation loss and a
/// greedy action on the validation environments (what a run holds beside its backtest), and the
/// estimate of the same (every item but the backtest's records).
std::pair<std::uint64_t, std::uint64_t> measure(const Case& c) {
    std::vector<std::string> overrides = c.overrides;
    overrides.emplace_back("run.device=cpu");
    const auto p = config::resolve_profile_file(config::locate_profile(c.profile), overrides);
    ops::CpuDevice ops;
    const auto market = data::load_market(trainers::data_options(p));
    {
        const env::DeviceMarket dm(ops, market);
        auto trainer = trainers::make_trainer(ops, p, dm);
        for (int i = 0; i < 4; ++i) trainer->iterate();
        (void)trainer->validation_loss();  // the supervised forecaster's validation chunks
        const int n = static_cast<int>(p.eval.segments);
        env::VecEnv venv(ops, dm, env::Split::val, trainer->env_params(), n);
        venv.reset_all();
        auto actions = ops.alloc<int>(static_cast<std::size_t>(n));
        trainer->act(ops, actions.view(), venv.states(), n);
    }
    std::uint64_t estimate = 0;
    config::SizeInputs in;
    in.bars = market.bars.size();
    in.host_backend = true;  // no CUDA context: what the CPU backend allocates
    for (const auto& item : config::estimate_device_memory(p, in))
        if (item.consumer.rfind("backtest records", 0) != 0) estimate += item.bytes;
    return {ops.peak_bytes(), estimate};
}

}  // namespace

TEST_CASE("check's memory estimate covers what every trainer and option allocates", "[memory][trainers]") {
    const std::vector<Case> cases{
        {"dqn-smoketest", {}},
        {"dqn-smoketest", {"dqn.head=\"iqn\""}},
        {"dqn-smoketest", {"dqn.head=\"mse\""}},
        {"dqn-smoketest", {"dqn.her=true"}},
        {"dqn-smoketest", {"dqn.curiosity=true"}},
        {"dqn-smoketest", {"dqn.attention=true"}},
        {"dqn-smoketest", {"dqn.ensemble_size=3"}},
        {"dqn-smoketest", {"dqn.cql_alpha=0.3"}},
        {"dqn-smoketest", {"experience.n_step=3", "replay_buffer.batch_size=64"}},
        {"ppo-smoketest", {}},
        {"ppo-smoketest", {"ppo.curiosity=true"}},
        {"iql-smoketest", {}},
        {"supervised-smoketest", {}},
        {"dt-smoketest", {}},
    };
    for (const auto& c : cases) {
        const auto [peak, estimate] = measure(c);
        std::string what = c.profile;
        for (const auto& o : c.overrides) what += " " + o;
        INFO(what << ": allocated at peak " << peak << " B, estimated " << estimate << " B");
        CHECK(estimate >= peak);
        CHECK(estimate <= peak + peak / 2);
    }
}
