/// @file dqn_trainer.cpp
/// @brief The DQN algorithm, top to bottom: collect (epsilon-greedy, env step, push), update
///        (sample n-step batch, double-DQN C51 target, blended loss, backward, guard, Adam,
///        target update), log. No host synchronisation inside an iteration: the host only reads
///        the device at log intervals.
#include "trainers/dqn_trainer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <limits>

#include "io/json.hpp"
#include "ops/dqn/ops.hpp"
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
    c.state_dim = state_dim;
    for (auto h : p.dqn.hidden) c.hidden.push_back(static_cast<int>(h));
    c.head = dqn::HeadParams{static_cast<int>(p.num_actions()), static_cast<int>(p.dqn.num_atoms),
                             p.dqn.dueling ? 1 : 0, static_cast<float>(p.dqn.v_min),
                             static_cast<float>(p.dqn.v_max)};
    return c;
}

namespace {

/// Options the DQN trainer does not implement yet are refused, never silently ignored.
void require_supported(const config::Profile& p) {
    std::vector<std::string> missing;
    if (p.dqn.head != "c51") missing.push_back(fmt::format("dqn.head = \"{}\" (only \"c51\")", p.dqn.head));
    if (p.dqn.cql_alpha != 0.0) missing.push_back("dqn.cql_alpha != 0 (CQL)");
    if (p.dqn.ensemble_size != 1) missing.push_back("dqn.ensemble_size != 1");
    if (p.dqn.attention) missing.push_back("dqn.attention");
    if (p.dqn.curiosity) missing.push_back("dqn.curiosity");
    if (p.dqn.her) missing.push_back("dqn.her");
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
constexpr const char* kGuardLossNames[] = {"the C51 loss", "the MSE loss"};  // batch_losses_

DqnTrainer::DqnTrainer(ops::Device& ops, const config::Profile& profile, const env::DeviceMarket& market)
    : ops_(ops),
      profile_(profile),
      env_params_(trainers::env_params(profile, market.market_dim())),
      env_(ops, market, env::Split::train, env_params_, static_cast<int>(profile.experience.gpu_n_episodes)),
      n_envs_(static_cast<int>(profile.experience.gpu_n_episodes)),
      batch_(static_cast<int>(profile.replay_buffer.batch_size)),
      num_actions_(static_cast<int>(profile.num_actions())),
      net_((require_supported(profile), network_config(profile, env_params_.state_dim))),
      policy_(network_config(profile, env_params_.state_dim)) {
    const std::size_t B = static_cast<std::size_t>(batch_);
    const std::size_t AZ = static_cast<std::size_t>(num_actions_) * static_cast<std::size_t>(net_.head().num_atoms);

    online_ = nn::alloc_zeroed(ops, net_.layout());
    nn::init_params(ops, online_.view(), net_.layout(), static_cast<std::uint64_t>(profile.run.seed));
    target_ = nn::alloc_zeroed(ops, net_.layout());
    ops.copy(target_.view(), online_.cview());
    grads_ = nn::alloc_zeroed(ops, net_.layout());
    adam_ = AdamState(ops, net_.layout());

    ws_act_ = net_.make_workspace(ops, n_envs_);
    ws_s_ = net_.make_workspace(ops, batch_);
    ws_next_online_ = net_.make_workspace(ops, batch_);
    ws_next_target_ = net_.make_workspace(ops, batch_);

    const int capacity_steps = static_cast<int>(
        std::max<long long>(profile.replay_buffer.buffer_size / n_envs_, profile.experience.n_step + 1));
    replay_ = ReplayRing(ops, n_envs_, capacity_steps, env_params_.state_dim);
    batch_buf_ = ReplayBatch(ops, batch_, env_params_.state_dim);

    loss_c51_ = ops.alloc<float>(B);
    loss_mse_ = ops.alloc<float>(B);
    td_ = ops.alloc<float>(B);
    d_c51_ = ops.alloc<float>(B * AZ);
    d_mse_ = ops.alloc<float>(B * AZ);
    batch_losses_ = ops.alloc<float>(std::size(kGuardLossNames));
    grad_norm_ = ops.alloc<float>(1);
    norm_scratch_ = ops.alloc<float>(ops::Device::global_norm_scratch_size());

    gate_ = ops.alloc<int>(1);
    actions_ = ops.alloc<int>(static_cast<std::size_t>(n_envs_));
    guard_ = ops.from_host<nn::GuardState>(std::vector<nn::GuardState>{{0, 0, -1, 0, 0}});
    stats_ = ops.from_host<dqn::MonitorStats>(std::vector<dqn::MonitorStats>{dqn::MonitorStats{}});
    histogram_ = ops.from_host<unsigned long long>(
        std::vector<unsigned long long>(static_cast<std::size_t>(num_actions_), 0));
    env_.reset_all();
}

void DqnTrainer::iterate() {
    collect();
    if (ready_to_update())
        for (long long k = 0; k < profile_.training.updates_per_iteration; ++k) update();
}

void DqnGreedyPolicy::act(ops::Device& ops, ops::View<const float> weights, ops::View<int> actions,
                          ops::View<const float> states, int n) {
    if (&ops != ws_owner_ || n > ws_.max_batch) {  // evaluation batch sizes vary
        ws_ = net_.make_workspace(ops, n);
        ws_owner_ = &ops;
    }
    const auto q = net_.forward(ops, weights, states, n, ws_);
    ops::epsilon_greedy(ops, actions, q, net_.head().num_actions, 0.0f, 0, 0);
}

std::vector<StateTensor> DqnTrainer::state_tensors() {
    const auto P = static_cast<std::int64_t>(net_.layout().total());
    const auto D = static_cast<std::int64_t>(env_params_.state_dim);
    const auto n = static_cast<std::int64_t>(n_envs_);
    auto env = env_.persistent();
    std::vector<StateTensor> t{state_tensor("params/online", "F32", {P}, online_.view()),
                               state_tensor("params/target", "F32", {P}, target_.view())};
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
    return t;
}

void DqnTrainer::restore_counter_values(std::span<const std::int64_t> v) {
    if (v.size() != 3 || v[0] < 0 || v[1] < 0 || v[2] != v[0])
        throw UsageError("checkpoint counters are inconsistent (steps, updates, pushed steps)");
    steps_ = v[0];
    updates_ = v[1];
    replay_.restore_pushed_steps(v[2]);
    adam_.restore_steps(updates_);
    updates_at_log_ = updates_;
    env_steps_at_log_ = steps_ * n_envs_;
}

bool DqnTrainer::ready_to_update() const noexcept {
    const long long min_steps = std::max<long long>(
        (profile_.replay_buffer.min_replay_size + n_envs_ - 1) / n_envs_, profile_.experience.n_step);
    return replay_.pushed_steps() >= min_steps;
}

float DqnTrainer::epsilon_at(long long step) const {
    const auto& t = profile_.training;
    const double env_steps = static_cast<double>(step) * n_envs_;
    const double frac =
        t.epsilon_decay_steps > 0 ? std::min(1.0, env_steps / static_cast<double>(t.epsilon_decay_steps)) : 1.0;
    return static_cast<float>(t.epsilon_start + frac * (t.epsilon_end - t.epsilon_start));
}

// One collection step: every environment acts epsilon-greedily and the transitions go into the
// replay ring's next slot.
void DqnTrainer::collect() {
    const long long step = steps_++;
    const auto seed = static_cast<std::uint64_t>(profile_.run.seed);
    const auto q = net_.forward(ops_, online_.cview(), env_.states(), n_envs_, ws_act_);
    ops::epsilon_greedy(ops_, actions_.view(), q, num_actions_, epsilon_at(step), seed,
                        static_cast<std::uint64_t>(step));
    ops::action_histogram(ops_, histogram_.view(), actions_.cview(), num_actions_);

    const auto slot = replay_.next_slot();
    ops_.copy(slot.states, env_.states());  // s_t (before the step)
    env_.step(actions_.cview());
    ops_.copy_raw(slot.actions, actions_.cview());
    ops_.copy(slot.rewards, env_.rewards());
    ops_.copy(slot.next_states, env_.next_states());
    ops_.copy_raw(slot.done, env_.done());
    replay_.commit_slot();
}

// One gradient update on a uniform batch of n-step transitions.
void DqnTrainer::update() {
    const long long u = ++updates_;
    const auto& t = profile_.training;
    const auto& h = net_.head();
    const int B = batch_;
    const std::size_t AZ = static_cast<std::size_t>(num_actions_) * static_cast<std::size_t>(h.num_atoms);
    const auto n_step = static_cast<int>(profile_.experience.n_step);

    // 1. Sample: steps whose n-1 successors are in the ring, any environment.
    replay_.sample(ops_, batch_buf_, static_cast<std::uint64_t>(profile_.run.seed), static_cast<std::uint64_t>(u),
                   n_step, static_cast<float>(t.gamma));
    const auto states = batch_buf_.states.cview(), next_states = batch_buf_.next_states.cview();
    const auto actions = batch_buf_.actions.cview();
    const auto returns = batch_buf_.returns.cview(), discounts = batch_buf_.discounts.cview();

    // 2. Target: the target network's distribution at s' for a* = argmax of the online Q(s')
    //    (double DQN) or of the target Q(s').
    const auto q_next_target = net_.forward(ops_, target_.cview(), next_states, B, ws_next_target_);
    ops::View<const float> q_next_select = q_next_target;
    if (profile_.dqn.double_dqn) q_next_select = net_.forward(ops_, online_.cview(), next_states, B, ws_next_online_);
    const auto probs_next_target = ws_next_target_.probs.cview().subview(0, B * AZ);

    // 3. Online network at s, the two losses and their gradients w.r.t. the logits.
    const auto q = net_.forward(ops_, online_.cview(), states, B, ws_s_);
    const auto logits = ws_s_.logits.cview().subview(0, B * AZ);
    const auto probs = ws_s_.probs.cview().subview(0, B * AZ);
    ops::c51_loss(ops_, loss_c51_.view(), d_c51_.view(), logits, probs, q_next_select, probs_next_target, actions,
                  returns, discounts, h, B);
    ops::mse_loss(ops_, loss_mse_.view(), d_mse_.view(), td_.view(), probs, q, q_next_select, q_next_target, actions,
                  returns, discounts, h, B);
    // d_c51 <- alpha * d_c51 + (1 - alpha) * d_mse: in-place scale, then saxpy of a distinct buffer.
    ops::blend_c51_mse_gradient(ops_, d_c51_.view(), d_mse_.cview(), static_cast<float>(profile_.dqn.mse_blend_alpha));
    ops_.mean(batch_losses_.view().subview(0, 1), loss_c51_.cview());
    ops_.mean(batch_losses_.view().subview(1, 1), loss_mse_.cview());
    if (nan_injected(u)) ops_.fill(batch_losses_.view().subview(0, 1), std::numeric_limits<float>::quiet_NaN());

    // 4. Backward, global gradient norm, guard, Adam (skipped on the device when the guard says so).
    net_.backward(ops_, online_.cview(), grads_.view(), d_c51_.cview(), B, ws_s_);
    ops_.global_norm(grad_norm_.view(), grads_.cview(), norm_scratch_.view());
    ops::training_guard(ops_, gate_.view(), guard_.view(), batch_losses_.cview(), grad_norm_.cview(), u);
    ops::AdamParams adam;
    adam.lr = static_cast<float>(t.learning_rate);
    adam.clip_norm = static_cast<float>(t.grad_clip_norm);
    adam_.update(ops_, online_.view(), grads_.cview(), grad_norm_.cview(), gate_.cview(), adam);

    // 5. Target network: soft (target += tau (online - target)) or a periodic copy.
    if (t.tau > 0) {
        ops_.scale(target_.view(), static_cast<float>(1.0 - t.tau));
        ops_.saxpy(target_.view(), static_cast<float>(t.tau), online_.cview());  // distinct buffers
    } else if (u % t.target_update_period == 0) {
        ops_.copy(target_.view(), online_.cview());
    }

    ops::dqn_monitor_update(ops_, stats_.view(), batch_losses_.cview(), q, actions, td_.cview(), grad_norm_.cview(),
                            num_actions_, B);
}

LogLine DqnTrainer::read_log(double seconds) {
    const dqn::MonitorStats s = ops_.to_host(stats_.cview())[0];  // synchronises: once per log interval
    const nn::GuardState g = ops_.to_host(guard_.cview())[0];
    const auto histogram = ops_.to_host(histogram_.cview());
    // Start the next interval from zero.
    ops_.upload<dqn::MonitorStats>(stats_.view(), std::vector<dqn::MonitorStats>{dqn::MonitorStats{}});
    ops_.upload<unsigned long long>(histogram_.view(), std::vector<unsigned long long>(histogram.size(), 0));
    throw_if_diverged(g, profile_.training.max_bad_updates, kGuardLossNames,
                      "Lower training.learning_rate, raise training.grad_clip_norm's strictness (a smaller value) "
                      "or check the data.");

    const double alpha = profile_.dqn.mse_blend_alpha;
    const double n = std::max(1, s.updates);
    const double samples = static_cast<double>(std::max<long long>(1, s.samples));
    const double loss_c51 = s.loss_sum[0] / n, loss_mse = s.loss_sum[1] / n;
    const double loss = alpha * loss_c51 + (1 - alpha) * loss_mse;
    const double q_mean = s.q_sum / samples;
    const long long env_steps = steps_ * n_envs_;
    seconds = std::max(1e-9, seconds);
    const double env_steps_per_s = static_cast<double>(env_steps - env_steps_at_log_) / seconds;
    const double updates_per_s = static_cast<double>(updates_ - updates_at_log_) / seconds;
    updates_at_log_ = updates_;
    env_steps_at_log_ = env_steps;
    const bool any = s.updates > 0;
    const double epsilon = epsilon_at(steps_);

    LogLine line;
    line.json = io::json::object({
        {"step", steps_},
        {"env_steps", env_steps},
        {"updates", static_cast<long long>(g.applied_updates) + g.bad_total},
        {"losses/loss", any ? loss : 0.0},
        {"losses/c51", any ? loss_c51 : 0.0},
        {"losses/mse", any ? loss_mse : 0.0},
        {"losses/td_abs", any ? s.td_abs_sum / samples : 0.0},
        {"q/mean", any ? q_mean : 0.0},
        {"q/min", any ? static_cast<double>(s.q_min) : 0.0},
        {"q/max", any ? static_cast<double>(s.q_max) : 0.0},
        {"charts/epsilon", epsilon},
        {"charts/grad_norm", any ? s.grad_norm_sum / n : 0.0},
        {"charts/grad_norm_max", any ? static_cast<double>(s.grad_norm_max) : 0.0},
        {"charts/skipped_updates", g.bad_total},
        {"charts/action_histogram", io::json::array_of<unsigned long long>(histogram)},
        {"perf/env_steps_per_s", env_steps_per_s},
        {"perf/updates_per_s", updates_per_s},
    });
    line.text = fmt::format("step {:>9} env steps | loss {:.4f} (c51 {:.4f}, mse {:.4f}) | Q {:+.3f} | eps {:.3f} | "
                            "{:.3g} env steps/s, {:.3g} updates/s",
                            env_steps, any ? loss : 0.0, any ? loss_c51 : 0.0, any ? loss_mse : 0.0,
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
