/// @file engine.cpp
/// @brief The PPO algorithm, top to bottom (docs/ppo.md), for every agent of an engine at once:
///        collect a rollout (sample from the actor, value from the critic, env step, diversity
///        penalty, curiosity bonus), GAE and advantage normalisation, then epochs of shuffled
///        minibatches (clipped surrogate, value loss, entropy bonus, backward, guard, Adam with a
///        learning-rate schedule).
#include "trainers/ppo/engine.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <stdexcept>
#include <tuple>

#include "io/json.hpp"
#include "nn/init.hpp"
#include "ops/ppo/ops.hpp"
#include "trainers/setup.hpp"
#include "util/errors.hpp"
#include "abi/core_optim.h"
#include "abi/core_vector.h"
#include "abi/nn_select.h"

namespace fh::trainers {

using namespace ppo_monitor;

double ppo_total_rollouts(const config::Profile& p) {
    const long long per_rollout = p.experience.gpu_n_episodes * p.experience.gpu_timesteps_per_episode;
    return static_cast<double>(std::max<long long>(1, p.run.total_steps / std::max<long long>(1, per_rollout)));
}

float ppo_scheduled_learning_rate(const config::Profile& p, long long rollouts) {
    return ppo::scheduled_learning_rate(p.training.learning_rate, p.ppo.lr_schedule == "linear" ? 1 : 0,
                                        ppo_total_rollouts(p), rollouts);
}

ActorCritic::ActorCritic(const config::Profile& p, int state_dim, int num_actions)
    : layout(),
      // A small last actor layer starts the policy near uniform (maximal entropy).
      actor(layout, "actor", nn::MlpConfig::stack(state_dim, p.ppo.hidden, num_actions, ops::Activation::tanh, 0.01f)),
      critic(layout, "critic", nn::MlpConfig::stack(state_dim, p.ppo.hidden, 1, ops::Activation::tanh)) {}

std::unique_ptr<PpoAgent> make_ppo_trainer(ops::Device& ops, const config::Profile& profile,
                                           const env::DeviceMarket& market) {
    return single_run<PpoAgent, PpoAgent, PpoEngine>(ops, profile, market);
}

/// run.population_batching = "auto" batches PPO agents whose widest ppo.hidden layer is at most
/// kAutoBatchingMaxWidth and whose rollouts hold at least kAutoBatchingMinRollout transitions:
/// measured on an H200 (16 agents, docs/performance.md), up to [256, 256] the batched engine is as
/// fast or faster end to end (within 9% where slower, up to 7 times faster with few environments);
/// wider agents ([512, 512]) and tiny runs go faster on their own launches.
constexpr long long kAutoBatchingMaxWidth = 256;
constexpr long long kAutoBatchingMinRollout = 1024;

std::string PpoEngine::auto_batching_declined(const config::Profile& first) {
    const long long widest = *std::max_element(first.ppo.hidden.begin(), first.ppo.hidden.end());
    const long long rollout = first.experience.gpu_n_episodes * first.experience.gpu_timesteps_per_episode;
    if (widest > kAutoBatchingMaxWidth)
        return fmt::format(
            "run.population_batching = \"auto\": the widest ppo.hidden layer is {} > {}, where the "
            "agents run faster on their own; \"on\" batches them",
            widest, kAutoBatchingMaxWidth);
    if (rollout < kAutoBatchingMinRollout)
        return fmt::format(
            "run.population_batching = \"auto\": a rollout of experience.gpu_n_episodes x "
            "gpu_timesteps_per_episode = {} < {} transitions, where the agents run faster on their "
            "own; \"on\" batches them",
            rollout, kAutoBatchingMinRollout);
    return "";
}

std::string PpoEngine::unsupported(const config::Profile& p, const config::Profile& first) {
    if (p.run.trainer != "ppo") return fmt::format("run.trainer = \"{}\" (only ppo)", p.run.trainer);
    if (!p.eval.deterministic) return "eval.deterministic = false";
    // What the agents share: the networks, the rollout's shape, the updates' schedule and mode.
    const auto shape = [](const config::Profile& q) {
        return std::tie(q.ppo.hidden, q.experience.gpu_n_episodes, q.experience.gpu_timesteps_per_episode, q.ppo.epochs,
                        q.ppo.minibatches, q.ppo.clip_value, q.ppo.diversity_window, q.ppo.lr_schedule,
                        q.training.grad_clip_norm, q.run.total_steps, q.gpu.precision, q.ppo.curiosity);
    };
    if (shape(p) != shape(first))
        return "a shape (ppo.hidden, experience.gpu_n_episodes, experience.gpu_timesteps_per_episode, ppo.epochs, "
               "ppo.minibatches, ppo.clip_value, ppo.diversity_window, ppo.lr_schedule, training.grad_clip_norm, "
               "run.total_steps, gpu.precision or ppo.curiosity) differs from the first agent's";
    if ((p.ppo.diversity_coef > 0) != (first.ppo.diversity_coef > 0))
        return "ppo.diversity_coef > 0 (a diversity penalty) for some agents and not for others";
    if (env_without_seed(trainers::env_params(p, 1)) != env_without_seed(trainers::env_params(first, 1)))
        return "the environment ([instrument] or [env]) differs from the first agent's";
    return "";
}

namespace {

std::vector<std::uint64_t> seeds_of(const std::vector<config::Profile>& agents) {
    std::vector<std::uint64_t> seeds;
    for (const auto& p : agents) seeds.push_back(static_cast<std::uint64_t>(p.run.seed));
    return seeds;
}

}  // namespace

MemoryPlan PpoEngine::plan(const config::Profile& first, int agents, const PlanInputs& in) {
    const int state_dim = trainers::env_params(first, in.market_dim).state_dim,
              A_ = static_cast<int>(first.num_actions()), n_envs = static_cast<int>(first.experience.gpu_n_episodes);
    const ActorCritic net(first, state_dim, A_);
    const std::uint64_t N = static_cast<std::uint64_t>(agents), n = static_cast<std::uint64_t>(n_envs),
                        P = net.layout.total(),
                        M = n * static_cast<std::uint64_t>(first.experience.gpu_timesteps_per_episode),
                        D = static_cast<std::uint64_t>(state_dim), A = static_cast<std::uint64_t>(A_),
                        W = static_cast<std::uint64_t>(first.ppo.diversity_window),
                        B = M / static_cast<std::uint64_t>(std::max<std::int64_t>(1, first.ppo.minibatches)),
                        portfolio_dim = D - static_cast<std::uint64_t>(in.market_dim);
    const int batch = static_cast<int>(B);
    // Its buffers, [agents][...] (PerAgent) but for the few the agents share, set to their starting
    // value where a kernel reads them before it writes them (reset_agent sets a slot's again).
    using E = PpoEngine;
    using PerAgent = MemoryPlan::PerAgent;
    MemoryPlan plan(agents);
    plan.consumer(fmt::format("networks ({} parameters, with gradients and Adam moments)", N * P), "ppo.hidden");
    plan.add("parameters, gradients and Adam moments", {&E::params_, &E::grads_, &E::m_, &E::v_}, PerAgent{P}, 0.0f);
    plan.add("seeds", {&E::seeds_}, PerAgent{1});
    plan.add("loss coefficients", {&E::loss_params_}, PerAgent{1});
    plan.add("gamma and lambda", {&E::gamma_lambda_}, PerAgent{2});
    plan.add("diversity coefficients and learning rates", {&E::diversity_coef_, &E::lr_}, PerAgent{1}, 0.0f);
    plan.consumer(fmt::format("environments ({} agents x {})", N, n), "experience.gpu_n_episodes");
    plan.add<std::uint8_t>("environments", env::VecEnv::device_bytes(agents, n_envs, state_dim), 1, 2 * N * n * D);
    plan.consumer(fmt::format("rollout buffer ({} agents x {} steps)", N, M), "experience.gpu_timesteps_per_episode");
    plan.add("the rollout's observations", {&E::r_states_}, PerAgent{M * D});
    plan.add("rollout scalars",
             {&E::r_logp_, &E::r_values_, &E::r_next_values_, &E::r_rewards_, &E::r_adv_, &E::r_returns_}, PerAgent{M});
    plan.add("rollout penalties and curiosity", {&E::r_penalty_, &E::r_curiosity_}, PerAgent{M}, 0.0f);
    plan.add("rollout actions", {&E::r_actions_}, PerAgent{M});
    plan.add("rollout done flags", {&E::r_done_}, PerAgent{M});
    plan.add("step actions", {&E::step_actions_}, PerAgent{n, 2});  // two sets (sample_actions)
    plan.add("step log-probabilities", {&E::step_logp_}, PerAgent{n, 2});
    plan.add("step rewards and penalties", {&E::step_rewards_, &E::step_penalty_}, PerAgent{n});
    plan.consumer(fmt::format("truncated episodes (up to {})", N * M), "experience.gpu_timesteps_per_episode");
    plan.add("truncated rows and bars", {&E::trunc_rows_, &E::trunc_bars_}, PerAgent{M});
    plan.add("truncated portfolios", {&E::trunc_portfolio_}, PerAgent{M * portfolio_dim});
    plan.add("truncated counts", {&E::trunc_count_}, PerAgent{1}, 0);
    plan.add("truncated observations", {&E::trunc_states_}, n * D, 0.0f);  // the critic's padded passes read them
    plan.consumer("action-diversity windows", "ppo.diversity_window");
    plan.add("diversity windows", {&E::div_window_}, PerAgent{n * W}, 0);
    plan.add("diversity counts", {&E::div_counts_}, PerAgent{n * A}, 0);
    plan.consumer(fmt::format("minibatch and workspaces ({} rows per minibatch)", B), "ppo.minibatches");
    plan.add("minibatch states", {&E::mb_states_}, PerAgent{B * D});
    plan.add("minibatch scalars",
             {&E::mb_old_logp_, &E::mb_adv_, &E::mb_returns_, &E::mb_old_values_, &E::mb_d_values_}, PerAgent{B});
    plan.add("minibatch loss statistics", {&E::mb_stats_}, PerAgent{B, ppo::kPpoLossStats});  // stat-major
    plan.add("minibatch logit gradients", {&E::mb_d_logits_}, PerAgent{B * A});
    plan.add("minibatch actions", {&E::mb_actions_}, PerAgent{B});
    plan.add("update sums", {&E::current_}, PerAgent{1, kUpdateGroup}, 0.0f);  // stat-major; tickets zero
    plan.add("rollout sums", {&E::rollout_current_}, PerAgent{kRolloutGroup}, 0.0f);
    plan.add("monitor sums", {&E::accum_}, PerAgent{kAccSize}, 0.0f);
    plan.add("norm scratch", {&E::norm_scratch_}, PerAgent{ops::norm_guard_scratch_size()}, 0.0f);
    plan.add("normalisation scratch", {&E::normalize_scratch_}, ops::normalize_scratch_size());
    plan.add("gates", {&E::gate_}, PerAgent{1}, 0);
    plan.add("guards", {&E::guard_}, PerAgent{1}, nn::GuardState{0, 0, -1, 0, 0});
    plan.add("action histograms", {&E::histogram_}, PerAgent{A}, 0ull);
    plan.add("rollout counts", {&E::rollouts_dev_}, PerAgent{1}, 0ll);
    plan.add("workspaces", net.actor.workspace_size(agents * n_envs) + net.critic.workspace_size(agents * n_envs) +
                               net.critic.workspace_size(n_envs) + net.actor.workspace_size(agents * batch) +
                               net.critic.workspace_size(agents * batch));
    std::uint64_t curiosity = 0;
    if (first.ppo.curiosity) {
        plan.consumer(fmt::format("curiosity model ({} rows per step)", n), "ppo.curiosity");
        curiosity = 3 * 4 *
                    CuriosityModel::plan(plan, state_dim, A_, static_cast<int>(first.ppo.hidden.front()), in.market_dim,
                                         n_envs, N);
    }
    const auto segments = static_cast<int>(first.eval.segments);
    plan.consumer(fmt::format("the backtests' policy ({} segments)", segments), "eval.segments");
    plan.add("policy workspace", net.actor.workspace_size(segments), N);
    // A checkpoint's host copy: weights and Adam, the environments and diversity windows, the curiosity model.
    plan.host("the host copy a checkpoint is written from",
              3 * P * 4 + curiosity + n * (sizeof(env::EnvState) + env::PORTFOLIO_STRIDE * 4 + D * 4 + 4 * (W + A)),
              "ppo.hidden");
    return plan;
}

PpoEngine::PpoEngine(ops::Device& ops, const std::vector<config::Profile>& agents,
                     const std::vector<const env::DeviceMarket*>& markets)
    : BatchedEngine(ops, agents, markets, "PPO"),
      markets_(markets),
      n_envs_(static_cast<int>(agents.front().experience.gpu_n_episodes)),
      horizon_(static_cast<int>(agents.front().experience.gpu_timesteps_per_episode)),
      num_actions_(static_cast<int>(agents.front().num_actions())),
      state_dim_((check_agents(agents, markets, "a batched PPO population", unsupported, [](const auto&) {}),
                  trainers::env_params(agents.front(), markets.front()->market_dim()).state_dim)),
      batch_(static_cast<int>(static_cast<long long>(n_envs_) * horizon_ / agents.front().ppo.minibatches)),
      window_(static_cast<int>(agents.front().ppo.diversity_window)),
      epochs_(agents.front().ppo.epochs),
      minibatches_(agents.front().ppo.minibatches),
      net_(agents.front(), state_dim_, num_actions_),
      env_(ops, markets, seeds_of(agents), env::Split::train,
           trainers::env_params(agents.front(), markets.front()->market_dim()), n_envs_),
      trunc_read_(ops, agents.size()) {
    if (batch_ < 1) throw UsageError("ppo.minibatches exceeds the rollout's transitions");
    const std::size_t N = agents.size();
    env_params_.resize(N);
    rollouts_.assign(N, 0);
    PlanInputs inputs;
    inputs.market_dim = markets.front()->market_dim();
    plan_ = PpoEngine::plan(agents.front(), agents_, inputs);
    plan_.allocate(ops, *this);
    if (agents.front().ppo.curiosity) curiosity_.reserve(N);
    for (std::size_t i = 0; i < N; ++i) start_agent(i, agents[i], *markets[i]);

    ws_actor_step_ = net_.actor.make_workspace(ops, agents_ * n_envs_);
    ws_critic_step_ = net_.critic.make_workspace(ops, agents_ * n_envs_);
    ws_critic_trunc_ = net_.critic.make_workspace(ops, n_envs_);
    ws_actor_mb_ = net_.actor.make_workspace(ops, agents_ * batch_);
    ws_critic_mb_ = net_.critic.make_workspace(ops, agents_ * batch_);
    env_.reset_all();  // every agent's environments from its seed on its market (reset_agent: restart_agent)
}

void PpoEngine::start_agent(std::size_t a, const config::Profile& p, const env::DeviceMarket& market) {
    const std::size_t P = params();
    const auto seed = static_cast<std::uint64_t>(p.run.seed);
    profiles_[a] = p;
    markets_[a] = &market;
    env_params_[a] = trainers::env_params(p, market.market_dim());
    // Its seed and keys (its learning rate: ppo_learning_rate, every rollout).
    upload_agent(ops_, seeds_, a, {seed});
    upload_keys(a, p);
    // The weights from its seed (the padding zero).
    nn::init_params(ops_, params_.view().subview(a * P, P), net_.layout, seed);
    if (p.ppo.curiosity)
        put_agent(curiosity_, a,
                  CuriosityModel(ops_, state_dim_, num_actions_, static_cast<int>(p.ppo.hidden.front()),
                                 env_params_.front().market_dim, n_envs_, seed));
    rollouts_[a] = 0;
}

template <class T>
ops::CopyPair PpoEngine::step_row(ops::Buffer<T>& rollout, int t, ops::View<const T> step, std::size_t width) {
    const std::size_t N = static_cast<std::size_t>(agents_), n = static_cast<std::size_t>(n_envs_) * width;
    const std::size_t M = n * static_cast<std::size_t>(horizon_);  // an agent's rollout, in elements
    return ops::CopyPair::strided<T>(rollout.view().subview(static_cast<std::size_t>(t) * n, (N - 1) * M + n), M, step,
                                     n, n, N);
}

std::uint32_t PpoEngine::nan_mask_at(long long index) const {
    return members_.nan_mask(
        [&](int a) { return rollouts_[static_cast<std::size_t>(a)] * updates_per_rollout() + index; });
}

void PpoEngine::iterate() {
    collect_rollout();
    std::uint32_t inject = 0;
    for (long long i = 1; i <= updates_per_rollout(); ++i) inject |= nan_mask_at(i);
    update_from_rollout(inject);
}

void PpoEngine::issue_rollout() {
    ops_.run_sequence(rollout_sequence_, [this] { rollout_ops(); });
    trunc_read_.start(trunc_count_.cview());
    rollout_issued_ = true;
}

void PpoEngine::collect_rollout() {
    if (!rollout_issued_) issue_rollout();
    rollout_issued_ = false;
    bootstrap_truncated();
    ops_.run_sequence(advantage_sequence_, [this] { advantage_ops(); });
    for (auto& c : curiosity_) c.count_steps(horizon_);
}

// The rollout's T steps, beginning with V(s_0) (stored with s_0) beside the actor's first step;
// each step (rollout_step) computes the values the next one needs.
// A collection step's actor or critic on every agent's n observations: one strided-batched pass
// over the agents' networks, or for an engine of one the fused inference (Device::mlp_infer: one
// launch for the whole network where it fits).
ops::View<const float> PpoEngine::step_forward(const nn::Mlp& net, ops::View<const float> states,
                                               nn::Mlp::Workspace& ws) {
    if (agents_ == 1) return net.infer(ops_, params_.cview(), states, n_envs_, ws);
    const std::size_t xs = static_cast<std::size_t>(n_envs_) * static_cast<std::size_t>(state_dim_);
    return net.forward_batched(ops_, params_.cview(), params(), states, xs, n_envs_, agents_, ws);
}

void PpoEngine::rollout_ops() {
    ops_.run_concurrently(
        [&] {
            const auto v = step_forward(net_.critic, env_.states(), ws_critic_step_);
            ops::run(ops_, ops::CopyGroup{{step_row(r_values_, 0, v), step_row(r_states_, 0, env_.states(),
                                                                               static_cast<std::size_t>(state_dim_))}});
        },
        [&] { sample_actions(0); });
    for (int t = 0; t < horizon_; ++t) rollout_step(t);
}

// The actor on every agent's states at step t: actions and log-probabilities (into the step's set
// t % 2, then the rollouts' row t), the histograms.
void PpoEngine::sample_actions(int t) {
    const std::size_t Nn = static_cast<std::size_t>(agents_) * static_cast<std::size_t>(n_envs_);
    const std::size_t set = static_cast<std::size_t>(t % 2) * Nn;
    const auto actions = step_actions_.view().subview(set, Nn);
    const auto logp = step_logp_.view().subview(set, Nn);
    const auto logits = step_forward(net_.actor, env_.states(), ws_actor_step_);
    fh::ops::run(ops_, fh::ops::PpoSample{actions, logp, logits, num_actions_,
                                          static_cast<std::uint64_t>(profiles_.front().run.seed), collection_step(t),
                                          seeds_.cview()});
    ops::run(ops_, ops::ActionHistogram{histogram_.view(), actions, num_actions_, agents_});
    ops::run(ops_, ops::CopyGroup{{step_row(r_actions_, t, ops::View<const int>(actions)),
                                   step_row(r_logp_, t, ops::View<const float>(logp))}});
}

// Step t of the rollout (its actions are sampled): the environments' step, then branches (streams
// on CUDA) that each write only their own buffers and rows:
//  - the critic on s_{t+1} (the state after any reset): V(s_{t+1}) of step t + 1, which is also V
//    of the observation after step t where the episode did not end; at the rollout's last step
//    the critic runs on the observations after the step instead (GAE bootstraps from them);
//  - the actor at step t + 1;
//  - step t's done flags, s_{t+1}, the reward less the diversity penalty, the curiosity bonus,
//    and the truncated episodes' gather (their values come after the rollout,
//    bootstrap_truncated; a terminated episode's next value is never read).
// So each step waits for one critic pass beside the actor.
void PpoEngine::rollout_step(int t) {
    const std::size_t Nn = static_cast<std::size_t>(agents_) * static_cast<std::size_t>(n_envs_);
    const bool last = t + 1 == horizon_;
    const auto actions = step_actions_.cview().subview(static_cast<std::size_t>(t % 2) * Nn, Nn);
    const auto& first = profiles_.front().ppo;

    env_.step(actions);
    const auto critic = [&] {
        const auto v = step_forward(net_.critic, last ? env_.next_states() : env_.states(), ws_critic_step_);
        if (last)
            ops::run(ops_, ops::CopyGroup{{step_row(r_next_values_, t, v)}});
        else
            ops::run(ops_, ops::CopyGroup{{step_row(r_next_values_, t, v), step_row(r_values_, t + 1, v)}});
    };
    // Step t's done flags and reward less the diversity penalty, the penalty, and s_{t+1}: one
    // launch of strided stores; then the curiosity bonus, added to the stored reward.
    const auto reward_terms = [&] {
        std::vector<ops::CopyPair> stores{step_row(r_done_, t, env_.done())};
        if (!last) stores.push_back(step_row(r_states_, t + 1, env_.states(), static_cast<std::size_t>(state_dim_)));
        if (first.diversity_coef > 0) {
            fh::ops::run(ops_,
                         fh::ops::PpoDiversity{div_window_.view(), div_counts_.view(), step_penalty_.view(), actions,
                                               num_actions_, window_, static_cast<float>(first.diversity_coef),
                                               collection_step(t), diversity_coef_.cview()});
            ops::run(ops_, ops::Copy{step_rewards_.view(), env_.rewards()});
            ops::run(ops_, ops::Saxpy{step_rewards_.view(), -1.0f, step_penalty_.cview()});
            stores.push_back(step_row(r_rewards_, t, step_rewards_.cview()));
            stores.push_back(step_row(r_penalty_, t, step_penalty_.cview()));
        } else {
            stores.push_back(step_row(r_rewards_, t, env_.rewards()));
        }
        ops::run(ops_, ops::CopyGroup{stores});
        if (!curiosity_.empty()) curiosity_step(t);
    };
    if (last) return ops_.run_concurrently(critic, reward_terms);
    ops_.run_concurrently(
        critic, [&] { sample_actions(t + 1); },
        [&] {
            reward_terms();
            fh::ops::run(ops_,
                         fh::ops::PpoCollectTruncated{trunc_rows_.view(), trunc_bars_.view(), trunc_portfolio_.view(),
                                                      trunc_count_.view(), env_.next_states(), env_.info(), env_.done(),
                                                      env_params_.front().market_dim, t * n_envs_, t == 0, agents_});
        });
}

// The curiosity bonus of step t, per agent: its forward model's prediction error on (s_t, a_t) ->
// the next bar's market features, added to the reward with its ppo.curiosity_coef; then one Adam
// step of its model on the same transitions (at its ppo learning rate, unscheduled).
void PpoEngine::curiosity_step(int t) {
    const std::size_t n = static_cast<std::size_t>(n_envs_), D = static_cast<std::size_t>(state_dim_);
    const std::size_t M = n * static_cast<std::size_t>(horizon_);
    for (std::size_t g = 0; g < curiosity_.size(); ++g) {
        const auto& p = profiles_[g];
        const std::size_t row = g * M + static_cast<std::size_t>(t) * n;  // agent g's row t
        const auto error = r_curiosity_.view().subview(row, n);
        fh::ops::run(ops_, fh::ops::CuriosityInput{curiosity_[g].input(), r_states_.cview().subview(row * D, n * D),
                                                   r_actions_.cview().subview(row, n), num_actions_});
        curiosity_[g].train_step(ops_, error, env_.next_states().subview(g * n * D, n * D), state_dim_,
                                 static_cast<float>(p.training.learning_rate));
        ops::run(ops_, ops::Saxpy{r_rewards_.view().subview(row, n), static_cast<float>(p.ppo.curiosity_coef), error});
    }
}

// The bootstrap values of the rollout's truncated episodes, per agent: its critic on their
// terminal observations (rebuilt from bar and portfolio features of its market), written over
// next_values at their rows. The host reads the counts (its one wait in a rollout: for the
// rollout's steps alone, as their read was issued right after them) and runs the critic on just
// those rows, in passes of at most n rows, each padded to a power of two of at least 64 rows (the
// padding rows are discarded) so that the matrix products see few distinct shapes.
void PpoEngine::bootstrap_truncated() {
    const std::vector<int> counts = trunc_read_.wait();
    const std::size_t n = static_cast<std::size_t>(n_envs_), M = n * static_cast<std::size_t>(horizon_);
    const std::size_t D = static_cast<std::size_t>(state_dim_), P = params();
    const int market_dim = env_params_.front().market_dim;
    const std::size_t PD = D - static_cast<std::size_t>(market_dim);
    for (std::size_t g = 0; g < counts.size(); ++g) {
        const int count = counts[g];
        if (count < 0 || static_cast<std::size_t>(count) > M)
            throw std::logic_error(
                fmt::format("PPO population rollout: agent {}: {} truncated episodes in {} rows", g, count, M));
        const env::MarketView market = markets_[g]->view(env::Split::train);
        const ops::View<const float> features(
            market.features, static_cast<std::size_t>(market.n_bars) * static_cast<std::size_t>(market_dim));
        const auto params = params_.cview().subview(g * P, P);
        for (int first = 0; first < count; first += n_envs_) {
            const std::size_t row = g * M + static_cast<std::size_t>(first);
            const int rows = std::min(n_envs_, count - first);
            const std::size_t r = static_cast<std::size_t>(rows);
            const int pass =
                std::min(n_envs_, static_cast<int>(std::bit_ceil(static_cast<unsigned>(std::max(rows, 64)))));
            fh::ops::run(ops_, fh::ops::PpoTerminalObservations{
                                   trunc_states_.view().subview(0, r * D), trunc_bars_.cview().subview(row, r),
                                   trunc_portfolio_.cview().subview(row * PD, r * PD), features, market_dim});
            const auto v =
                net_.critic.infer(ops_, params, trunc_states_.cview().subview(0, static_cast<std::size_t>(pass) * D),
                                  pass, ws_critic_trunc_);
            fh::ops::run(ops_, fh::ops::PpoScatterValues{r_next_values_.view().subview(g * M, M), v.subview(0, r),
                                                         trunc_rows_.cview().subview(row, r)});
        }
    }
}

// GAE for every agent in one launch (each agent's gamma and lambda), then per agent the rollout's
// statistics and the advantages' normalisation.
void PpoEngine::advantage_ops() {
    const std::size_t M = static_cast<std::size_t>(n_envs_) * static_cast<std::size_t>(horizon_);
    const std::size_t R = static_cast<std::size_t>(kRolloutGroup), S = static_cast<std::size_t>(kAccSize);
    const auto& first = profiles_.front();
    fh::ops::run(ops_,
                 fh::ops::PpoGae{r_adv_.view(), r_returns_.view(), r_rewards_.cview(), r_values_.cview(),
                                 r_next_values_.cview(), r_done_.cview(), static_cast<float>(first.training.gamma),
                                 static_cast<float>(first.ppo.gae_lambda), horizon_, gamma_lambda_.cview()});
    for (std::size_t g = 0; g < static_cast<std::size_t>(agents_); ++g) {
        const auto acc = rollout_current_.view().subview(g * R, R);
        const auto at = [&](int k) { return acc.subview(static_cast<std::size_t>(k - kAccReward), 1); };
        const auto own = [&](ops::Buffer<float>& b) { return b.view().subview(g * M, M); };
        ops::run(ops_, ops::Mean{at(kAccReward), own(r_rewards_)});
        ops::run(ops_, ops::Mean{at(kAccPenalty), own(r_penalty_)});
        ops::run(ops_, ops::Mean{at(kAccCuriosity), own(r_curiosity_)});
        ops::run(ops_, ops::Mean{at(kAccValueMean), own(r_values_)});
        ops::run(ops_, ops::Mean{at(kAccReturn), own(r_returns_)});
        ops::run(ops_, ops::Saxpy{accum_.view().subview(g * S + static_cast<std::size_t>(kAccReward), R), 1.0f, acc});
        fh::ops::run(ops_, fh::ops::Normalize{own(r_adv_), normalize_scratch_.view()});
    }
}

void PpoEngine::update_from_rollout(std::uint32_t inject_nan) {
    if (rollout_issued_)
        throw std::logic_error("PPO population: an update while a rollout is issued but not completed");
    run_unless_injected(ops_, update_sequence_, inject_nan != 0, [&] { update_ops(inject_nan); });
    ++iterations_;
    for (auto& r : rollouts_) ++r;
}

// Each agent's scheduled learning rate, the epochs of minibatch updates, then each agent's rollout
// count advances.
void PpoEngine::update_ops(std::uint32_t inject_nan) {
    for (int g = 0; g < agents_; ++g) {
        const auto& p = profiles_[static_cast<std::size_t>(g)];
        fh::ops::run(ops_, fh::ops::PpoLearningRate{
                               lr_.view().subview(static_cast<std::size_t>(g), 1), p.training.learning_rate,
                               p.ppo.lr_schedule == "linear", ppo_total_rollouts(p),
                               ops::counter_value(rollouts_dev_.cview().subview(static_cast<std::size_t>(g), 1))});
    }
    for (int e = 0; e < static_cast<int>(epochs_); ++e)
        for (int k = 0; k < static_cast<int>(minibatches_); ++k) minibatch_update(e, k, inject_nan);
    ops::run(ops_, ops::Increment{rollouts_dev_.view()});
}

// Minibatch k of epoch e of every agent: rows [k B, (k + 1) B) of agent a's rollout shuffled by the
// key (its seed, rollouts * epochs + e); its loss with its coefficients, its norm, guard and Adam
// step. It is update number rollouts * epochs * minibatches + e * minibatches + k + 1.
void PpoEngine::minibatch_update(int epoch, int minibatch, std::uint32_t inject_nan) {
    const long long index = epoch * minibatches_ + minibatch + 1;  // 1-based, within the rollout
    // Agent a's numbers from its own rollout count (rollouts_dev_[a]).
    const ops::CounterValue update = agent_counter(rollouts_dev_.cview(), updates_per_rollout(), index);
    const ops::CounterValue epoch_key = agent_counter(rollouts_dev_.cview(), epochs_, epoch);
    const int N = agents_, B = batch_;
    const std::size_t Ns = static_cast<std::size_t>(N), P = params(), Bs = static_cast<std::size_t>(B);
    const std::size_t D = static_cast<std::size_t>(state_dim_);
    const ppo::RolloutView rollout{
        r_states_.cview().data(),  r_actions_.cview().data(), r_logp_.cview().data(), r_adv_.cview().data(),
        r_returns_.cview().data(), r_values_.cview().data(),  n_envs_ * horizon_,     state_dim_};
    fh::ops::run(ops_, fh::ops::PpoGather{mb_states_.view(), mb_actions_.view(), mb_old_logp_.view(), mb_adv_.view(),
                                          mb_returns_.view(), mb_old_values_.view(), rollout,
                                          static_cast<std::uint64_t>(profiles_.front().run.seed), epoch_key,
                                          minibatch * B, seeds_.cview()});
    ops::View<const float> logits, values;
    ops_.run_concurrently(
        [&] {
            values =
                net_.critic.forward_batched(ops_, params_.cview(), P, mb_states_.cview(), Bs * D, B, N, ws_critic_mb_);
        },
        [&] {
            logits =
                net_.actor.forward_batched(ops_, params_.cview(), P, mb_states_.cview(), Bs * D, B, N, ws_actor_mb_);
        });
    const auto& pp = profiles_.front().ppo;
    fh::ops::run(ops_, fh::ops::PpoLoss{mb_stats_.view(), mb_d_logits_.view(), mb_d_values_.view(), logits, values,
                                        mb_actions_.cview(), mb_old_logp_.cview(), mb_adv_.cview(), mb_returns_.cview(),
                                        mb_old_values_.cview(),
                                        ppo::LossParams{static_cast<float>(pp.clip), static_cast<float>(pp.value_coef),
                                                        static_cast<float>(pp.entropy_coef), pp.clip_value ? 1 : 0},
                                        loss_params_.cview()});
    // The statistics stat-major: stat k of agent a at k N + a (one mean launch for all).
    const auto cur = current_.view();
    ops_.run_concurrently(
        [&] {
            ops::run(ops_,
                     ops::Mean{cur.subview(0, static_cast<std::size_t>(ppo::kPpoLossStats) * Ns), mb_stats_.cview()});
            if (inject_nan != 0)
                inject_nan_at(ops_, cur.subview(static_cast<std::size_t>(kAccPolicy) * Ns, Ns), nan_mask_at(index));
            net_.critic.backward_batched(ops_, params_.cview(), grads_.view(), mb_d_values_.view(), {}, ws_critic_mb_,
                                         false);
        },
        [&] {
            net_.actor.backward_batched(ops_, params_.cview(), grads_.view(), mb_d_logits_.view(), {}, ws_actor_mb_,
                                        false);
        });
    ops::run(ops_, ops::NormAndGuardAgents{N, grads_.cview(), norm_scratch_.view(), gate_.view(), guard_.view(), cur,
                                           kGuardLosses, kAccGradNorm, update, accum_.view(), kAccSize});
    ops::AdamParams adam;
    adam.clip_norm = static_cast<float>(profiles_.front().training.grad_clip_norm);
    ops::run(ops_, ops::AdamStepAgents{N, params_.view(), m_.view(), v_.view(), grads_.cview(),
                                       current_.cview().subview(static_cast<std::size_t>(kAccGradNorm) * Ns, Ns),
                                       gate_.cview(), update, adam, lr_.cview()});
}

void PpoEngine::restore_rollouts(int agent, long long rollouts) {
    if (agent < 0 || agent >= agents_) throw std::out_of_range("PpoEngine::restore_rollouts: no such agent");
    if (iterations_ != 0) throw std::logic_error("PpoEngine::restore_rollouts after the population trained");
    const auto a = static_cast<std::size_t>(agent);
    rollouts_[a] = rollouts;
    upload_agent(ops_, rollouts_dev_, a, {rollouts});
}

void PpoEngine::reset_agent(int agent, const config::Profile& p, const env::DeviceMarket& market) {
    if (rollout_issued_) throw std::logic_error("PpoEngine::reset_agent while a rollout is issued");
    require_greedy_evaluation(p);
    check_new_agent(profiles_, agent, p, market, env_params_.front().market_dim, unsupported, "a PPO engine");
    plan_.reset_agent(ops_, *this, agent);
    env_.restart_agent(agent, market, static_cast<std::uint64_t>(p.run.seed));
    start_agent(static_cast<std::size_t>(agent), p, market);
    // The curiosity model's buffers and the learning rates are the captured sequences' arguments.
    for (auto* sequence : {&rollout_sequence_, &advantage_sequence_, &update_sequence_}) sequence->reset();
    ops_.synchronize();
}

void PpoEngine::set_agent_keys(int a, const config::Profile& p) {
    upload_keys(replace_agent_keys(profiles_, a, p, unsupported,
                                   "a PPO agent keeps its run.seed while it trains (its environments and sampling)"),
                p);
    // The learning rate (ppo_learning_rate) and the curiosity weight are arguments of the sequences.
    for (auto* sequence : {&rollout_sequence_, &advantage_sequence_, &update_sequence_}) sequence->reset();
}

void PpoEngine::upload_keys(std::size_t i, const config::Profile& p) {
    upload_agent(ops_, loss_params_, i,
                 {ppo::LossParams{static_cast<float>(p.ppo.clip), static_cast<float>(p.ppo.value_coef),
                                  static_cast<float>(p.ppo.entropy_coef), p.ppo.clip_value ? 1 : 0}});
    upload_agent(ops_, gamma_lambda_, i, {static_cast<float>(p.training.gamma), static_cast<float>(p.ppo.gae_lambda)});
    upload_agent(ops_, diversity_coef_, i, {static_cast<float>(p.ppo.diversity_coef)});
}

PpoEngine::AgentState PpoEngine::agent_state(int agent) {
    if (agent < 0 || agent >= agents_) throw std::out_of_range("PpoEngine::agent_state");
    const std::size_t a = static_cast<std::size_t>(agent), P = params(), n = static_cast<std::size_t>(n_envs_);
    const std::size_t D = static_cast<std::size_t>(state_dim_), A = static_cast<std::size_t>(num_actions_),
                      W = static_cast<std::size_t>(window_), S = static_cast<std::size_t>(kAccSize);
    const std::size_t M = n * static_cast<std::size_t>(horizon_);
    const auto env = env_.persistent();
    return AgentState{params_.view().subview(a * P, P),
                      m_.view().subview(a * P, P),
                      v_.view().subview(a * P, P),
                      accum_.view().subview(a * S, S),
                      env.state.subview(a * n, n),
                      env.portfolio.subview(a * n * env::PORTFOLIO_STRIDE, n * env::PORTFOLIO_STRIDE),
                      env.states.subview(a * n * D, n * D),
                      div_window_.view().subview(a * n * W, n * W),
                      div_counts_.view().subview(a * n * A, n * A),
                      guard_.view().subview(a, 1),
                      histogram_.view().subview(a * A, A),
                      r_values_.cview().subview(a * M, M),
                      r_next_values_.cview().subview(a * M, M),
                      r_actions_.cview().subview(a * M, M),
                      r_done_.cview().subview(a * M, M),
                      curiosity_.empty() ? nullptr : &curiosity_[a]};
}

PpoAgent::PpoAgent(std::shared_ptr<PpoEngine> population, int agent)
    : EngineAgent(population, agent, population->rollouts(agent)),
      state_(engine_->agent_state(agent)),
      policy_(engine_->network().actor, engine_->network().layout.total()),
      rollouts_(engine_->rollouts(agent)) {}

void PpoAgent::iterate() {
    advance(rollouts_);
    ++rollouts_;
}

LogLine PpoAgent::read_log(double seconds) {
    ops::Device& ops = engine_->device();
    const auto acc = ops.to_host(ops::View<const float>(state_.accumulators));  // synchronises
    const nn::GuardState g = ops.to_host(ops::View<const nn::GuardState>(state_.guard))[0];
    const auto hist = ops.to_host(ops::View<const unsigned long long>(state_.histogram));
    ops::run(ops, ops::Fill{state_.accumulators, 0.0f});
    ops.upload<unsigned long long>(state_.histogram, std::vector<unsigned long long>(hist.size(), 0));
    const PpoLogMarks now{rollouts_, rollouts_ * engine_->horizon(), updates()};
    return ppo_log_line(engine_->profile(agent_), acc, g, hist, now, engine_->n_envs(), seconds, log_marks_);
}

// The checkpoint's tensors (their names, shapes and order are those of checkpoints written by
// earlier versions' single runs, which therefore resume).
std::vector<StateTensor> PpoAgent::state_tensors() {
    const auto P = static_cast<std::int64_t>(state_.params.size());
    const auto D = static_cast<std::int64_t>(env_params_.state_dim);
    const auto n = static_cast<std::int64_t>(engine_->n_envs());
    const auto A = static_cast<std::int64_t>(state_.histogram.size());
    std::vector<StateTensor> t{
        state_tensor("params/online", "F32", {P}, state_.params),
        state_tensor("adam/m", "F32", {P}, state_.m),
        state_tensor("adam/v", "F32", {P}, state_.v),
        state_tensor("env/state", "U8", {n, static_cast<std::int64_t>(sizeof(env::EnvState))}, state_.env_state),
        state_tensor("env/portfolio", "F32", {n, env::PORTFOLIO_STRIDE}, state_.env_portfolio),
        state_tensor("env/states", "F32", {n, D}, state_.env_states),
        state_tensor("diversity/window", "I32", {n, static_cast<std::int64_t>(state_.diversity_window.size()) / n},
                     state_.diversity_window),
        state_tensor("diversity/counts", "I32", {n, A}, state_.diversity_counts),
        state_tensor("guard/state", "U8", {static_cast<std::int64_t>(sizeof(nn::GuardState))}, state_.guard),
        state_tensor("monitor/accumulators", "F32", {kAccSize}, state_.accumulators),
        state_tensor("monitor/histogram", "U64", {A}, state_.histogram)};
    if (state_.curiosity)
        for (auto& c : state_.curiosity->state_tensors("curiosity/")) t.push_back(std::move(c));
    return t;
}

void PpoAgent::restore_counter_values(std::span<const std::int64_t> v) {
    const long long per = engine_->updates_per_rollout();
    if (v.size() != 4 || v[0] < 0 || v[1] != v[0] * engine_->horizon() || v[2] != v[0] * per || v[3] < 0)
        throw UsageError("checkpoint counters are inconsistent (rollouts, steps, updates, curiosity updates)");
    engine_->restore_rollouts(agent_, v[0]);
    if (state_.curiosity) state_.curiosity->restore_steps(engine_->device(), v[3]);
    rollouts_ = v[0];
    restart_at(rollouts_);
    log_marks_ = PpoLogMarks{v[0], v[1], v[2]};
}

void PpoAgent::prepare_iteration() {
    if (first_of_round(rollouts_)) engine_->issue_ahead();
}

float PpoAgent::learning_rate() const noexcept {
    return ppo_scheduled_learning_rate(engine_->profile(agent_), rollouts_);
}

long long PpoAgent::bench_collect() {
    require_alone();
    engine_->collect();
    return progress_per_iteration();
}

// The rollout's updates, which also count the rollout (on the host as on the device).
long long PpoAgent::bench_update() {
    require_alone();
    engine_->update();
    ++rollouts_;
    return engine_->updates_per_rollout();
}

LogLine ppo_log_line(const config::Profile& profile, std::span<const float> acc, const nn::GuardState& g,
                     std::span<const unsigned long long> hist, const PpoLogMarks& now, int n_envs, double seconds,
                     PpoLogMarks& marks) {
    if (acc.size() != static_cast<std::size_t>(kAccSize))
        throw std::logic_error(fmt::format("PPO log: {} accumulators, expected {}", acc.size(), kAccSize));
    const double n_up = static_cast<double>(std::max<long long>(1, now.updates - marks.updates));
    const double n_roll = static_cast<double>(std::max<long long>(1, now.rollouts - marks.rollouts));
    seconds = std::max(1e-9, seconds);
    const double env_steps_per_s = static_cast<double>((now.steps - marks.steps) * n_envs) / seconds;
    const double updates_per_s = static_cast<double>(now.updates - marks.updates) / seconds;
    const auto& pp = profile.ppo;
    const double policy = acc[kAccPolicy] / n_up, value = acc[kAccValue] / n_up, entropy = acc[kAccEntropy] / n_up;
    const double loss = policy + pp.value_coef * value - pp.entropy_coef * entropy;
    LogLine line;
    line.json = io::json::object({
        {"step", now.steps},
        {"env_steps", now.steps * n_envs},
        {"updates", now.updates},
        {"rollouts", now.rollouts},
        {"losses/loss", loss},
        {"losses/policy", policy},
        {"losses/value", value},
        {"losses/entropy", entropy},
        {"charts/approx_kl", acc[kAccKl] / n_up},
        {"charts/clip_fraction", acc[kAccClip] / n_up},
        {"charts/grad_norm", acc[kAccGradNorm] / n_up},
        {"charts/learning_rate", ppo_scheduled_learning_rate(profile, now.rollouts)},
        {"charts/skipped_updates", g.bad_total},
        {"rollout/reward", acc[kAccReward] / n_roll},
        {"rollout/diversity_penalty", acc[kAccPenalty] / n_roll},
        {"rollout/curiosity", acc[kAccCuriosity] / n_roll},
        {"rollout/value", acc[kAccValueMean] / n_roll},
        {"rollout/return", acc[kAccReturn] / n_roll},
        {"charts/action_histogram",
         io::json::array_of<unsigned long long>(std::vector<unsigned long long>(hist.begin(), hist.end()))},
        {"perf/env_steps_per_s", env_steps_per_s},
        {"perf/updates_per_s", updates_per_s},
    });
    line.text = fmt::format(
        "step {:>9} env steps | loss {:.4f} (policy {:+.4f}, value {:.4f}, entropy {:.3f}) | kl "
        "{:.4f} | reward {:+.4f} | {:.3g} env steps/s, {:.3g} updates/s",
        now.steps * n_envs, loss, policy, value, entropy, acc[kAccKl] / n_up, acc[kAccReward] / n_roll, env_steps_per_s,
        updates_per_s);
    line.loss = loss;
    line.env_steps_per_s = env_steps_per_s;
    line.updates_per_s = updates_per_s;
    marks = now;
    throw_if_diverged(g, profile.training.max_bad_updates, kGuardLossNames,
                      "Lower training.learning_rate or training.grad_clip_norm, or check the data.");
    return line;
}

}  // namespace fh::trainers
