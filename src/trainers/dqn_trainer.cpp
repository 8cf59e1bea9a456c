/// @file dqn_trainer.cpp
/// @brief The DQN algorithm, top to bottom: collect (epsilon-greedy, env step, push), update
///        (sample n-step batch, double-DQN C51 target, blended loss, backward, guard, Adam,
///        target update), log. No host synchronisation inside an iteration: the host only reads
///        the device at log intervals.
#include "trainers/dqn_trainer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <iterator>
#include <limits>

#include "data/features.hpp"
#include "io/json.hpp"
#include "ops/dqn/ops.hpp"
#include "ops/iqn/ops.hpp"
#include "ops/nn/ops.hpp"
#include "nn/init.hpp"
#include "trainers/setup.hpp"
#include "util/errors.hpp"
#include "util/log.hpp"
#include "ops/dqn/ops.hpp"
#include "ops/nn/ops.hpp"
#include "ops/replay/ops.hpp"

namespace fh::trainers {
QNetworkConfig network_config(const config::Profile& p, int state_dim) {
    QNetworkConfig c;
    // dqn.her: the network sees [observation | goal features] (cuda/math/her.h).
    c.state_dim = state_dim + (p.dqn.her ? her::kGoalFeatures : 0);
    for (auto h : p.dqn.hidden) c.hidden.push_back(static_cast<int>(h));
    // The IQN head's rows (one per sample and fraction) are the scalar head's.
    c.head = dqn::HeadParams{static_cast<int>(p.num_actions()), static_cast<int>(p.dqn.num_atoms),
                             p.dqn.dueling ? 1 : 0, static_cast<float>(p.dqn.v_min),
                             static_cast<float>(p.dqn.v_max), p.dqn.head == "c51" ? 0 : 1,
                             static_cast<int>(p.dqn.ensemble_size)};
    if (p.dqn.head == "iqn")
        c.iqn = iqn::Params{static_cast<int>(p.dqn.iqn_quantiles), static_cast<int>(p.dqn.iqn_act_quantiles),
                            static_cast<int>(p.dqn.iqn_embedding)};
    if (p.dqn.attention) {
        // The feature set's groups, then the portfolio features (and HER's goal features) as one more.
        const int market_dim = state_dim - env::kPortfolioFeatures;
        for (const auto& g : data::core42_groups())
            if (g.end <= market_dim) c.attention.push_back(g);
        if (c.attention.empty() || c.attention.back().end != market_dim)
            throw UsageError(fmt::format("dqn.attention: the feature set's groups do not cover its {} features",
                                         market_dim));
        c.attention.push_back(data::FeatureGroup{"portfolio", market_dim, c.state_dim});
    }
    return c;
}

namespace {

/// Options the DQN trainer does not implement yet are refused, never silently ignored.
void require_supported(const config::Profile& p) {
    std::vector<std::string> missing;
    if (p.dqn.head != "c51" && p.dqn.head != "mse" && p.dqn.head != "iqn")
        missing.push_back(fmt::format("dqn.head = \"{}\" (only \"c51\", \"mse\" and \"iqn\")", p.dqn.head));
    if (!p.eval.deterministic) missing.push_back("eval.deterministic = false (only greedy evaluation exists)");
    if (!missing.empty()) {
        std::string list;
        for (const auto& m : missing) list += "\n  " + m;
        throw UsageError("the DQN trainer does not implement these profile options yet:" + list +
                         "\nset them to their defaults to train");
    }
}

}  // namespace

/// The losses the DQN update passes to the guard, in order.
constexpr const char* kGuardLossNames[] = {"the C51 loss", "the MSE loss", "the CQL term"};  // dqn::UpdateStep::losses
static_assert(std::size(kGuardLossNames) == dqn::kUpdateLosses);
/// The same with the IQN head, whose loss takes the MSE's place (its C51 row stays 0).
constexpr const char* kIqnGuardLossNames[] = {"the C51 loss", "the quantile Huber loss", "the CQL term"};
static_assert(std::size(kIqnGuardLossNames) == dqn::kUpdateLosses);

DqnReplaySteps dqn_replay_steps(const config::Profile& p) {
    const long long n = p.experience.gpu_n_episodes, n_step = p.experience.n_step;
    return {static_cast<int>(std::max<long long>(p.replay_buffer.buffer_size / n, n_step + 1)),
            std::max<long long>((p.replay_buffer.min_replay_size + n - 1) / n, n_step)};
}

dqn::AgentParams dqn_agent_params(const config::Profile& p) {
    const auto& t = p.training;
    dqn::AgentParams a{};
    a.seed = static_cast<std::uint64_t>(p.run.seed);
    a.epsilon_start = t.epsilon_start;
    a.epsilon_end = t.epsilon_end;
    a.epsilon_decay_env_steps = static_cast<double>(t.epsilon_decay_steps);
    a.n_envs = static_cast<int>(p.experience.gpu_n_episodes);
    a.n_step = static_cast<int>(p.experience.n_step);
    a.gamma = static_cast<float>(t.gamma);
    a.mse_alpha = static_cast<float>(p.dqn.mse_blend_alpha);
    a.cql_alpha = static_cast<float>(p.dqn.cql_alpha);
    a.curiosity_coef = p.dqn.curiosity ? static_cast<float>(p.dqn.curiosity_coef) : 0.0f;
    a.bootstrap_prob = static_cast<float>(p.dqn.ensemble_bootstrap);
    a.ucb = static_cast<float>(p.dqn.ensemble_ucb);
    a.tau = static_cast<float>(t.tau);
    a.one_minus_tau = static_cast<float>(1.0 - t.tau);
    a.target_period = t.target_update_period;
    const ops::AdamParams adam;  // the defaults: betas, eps; no weight decay
    a.lr = static_cast<float>(t.learning_rate);
    a.beta1 = adam.beta1;
    a.beta2 = adam.beta2;
    a.adam_eps = adam.eps;
    a.clip_norm = static_cast<float>(t.grad_clip_norm);
    a.weight_decay = adam.weight_decay;
    if (p.dqn.her) {
        a.her_ratio = static_cast<float>(p.dqn.her_ratio);
        a.her_reward = static_cast<float>(p.dqn.her_reward);
        a.her_goal_min = static_cast<float>(p.dqn.her_goal_min);
        a.her_goal_max = static_cast<float>(p.dqn.her_goal_max);
        a.her_horizon = static_cast<int>(p.experience.gpu_timesteps_per_episode);
    }
    return a;
}

DqnTrainer::DqnTrainer(ops::Device& ops, const config::Profile& profile, const env::DeviceMarket& market)
    : ops_(ops),
      profile_(profile),
      env_params_(trainers::env_params(profile, market.market_dim())),
      env_(ops, market, env::Split::train, env_params_, static_cast<int>(profile.experience.gpu_n_episodes)),
      n_envs_(static_cast<int>(profile.experience.gpu_n_episodes)),
      batch_(static_cast<int>(profile.replay_buffer.batch_size)),
      num_actions_(static_cast<int>(profile.num_actions())),
      net_((require_supported(profile), network_config(profile, env_params_.state_dim))),
      policy_(network_config(profile, env_params_.state_dim), eval_goal(profile)) {
    const std::size_t B = static_cast<std::size_t>(batch_);
    // The network's inputs: the observations, with HER's goal features.
    const std::size_t DX = static_cast<std::size_t>(net_.state_dim());
    const std::size_t W = static_cast<std::size_t>(net_.output_width());
    const std::size_t K = static_cast<std::size_t>(net_.head().ensemble);

    const std::size_t P = net_.layout().total();
    nets_ = ops.alloc<float>(2 * P);
    ops.fill(nets_.view(), 0.0f);  // the padding between slices stays zero
    online_ = nets_.view().subview(0, P);
    target_ = nets_.view().subview(P, P);
    nn::init_params(ops, online_, net_.layout(), static_cast<std::uint64_t>(profile.run.seed));
    ops.copy(target_, ops::View<const float>(online_));
    grads_ = nn::alloc_zeroed(ops, net_.layout());
    adam_ = AdamState(ops, net_.layout());

    ws_act_ = net_.make_workspace(ops, n_envs_);
    // With the IQN head, every sample has N fractions: its update's head rows are B * N per network.
    const int quantiles = net_.iqn_params().quantiles;
    const std::size_t head_rows = B * static_cast<std::size_t>(std::max(1, quantiles));
    make_update_workspaces();
    if (quantiles > 0) {
        const std::size_t fractions = 2 * head_rows;  // the rows of [s; s'], N each
        iqn_features_ = ops.alloc<float>(fractions * static_cast<std::size_t>(net_.iqn_params().n_cos));
        iqn_taus_ = ops.alloc<float>(fractions);
    }

    const int capacity_steps = dqn_replay_steps(profile).capacity;
    replay_ = ReplayRing(ops, n_envs_, capacity_steps, env_params_.state_dim);

    agent_ = ops.from_host<dqn::AgentParams>(std::vector<dqn::AgentParams>{dqn_agent_params(profile)});
    counters_ = ops.from_host<dqn::Counters>(std::vector<dqn::Counters>{dqn::Counters{}});
    collect_tickets_ = ops.from_host<unsigned>(std::vector<unsigned>{0u});
    step_ = ops.from_host<dqn::UpdateStep>(std::vector<dqn::UpdateStep>{dqn::UpdateStep{}});
    x_ = ops.alloc<float>(2 * B * DX);
    if (profile.dqn.her) {
        her_goals_ = ops.alloc<float>(static_cast<std::size_t>(capacity_steps) * static_cast<std::size_t>(n_envs_));
        ops.fill(her_goals_.view(), 0.0f);
        her_obs_ = ops.alloc<float>(static_cast<std::size_t>(n_envs_) * DX);
    }
    returns_ = ops.alloc<float>(B);
    discounts_ = ops.alloc<float>(B);
    batch_actions_ = ops.alloc<int>(B);
    actions_ = ops.alloc<int>(static_cast<std::size_t>(n_envs_));
    d_head_ = ops.alloc<float>(head_rows * W);
    sample_stats_ = ops.alloc<float>(dqn::kSampleStats * B * K);
    if (K > 1) {
        target_actions_ = ops.alloc<int>(B);
        if (profile.dqn.ensemble_bootstrap < 1.0) masks_ = ops.alloc<float>(B * K);
    }
    norm_partials_ = ops.alloc<float>(ops::dqn_finish_scratch_size());
    ops.fill(norm_partials_.view(), 0.f);  // the finish's ticket starts at zero
    guard_ = ops.from_host<nn::GuardState>(std::vector<nn::GuardState>{{0, 0, -1, 0, 0}});
    stats_ = ops.from_host<dqn::MonitorStats>(std::vector<dqn::MonitorStats>{dqn::MonitorStats{}});
    histogram_ = ops.from_host<unsigned long long>(
        std::vector<unsigned long long>(static_cast<std::size_t>(num_actions_), 0));
    if (profile.dqn.curiosity) {
        const int M = env_params_.market_dim;
        curiosity_.emplace(ops, env_params_.state_dim, num_actions_, static_cast<int>(profile.dqn.hidden.front()), M,
                           n_envs_, static_cast<std::uint64_t>(profile.run.seed));
        cur_next_market_ = ops.alloc<float>(static_cast<std::size_t>(n_envs_) * static_cast<std::size_t>(M));
        cur_error_ = ops.alloc<float>(static_cast<std::size_t>(n_envs_));
        cur_stats_ = ops.from_host<dqn::CuriosityStats>(std::vector<dqn::CuriosityStats>{dqn::CuriosityStats{}});
    }
    env_.reset_all();
}

void DqnTrainer::iterate() {
    if (!ready_to_update()) return collect();
    const long long n = profile_.training.updates_per_iteration;
    bool inject = false;
    for (long long k = 1; k <= n; ++k) inject = inject || nan_injected(updates_ + k);
    const long long first = updates_;
    // The first update's gradient beside the collection step; its Adam step only after the
    // collection's forward has read the weights (the join), so collection acts with the weights
    // of the iteration's start without a copy of them. The last Adam step also advances the
    // counters (end_step_ops in the same launch).
    const auto issue = [&] {
        ops_.run_concurrently([this] { collect_ops(); }, [&] { gradient_ops(inject && nan_injected(first + 1)); });
        adam_ops(n == 1);
        for (long long k = 2; k <= n; ++k) {
            gradient_ops(inject && nan_injected(first + k));
            adam_ops(k == n);
        }
    };
    if (inject) issue();  // tests: never captured
    else ops_.run_sequence(iteration_sequence_, issue);
    after_collect();
    for (long long k = 0; k < n; ++k) after_update();
}

void DqnGreedyPolicy::act(ops::Device& ops, ops::View<const float> weights, ops::View<int> actions,
                          ops::View<const float> states, int n) {
    const std::size_t DX = static_cast<std::size_t>(net_.state_dim());
    if (&ops != ws_owner_ || n > ws_.max_batch) {  // evaluation batch sizes vary
        ws_ = net_.make_workspace(ops, n);
        ws_owner_ = &ops;
        if (goal_) {  // dqn.her: the rows with the evaluation goal's features, and the goal
            goal_obs_ = ops.alloc<float>(static_cast<std::size_t>(n) * DX);
            goal_buffer_ = ops.from_host<float>(std::vector<float>{*goal_});
        }
    }
    if (!goal_) return net_.q_values(ops, weights, states, n, ws_, {}, actions);
    const auto obs = goal_obs_.view().subview(0, static_cast<std::size_t>(n) * DX);
    ops::dqn_goal_states(ops, obs, states, goal_buffer_.cview(), net_.state_dim() - her::kGoalFeatures);
    net_.q_values(ops, weights, obs, n, ws_, {}, actions);
}

std::optional<float> eval_goal(const config::Profile& p) {
    if (!p.dqn.her) return std::nullopt;
    return static_cast<float>(p.dqn.her_eval_goal);
}

std::vector<StateTensor> DqnTrainer::state_tensors() {
    const auto P = static_cast<std::int64_t>(net_.layout().total());
    const auto D = static_cast<std::int64_t>(env_params_.state_dim);
    const auto n = static_cast<std::int64_t>(n_envs_);
    auto env = env_.persistent();
    std::vector<StateTensor> t{state_tensor("params/online", "F32", {P}, online_),
                               state_tensor("params/target", "F32", {P}, target_)};
    for (auto& a : adam_.state_tensors("adam/")) t.push_back(std::move(a));
    for (auto& r : replay_.state_tensors("replay/")) t.push_back(std::move(r));
    for (auto& e : std::vector<StateTensor>{
             state_tensor("env/state", "U8", {n, static_cast<std::int64_t>(sizeof(env::EnvState))}, env.state),
             state_tensor("env/portfolio", "F32", {n, env::PORTFOLIO_STRIDE}, env.portfolio),
             state_tensor("env/states", "F32", {n, D}, env.states),
             state_tensor("guard/state", "U8", {static_cast<std::int64_t>(sizeof(nn::GuardState))}, guard_.view()),
             state_tensor("monitor/stats", "U8", {static_cast<std::int64_t>(sizeof(dqn::MonitorStats))},
                          stats_.view()),
             state_tensor("monitor/histogram", "U64", {static_cast<std::int64_t>(num_actions_)}, histogram_.view()),
         })
        t.push_back(std::move(e));
    if (profile_.dqn.her)  // the goal of every transition in the ring
        t.push_back(state_tensor("her/goals", "F32",
                                 {static_cast<std::int64_t>(replay_.capacity_steps()), n}, her_goals_.view()));
    if (curiosity_) {
        for (auto& c : curiosity_->state_tensors("curiosity/")) t.push_back(std::move(c));
        t.push_back(state_tensor("curiosity/stats", "U8", {static_cast<std::int64_t>(sizeof(dqn::CuriosityStats))},
                                 cur_stats_.view()));
    }
    return t;
}

void DqnTrainer::restore_counter_values(std::span<const std::int64_t> v) {
    if (v.size() != 3 || v[0] < 0 || v[1] < 0 || v[2] != v[0])
        throw UsageError("checkpoint counters are inconsistent (steps, updates, pushed steps)");
    steps_ = v[0];
    updates_ = v[1];
    replay_.restore_pushed_steps(v[2]);
    adam_.restore_steps(ops_, updates_);
    if (curiosity_) curiosity_->restore_steps(ops_, steps_);  // one model step per collection step
    log_marks_ = DqnLogMarks{updates_, steps_ * n_envs_};
    upload_counters();
}

// The device's counters follow the host's (which a checkpoint restores).
void DqnTrainer::upload_counters() {
    ops_.upload<dqn::Counters>(counters_.view(),
                               std::vector<dqn::Counters>{dqn::Counters{steps_, updates_, replay_.pushed_steps()}});
}

bool DqnTrainer::ready_to_update() const noexcept {
    return replay_.pushed_steps() >= dqn_replay_steps(profile_).before_updates;
}


// One collection step: every environment acts epsilon-greedily on the online network's Q and
// the transitions go into the replay ring's next slot. The step count, epsilon and the slot come
// from the device counters, so the sequence is captured once and replayed. With `advance` the
// counters advance after it (end_step_ops): in the environment step's launch, unless the
// curiosity bonus still has to read this step's slot.
void DqnTrainer::collect_ops(bool advance) {
    ops::View<const float> observations = env_.states();
    if (profile_.dqn.her) {  // the episodes' goals into the slot's goal column, and the rows acted on
        auto persistent = env_.persistent();
        ops::dqn_her_observe(ops_, her_obs_.view(), her_goals_.view(), persistent.state, env_.states(),
                             counters_.cview(), agent_.cview(), replay_.capacity_steps(), env_params_.state_dim);
        observations = her_obs_.cview();
    }
    const auto head = net_.forward(ops_, online_, observations, n_envs_, ws_act_);
    act_outputs_ = head;
    ops::dqn_act(ops_, actions_.view(), {}, histogram_.view(), head, net_.head(), agent_.cview(), counters_.cview());
    auto persistent = env_.persistent();
    const bool advance_here = advance && !curiosity_;
    ops::dqn_collect(ops_, persistent.state, persistent.portfolio, persistent.states, actions_.cview(),
                     replay_.views(), counters_.cview(), env_.market(), env_params_,
                     advance_here ? ops::CollectAdvance{counters_.view(), collect_tickets_.view()}
                                  : ops::CollectAdvance{});
    if (curiosity_) curiosity_ops();
    if (advance && !advance_here) end_step_ops();
}

// The curiosity bonus (docs/dqn.md, "Curiosity"): the forward model's error on the transitions
// just written, (s, a) -> the next bar's market features, is added to their stored rewards with
// dqn.curiosity_coef before any update can sample them (the slot joins the sampled range at
// dqn_advance); then one Adam step of the model on the same transitions.
void DqnTrainer::curiosity_ops() {
    const auto ring = replay_.views();
    ops::dqn_curiosity_gather(ops_, curiosity_->input(), cur_next_market_.view(), ring, counters_.cview(), num_actions_,
                              env_params_.market_dim);
    curiosity_->train_step(ops_, cur_error_.view(), cur_next_market_.cview(), env_params_.market_dim,
                           static_cast<float>(profile_.training.learning_rate));
    ops::dqn_curiosity_bonus(ops_, ring, cur_stats_.view(), cur_error_.cview(), counters_.cview(), agent_.cview());
}

// After the collection step and the updates beside it: the step and push counters advance (the
// updates sampled at the old push count).
void DqnTrainer::end_step_ops() { ops::dqn_advance(ops_, counters_.view()); }

void DqnTrainer::after_collect() {
    ++steps_;
    if (curiosity_) curiosity_->count_steps(1);
    replay_.commit_slot();
}

void DqnTrainer::after_update() {
    ++updates_;
    adam_.count_step();
}

void DqnTrainer::make_update_workspaces() {
    if (split_forward()) {  // the online network on 2B rows, the target on B
        ws_pair_ = net_.make_workspace(ops_, 2 * batch_);
        ws_target_ = net_.make_workspace(ops_, batch_);
    } else {
        ws_pair_ = net_.make_workspace(ops_, 4 * batch_, net_.iqn_params().quantiles);
        ws_target_ = QNetwork::Workspace{};
    }
}

void DqnTrainer::set_paired_forward_max_rows(int rows) {
    paired_forward_max_rows_ = rows;
    make_update_workspaces();
    update_sequence_.reset();  // captured with the old workspaces
    iteration_sequence_.reset();
}

void DqnTrainer::collect() {
    ops_.run_sequence(collect_sequence_, [this] { collect_ops(true); });
    after_collect();
}

// One gradient update on a uniform batch of n-step transitions (docs/dqn.md):
// 1. sample [s; s'], actions, n-step returns and discounts at the device's counters;
// 2. the online network on s and s' in one pass (s' picks a* for double DQN), the target on s';
// 3. the fused loss: C51 projection and cross-entropy blended with the MSE on the expected Q
//    (dqn.head = "iqn": iqn_loss_ops, the fractions, both networks' quantiles and their loss),
//    and the head's backward (d_head); an ensemble's K heads are K rows per sample, each with
//    its bootstrap mask, all bootstrapping from the action the heads' mean Q picks at s';
// 4. backward through the network; the finish: gradient norm, guard, monitor, Adam constants;
// 5. Adam (skipped on the device when the guard says so) and the target update, one pass
//    (adam_ops: an iteration issues it after the collection's forward).
void DqnTrainer::gradient_ops(bool inject_nan) {
    const int B = batch_;
    const std::size_t Bs = static_cast<std::size_t>(B);
    const std::size_t W = static_cast<std::size_t>(net_.output_width());
    const int K = net_.head().ensemble;
    const bool double_dqn = profile_.dqn.double_dqn;
    if (profile_.dqn.her)  // relabelled goals, goal-conditioned returns, rows with goal features
        ops::dqn_her_sample(ops_, x_.view(), batch_actions_.view(), returns_.view(), discounts_.view(), replay_.views(),
                            her_goals_.cview(), counters_.cview(), agent_.cview(), B, masks_.view(), K);
    else
        ops::dqn_sample(ops_, x_.view(), batch_actions_.view(), returns_.view(), discounts_.view(), replay_.views(),
                        counters_.cview(), agent_.cview(), B, masks_.view(), K);
    if (net_.iqn_params().quantiles > 0) {
        iqn_loss_ops();
    } else {
        ops::View<const float> head_s, head_online_next, head_target;
        if (split_forward()) {
            // Large batches: the online network on [s; s'] beside the target on s' alone (a quarter
            // of the forward's products fewer; the GPU is full either way).
            const std::size_t D = static_cast<std::size_t>(net_.state_dim());
            ops::View<const float> online_heads;
            ops_.run_concurrently(
                [&] { online_heads = net_.forward(ops_, online_, x_.cview(), 2 * B, ws_pair_); },
                [&] { head_target = net_.forward(ops_, target_, x_.cview().subview(Bs * D, Bs * D), B, ws_target_); });
            head_s = online_heads.subview(0, Bs * W);
            head_online_next = online_heads.subview(Bs * W, Bs * W);
        } else {
            // Both networks on [s; s'] in one batched pass: rows (net, 2B); the target's rows on s are unused.
            const auto heads = net_.forward_batched(ops_, nets_.cview(), 2, x_.cview(), 2 * B, ws_pair_);
            head_s = heads.subview(0, Bs * W);
            head_online_next = heads.subview(Bs * W, Bs * W);
            head_target = heads.subview(3 * Bs * W, Bs * W);
        }
        const auto head_select = double_dqn ? head_online_next : head_target;
        if (K > 1)  // the ensemble's a*: the heads' mean Q of the select network at s'
            ops::dqn_act(ops_, target_actions_.view(), {}, {}, head_select, net_.head(), agent_.cview(),
                         counters_.cview(), false);
        ops::dqn_loss(ops_, d_head_.view(), sample_stats_.view(), head_s, head_select, head_target,
                      batch_actions_.cview(), returns_.cview(), discounts_.cview(), agent_.cview(), net_.head(), B,
                      target_actions_.cview(), masks_.cview());
    }
    net_.backward(ops_, online_, grads_.view(), d_head_.view(), B, ws_pair_);
    ops::dqn_update_finish(ops_, step_.view(), guard_.view(), stats_.view(), counters_.view(), norm_partials_.view(),
                           grads_.cview(), sample_stats_.cview(), agent_.cview(), B * K, inject_nan);
}

void DqnTrainer::adam_ops(bool end_step) {
    ops::dqn_adam_target(ops_, online_, adam_.m(), adam_.v(), target_, grads_.cview(), step_.cview(), agent_.cview(),
                         end_step ? counters_.view() : ops::View<dqn::Counters>{});
}

// The IQN head's loss (docs/dqn.md, "IQN head"): this update's fractions (Philox on the update
// number in device memory) for the rows of [s; s'], both networks' head rows under them, the
// quantile Huber loss between the online quantiles at s and the targets at s', the head's backward.
void DqnTrainer::iqn_loss_ops() {
    const int B = batch_, N = net_.iqn_params().quantiles;
    const std::size_t rows = static_cast<std::size_t>(B) * static_cast<std::size_t>(N);
    const std::size_t W = static_cast<std::size_t>(net_.output_width());
    ops::iqn_taus(ops_, iqn_features_.view(), iqn_taus_.view(), agent_.cview(), counters_.cview(), 2 * B, N,
                  net_.iqn_params().n_cos);
    // (network, [s; s'] rows x N, W): the online network's rows at s, its rows at s' (double
    // DQN's selection), the target's at s'.
    const auto heads = net_.forward_quantiles(ops_, nets_.cview(), 2, x_.cview(), 2 * B, iqn_features_.cview(), N,
                                              ws_pair_);
    const auto head_s = heads.subview(0, rows * W);
    const auto head_target = heads.subview(3 * rows * W, rows * W);
    const auto head_select = profile_.dqn.double_dqn ? heads.subview(rows * W, rows * W) : head_target;
    ops::iqn_loss(ops_, d_head_.view(), sample_stats_.view(), head_s, head_select, head_target,
                  iqn_taus_.cview().subview(0, rows), batch_actions_.cview(), returns_.cview(), discounts_.cview(),
                  agent_.cview(), net_.head(), N, B);
}

void DqnTrainer::update() {
    const bool inject = nan_injected(updates_ + 1);
    const auto issue = [this, inject] {
        gradient_ops(inject);
        adam_ops(false);
    };
    if (inject) issue();  // tests: never captured
    else ops_.run_sequence(update_sequence_, issue);
    after_update();
}

LogLine DqnTrainer::read_log(double seconds) {
    const dqn::MonitorStats s = ops_.to_host(stats_.cview())[0];  // synchronises: once per log interval
    const nn::GuardState g = ops_.to_host(guard_.cview())[0];
    const auto histogram = ops_.to_host(histogram_.cview());
    // Start the next interval from zero.
    ops_.upload<dqn::MonitorStats>(stats_.view(), std::vector<dqn::MonitorStats>{dqn::MonitorStats{}});
    ops_.upload<unsigned long long>(histogram_.view(), std::vector<unsigned long long>(histogram.size(), 0));
    dqn::CuriosityStats curiosity{};
    if (curiosity_) {
        curiosity = ops_.to_host(cur_stats_.cview())[0];
        ops_.upload<dqn::CuriosityStats>(cur_stats_.view(), std::vector<dqn::CuriosityStats>{dqn::CuriosityStats{}});
    }
    // With attention: the weights of the last collection step's environments, mean per group.
    std::vector<double> attention_mean(net_.attention_groups().size(), 0.0);
    if (!attention_mean.empty()) {
        const auto alpha = ops_.to_host(net_.attention_weights(ws_act_));
        const std::size_t G = attention_mean.size(), rows = alpha.size() / G;
        for (std::size_t r = 0; r < rows; ++r)
            for (std::size_t k = 0; k < G; ++k) attention_mean[k] += alpha[r * G + k];
        for (auto& m : attention_mean) m /= static_cast<double>(std::max<std::size_t>(1, rows));
    }
    // With an ensemble: the heads' disagreement at the states of the log interval's last
    // collection step (its first kSpreadRows environments).
    double spread = 0.0;
    const bool ensemble = net_.head().ensemble > 1 && !act_outputs_.empty();
    if (ensemble) {
        constexpr std::size_t kSpreadRows = 256;
        const std::size_t OW = static_cast<std::size_t>(net_.output_width());
        const std::size_t rows = std::min<std::size_t>(kSpreadRows, act_outputs_.size() / OW);
        spread = ensemble_spread(ops_.to_host(act_outputs_.subview(0, rows * OW)), net_.head());
    }
    // With HER: the share of the environments whose return is at or above their episode's goal at
    // the log interval's last collection step (the acting rows' distance feature g - achieved <= 0).
    double goal_reached = 0.0;
    if (profile_.dqn.her && steps_ > 0) {
        const auto rows = ops_.to_host(her_obs_.cview());
        const std::size_t DX = static_cast<std::size_t>(net_.state_dim());
        std::size_t reached = 0;
        for (std::size_t e = 0; e < static_cast<std::size_t>(n_envs_); ++e) reached += rows[e * DX + DX - 1] <= 0.0f;
        goal_reached = static_cast<double>(reached) / n_envs_;
    }
    LogLine line = dqn_log_line(profile_, s, g, histogram, curiosity, steps_, updates_, n_envs_, seconds, log_marks_);
    const bool iqn = profile_.dqn.head == "iqn";
    const double loss_mse = s.loss_sum[1] / std::max(1, s.updates);
    if (iqn) {  // losses/quantile_huber: the IQN head's loss (losses/mse holds the same number)
        auto members = line.json.as_object();
        members.emplace_back("losses/quantile_huber", s.updates > 0 ? loss_mse : 0.0);
        line.json = io::json::Value::object(std::move(members));
    }
    if (profile_.dqn.her) {
        auto members = line.json.as_object();
        members.emplace_back("her/goal_reached", goal_reached);
        line.json = io::json::Value::object(std::move(members));
    }
    if (!attention_mean.empty() || ensemble) {
        auto members = line.json.as_object();
        const auto& groups = net_.attention_groups();  // attention/<group>: what the agent looks at
        for (std::size_t k = 0; k < attention_mean.size(); ++k)
            members.emplace_back("attention/" + groups[k].name, attention_mean[k]);
        if (ensemble) members.emplace_back("q/ensemble_spread", spread);
        line.json = io::json::Value::object(std::move(members));
    }
    return line;
}

LogLine dqn_log_line(const config::Profile& profile, const dqn::MonitorStats& s, const nn::GuardState& g,
                     const std::vector<unsigned long long>& histogram, const dqn::CuriosityStats& curiosity,
                     long long steps, long long updates, int n_envs, double seconds, DqnLogMarks& marks) {
    const bool iqn = profile.dqn.head == "iqn";
    throw_if_diverged(g, profile.training.max_bad_updates, iqn ? kIqnGuardLossNames : kGuardLossNames,
                      "Lower training.learning_rate, raise training.grad_clip_norm's strictness (a smaller value) "
                      "or check the data.");

    // The scalar head's loss is the MSE alone (mse_blend_alpha blends the C51 head's two losses);
    // the IQN head's quantile Huber loss takes the MSE's row.
    const double alpha = profile.dqn.head == "c51" ? profile.dqn.mse_blend_alpha : 0.0;
    const double n = std::max(1, s.updates);
    const double samples = static_cast<double>(std::max<long long>(1, s.samples));
    const double loss_c51 = s.loss_sum[0] / n, loss_mse = s.loss_sum[1] / n, loss_cql = s.loss_sum[2] / n;
    const double cql = profile.dqn.cql_alpha;
    const double loss = alpha * loss_c51 + (1 - alpha) * loss_mse + cql * loss_cql;
    const double q_mean = s.q_sum / samples;
    const long long env_steps = steps * n_envs;
    seconds = std::max(1e-9, seconds);
    const double env_steps_per_s = static_cast<double>(env_steps - marks.env_steps) / seconds;
    const double updates_per_s = static_cast<double>(updates - marks.updates) / seconds;
    marks.updates = updates;
    marks.env_steps = env_steps;
    const bool any = s.updates > 0;
    const double epsilon = dqn::epsilon_at(dqn_agent_params(profile), steps);
    LogLine line;
    line.json = io::json::object({
        {"step", steps},
        {"env_steps", env_steps},
        {"updates", static_cast<long long>(g.applied_updates) + g.bad_total},
        {"losses/loss", any ? loss : 0.0},
        {"losses/c51", any ? loss_c51 : 0.0},
        {"losses/mse", any ? loss_mse : 0.0},
        {"losses/cql", any ? loss_cql : 0.0},
        {"losses/td_abs", any ? s.td_abs_sum / samples : 0.0},
        {"q/mean", any ? q_mean : 0.0},
        {"q/min", any ? static_cast<double>(s.q_min) : 0.0},
        {"q/max", any ? static_cast<double>(s.q_max) : 0.0},
        {"charts/epsilon", epsilon},
        {"charts/grad_norm", any ? s.grad_norm_sum / n : 0.0},
        {"charts/grad_norm_max", any ? static_cast<double>(s.grad_norm_max) : 0.0},
        {"charts/skipped_updates", g.bad_total},
        {"charts/action_histogram", io::json::array_of<unsigned long long>(histogram)},
        {"charts/curiosity", curiosity.transitions > 0
                                 ? curiosity.error_sum / static_cast<double>(curiosity.transitions)
                                 : 0.0},
        {"perf/env_steps_per_s", env_steps_per_s},
        {"perf/updates_per_s", updates_per_s},
    });
    const std::string cql_part = cql > 0 ? fmt::format(", cql {:.4f}", any ? loss_cql : 0.0) : "";
    const std::string parts = iqn ? fmt::format("quantile Huber {:.4f}{}", any ? loss_mse : 0.0, cql_part)
                                  : fmt::format("c51 {:.4f}, mse {:.4f}{}", any ? loss_c51 : 0.0, any ? loss_mse : 0.0,
                                                cql_part);
    line.text = fmt::format("step {:>9} env steps | loss {:.4f} ({}) | Q {:+.3f} | eps {:.3f} | "
                            "{:.3g} env steps/s, {:.3g} updates/s",
                            env_steps, any ? loss : 0.0, parts,
                            any ? q_mean : 0.0, epsilon, env_steps_per_s, updates_per_s);
    line.loss = any ? loss : 0.0;
    line.env_steps_per_s = env_steps_per_s;
    line.updates_per_s = updates_per_s;
    return line;
}

void DqnTrainer::bench_prepare() {
    while (!ready_to_update()) collect();
}

long long DqnTrainer::bench_collect() {
    collect();
    return n_envs_;
}

long long DqnTrainer::bench_update() {
    update();
    return 1;
}

}  // namespace fh::trainers
