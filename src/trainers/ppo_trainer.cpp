/// @file ppo_trainer.cpp
/// @brief The PPO algorithm, top to bottom (docs/ppo.md): collect a rollout (sample from the
///        actor, value from the critic, env step, diversity penalty, curiosity bonus), GAE and
///        advantage normalisation, then epochs of shuffled minibatches (clipped surrogate, value
///        loss, entropy bonus, backward, guard, Adam with a learning-rate schedule).
#include "trainers/ppo_trainer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <limits>

#include "math/ppo.h"
#include "io/json.hpp"
#include "nn/init.hpp"
#include "trainers/setup.hpp"
#include "util/errors.hpp"
#include "ops/nn/ops.hpp"
#include "ops/ppo/ops.hpp"

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

PpoTrainer::PpoTrainer(ops::Device& ops, const config::Profile& profile, const env::DeviceMarket& market)
    : ops_(ops),
      profile_((require_greedy_evaluation(profile), profile)),
      env_params_(trainers::env_params(profile, market.market_dim())),
      env_(ops, market, env::Split::train, env_params_, static_cast<int>(profile.experience.gpu_n_episodes)),
      n_envs_(static_cast<int>(profile.experience.gpu_n_episodes)),
      horizon_(static_cast<int>(profile.experience.gpu_timesteps_per_episode)),
      num_actions_(env::num_actions(env_params_)),
      state_dim_(env_params_.state_dim),
      batch_(static_cast<int>(static_cast<long long>(n_envs_) * horizon_ / profile.ppo.minibatches)),
      window_(static_cast<int>(profile.ppo.diversity_window)),
      net_(profile, state_dim_, num_actions_),
      policy_(net_.actor, net_.layout.total()),
      trunc_read_(ops, 1) {
    const std::size_t n = static_cast<std::size_t>(n_envs_);
    const std::size_t M = n * static_cast<std::size_t>(horizon_);
    const std::size_t D = static_cast<std::size_t>(state_dim_);
    const std::size_t A = static_cast<std::size_t>(num_actions_);
    const std::size_t B = static_cast<std::size_t>(batch_);
    if (batch_ < 1) throw UsageError("ppo.minibatches exceeds the rollout's transitions");

    params_ = nn::alloc_zeroed(ops, net_.layout);
    nn::init_params(ops, params_.view(), net_.layout, static_cast<std::uint64_t>(profile.run.seed));
    grads_ = nn::alloc_zeroed(ops, net_.layout);
    adam_ = AdamState(ops, net_.layout);
    ws_actor_step_ = net_.actor.make_workspace(ops, n_envs_);
    ws_critic_step_ = net_.critic.make_workspace(ops, n_envs_);
    ws_actor_mb_ = net_.actor.make_workspace(ops, batch_);
    ws_critic_mb_ = net_.critic.make_workspace(ops, batch_);

    r_states_ = ops.alloc<float>(M * D);
    for (auto* b : {&r_logp_, &r_values_, &r_next_values_, &r_rewards_, &r_adv_, &r_returns_}) *b = ops.alloc<float>(M);
    r_penalty_ = ops.alloc<float>(M);
    ops.fill(r_penalty_.view(), 0.0f);
    r_curiosity_ = ops.alloc<float>(M);
    ops.fill(r_curiosity_.view(), 0.0f);
    r_actions_ = ops.alloc<int>(M);
    r_done_ = ops.alloc<std::uint8_t>(M);
    // Truncated episodes: at most one per rollout row (an episode ends at most once a step).
    trunc_rows_ = ops.alloc<int>(M);
    trunc_bars_ = ops.alloc<int>(M);
    trunc_portfolio_ = ops.alloc<float>(M * (D - static_cast<std::size_t>(env_params_.market_dim)));
    trunc_count_ = ops.from_host<int>(std::vector<int>{0});
    trunc_states_ = ops.alloc<float>(n * D);
    ops.fill(trunc_states_.view(), 0.0f);  // the critic's padded passes read rows past the count

    div_window_ = ops.from_host<int>(std::vector<int>(n * static_cast<std::size_t>(window_), 0));
    div_counts_ = ops.from_host<int>(std::vector<int>(n * A, 0));

    mb_states_ = ops.alloc<float>(B * D);
    for (auto* b : {&mb_old_logp_, &mb_adv_, &mb_returns_, &mb_old_values_, &mb_d_values_}) *b = ops.alloc<float>(B);
    mb_stats_ = ops.alloc<float>(static_cast<std::size_t>(ppo::kPpoLossStats) * B);
    mb_d_logits_ = ops.alloc<float>(B * A);
    mb_actions_ = ops.alloc<int>(B);

    if (profile.ppo.curiosity)
        curiosity_.emplace(ops, state_dim_, num_actions_, static_cast<int>(profile.ppo.hidden.front()),
                           env_params_.market_dim, n_envs_, static_cast<std::uint64_t>(profile.run.seed));

    current_ = ops.alloc<float>(kAccSize);  // this update's and rollout's values, laid out like accum_
    ops.fill(current_.view(), 0.0f);
    norm_scratch_ = ops.alloc<float>(ops::norm_guard_scratch_size());
    ops.fill(norm_scratch_.view(), 0.f);  // ops::norm_and_guard's ticket starts at zero
    normalize_scratch_ = ops.alloc<float>(ops::normalize_scratch_size());
    accum_ = ops.alloc<float>(kAccSize);
    ops.fill(accum_.view(), 0.0f);
    gate_ = ops.alloc<int>(1);
    guard_ = ops.from_host<nn::GuardState>(std::vector<nn::GuardState>{{0, 0, -1, 0, 0}});
    histogram_ = ops.from_host<unsigned long long>(std::vector<unsigned long long>(A, 0));
    rollouts_dev_ = ops.from_host<long long>(std::vector<long long>{0});
    lr_dev_ = ops.alloc<float>(1);
    env_.reset_all();
}

double PpoTrainer::total_rollouts() const noexcept { return ppo_total_rollouts(profile_); }

float PpoTrainer::learning_rate() const noexcept { return ppo_scheduled_learning_rate(profile_, rollouts_); }

long long PpoTrainer::updates_per_rollout() const noexcept { return profile_.ppo.epochs * profile_.ppo.minibatches; }

void PpoTrainer::iterate() {
    collect_rollout();
    update_from_rollout();
}

void PpoTrainer::prepare_iteration() {
    if (!rollout_issued_) issue_rollout();
}

void PpoTrainer::issue_rollout() {
    ops_.run_sequence(rollout_sequence_, [this] { rollout_ops(); });
    trunc_read_.start(trunc_count_.cview());
    rollout_issued_ = true;
}

void PpoTrainer::collect_rollout() {
    if (!rollout_issued_) issue_rollout();
    rollout_issued_ = false;
    bootstrap_truncated();
    ops_.run_sequence(advantage_sequence_, [this] { advantage_ops(); });
    steps_ += horizon_;
    if (curiosity_) curiosity_->count_steps(horizon_);
}

// The rollout's T steps, beginning with V(s_0) (stored with s_0) beside the actor's first step;
// each step (rollout_step) computes the values the next one needs.
void PpoTrainer::rollout_ops() {
    const std::size_t n = static_cast<std::size_t>(n_envs_);
    const std::size_t D = static_cast<std::size_t>(state_dim_);
    ops_.run_concurrently(
        [&] {
            const auto v = net_.critic.infer(ops_, params_.cview(), env_.states(), n_envs_, ws_critic_step_);
            ops_.copy_group({{r_values_.view().subview(0, n), v}, {r_states_.view().subview(0, n * D), env_.states()}});
        },
        [&] { sample_actions(0); });
    for (int t = 0; t < horizon_; ++t) rollout_step(t);
}

// The bootstrap values of the rollout's truncated episodes: the critic on their terminal
// observations (rebuilt from bar and portfolio features), written over next_values at their
// rows. The host reads their count (its one wait in a rollout: for the rollout's steps alone, as
// their read was issued right after them) and runs the critic on just those rows, in passes of
// at most n rows, each padded to a power of two of at least 64 rows (the padding rows are
// discarded) so that the matrix products see few distinct shapes.
void PpoTrainer::bootstrap_truncated() {
    const int count = trunc_read_.wait()[0];  // 0 when T = 1: only steps before the last gather
    if (count < 0 || static_cast<std::size_t>(count) > trunc_rows_.size())
        throw std::logic_error(fmt::format("PPO rollout: {} truncated episodes in {} rows", count, trunc_rows_.size()));
    const std::size_t D = static_cast<std::size_t>(state_dim_);
    const std::size_t P = D - static_cast<std::size_t>(env_params_.market_dim);
    const auto features = env_.market_features();
    for (int first = 0; first < count; first += n_envs_) {
        const std::size_t row = static_cast<std::size_t>(first);
        const int rows = std::min(n_envs_, count - first);
        const std::size_t r = static_cast<std::size_t>(rows);
        const int pass = std::min(n_envs_, static_cast<int>(std::bit_ceil(static_cast<unsigned>(std::max(rows, 64)))));
        fh::ops::ppo_terminal_observations(ops_, trunc_states_.view().subview(0, r * D),
                                           trunc_bars_.cview().subview(row, r),
                                           trunc_portfolio_.cview().subview(row * P, r * P), features,
                                           env_params_.market_dim);
        const auto v = net_.critic.infer(ops_, params_.cview(),
                                         trunc_states_.cview().subview(0, static_cast<std::size_t>(pass) * D), pass,
                                         ws_critic_step_);
        fh::ops::ppo_scatter_values(ops_, r_next_values_.view(), v.subview(0, r), trunc_rows_.cview().subview(row, r));
    }
}

// Per-rollout statistics, then GAE and the normalised advantages.
void PpoTrainer::advantage_ops() {
    const auto acc = current_.view();
    ops_.mean(acc.subview(kAccReward, 1), r_rewards_.cview());
    ops_.mean(acc.subview(kAccPenalty, 1), r_penalty_.cview());
    ops_.mean(acc.subview(kAccCuriosity, 1), r_curiosity_.cview());
    ops_.mean(acc.subview(kAccValueMean, 1), r_values_.cview());
    fh::ops::ppo_gae(ops_, r_adv_.view(), r_returns_.view(), r_rewards_.cview(), r_values_.cview(), r_next_values_.cview(),
                 r_done_.cview(), static_cast<float>(profile_.training.gamma), static_cast<float>(profile_.ppo.gae_lambda),
                 horizon_);
    ops_.mean(acc.subview(kAccReturn, 1), r_returns_.cview());
    ops_.saxpy(accum_.view().subview(kAccReward, kRolloutGroup), 1.0f,
               current_.cview().subview(kAccReward, kRolloutGroup));
    fh::ops::normalize(ops_, r_adv_.view(), normalize_scratch_.view());
}

// Step t's global collection step, rollouts * T + t (the rollout count from device memory).
ops::CounterValue PpoTrainer::collection_step(int t) const {
    return ops::counter_value(rollouts_dev_.cview(), horizon_, t);
}

// The actor at step t (rows t * n .. t * n + n - 1): sampled actions and their log-probabilities,
// the action histogram (s_t is stored beside: rollout_ops, rollout_step).
void PpoTrainer::sample_actions(int t) {
    const std::size_t n = static_cast<std::size_t>(n_envs_);
    const std::size_t row = static_cast<std::size_t>(t) * n;
    const auto actions = r_actions_.view().subview(row, n);
    const auto logits = net_.actor.infer(ops_, params_.cview(), env_.states(), n_envs_, ws_actor_step_);
    fh::ops::ppo_sample(ops_, actions, r_logp_.view().subview(row, n), logits, num_actions_,
                        static_cast<std::uint64_t>(profile_.run.seed), collection_step(t));
    fh::ops::action_histogram(ops_, histogram_.view(), actions, num_actions_);
}

// Step t of the rollout (its actions are sampled): the environment step, then branches (streams
// on CUDA) that each write only their own buffers and rows:
//  - the critic on s_{t+1} (the state after any reset): V(s_{t+1}) of step t + 1, which is also V
//    of the observation after step t where the episode did not end; at the rollout's last step
//    the critic runs on the observations after the step instead (GAE bootstraps from them);
//  - the truncated episodes gathered (their values come after the rollout, bootstrap_truncated;
//    a terminated episode's next value is never read);
//  - the actor at step t + 1;
//  - s_{t+1} stored, step t's diversity penalty and curiosity bonus, the truncated episodes'
//    gather.
// So each step waits for one critic pass on n rows beside the actor.
void PpoTrainer::rollout_step(int t) {
    const std::size_t n = static_cast<std::size_t>(n_envs_);
    const std::size_t D = static_cast<std::size_t>(state_dim_);
    const std::size_t row = static_cast<std::size_t>(t) * n;
    const bool last = t + 1 == horizon_;
    const auto actions = r_actions_.view().subview(row, n);

    env_.step(actions);
    // r_t and done_t in one launch; s_{t+1} (the next step's rows) is stored on the third branch:
    // on the path before the branches it made ppo-full's step 10 us slower (docs/performance.md).
    const auto rewards = r_rewards_.view().subview(row, n);
    ops_.copy_group({{rewards, env_.rewards()}, {r_done_.view().subview(row, n), env_.done()}});
    const auto critic = [&] {
        const auto v = net_.critic.infer(ops_, params_.cview(), last ? env_.next_states() : env_.states(), n_envs_,
                                         ws_critic_step_);
        const ops::CopyPair next_value{r_next_values_.view().subview(row, n), v};
        if (last) ops_.copy_group({next_value});
        else ops_.copy_group({next_value, {r_values_.view().subview(row + n, n), v}});
    };
    // Step t's reward terms need neither network's pass, so they run beside both, off the actor's
    // path to the next step.
    const auto reward_terms = [&] {
        if (profile_.ppo.diversity_coef > 0) {
            const auto penalty = r_penalty_.view().subview(row, n);
            fh::ops::ppo_diversity(ops_, div_window_.view(), div_counts_.view(), penalty, actions, num_actions_,
                                   window_, static_cast<float>(profile_.ppo.diversity_coef), collection_step(t));
            ops_.saxpy(rewards, -1.0f, penalty);
        }
        if (curiosity_) curiosity_step(t);
    };
    if (last) return ops_.run_concurrently(critic, reward_terms);
    ops_.run_concurrently(critic, [&] { sample_actions(t + 1); }, [&] {
        ops_.copy(r_states_.view().subview((row + n) * D, n * D), env_.states());
        reward_terms();
        fh::ops::ppo_collect_truncated(ops_, trunc_rows_.view(), trunc_bars_.view(), trunc_portfolio_.view(),
                                       trunc_count_.view(), env_.next_states(), env_.info(),
                                       r_done_.cview().subview(row, n), env_params_.market_dim, static_cast<int>(row),
                                       t == 0);
    });
}

// The curiosity bonus of step t: the forward model's prediction error on (s_t, a_t) -> the next
// bar's market features, added to the reward with ppo.curiosity_coef; then one Adam step of the
// model on the same transitions.
void PpoTrainer::curiosity_step(int t) {
    const std::size_t n = static_cast<std::size_t>(n_envs_);
    const std::size_t D = static_cast<std::size_t>(state_dim_);
    const std::size_t row = static_cast<std::size_t>(t) * n;
    const auto error = r_curiosity_.view().subview(row, n);
    fh::ops::curiosity_input(ops_, curiosity_->input(), r_states_.cview().subview(row * D, n * D),
                             r_actions_.cview().subview(row, n), num_actions_);
    curiosity_->train_step(ops_, error, env_.next_states(), state_dim_, static_cast<float>(profile_.training.learning_rate));
    ops_.saxpy(r_rewards_.view().subview(row, n), static_cast<float>(profile_.ppo.curiosity_coef), error);
}

void PpoTrainer::update_from_rollout() {
    if (rollout_issued_) throw std::logic_error("PPO: an update while a rollout is issued but not completed");
    const long long per_rollout = updates_per_rollout();
    bool inject_nan = false;
    for (long long i = 1; i <= per_rollout; ++i) inject_nan = inject_nan || nan_injected(updates_ + i);
    if (inject_nan) update_ops(true);  // tests: never captured
    else ops_.run_sequence(update_sequence_, [this] { update_ops(false); });
    updates_ += per_rollout;
    adam_.count_steps(per_rollout);
    ++rollouts_;
}

// The rollout's learning rate, its epochs of minibatch updates, then the rollout count advances.
void PpoTrainer::update_ops(bool inject_nan) {
    fh::ops::ppo_learning_rate(ops_, lr_dev_.view(), profile_.training.learning_rate,
                               profile_.ppo.lr_schedule == "linear", total_rollouts(),
                               ops::counter_value(rollouts_dev_.cview()));
    for (int e = 0; e < static_cast<int>(profile_.ppo.epochs); ++e)
        for (int k = 0; k < static_cast<int>(profile_.ppo.minibatches); ++k) minibatch_update(e, k, inject_nan);
    ops_.increment(rollouts_dev_.view());
}

// Minibatch k of epoch e: rows [k B, (k + 1) B) of the rollout shuffled by the key
// rollouts * epochs + e; it is update number rollouts * epochs * minibatches + e * minibatches + k + 1.
void PpoTrainer::minibatch_update(int epoch, int minibatch, bool inject_nan) {
    const long long K = profile_.ppo.minibatches;
    const long long index = epoch * K + minibatch + 1;  // 1-based, within the rollout
    const auto update = ops::counter_value(rollouts_dev_.cview(), updates_per_rollout(), index);
    const int offset = minibatch * batch_;
    const int B = batch_;
    const ppo::RolloutView rollout{r_states_.cview().data(), r_actions_.cview().data(), r_logp_.cview().data(),
                                   r_adv_.cview().data(),    r_returns_.cview().data(), r_values_.cview().data(),
                                   static_cast<int>(r_actions_.size()), state_dim_};
    fh::ops::ppo_gather(ops_, mb_states_.view(), mb_actions_.view(), mb_old_logp_.view(), mb_adv_.view(), mb_returns_.view(),
                    mb_old_values_.view(), rollout, static_cast<std::uint64_t>(profile_.run.seed),
                    ops::counter_value(rollouts_dev_.cview(), profile_.ppo.epochs, epoch), offset);
    // Actor and critic are separate networks: forwards and backwards on two streams on CUDA.
    ops::View<const float> logits, values;
    ops_.run_concurrently([&] { values = net_.critic.forward(ops_, params_.cview(), mb_states_.cview(), B, ws_critic_mb_); },
                          [&] { logits = net_.actor.forward(ops_, params_.cview(), mb_states_.cview(), B, ws_actor_mb_); });
    const auto& pp = profile_.ppo;
    fh::ops::ppo_loss(ops_, mb_stats_.view(), mb_d_logits_.view(), mb_d_values_.view(), logits, values, mb_actions_.cview(),
                  mb_old_logp_.cview(), mb_adv_.cview(), mb_returns_.cview(), mb_old_values_.cview(),
                  ppo::LossParams{static_cast<float>(pp.clip), static_cast<float>(pp.value_coef),
                                  static_cast<float>(pp.entropy_coef), pp.clip_value ? 1 : 0});
    const auto cur = current_.view();
    ops_.run_concurrently(
        [&] {
            ops_.mean(cur.subview(0, ppo::kPpoLossStats), mb_stats_.cview());  // each stat's B rows
            if (inject_nan && nan_injected(updates_ + index))
                ops_.fill(cur.subview(kAccPolicy, 1), std::numeric_limits<float>::quiet_NaN());
            net_.critic.backward(ops_, params_.cview(), grads_.view(), mb_d_values_.view(), {}, B, ws_critic_mb_, false);
        },
        [&] { net_.actor.backward(ops_, params_.cview(), grads_.view(), mb_d_logits_.view(), {}, B, ws_actor_mb_, false); });
    fh::ops::norm_and_guard(ops_, cur.subview(kAccGradNorm, 1), norm_scratch_.view(), grads_.cview(), gate_.view(),
                            guard_.view(), current_.cview().subview(0, kGuardLosses), update,
                            accum_.view().subview(0, kUpdateGroup), current_.cview().subview(0, kUpdateGroup));
    ops::AdamParams adam;
    adam.clip_norm = static_cast<float>(profile_.training.grad_clip_norm);
    adam_.update_at(ops_, params_.view(), grads_.cview(), current_.cview().subview(kAccGradNorm, 1), gate_.cview(), adam,
                    update, lr_dev_.cview());
}

std::vector<StateTensor> PpoTrainer::state_tensors() {
    const auto P = static_cast<std::int64_t>(net_.layout.total());
    const auto D = static_cast<std::int64_t>(state_dim_);
    const auto n = static_cast<std::int64_t>(n_envs_);
    auto env = env_.persistent();
    std::vector<StateTensor> t{state_tensor("params/online", "F32", {P}, params_.view())};
    for (auto& a : adam_.state_tensors("adam/")) t.push_back(std::move(a));
    for (auto& e : std::vector<StateTensor>{
        state_tensor("env/state", "U8", {n, static_cast<std::int64_t>(sizeof(env::EnvState))}, env.state),
        state_tensor("env/portfolio", "F32", {n, env::PORTFOLIO_STRIDE}, env.portfolio),
        state_tensor("env/states", "F32", {n, D}, env.states),
        state_tensor("diversity/window", "I32", {n, window_}, div_window_.view()),
        state_tensor("diversity/counts", "I32", {n, num_actions_}, div_counts_.view()),
        state_tensor("guard/state", "U8", {static_cast<std::int64_t>(sizeof(nn::GuardState))}, guard_.view()),
        state_tensor("monitor/accumulators", "F32", {kAccSize}, accum_.view()),
        state_tensor("monitor/histogram", "U64", {num_actions_}, histogram_.view()),
         })
        t.push_back(std::move(e));
    if (curiosity_)
        for (auto& c : curiosity_->state_tensors("curiosity/")) t.push_back(std::move(c));
    return t;
}

void PpoTrainer::restore_counter_values(std::span<const std::int64_t> v) {
    if (v.size() != 4 || v[0] < 0 || v[1] != v[0] * horizon_ || v[2] != v[0] * profile_.ppo.epochs * profile_.ppo.minibatches ||
        v[3] < 0)
        throw UsageError("checkpoint counters are inconsistent (rollouts, steps, updates, curiosity updates)");
    rollouts_ = v[0];
    steps_ = v[1];
    updates_ = v[2];
    adam_.restore_steps(ops_, updates_);
    if (curiosity_) curiosity_->restore_steps(ops_, v[3]);
    ops_.upload<long long>(rollouts_dev_.view(), std::vector<long long>{rollouts_});
    log_marks_ = PpoLogMarks{rollouts_, steps_, updates_};
}

LogLine PpoTrainer::read_log(double seconds) {
    const auto acc = ops_.to_host(accum_.cview());  // synchronises: once per log interval
    const nn::GuardState g = ops_.to_host(guard_.cview())[0];
    const auto hist = ops_.to_host(histogram_.cview());
    ops_.fill(accum_.view(), 0.0f);
    ops_.upload<unsigned long long>(histogram_.view(), std::vector<unsigned long long>(hist.size(), 0));
    return ppo_log_line(profile_, acc, g, hist, PpoLogMarks{rollouts_, steps_, updates_}, n_envs_, seconds, log_marks_);
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
        {"charts/action_histogram", io::json::array_of<unsigned long long>(std::vector<unsigned long long>(hist.begin(), hist.end()))},
        {"perf/env_steps_per_s", env_steps_per_s},
        {"perf/updates_per_s", updates_per_s},
    });
    line.text = fmt::format("step {:>9} env steps | loss {:.4f} (policy {:+.4f}, value {:.4f}, entropy {:.3f}) | kl "
                            "{:.4f} | reward {:+.4f} | {:.3g} env steps/s, {:.3g} updates/s",
                            now.steps * n_envs, loss, policy, value, entropy, acc[kAccKl] / n_up,
                            acc[kAccReward] / n_roll, env_steps_per_s, updates_per_s);
    line.loss = loss;
    line.env_steps_per_s = env_steps_per_s;
    line.updates_per_s = updates_per_s;
    marks = now;
    throw_if_diverged(g, profile.training.max_bad_updates, kGuardLossNames,
                      "Lower training.learning_rate or training.grad_clip_norm, or check the data.");
    return line;
}

long long PpoTrainer::bench_collect() {
    collect_rollout();
    return progress_per_iteration();
}

long long PpoTrainer::bench_update() {
    const long long before = updates_;
    update_from_rollout();  // also counts a rollout, on the host as on the device
    return updates_ - before;
}

}  // namespace fh::trainers
