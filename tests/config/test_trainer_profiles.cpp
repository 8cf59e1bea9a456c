/// @file test_trainer_profiles.cpp
/// @brief The profile's table of trainers (config/trainer_profiles.hpp): one entry per run.trainer
///        choice, each with its schema section and its own rules; each rule fires for its trainer
///        and for no other, at the same file:line:col; the capabilities other keys ask for
///        (run.search, early_stopping.metric = "val_loss", replay_buffer.save_dump) are read from
///        the entries.
#include <set>
#include <string>
#include <vector>

#include "config/schema.hpp"
#include "config/trainer_profiles.hpp"
#include "support.hpp"

using fh::test::has_problem;
using fh::test::resolve;

namespace {

/// A rule of one trainer: a profile body (after "[run]\ntrainer = ...\n", lines 1-2) that breaks it,
/// and where and how it is reported.
struct OwnRule {
    std::string trainer, body, where, what;
};

std::vector<OwnRule> own_rules() {
    return {
        {"dqn", "[replay_buffer]\nmin_replay_size = 64\nbatch_size = 128\n",
         "p.toml:5:14:", "replay_buffer.batch_size = 128 exceeds min_replay_size = 64: the first updates"},
        {"dqn", "[dqn]\nhead = \"iqn\"\nensemble_size = 3\n",
         "p.toml:5:17:", "the ensemble has C51 and scalar heads only"},
        {"dqn", "[env]\nposition_levels = 101\nurgency_levels = 3\n[dqn]\nhead = \"iqn\"\n",
         "p.toml:7:8:", "2 * actions (303) + dqn.iqn_quantiles (8) = 614 exceeds 384"},
        {"dqn", "[dqn]\nher = true\nher_goal_min = 3.0\nher_goal_max = 1.0\n",
         "p.toml:6:16:", "dqn.her_goal_min = 3 exceeds dqn.her_goal_max = 1"},
        {"dqn", "[dqn]\nher = true\nher_eval_goal = 10.0\n",
         "p.toml:5:17:", "dqn.her_eval_goal = 10 lies outside the training goals"},
        {"dqn", "[dqn]\nher = true\nher_reward = 100.0\n", "p.toml:5:14:", "more than the whole C51 support"},
        {"dqn", "[dqn]\nnum_atoms = 1001\nensemble_size = 8\n",
         "p.toml:5:17:", "need 65792 bytes of the DQN kernels' shared memory per block"},
        {"dqn", "[replay_buffer]\nbuffer_size = 10\nmin_replay_size = 5\nbatch_size = 5\n",
         "p.toml:4:15:", "replay_buffer.buffer_size = 10 is smaller than one step of every environment"},
        {"ppo", "[experience]\ngpu_n_episodes = 2\ngpu_timesteps_per_episode = 4\n[ppo]\nminibatches = 16\n",
         "p.toml:7:15:", "ppo.minibatches = 16 exceeds the rollout's 8 transitions"},
        {"iql", "[iql]\ndataset_size = 10\n", "p.toml:4:16:", "exceeds iql.dataset_size = 10"},
        {"supervised", "[env]\nurgency_levels = 1\n[supervised]\norder_type = \"far_limit\"\n",
         "p.toml:6:14:", "supervised.order_type = \"far_limit\" needs env.urgency_levels >= 3 (it is 1)"},
        {"dt", "[dt]\ndataset_size = 10\n", "p.toml:4:16:", "dt.batch_size = 64 exceeds dt.dataset_size = 10"},
    };
}

std::string with_trainer(std::string_view trainer, const std::string& body) {
    return "[run]\ntrainer = \"" + std::string(trainer) + "\"\n" + body;
}

bool mentions(const fh::test::Outcome& o, const std::string& what) {
    return o.message.find(what) != std::string::npos;
}

}  // namespace

TEST_CASE("trainer profiles: one entry per run.trainer choice, each with its section and rules", "[config]") {
    const auto* trainer = fh::config::find_key("run", "trainer");
    REQUIRE(trainer != nullptr);
    std::string choices;
    for (const auto& t : fh::config::trainer_profiles()) {
        if (!choices.empty()) choices += '|';
        choices += t.name;
        INFO("trainer " << t.name);
        CHECK(fh::config::is_section(t.section));
        CHECK(t.rules != nullptr);
        CHECK(fh::config::find_trainer_profile(t.name) == &t);
    }
    CHECK(choices == trainer->choices);  // the same trainers, in the same order
    CHECK(fh::config::find_trainer_profile("dqm") == nullptr);
    CHECK(fh::config::find_trainer_profile("") == nullptr);
}

TEST_CASE("trainer profiles: each trainer's rule fires for it at its key's file:line:col, and for no other",
          "[config]") {
    const auto rules = own_rules();
    std::set<std::string> owners;
    for (const auto& r : rules) owners.insert(r.trainer);
    for (const auto& t : fh::config::trainer_profiles()) {
        INFO("trainer " << t.name);
        CHECK(owners.count(std::string(t.name)) == 1);  // every trainer's entry has its rules here
    }
    for (const auto& r : rules) {
        REQUIRE(fh::config::find_trainer_profile(r.trainer) != nullptr);
        for (const auto& t : fh::config::trainer_profiles()) {
            INFO("rule of " << r.trainer << " (" << r.what << "), profile of " << t.name);
            const auto o = resolve(with_trainer(t.name, r.body));
            INFO(o.message);
            if (t.name == r.trainer) {
                CHECK(o.exit_code == 2);
                CHECK(has_problem(o, r.where, r.what));
            } else {
                CHECK_FALSE(mentions(o, r.what));
            }
        }
        // run.trainer given on the command line instead: the same rule fires.
        const auto o = resolve(with_trainer("dt", r.body), {"run.trainer=\"" + r.trainer + "\""});
        INFO("rule of " << r.trainer << " with --set run.trainer: " << o.message);
        CHECK(mentions(o, r.what));
    }
}

TEST_CASE("trainer profiles: run.search, val_loss and save_dump ask the trainer's entry", "[config]") {
    // What each trainer can do, as docs/sweeps.md, docs/supervised.md and docs/dqn.md say.
    const std::set<std::string> searches{"dqn", "iql", "ppo"}, validation_loss{"supervised"}, replay_memory{"dqn"};
    for (const auto& t : fh::config::trainer_profiles()) {
        const std::string name(t.name);
        INFO("trainer " << name);
        CHECK(t.searches == (searches.count(name) == 1));
        CHECK(t.validation_loss == (validation_loss.count(name) == 1));
        CHECK(t.replay_memory == (replay_memory.count(name) == 1));

        auto o = resolve(with_trainer(name, "search = \"pbt\"\n"));
        const std::string search = "p.toml:3:10: run.search = \"pbt\" trains DQN, IQL and PPO populations, not " + name;
        CHECK(has_problem(o, search, "") == !t.searches);
        CHECK(mentions(o, "trains DQN") == !t.searches);

        o = resolve(with_trainer(name, "[early_stopping]\nmetric = \"val_loss\"\n"));
        const std::string val_loss =
            "p.toml:4:10: early_stopping.metric = \"val_loss\" needs run.trainer = "
            "\"supervised\" (the " +
            name + " trainer has no validation loss); use val_sharpe, val_return or val_sortino";
        CHECK(has_problem(o, val_loss, "") == !t.validation_loss);
        CHECK(mentions(o, "needs run.trainer") == !t.validation_loss);

        o = resolve(with_trainer(name, "[replay_buffer]\nsave_dump = true\n"));
        const std::string dump = "p.toml:4:13: replay_buffer.save_dump = true needs run.trainer = \"dqn\" (the " +
                                 name + " trainer has no replay memory)";
        CHECK(has_problem(o, dump, "") == !t.replay_memory);
        CHECK(mentions(o, "needs run.trainer") == !t.replay_memory);
    }
    // A missing run.trainer has no entry: each capability is refused (and the missing key reported).
    const auto o = resolve("[run]\nsearch = \"pbt\"\n[early_stopping]\nmetric = \"val_loss\"\n");
    CHECK(has_problem(o, "p.toml:1:1:", "[run] has no 'trainer'"));
    CHECK(mentions(o, "trains DQN, IQL and PPO populations, not "));
    CHECK(mentions(o, "needs run.trainer = \"supervised\" (the  trainer has no validation loss)"));
}
