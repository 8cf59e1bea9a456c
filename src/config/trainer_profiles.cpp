/// @file trainer_profiles.cpp
/// @brief The profile's side of each trainer (trainer_profiles.hpp): its section, its
///        capabilities and its own rules between keys, one entry per trainer.
#include "config/trainer_profiles.hpp"

#include <fmt/format.h>

#include <array>

#include "abi/dqn_step.h"
#include "config/schema.hpp"

namespace fh::config {
namespace {

// Each trainer's own rules between keys, in the order resolution reports them.

void dqn_rules(const Profile& p, const CrossKeyRule& rule) {
    rule({"replay_buffer.batch_size", "replay_buffer.min_replay_size", "run.trainer"}, [&] {
        return exceeds("replay_buffer.batch_size", p.replay_buffer.batch_size, "min_replay_size",
                       p.replay_buffer.min_replay_size,
                       ": the first updates would sample the same few transitions many times");
    });
    // Options the DQN kernels cannot run as set: refused here, so that `check` and `train` agree
    // and nothing runs for hours before saying so.
    // The IQN head (docs/dqn.md): one agent, one network; its loss kernel keeps 2A + N floats
    // per sample in shared memory.
    rule({"dqn.head", "dqn.ensemble_size"}, [&] {
        return p.dqn.head == "iqn" && p.dqn.ensemble_size > 1
                   ? fmt::format(
                         "dqn.head = \"iqn\" with dqn.ensemble_size = {}: the ensemble has C51 and scalar heads only; "
                         "set dqn.ensemble_size = 1 or dqn.head = \"c51\" / \"mse\"",
                         p.dqn.ensemble_size)
                   : "";
    });
    rule({"dqn.head", "dqn.iqn_quantiles", "env.position_levels", "env.urgency_levels"}, [&] {
        const auto floats = 2 * p.num_actions() + p.dqn.iqn_quantiles;
        return p.dqn.head == "iqn" && floats > 384
                   ? fmt::format(
                         "dqn.head = \"iqn\": 2 * actions ({}) + dqn.iqn_quantiles ({}) = {} exceeds 384, the floats "
                         "per sample the IQN loss kernel keeps in shared memory; use fewer fractions or fewer position "
                         "/ urgency levels",
                         p.num_actions(), p.dqn.iqn_quantiles, floats)
                   : "";
    });
    // Hindsight experience replay (docs/dqn.md): the goals the network trains on and the one it is
    // evaluated with.
    rule({"dqn.her", "dqn.her_goal_min", "dqn.her_goal_max"}, [&] {
        return p.dqn.her ? exceeds("dqn.her_goal_min", p.dqn.her_goal_min, "dqn.her_goal_max", p.dqn.her_goal_max,
                                   ": the episode goals are drawn from [her_goal_min, her_goal_max]")
                         : "";
    });
    rule({"dqn.her", "dqn.her_eval_goal", "dqn.her_goal_min", "dqn.her_goal_max"}, [&] {
        return p.dqn.her && p.dqn.her_goal_min <= p.dqn.her_goal_max &&
                       (p.dqn.her_eval_goal < p.dqn.her_goal_min || p.dqn.her_eval_goal > p.dqn.her_goal_max)
                   ? fmt::format(
                         "dqn.her_eval_goal = {} lies outside the training goals [{}, {}] (dqn.her_goal_min, "
                         "dqn.her_goal_max): the backtests would ask the network for a goal no episode had, an "
                         "extrapolation of the goal features; widen the range or pick a goal inside it",
                         p.dqn.her_eval_goal, p.dqn.her_goal_min, p.dqn.her_goal_max)
                   : "";
    });
    rule({"dqn.her", "dqn.her_reward", "dqn.v_min", "dqn.v_max", "training.gamma", "dqn.head"}, [&] {
        return p.dqn.her && p.dqn.head == "c51" && p.training.gamma < 1 &&
                       p.dqn.her_reward / (1 - p.training.gamma) > p.dqn.v_max - p.dqn.v_min
                   ? fmt::format(
                         "dqn.her_reward = {} can add up to her_reward / (1 - training.gamma) = {:.4g} to a value, "
                         "more than the whole C51 support [dqn.v_min, dqn.v_max] = [{}, {}] spans: the goal's values "
                         "would pile up on the support's edge; lower her_reward or widen the support",
                         p.dqn.her_reward, p.dqn.her_reward / (1 - p.training.gamma), p.dqn.v_min, p.dqn.v_max)
                   : "";
    });
    // The per-sample DQN kernels keep a row's atoms, Q and (ensemble) every head's Q in 48 KB
    // of shared memory per block of up to four warps (abi::dqn_step_smem_bytes).
    rule({"dqn.num_atoms", "dqn.ensemble_size", "env.position_levels", "env.urgency_levels"}, [&] {
        dqn::HeadParams head{};
        head.num_actions = static_cast<int>(p.num_actions());
        head.num_atoms = static_cast<int>(p.dqn.num_atoms);
        head.ensemble = static_cast<int>(p.dqn.ensemble_size);
        const auto bytes = abi::dqn_step_smem_bytes(head);
        return bytes > abi::kDqnMaxSmemBytes
                   ? fmt::format(
                         "dqn.num_atoms = {}, {} actions and dqn.ensemble_size = {} need {} bytes of the DQN kernels' "
                         "shared memory per block, more than 48 KB: use fewer atoms, actions or heads",
                         p.dqn.num_atoms, head.num_actions, head.ensemble, bytes)
                   : "";
    });
    // The replay ring holds whole steps of every environment, at least n_step + 1 of them.
    rule({"replay_buffer.buffer_size", "training.buffer_size", "experience.gpu_n_episodes", "experience.n_step"}, [&] {
        const auto need = p.experience.gpu_n_episodes * (p.experience.n_step + 1);
        return p.replay_buffer.buffer_size < need
                   ? fmt::format(
                         "replay_buffer.buffer_size = {} is smaller than one step of every environment for n_step + 1 "
                         "steps (experience.gpu_n_episodes * (experience.n_step + 1) = {} * {} = {}): the replay would "
                         "silently grow to {} transitions; raise buffer_size to at least {} or lower gpu_n_episodes",
                         p.replay_buffer.buffer_size, p.experience.gpu_n_episodes, p.experience.n_step + 1, need, need,
                         need)
                   : "";
    });
}

void ppo_rules(const Profile& p, const CrossKeyRule& rule) {
    rule({"ppo.minibatches", "experience.gpu_n_episodes", "experience.gpu_timesteps_per_episode", "run.trainer"}, [&] {
        const auto rollout = p.experience.gpu_n_episodes * p.experience.gpu_timesteps_per_episode;
        return p.ppo.minibatches > rollout ? fmt::format(
                                                 "ppo.minibatches = {} exceeds the rollout's {} transitions "
                                                 "(gpu_n_episodes * gpu_timesteps_per_episode)",
                                                 p.ppo.minibatches, rollout)
                                           : "";
    });
}

void iql_rules(const Profile& p, const CrossKeyRule& rule) {
    rule({"replay_buffer.batch_size", "iql.dataset_size", "run.trainer"}, [&] {
        return exceeds("replay_buffer.batch_size", p.replay_buffer.batch_size, "iql.dataset_size", p.iql.dataset_size);
    });
}

void supervised_rules(const Profile& p, const CrossKeyRule& rule) {
    rule({"supervised.order_type", "env.urgency_levels", "run.trainer"}, [&] {
        const std::int64_t urgency = p.supervised.order_type == "far_limit"       ? 2
                                     : p.supervised.order_type == "passive_limit" ? 1
                                                                                  : 0;
        return urgency >= p.env.urgency_levels
                   ? fmt::format(
                         "supervised.order_type = {} needs env.urgency_levels >= {} (it is {}): the environment's "
                         "actions have no such order type",
                         toml_quote(p.supervised.order_type), urgency + 1, p.env.urgency_levels)
                   : "";
    });
}

void dt_rules(const Profile& p, const CrossKeyRule& rule) {
    rule({"dt.batch_size", "dt.dataset_size", "run.trainer"}, [&] {
        return p.dt.dataset == "behaviour"
                   ? exceeds("dt.batch_size", p.dt.batch_size, "dt.dataset_size", p.dt.dataset_size)
                   : "";
    });
}

constexpr std::array<TrainerProfile, 5> kTrainers{{
    {.name = "dqn", .section = "dqn", .searches = true, .replay_memory = true, .rules = &dqn_rules},
    {.name = "ppo", .section = "ppo", .searches = true, .rules = &ppo_rules},
    {.name = "iql", .section = "iql", .searches = true, .rules = &iql_rules},
    {.name = "supervised", .section = "supervised", .validation_loss = true, .rules = &supervised_rules},
    {.name = "dt", .section = "dt", .rules = &dt_rules},
}};

}  // namespace

std::span<const TrainerProfile> trainer_profiles() {
    return kTrainers;
}

const TrainerProfile* find_trainer_profile(std::string_view name) {
    for (const auto& t : kTrainers)
        if (t.name == name) return &t;
    return nullptr;
}

std::vector<std::string_view> trainers_with(bool TrainerProfile::*capability) {
    std::vector<std::string_view> out;
    for (const auto& t : kTrainers)
        if (t.*capability) out.push_back(t.name);
    return out;
}

}  // namespace fh::config
