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

DqnTrainer::DqnTrainer(ops::Device& ops, const config::Profile& profile, const env::DeviceMarket& market,
                       DqnHooks hooks)
    : ops_(ops),
      profile_(profile),
      hooks_(std::move(hooks)),
      env_params_(trainers::env_params(profile, market.market_dim())),
      env_(ops, market, env::Split::train, env_params_, static_cast<int>(profile.experience.gpu_n_episodes)),
      n_envs_(static_cast<int>(profile.experience.gpu_n_episodes)),
      batch_(static_cast<int>(profile.replay_buffer.batch_size)),
      num_actions_(static_cast<int>(profile.num_actions())),
      net_((require_supported(profile), network_config(profile, env_params_.state_dim))),
      policy_(network_config(profile, env_params_.state_dim)) {
    const std::size_t D = static_cast<std::size_t>(env_params_.state_dim);
    const std::size_t B = static_cast<std::size_t>(batch_);
    const std::size_t AZ = static_cast<std::size_t>(num_actions_) * static_cast<std::size_t>(net_.head().num_atoms);

    online_ = nn::alloc_zeroed(ops, net_.layout());
    nn::init_params(ops, online_.view(), net_.layout(), static_cast<std::uint64_t>(profile.run.seed));
    target_ = nn::alloc_zeroed(ops, net_.layout());
    ops.copy(target_.view(), online_.cview());
    grads_ = nn::alloc_zeroed(ops, net_.layout());
    adam_m_ = nn::alloc_zeroed(ops, net_.layout());
    adam_v_ = nn::alloc_zeroed(ops, net_.layout());

    ws_act_ = net_.make_workspace(ops, n_envs_);
    ws_s_ = net_.make_workspace(ops, batch_);
    ws_next_online_ = net_.make_workspace(ops, batch_);
    ws_next_target_ = net_.make_workspace(ops, batch_);

    capacity_steps_ = static_cast<int>(std::max<long long>(profile.replay_buffer.buffer_size / n_envs_,
                                                           profile.experience.n_step + 1));
    const std::size_t rows = static_cast<std::size_t>(capacity_steps_) * static_cast<std::size_t>(n_envs_);
    ring_states_ = ops.alloc<float>(rows * D);
    ring_next_ = ops.alloc<float>(rows * D);
    ring_rewards_ = ops.alloc<float>(rows);
    ring_actions_ = ops.alloc<int>(rows);
    ring_done_ = ops.alloc<std::uint8_t>(rows);

    b_states_ = ops.alloc<float>(B * D);
    b_next_ = ops.alloc<float>(B * D);
    b_returns_ = ops.alloc<float>(B);
    b_discounts_ = ops.alloc<float>(B);
    b_actions_ = ops.alloc<int>(B);
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
    histogram_ = ops.from_host<unsigned long long>(std::vector<unsigned long long>(static_cast<std::size_t>(num_actions_), 0));
    env_.reset_all();
}

void DqnTrainer::collect_step() { collect(steps_++); }

void DqnTrainer::iterate() {
    collect_step();
    if (ready_to_update())
        for (long long k = 0; k < profile_.training.updates_per_iteration; ++k) update_step();
}

void DqnGreedyPolicy::act(ops::Device& ops, ops::View<const float> weights, ops::View<int> actions,
                          ops::View<const float> states, int n) {
    if (&ops != ws_owner_ || n > ws_.max_batch) {  // evaluation batch sizes vary
        ws_ = net_.make_workspace(ops, n);
        ws_owner_ = &ops;
    }
    const auto q = net_.forward(ops, weights, states, n, ws_);
    fh::ops::epsilon_greedy(ops, actions, q, net_.head().num_actions, 0.0f, 0, 0);
}

std::vector<StateTensor> DqnTrainer::state_tensors() {
    const auto P = static_cast<std::int64_t>(net_.layout().total());
    const auto D = static_cast<std::int64_t>(env_params_.state_dim);
    const auto rows = static_cast<std::int64_t>(capacity_steps_) * n_envs_;
    const auto n = static_cast<std::int64_t>(n_envs_);
    auto env = env_.persistent();
    return {
        state_tensor("params/online", "F32", {P}, online_.view()),
        state_tensor("params/target", "F32", {P}, target_.view()),
        state_tensor("adam/m", "F32", {P}, adam_m_.view()),
        state_tensor("adam/v", "F32", {P}, adam_v_.view()),
        state_tensor("replay/states", "F32", {rows, D}, ring_states_.view()),
        state_tensor("replay/next_states", "F32", {rows, D}, ring_next_.view()),
        state_tensor("replay/rewards", "F32", {rows}, ring_rewards_.view()),
        state_tensor("replay/actions", "I32", {rows}, ring_actions_.view()),
        state_tensor("replay/done", "U8", {rows}, ring_done_.view()),
        state_tensor("env/state", "U8", {n, static_cast<std::int64_t>(sizeof(env::EnvState))}, env.state),
        state_tensor("env/portfolio", "F32", {n, env::PORTFOLIO_STRIDE}, env.portfolio),
        state_tensor("env/states", "F32", {n, D}, env.states),
        state_tensor("guard/state", "U8", {static_cast<std::int64_t>(sizeof(nn::GuardState))}, guard_.view()),
        state_tensor("monitor/stats", "U8", {static_cast<std::int64_t>(sizeof(dqn::MonitorStats))}, stats_.view()),
        state_tensor("monitor/histogram", "U64", {static_cast<std::int64_t>(num_actions_)}, histogram_.view()),
    };
}

io::ReplayDump DqnTrainer::replay_dump() {
    io::ReplayDump d;
    d.state_dim = env_params_.state_dim;
    d.n_envs = n_envs_;
    d.capacity_steps = capacity_steps_;
    d.num_actions = num_actions_;
    d.pushed_steps = pushed_steps_;
    d.states = ops_.to_host(ring_states_.cview());
    d.next_states = ops_.to_host(ring_next_.cview());
    d.rewards = ops_.to_host(ring_rewards_.cview());
    d.actions = ops_.to_host(ring_actions_.cview());
    d.done = ops_.to_host(ring_done_.cview());
    return d;
}

void DqnTrainer::restore_counters(const DqnCounters& c) {
    if (c.steps < 0 || c.updates < 0 || c.pushed_steps < 0 || c.pushed_steps != c.steps)
        throw UsageError("checkpoint counters are inconsistent (steps, updates, pushed steps)");
    steps_ = c.steps;
    updates_ = c.updates;
    pushed_steps_ = c.pushed_steps;
    updates_at_log_ = updates_;
    env_steps_at_log_ = steps_ * n_envs_;
}

void DqnTrainer::restore_counter_values(std::span<const std::int64_t> v) {
    if (v.size() != 3) throw UsageError("checkpoint counters: expected 3 values (steps, updates, pushed steps)");
    restore_counters(DqnCounters{v[0], v[1], v[2]});
}

bool DqnTrainer::ready_to_update() const noexcept {
    const long long min_steps = std::max<long long>(
        (profile_.replay_buffer.min_replay_size + n_envs_ - 1) / n_envs_, profile_.experience.n_step);
    return pushed_steps_ >= min_steps;
}

void DqnTrainer::update_step() { update(++updates_); }

float DqnTrainer::epsilon_at(long long step) const {
    const auto& t = profile_.training;
    const double env_steps = static_cast<double>(step) * n_envs_;
    const double frac = t.epsilon_decay_steps > 0 ? std::min(1.0, env_steps / static_cast<double>(t.epsilon_decay_steps)) : 1.0;
    return static_cast<float>(t.epsilon_start + frac * (t.epsilon_end - t.epsilon_start));
}

void DqnTrainer::greedy_actions(ops::View<int> actions, ops::View<const float> states, int n) {
    act(ops_, actions, states, n);
}

// One collection step: every environment acts epsilon-greedily and the transitions go into the
// replay ring at slot step % capacity (rows slot * n_envs .. + n_envs).
void DqnTrainer::collect(long long step) {
    const std::size_t D = static_cast<std::size_t>(env_params_.state_dim);
    const std::size_t n = static_cast<std::size_t>(n_envs_);
    const std::size_t row = static_cast<std::size_t>(step % capacity_steps_) * n;
    const auto seed = static_cast<std::uint64_t>(profile_.run.seed);

    const auto q = net_.forward(ops_, online_.cview(), env_.states(), n_envs_, ws_act_);
    fh::ops::epsilon_greedy(ops_, actions_.view(), q, num_actions_, epsilon_at(step), seed, static_cast<std::uint64_t>(step));
    fh::ops::action_histogram(ops_, histogram_.view(), actions_.cview(), num_actions_);

    ops_.copy(ring_states_.view().subview(row * D, n * D), env_.states());  // s_t (before the step)
    env_.step(actions_.cview());
    ops_.copy_raw(ring_actions_.view().subview(row, n), actions_.cview());
    ops_.copy(ring_rewards_.view().subview(row, n), env_.rewards());
    ops_.copy(ring_next_.view().subview(row * D, n * D), env_.next_states());
    ops_.copy_raw(ring_done_.view().subview(row, n), env_.done());
    ++pushed_steps_;
}

// One gradient update on a uniform batch of n-step transitions.
void DqnTrainer::update(long long u) {
    const auto& t = profile_.training;
    const auto& h = net_.head();
    const int B = batch_;
    const std::size_t AZ = static_cast<std::size_t>(num_actions_) * static_cast<std::size_t>(h.num_atoms);
    const auto n_step = static_cast<int>(profile_.experience.n_step);

    // 1. Sample: steps whose n-1 successors are in the ring, any environment.
    const long long oldest = std::max<long long>(0, pushed_steps_ - capacity_steps_);
    const long long sampleable = pushed_steps_ - (n_step - 1) - oldest;
    const replay::ReplayView ring{ring_states_.cview().data(), ring_next_.cview().data(), ring_actions_.cview().data(),
                               ring_rewards_.cview().data(), ring_done_.cview().data(), capacity_steps_, n_envs_,
                               env_params_.state_dim};
    fh::ops::nstep_sample(ops_, b_states_.view(), b_next_.view(), b_actions_.view(), b_returns_.view(), b_discounts_.view(),
                      ring,
                      replay::SampleParams{static_cast<std::uint64_t>(profile_.run.seed), static_cast<std::uint64_t>(u),
                                        oldest, sampleable, n_step, static_cast<float>(t.gamma)},
                      B);

    // 2. Target: the target network's distribution at s' for a* = argmax of the online Q(s')
    //    (double DQN) or of the target Q(s').
    const auto q_next_target = net_.forward(ops_, target_.cview(), b_next_.cview(), B, ws_next_target_);
    ops::View<const float> q_next_select = q_next_target;
    if (profile_.dqn.double_dqn) q_next_select = net_.forward(ops_, online_.cview(), b_next_.cview(), B, ws_next_online_);
    const auto probs_next_target = ws_next_target_.probs.cview().subview(0, B * AZ);

    // 3. Online network at s, the two losses and their gradients w.r.t. the logits.
    const auto q = net_.forward(ops_, online_.cview(), b_states_.cview(), B, ws_s_);
    const auto logits = ws_s_.logits.cview().subview(0, B * AZ);
    const auto probs = ws_s_.probs.cview().subview(0, B * AZ);
    fh::ops::c51_loss(ops_, loss_c51_.view(), d_c51_.view(), logits, probs, q_next_select, probs_next_target,
                  b_actions_.cview(), b_returns_.cview(), b_discounts_.cview(), h, B);
    fh::ops::mse_loss(ops_, loss_mse_.view(), d_mse_.view(), td_.view(), probs, q, q_next_select, q_next_target,
                  b_actions_.cview(), b_returns_.cview(), b_discounts_.cview(), h, B);
    // d_c51 <- alpha * d_c51 + (1 - alpha) * d_mse: in-place scale, then saxpy of a distinct buffer.
    fh::ops::blend_c51_mse_gradient(ops_, d_c51_.view(), d_mse_.cview(), static_cast<float>(profile_.dqn.mse_blend_alpha));
    ops_.mean(batch_losses_.view().subview(0, 1), loss_c51_.cview());
    ops_.mean(batch_losses_.view().subview(1, 1), loss_mse_.cview());
    if (std::find(hooks_.inject_nan_at_updates.begin(), hooks_.inject_nan_at_updates.end(), u) !=
        hooks_.inject_nan_at_updates.end())
        ops_.fill(batch_losses_.view().subview(0, 1), std::numeric_limits<float>::quiet_NaN());

    // 4. Backward, global gradient norm, guard, Adam (skipped on the device when the guard says so).
    net_.backward(ops_, online_.cview(), grads_.view(), d_c51_.cview(), B, ws_s_);
    ops_.global_norm(grad_norm_.view(), grads_.cview(), norm_scratch_.view());
    fh::ops::training_guard(ops_, gate_.view(), guard_.view(), batch_losses_.cview(), grad_norm_.cview(), u);
    ops::AdamParams adam;
    adam.lr = static_cast<float>(t.learning_rate);
    adam.clip_norm = static_cast<float>(t.grad_clip_norm);
    adam.step = static_cast<int>(std::min<long long>(u, std::numeric_limits<int>::max()));
    ops_.adam_step(online_.view(), adam_m_.view(), adam_v_.view(), grads_.cview(), grad_norm_.cview(),
                   gate_.cview(), adam);

    // 5. Target network: soft (target += tau (online - target)) or a periodic copy.
    if (t.tau > 0) {
        ops_.scale(target_.view(), static_cast<float>(1.0 - t.tau));
        ops_.saxpy(target_.view(), static_cast<float>(t.tau), online_.cview());  // distinct buffers
    } else if (u % t.target_update_period == 0) {
        ops_.copy(target_.view(), online_.cview());
    }

    fh::ops::monitor_update(ops_, stats_.view(), batch_losses_.cview(), q, b_actions_.cview(), td_.cview(),
                        grad_norm_.cview(), num_actions_, B);
}

DqnMetrics DqnTrainer::read_metrics(long long step) {
    const dqn::MonitorStats s = ops_.to_host(stats_.cview())[0];
    const nn::GuardState g = ops_.to_host(guard_.cview())[0];
    DqnMetrics m;
    m.step = step;
    m.env_steps = step * n_envs_;
    m.updates = g.applied_updates + g.bad_total;
    const double alpha = profile_.dqn.mse_blend_alpha;
    if (s.updates > 0) {
        m.loss_c51 = s.loss_sum[0] / s.updates;
        m.loss_mse = s.loss_sum[1] / s.updates;
        m.loss = alpha * m.loss_c51 + (1 - alpha) * m.loss_mse;
        m.q_mean = s.q_sum / static_cast<double>(s.samples);
        m.q_min = s.q_min;
        m.q_max = s.q_max;
        m.td_abs = s.td_abs_sum / static_cast<double>(s.samples);
        m.grad_norm = s.grad_norm_sum / s.updates;
        m.grad_norm_max = s.grad_norm_max;
    }
    m.epsilon = epsilon_at(step);
    m.skipped_updates = g.bad_total;
    m.action_histogram = ops_.to_host(histogram_.cview());
    // Start the next interval from zero.
    ops_.upload<dqn::MonitorStats>(stats_.view(), std::vector<dqn::MonitorStats>{dqn::MonitorStats{}});
    ops_.upload<unsigned long long>(histogram_.view(), std::vector<unsigned long long>(static_cast<std::size_t>(num_actions_), 0));

    throw_if_diverged(g, profile_.training.max_bad_updates, kGuardLossNames,
                      "Lower training.learning_rate, raise training.grad_clip_norm's strictness (a smaller value) "
                      "or check the data.");
    return m;
}

DqnMetrics DqnTrainer::read_metrics_with_rates(double seconds) {
    DqnMetrics m = read_metrics(steps_);  // synchronises: once per log interval
    seconds = std::max(1e-9, seconds);
    m.env_steps_per_s = static_cast<double>(m.env_steps - env_steps_at_log_) / seconds;
    m.updates_per_s = static_cast<double>(updates_ - updates_at_log_) / seconds;
    updates_at_log_ = updates_;
    env_steps_at_log_ = m.env_steps;
    return m;
}

LogLine DqnTrainer::read_log(double seconds) {
    const DqnMetrics m = read_metrics_with_rates(seconds);
    LogLine line;
    line.json = metrics_value(m);
    line.text = fmt::format("step {:>9} env steps | loss {:.4f} (c51 {:.4f}, mse {:.4f}) | Q {:+.3f} | eps {:.3f} | "
                            "{:.3g} env steps/s, {:.3g} updates/s",
                            m.env_steps, m.loss, m.loss_c51, m.loss_mse, m.q_mean, m.epsilon, m.env_steps_per_s,
                            m.updates_per_s);
    line.loss = m.loss;
    line.env_steps_per_s = m.env_steps_per_s;
    line.updates_per_s = m.updates_per_s;
    return line;
}

DqnResult DqnTrainer::train() {
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    const long long steps_at_start = steps_;
    DqnResult result;
    LoopCallbacks callbacks;
    callbacks.log = [&](double seconds) {
        DqnMetrics m = read_metrics_with_rates(seconds);
        if (hooks_.on_log) hooks_.on_log(m);
        result.log.push_back(std::move(m));
    };
    callbacks.after_iteration = [&](long long steps) { return !hooks_.after_step || hooks_.after_step(steps); };
    training_loop(*this, profile_.run.total_steps, profile_.run.log_interval, callbacks);
    ops_.synchronize();
    result.steps = steps_;
    result.env_steps = (steps_ - steps_at_start) * n_envs_;
    result.updates = updates_;
    result.wall_seconds = std::chrono::duration<double>(clock::now() - t0).count();
    return result;
}

BenchFigures DqnTrainer::bench(long long phase) {
    using clock = std::chrono::steady_clock;
    auto seconds_since = [](clock::time_point t) { return std::chrono::duration<double>(clock::now() - t).count(); };
    // Fill the replay to the update threshold, then time each phase alone, then both together.
    while (!ready_to_update()) collect_step();
    ops_.synchronize();
    auto t = clock::now();
    for (long long i = 0; i < phase; ++i) collect_step();
    ops_.synchronize();
    const double collect_s = seconds_since(t);
    t = clock::now();
    for (long long i = 0; i < phase; ++i) update_step();
    ops_.synchronize();
    const double update_s = seconds_since(t);
    t = clock::now();
    for (long long i = 0; i < phase; ++i) iterate();
    ops_.synchronize();
    const double e2e_s = seconds_since(t);
    (void)read_metrics(steps_);  // surfaces a diverged guard as exit 5
    BenchFigures f;
    f.iterations = phase;
    f.batch_rows = batch_;
    f.collection_env_steps_per_s = static_cast<double>(phase * n_envs_) / collect_s;
    f.updates_per_s = static_cast<double>(phase) / update_s;
    f.end_to_end_env_steps_per_s = static_cast<double>(phase * n_envs_) / e2e_s;
    return f;
}

io::json::Value metrics_value(const DqnMetrics& m) {
    return io::json::object({
        {"step", m.step},
        {"env_steps", m.env_steps},
        {"updates", m.updates},
        {"losses/loss", m.loss},
        {"losses/c51", m.loss_c51},
        {"losses/mse", m.loss_mse},
        {"losses/td_abs", m.td_abs},
        {"q/mean", m.q_mean},
        {"q/min", m.q_min},
        {"q/max", m.q_max},
        {"charts/epsilon", m.epsilon},
        {"charts/grad_norm", m.grad_norm},
        {"charts/grad_norm_max", m.grad_norm_max},
        {"charts/skipped_updates", m.skipped_updates},
        {"charts/action_histogram", io::json::array_of<unsigned long long>(m.action_histogram)},
        {"perf/env_steps_per_s", m.env_steps_per_s},
        {"perf/updates_per_s", m.updates_per_s},
    });
}

}  // namespace fh::trainers
