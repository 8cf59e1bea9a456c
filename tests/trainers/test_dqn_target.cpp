/// @file test_dqn_target.cpp
/// @brief The DQN update bootstraps from the target network: from one saved state, changing only
///        the target's weights changes the next update of the online weights (for every head),
///        and changing nothing changes nothing. A DQN that bootstrapped from the online network
///        learns almost as well on the planted market (docs/testing.md, the mutant
///        `dqn-online-bootstrap`), so no learning test can tell; this one does, exactly.
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "config/profile.hpp"
#include "data/load.hpp"
#include "env/vec_env.hpp"
#include "device/cpu_device.hpp"
#include "support/compare.hpp"
#include "support/trainer_support.hpp"
#include "trainers/dqn/engine.hpp"
#include "trainers/setup.hpp"

using namespace fh;

namespace {

config::Profile target_profile(std::vector<std::string> overrides) {
    return config::resolve_profile_text(R"(
[run]
trainer = "dqn"
seed = 5
log_interval = 100000
total_steps = 400
[data]
synthetic_bars = 3000
cache_dir = ""
[experience]
gpu_n_episodes = 4
gpu_timesteps_per_episode = 30
[replay_buffer]
buffer_size = 256
min_replay_size = 64
batch_size = 32
[training]
tau = 0.0
target_update_period = 1000000
[dqn]
hidden = [16]
)",
                                        "target-profile", overrides);
}

/// The state tensors' bytes and counters of a trainer.
struct Saved {
    std::vector<std::vector<std::byte>> tensors;
    std::vector<std::int64_t> counters;
};

void restore(ops::Device& ops, trainers::DqnAgent& t, const Saved& s) {
    const auto st = t.state_tensors();
    REQUIRE(st.size() == s.tensors.size());
    for (std::size_t i = 0; i < st.size(); ++i) ops.upload<std::byte>(st[i].bytes, s.tensors[i]);
    t.restore_counter_values(s.counters);
}

std::size_t index_of(trainers::DqnAgent& t, const std::string& name) {
    const auto st = t.state_tensors();
    for (std::size_t i = 0; i < st.size(); ++i)
        if (st[i].name == name) return i;
    FAIL("no state tensor " << name);
    return 0;
}

/// From the state after a short run (the target still the initial weights, the online network
/// trained away from them), one more iteration with `target` as the target's bytes; returns the
/// online weights after it.
std::vector<float> online_after_one_more(ops::Device& ops, const config::Profile& p, const env::DeviceMarket& dm,
                                         int paired_max_rows, const Saved& base, const std::vector<std::byte>& target) {
    auto t_engine = trainers::make_dqn_trainer(ops, p, dm);
    auto& t = *t_engine;
    if (paired_max_rows >= 0) t.engine().set_paired_forward_max_rows(paired_max_rows);
    Saved s = base;
    s.tensors[index_of(t, "params/target")] = target;
    restore(ops, t, s);
    const long long before = t.updates();
    t.iterate();
    REQUIRE(t.updates() > before);
    return test::as_floats(test::tensor_bytes(ops, t, "params/online"));
}

}  // namespace

TEST_CASE("the DQN update bootstraps from the target network, not the online one", "[trainers][dqn][target]") {
    ops::CpuDevice ops;
    std::vector<std::string> head;
    int paired = -1;  // >= 0: DqnTrainer::set_paired_forward_max_rows
    SECTION("C51, double DQN (the default)") {}
    SECTION("C51 without double DQN") {
        head = {"dqn.double_dqn=false"};
    }
    SECTION("the scalar head") {
        head = {"dqn.head=mse"};
    }
    SECTION("the IQN head") {
        head = {"dqn.head=iqn"};
    }
    SECTION("an ensemble of three heads") {
        head = {"dqn.ensemble_size=3"};
    }
    SECTION("the online and target forwards side by side (the large-batch path)") {
        paired = 16;
    }
    const auto p = target_profile(head);
    const auto market = data::load_market(trainers::data_options(p));
    env::DeviceMarket dm(ops, market);
    auto first_engine = trainers::make_dqn_trainer(ops, p, dm);
    auto& first = *first_engine;
    if (paired >= 0) first.engine().set_paired_forward_max_rows(paired);
    test::run_training(first, p);
    REQUIRE(first.updates() > 0);
    const Saved base{test::snapshot(ops, first), first.counter_values()};
    const auto target = base.tensors[index_of(first, "params/target")];
    const auto online = base.tensors[index_of(first, "params/online")];
    REQUIRE(target != online);  // the online network has moved; the target has not been refreshed

    // The same state twice: the same update, bit for bit.
    const auto a = online_after_one_more(ops, p, dm, paired, base, target);
    const auto b = online_after_one_more(ops, p, dm, paired, base, target);
    CHECK(test::same_bits(a, b));
    // The target set to the online weights (what bootstrapping from the online network reads):
    // the update must change.
    const auto c = online_after_one_more(ops, p, dm, paired, base, online);
    const auto m = test::compare_close(c, a, test::Tol{});
    INFO(test::describe(m));
    CHECK(m.count > 0);
    // The target's weights scaled by 1.5: the update changes again.
    auto scaled = test::as_floats(target);
    for (float& w : scaled) w *= 1.5f;
    std::vector<std::byte> scaled_bytes(scaled.size() * sizeof(float));
    std::memcpy(scaled_bytes.data(), scaled.data(), scaled_bytes.size());
    CHECK(test::compare_close(online_after_one_more(ops, p, dm, paired, base, scaled_bytes), a, test::Tol{}).count > 0);
}
