/// @file test_dqn_population.cpp
/// @brief The DQN engine with several agents (trainers::DqnEngine): agent i's weights, target and
///        Adam moments after a run equal those of an engine of one with agent i's profile (a
///        single run), with every option: bit for bit on the CPU; on the GPU, bit for bit or
///        within a bound the test reports.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "config/profile.hpp"
#include "data/load.hpp"
#include "env/vec_env.hpp"
#include "device/cpu_device.hpp"
#include "nn/init.hpp"
#include "support/compare.hpp"
#include "support/gpu.hpp"
#include "support/engine_agents.hpp"
#include "support/trainer_support.hpp"
#include "trainers/dqn/engine.hpp"
#include "trainers/setup.hpp"
#include "util/errors.hpp"
#include "abi/core_vector.h"

using namespace fh;
using fh::test::movement_fraction;
using fh::test::relative_l2;

namespace {

std::vector<float> tensor(ops::Device& ops, trainers::Trainer& t, const std::string& name) {
    for (const auto& st : t.state_tensors())
        if (st.name == name) {
            const auto bytes = ops.to_host<std::byte>(st.bytes);
            std::vector<float> out(bytes.size() / sizeof(float));
            std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
            return out;
        }
    throw std::runtime_error("no state tensor " + name);
}

/// How far a population's agents part from their single runs: `bits` whether every tensor below
/// is the same bytes; the largest movement_fraction of the online and target weights (against
/// the single run's start) and relative_l2 of Adam's moments, over the agents.
struct Parting {
    bool bits = true;
    double online = 0, target = 0, m = 0, v = 0;
};

/// Trains the agents as one population and each alone for `iterations`.
Parting population_against_single_runs(ops::Device& ops, const std::vector<config::Profile>& agents, int iterations) {
    const test::AgentMarkets markets(ops, agents);
    const auto population = std::make_shared<trainers::DqnEngine>(ops, agents, markets.views);
    std::vector<std::unique_ptr<trainers::Trainer>> members;
    for (int i = 0; i < population->agents(); ++i) members.push_back(population->agent(i));
    for (int k = 0; k < iterations; ++k) population->iterate();
    REQUIRE(population->updates(0) > 0);
    Parting r;
    std::vector<float> first_online;
    for (std::size_t i = 0; i < agents.size(); ++i) {
        INFO("agent " << i);
        auto single_engine = trainers::make_dqn_trainer(ops, agents[i], *markets.views[i]);
        auto& single = *single_engine;
        const auto start = tensor(ops, single, "params/online");  // the target starts as a copy
        for (int k = 0; k < iterations; ++k) single.iterate();
        REQUIRE(single.updates() == population->updates(static_cast<int>(i)));
        auto& member = *members[i];
        const auto online = tensor(ops, member, "params/online"), target = tensor(ops, member, "params/target"),
                   m = tensor(ops, member, "adam/m"), v = tensor(ops, member, "adam/v");
        const auto s_online = tensor(ops, single, "params/online"), s_target = tensor(ops, single, "params/target"),
                   s_m = tensor(ops, single, "adam/m"), s_v = tensor(ops, single, "adam/v");
        r.bits = r.bits && test::same_bits(online, s_online) && test::same_bits(target, s_target) &&
                 test::same_bits(m, s_m) && test::same_bits(v, s_v);
        r.online = std::max(r.online, movement_fraction(online, s_online, start));
        r.target = std::max(r.target, movement_fraction(target, s_target, start));
        r.m = std::max(r.m, relative_l2(m, s_m));
        r.v = std::max(r.v, relative_l2(v, s_v));
        // The agents are not copies of one another (their seeds or hyperparameters differ).
        if (i == 0)
            first_online = online;
        else
            CHECK(online != first_online);
    }
    return r;
}

/// Three agents: their own seeds, and a grid's scalars on two of them.
std::vector<config::Profile> three_agents(const std::vector<std::string>& shared) {
    std::vector<config::Profile> agents;
    const std::vector<std::vector<std::string>> own{
        {"run.seed=3"},
        {"run.seed=11", "training.learning_rate=0.0005", "training.gamma=0.95", "dqn.cql_alpha=0.2"},
        {"run.seed=12", "training.epsilon_decay_steps=300", "training.tau=0", "training.target_update_period=7",
         "training.grad_clip_norm=1"}};
    for (const auto& o : own) {
        auto overrides = shared;
        overrides.insert(overrides.end(), o.begin(), o.end());
        agents.push_back(test::small_dqn_profile(overrides));
    }
    return agents;
}

}  // namespace

TEST_CASE("A DQN engine's agents equal their single runs bit for bit, with every option (CPU, N = 3)",
          "[trainers][dqn][population]") {
    ops::CpuDevice ops;
    std::vector<std::string> shared;
    SECTION("the C51 head") {}
    SECTION("no double DQN, 3-step returns, two updates per iteration") {
        shared = {"dqn.double_dqn=false", "experience.n_step=3", "training.updates_per_iteration=2"};
    }
    SECTION("the scalar head") {
        shared = {"dqn.head=mse"};
    }
    // The options: HER and curiosity batch over the agents; attention and the IQN head run each
    // agent's networks in turn (the single run pairs its two networks in one pass, the engine of
    // several agents does not: the same values on the CPU).
    SECTION("HER") {
        shared = {"dqn.her=true"};
    }
    SECTION("curiosity") {
        shared = {"dqn.curiosity=true"};
    }
    SECTION("attention") {
        shared = {"dqn.attention=true"};
    }
    SECTION("the IQN head") {
        shared = {"dqn.head=iqn", "dqn.iqn_quantiles=8", "dqn.iqn_act_quantiles=4"};
    }
    SECTION("the IQN head without double DQN") {
        shared = {"dqn.head=iqn", "dqn.iqn_quantiles=8", "dqn.iqn_act_quantiles=4", "dqn.double_dqn=false"};
    }
    SECTION("a bootstrapped ensemble with UCB exploration") {
        shared = {"dqn.ensemble_size=3", "dqn.ensemble_bootstrap=0.7", "dqn.ensemble_ucb=0.5"};
    }
    // 8 collection steps fill min_replay_size; 40 more wrap the 32-step ring.
    CHECK(population_against_single_runs(ops, three_agents(shared), 48).bits);
}

namespace {

/// Whether two Trainers hold the same checkpoint: every state tensor's bytes and the counters.
bool same_state(ops::Device& ops, trainers::Trainer& a, trainers::Trainer& b) {
    const auto ta = a.state_tensors(), tb = b.state_tensors();
    bool same = ta.size() == tb.size() && a.counter_values() == b.counter_values();
    for (std::size_t k = 0; same && k < ta.size(); ++k) {
        INFO(ta[k].name);
        same = ta[k].name == tb[k].name && ops.to_host<std::byte>(ta[k].bytes) == ops.to_host<std::byte>(tb[k].bytes);
        CHECK(same);
    }
    return same;
}

}  // namespace

TEST_CASE(
    "A DQN engine's slot started again (reset_agent) trains as a single run of its new agent, the others on "
    "(CPU)",
    "[trainers][dqn][population][search]") {
    ops::CpuDevice ops;
    std::vector<std::string> shared;
    SECTION("the C51 head") {}
    SECTION("3-step returns, two updates per iteration, a periodic target") {
        shared = {"experience.n_step=3", "training.updates_per_iteration=2", "training.tau=0",
                  "training.target_update_period=5"};
    }
    SECTION("HER") {
        shared = {"dqn.her=true"};
    }
    SECTION("curiosity") {
        shared = {"dqn.curiosity=true"};
    }
    SECTION("the IQN head") {
        shared = {"dqn.head=iqn", "dqn.iqn_quantiles=8", "dqn.iqn_act_quantiles=4"};
    }
    SECTION("a bootstrapped ensemble") {
        shared = {"dqn.ensemble_size=3", "dqn.ensemble_bootstrap=0.7"};
    }
    const auto agents = three_agents(shared);
    auto fresh = shared;
    for (const char* o : {"run.seed=21", "training.learning_rate=0.002", "training.epsilon_decay_steps=200"})
        fresh.emplace_back(o);
    const config::Profile point = test::small_dqn_profile(fresh);
    const test::AgentMarkets markets(ops, agents);
    const env::DeviceMarket point_market(ops, data::load_market(trainers::data_options(point)));
    test::EngineAgents members(std::make_shared<trainers::DqnEngine>(ops, agents, markets.views));
    // 20 iterations (every agent updating since its 8th), then agent 1's slot starts the new point,
    // which waits 8 collection steps for its replay while the others update, then updates too.
    constexpr int kBefore = 20, kAfter = 30;
    members.rounds(kBefore);
    members.restart(1, point, point_market);
    CHECK(members[1].iterations() == 0);
    CHECK(members[1].updates() == 0);
    members.rounds(kAfter);
    CHECK(members[1].updates() > 0);
    CHECK(members[0].updates() > members[1].updates());
    auto alone = trainers::make_dqn_trainer(ops, point, point_market);
    for (int k = 0; k < kAfter; ++k) alone->iterate();
    CHECK(same_state(ops, members[1], *alone));
    for (int i : {0, 2}) {  // the other agents train on as they would alone
        INFO("agent " << i);
        auto single = trainers::make_dqn_trainer(ops, agents[static_cast<std::size_t>(i)],
                                                 *markets.views[static_cast<std::size_t>(i)]);
        for (int k = 0; k < kBefore + kAfter; ++k) single->iterate();
        CHECK(same_state(ops, members[static_cast<std::size_t>(i)], *single));
    }
}

TEST_CASE("A DQN engine refuses agents that do not share its shapes, naming what differs",
          "[trainers][dqn][population]") {
    const auto first = test::small_dqn_profile({});
    using trainers::DqnEngine;
    CHECK(
        DqnEngine::unsupported(test::small_dqn_profile({"run.seed=9", "training.learning_rate=0.01"}), first).empty());
    // Every option trains in an engine of agents that all take it...
    for (const char* option :
         {"dqn.her=true", "dqn.curiosity=true", "dqn.attention=true", "dqn.head=iqn", "dqn.ensemble_size=2"}) {
        INFO(option);
        CHECK(DqnEngine::unsupported(test::small_dqn_profile({option}), test::small_dqn_profile({option})).empty());
        // ... but not beside agents without it.
        CHECK(DqnEngine::unsupported(test::small_dqn_profile({option}), first).find("differs from the first agent's") !=
              std::string::npos);
    }
    CHECK(DqnEngine::unsupported(test::small_dqn_profile({"dqn.hidden=[32, 16]"}), first).find("shape") !=
          std::string::npos);
    CHECK(DqnEngine::unsupported(test::small_dqn_profile({"env.reward_scale=2"}), first).find("environment") !=
          std::string::npos);
    ops::CpuDevice ops;
    const auto bad = std::vector<config::Profile>{first, test::small_dqn_profile({"dqn.curiosity=true"})};
    env::DeviceMarket market(ops, data::load_market(trainers::data_options(first)));
    CHECK_THROWS_AS(DqnEngine(ops, bad, {&market, &market}), UsageError);
    CHECK_THROWS_AS(DqnEngine(ops, {first}, {}), UsageError);
}

TEST_CASE("A batched DQN population's agents against their single runs on the GPU (N = 8)",
          "[gpu][trainers][dqn][population]") {
    auto& ops = test::gpu_ops();
    // The C51 head batches every op; HER and curiosity add their batched ops; the IQN head and
    // attention run each agent's networks in turn (the online network beside the target, where a
    // single run pairs them in one strided batch).
    std::vector<std::string> shared;
    SECTION("the C51 head") {}
    SECTION("HER and curiosity") {
        shared = {"dqn.her=true", "dqn.curiosity=true"};
    }
    SECTION("the IQN head") {
        shared = {"dqn.head=iqn", "dqn.iqn_quantiles=8", "dqn.iqn_act_quantiles=4"};
    }
    SECTION("attention") {
        shared = {"dqn.attention=true"};
    }
    std::vector<config::Profile> agents;
    for (int i = 0; i < 8; ++i) {
        auto overrides = shared;
        overrides.push_back("run.seed=" + std::to_string(20 + i));
        overrides.push_back("training.learning_rate=" + std::to_string(0.0002 * (1 + i % 3)));
        agents.push_back(test::small_dqn_profile(overrides));
    }
    const auto r = population_against_single_runs(ops, agents, 48);
    // Error model: the population's products are strided batches of 8 networks where a single run
    // multiplies one or two, so cuBLAS may round them differently (a relative ~1e-6 per product,
    // bounded in the next test). Sampling, exploration and the replay are the same integers, so
    // the runs part only through those roundings, carried through 40 Adam updates: each moves a
    // weight by about the learning rate whatever the rounding, except where a gradient is near
    // zero. Bounded: 1% of the weights' movement over the run; Adam's moments, whose elements are
    // sums of the gradients (m) and their squares (v, twice the gradients' relative error), within
    // 1% and 2% of their norm.
    WARN("GPU population against single runs, fraction of the movement: online "
         << r.online << ", target " << r.target << "; relative difference of Adam's m " << r.m << ", v " << r.v);
    CHECK(r.online <= 0.01);
    CHECK(r.target <= 0.01);
    CHECK(r.m <= 0.01);
    CHECK(r.v <= 0.02);
}

// Where a batched population's GPU results part from its single runs': each product of the
// network, one network's (acting: forward; the update: the online and target networks' paired
// forward on [s; s'], the backward on s) against the same network's block of the population's
// strided batch over 8 networks. Reported, and each bounded.
TEST_CASE("the batched population's GPU products against one network's: where they part, and by how much",
          "[gpu][trainers][dqn][population]") {
    auto& ops = test::gpu_ops();
    const auto p = test::small_dqn_profile(
        {"dqn.hidden=[256, 256]", "replay_buffer.batch_size=256", "replay_buffer.min_replay_size=256"});
    const trainers::QNetwork net(trainers::network_config(p, 50));
    const int N = 8, B = 256, n = 512, D = net.state_dim(), W = net.output_width();
    const std::size_t P = net.layout().total(), Bs = B, Ds = static_cast<std::size_t>(D),
                      Ws = static_cast<std::size_t>(W);
    auto params = ops.alloc<float>(N * P), targets = ops.alloc<float>(N * P);
    fh::ops::run(ops, fh::ops::Fill{params.view(), 0.f});
    fh::ops::run(ops, fh::ops::Fill{targets.view(), 0.f});
    for (int i = 0; i < N; ++i) {
        nn::init_params(ops, params.view().subview(i * P, P), net.layout(), 100 + i);
        nn::init_params(ops, targets.view().subview(i * P, P), net.layout(), 200 + i);
    }
    auto obs = ops.from_host<float>(test::random_floats(N * n * Ds, 7));
    auto x = ops.from_host<float>(test::random_floats(N * 2 * Bs * Ds, 8));
    auto d_head = ops.from_host<float>(test::random_floats(N * Bs * Ws, 9, -0.01f, 0.01f));
    // The population's: acting, the online network on s, the target on s', the backward on s.
    auto ws_act = net.make_workspace(ops, N * n), ws_s = net.make_workspace(ops, N * B),
         ws_t = net.make_workspace(ops, N * B);
    const auto act_all = ops.to_host(net.forward_agents(ops, params.cview(), P, obs.cview(), n * Ds, n, N, ws_act));
    const std::size_t xs = 2 * Bs * Ds, span = (N - 1) * xs + Bs * Ds;
    const auto s_all =
        ops.to_host(net.forward_agents(ops, params.cview(), P, x.cview().subview(0, span), xs, B, N, ws_s));
    const auto t_all =
        ops.to_host(net.forward_agents(ops, targets.cview(), P, x.cview().subview(Bs * Ds, span), xs, B, N, ws_t));
    auto grads_all = ops.alloc<float>(N * P);
    fh::ops::run(ops, fh::ops::Fill{grads_all.view(), 0.f});
    auto d_all = ops.alloc<float>(N * Bs * Ws);
    fh::ops::run(ops, fh::ops::Copy{d_all.view(), d_head.cview()});
    net.backward_agents(ops, params.cview(), grads_all.view(), d_all.view(), ws_s);
    const auto g_all = ops.to_host(grads_all.cview());
    // One network at a time, as a single run computes them.
    // Error model (fh::test::reordered_sums): the same sums in another order. Forwards: three
    // nested reductions (the state's layer, 256 hidden, the heads) of at most 256 terms; the
    // gradients: the heads' and hidden layers' backward then the sum over the batch of 256, four.
    // The worst element, in units of that bound, must stay within 1.
    double act = 0, online = 0, target = 0, grads = 0;
    const auto worst = [](const std::vector<float>& got, const std::vector<float>& ref, int levels) {
        return test::compare_close(got, ref, test::reordered_sums(levels, 256, test::max_abs(ref))).worst;
    };
    auto pair = ops.alloc<float>(2 * P);
    auto ws1 = net.make_workspace(ops, n), ws_pair = net.make_workspace(ops, 4 * B);
    auto g1 = ops.alloc<float>(P);
    auto d1 = ops.alloc<float>(Bs * Ws);
    for (int i = 0; i < N; ++i) {
        const std::size_t k = static_cast<std::size_t>(i);
        const auto a1 = ops.to_host(
            net.forward(ops, params.cview().subview(k * P, P), obs.cview().subview(k * n * Ds, n * Ds), n, ws1));
        act = std::max(
            act, worst(a1, std::vector<float>(act_all.begin() + k * n * Ws, act_all.begin() + (k + 1) * n * Ws), 3));
        fh::ops::run(ops, fh::ops::Copy{pair.view().subview(0, P), params.cview().subview(k * P, P)});
        fh::ops::run(ops, fh::ops::Copy{pair.view().subview(P, P), targets.cview().subview(k * P, P)});
        const auto heads =
            ops.to_host(net.forward_batched(ops, pair.cview(), 2, x.cview().subview(k * xs, xs), 2 * B, ws_pair));
        online = std::max(online,
                          worst(std::vector<float>(heads.begin(), heads.begin() + Bs * Ws),
                                std::vector<float>(s_all.begin() + k * Bs * Ws, s_all.begin() + (k + 1) * Bs * Ws), 3));
        target = std::max(target,
                          worst(std::vector<float>(heads.begin() + 3 * Bs * Ws, heads.begin() + 4 * Bs * Ws),
                                std::vector<float>(t_all.begin() + k * Bs * Ws, t_all.begin() + (k + 1) * Bs * Ws), 3));
        fh::ops::run(ops, fh::ops::Fill{g1.view(), 0.f});
        fh::ops::run(ops, fh::ops::Copy{d1.view(), d_head.cview().subview(k * Bs * Ws, Bs * Ws)});
        net.backward(ops, pair.cview(), g1.view(), d1.view(), B, ws_pair);
        grads = std::max(grads, worst(ops.to_host(g1.cview()),
                                      std::vector<float>(g_all.begin() + k * P, g_all.begin() + (k + 1) * P), 4));
    }
    WARN("batched against one network, the worst element in units of its reordered-sums bound: acting forward "
         << act << ", online forward " << online << ", target forward " << target << ", gradients " << grads);
    CHECK(act <= 1);
    CHECK(online <= 1);
    CHECK(target <= 1);
    CHECK(grads <= 1);
}
