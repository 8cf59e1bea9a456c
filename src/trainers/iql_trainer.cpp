/// @file iql_trainer.cpp
/// @brief The IQL algorithm, top to bottom (docs/iql.md): build the dataset once, then per
///        update: sample a batch (n = 1), V by expectile regression on min(Q1', Q2')(s, a), the
///        twin Q towards r + gamma (1 - terminated) V(s'), the policy by advantage-weighted
///        regression, backward, guard, Adam, target update.
#include "trainers/iql_trainer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <stdexcept>

#include "math/iql.h"
#include "io/replay_dump.hpp"
#include "io/json.hpp"
#include "nn/init.hpp"
#include "trainers/offline_dataset.hpp"
#include "trainers/setup.hpp"
#include "util/errors.hpp"
#include "util/log.hpp"
#include "ops/iql/ops.hpp"
#include "ops/nn/ops.hpp"
#include "ops/replay/ops.hpp"

namespace fh::trainers {
namespace {

// The monitor's statistics (monitor_.current: this update's; monitor_.accum: their sums over the log interval).
using namespace iql_stats;
constexpr int kStats = kCount;
/// The losses each update passes to the guard, in order (monitor_.current[0, 3)); then the gradient norm.
constexpr const char* kGuardLossNames[] = {"the value (expectile) loss", "the Q loss", "the policy (AWR) loss"};
static_assert(kGuardLosses == static_cast<int>(std::size(kGuardLossNames)));
/// Share of the behaviour policy's rule-based traders' actions taken uniformly at random.
constexpr float kBehaviourRandomFraction = 0.2f;

}  // namespace

IqlNetworks::IqlNetworks(const config::Profile& p, int state_dim, int num_actions)
    : layout(),
      q1(layout, "q1", nn::MlpConfig::stack(state_dim, p.iql.hidden, num_actions, ops::Activation::relu)),
      q2(layout, "q2", nn::MlpConfig::stack(state_dim, p.iql.hidden, num_actions, ops::Activation::relu)),
      v(layout, "v", nn::MlpConfig::stack(state_dim, p.iql.hidden, 1, ops::Activation::relu)),
      // A small last layer starts the policy near uniform.
      policy(layout, "policy", nn::MlpConfig::stack(state_dim, p.iql.hidden, num_actions, ops::Activation::relu, 0.01f)) {}

iql::BehaviourParams behaviour_params(const env::EnvParams& e, std::uint64_t seed) {
    return iql::BehaviourParams{e.position_levels, e.urgency_levels, e.market_dim, e.state_dim,
                                kBehaviourRandomFraction, seed};
}

IqlTrainer::IqlTrainer(ops::Device& ops, const config::Profile& profile, const env::DeviceMarket& market)
    : ops_(ops),
      profile_((require_greedy_evaluation(profile), profile)),
      env_params_(trainers::env_params(profile, market.market_dim())),
      num_actions_(env::num_actions(env_params_)),
      state_dim_(env_params_.state_dim),
      batch_(static_cast<int>(profile.replay_buffer.batch_size)),
      net_(profile, state_dim_, num_actions_),
      policy_(net_.policy, net_.layout.total()) {
    {
        OfflineDataset ds = build_offline_dataset(ops, profile, market, env_params_, profile.iql.dataset,
                                                  profile.iql.dataset_size, "iql");
        dataset_ = std::move(ds.ring);
        dataset_transitions_ = ds.transitions;
        collection_seconds_ = ds.collection_seconds;
    }

    const std::size_t B = static_cast<std::size_t>(batch_);
    const std::size_t A = static_cast<std::size_t>(num_actions_);
    params_ = nn::alloc_zeroed(ops, net_.layout);
    nn::init_params(ops, params_.view(), net_.layout, static_cast<std::uint64_t>(profile.run.seed));
    target_ = nn::alloc_zeroed(ops, net_.layout);
    ops.copy(target_.view(), params_.cview());
    grads_ = nn::alloc_zeroed(ops, net_.layout);
    adam_ = AdamState(ops, net_.layout);
    twin_stride_ = net_.q2.layers().front().weight.offset - net_.q1.layers().front().weight.offset;
    for (std::size_t l = 0; l < net_.q1.layers().size(); ++l) {
        const auto &a = net_.q1.layers()[l], &b = net_.q2.layers()[l];
        if (b.weight.offset != a.weight.offset + twin_stride_ || b.bias.offset != a.bias.offset + twin_stride_)
            throw std::logic_error("IqlTrainer: the twin Q networks are not laid out at one stride");
    }
    ws_q_pair_ = net_.q1.make_workspace(ops, 2 * batch_);
    ws_q_target_pair_ = net_.q1.make_workspace(ops, 2 * batch_);
    ws_v_ = net_.v.make_workspace(ops, 2 * batch_);
    ws_policy_ = net_.policy.make_workspace(ops, batch_);

    batch_buf_ = ReplayBatch(ops, batch_, state_dim_);
    for (auto* b : {&loss_v_, &loss_q_, &loss_pi_, &awr_weights_, &d_v_}) *b = ops.alloc<float>(B);
    for (auto* b : {&d_q1_, &d_q2_, &d_logits_}) *b = ops.alloc<float>(B * A);
    monitor_ = UpdateMonitor(ops, kStats);
}

void IqlTrainer::iterate() {
    run_update(ops_, adam_, update_sequence_, [this](bool inject_nan) { update_ops(inject_nan); });
}

// One update. Its number (sampling, the guard, Adam's bias corrections, the periodic target copy)
// is read from the optimizer's step counter in device memory, which the update's first launch
// (the sampling) advances: no per-update value comes from the host, so the sequence is captured
// once and replayed.
void IqlTrainer::update_ops(bool inject_nan) {
    const int B = batch_;
    const auto seed = static_cast<std::uint64_t>(profile_.run.seed);
    const auto& t = profile_.training;
    const auto update = adam_.device_step();

    // 1. A uniform batch of one-step transitions (s, a, r, gamma (1 - terminated), s'), at the
    //    update number the sampling advances the counter to (no launch of its own).
    dataset_.sample(ops_, batch_buf_, seed, 0, 1, static_cast<float>(t.gamma), {}, adam_.device_step_advance());
    const ops::View<const float> b_states = batch_buf_.states();
    const auto b_actions = batch_buf_.actions.cview();
    const auto b_rewards = batch_buf_.returns.cview(), b_discounts = batch_buf_.discounts.cview();

    // The forwards are independent (each writes only its own workspace): the target twin (one
    // batched pass), V on [s; s'] (one pass of 2B rows, differentiated on s alone), the online
    // twin (one batched pass) and the policy run as four branches (four streams on CUDA: small
    // layers leave most of the GPU idle, so they overlap).
    const std::size_t Bs = static_cast<std::size_t>(B);
    const std::size_t BA = Bs * static_cast<std::size_t>(num_actions_);
    ops::View<const float> q_target, v_pair, q, logits;
    ops_.run_concurrently(
        [&] { q_target = net_.q1.forward_batched(ops_, target_.cview(), twin_stride_, b_states, 0, B, 2, ws_q_target_pair_); },
        [&] { v_pair = net_.v.forward(ops_, params_.cview(), batch_buf_.state_pairs.cview(), 2 * B, ws_v_); },
        [&] { q = net_.q1.forward_batched(ops_, params_.cview(), twin_stride_, b_states, 0, B, 2, ws_q_pair_); },
        [&] { logits = net_.policy.forward(ops_, params_.cview(), b_states, B, ws_policy_); });
    const auto q1_target = q_target.subview(0, BA), q2_target = q_target.subview(BA, BA);
    const auto q1 = q.subview(0, BA), q2 = q.subview(BA, BA);
    const auto v = v_pair.subview(0, Bs), v_next = v_pair.subview(Bs, Bs);

    // 2-5. Three branches, each a loss, its networks' backward and its statistics (every branch
    //    writes only its own loss, gradient buffers, workspace rows, gradient slices and
    //    statistics; all read the forwards' outputs):
    //  - V(s) by expectile regression towards min of the target twin Q at (s, a);
    //  - twin Q towards r + gamma (1 - terminated) V(s'), then Q1's and Q2's backwards side by
    //    side (Q2 is network 1 of the twin pass: q1's layers shifted by twin_stride_);
    //  - the policy by advantage-weighted regression: weights min(exp(beta (Q' - V)), max_weight).
    const auto cur = monitor_.current.view();
    ops_.run_concurrently(
        [&] {
            fh::ops::iql_value_loss(ops_, loss_v_.view(), d_v_.view(), v, q1_target, q2_target, b_actions,
                                    static_cast<float>(profile_.iql.expectile));
            net_.v.backward(ops_, params_.cview(), grads_.view(), d_v_.view(), {}, B, ws_v_, false);
            ops_.mean(cur.subview(kValueLoss, 1), loss_v_.cview());
            ops_.mean(cur.subview(kV, 1), v);
            if (inject_nan) ops_.fill(cur.subview(kValueLoss, 1), std::numeric_limits<float>::quiet_NaN());
        },
        [&] {
            fh::ops::iql_q_loss(ops_, loss_q_.view(), d_q1_.view(), d_q2_.view(), q1, q2, b_actions, b_rewards,
                                b_discounts, v_next);
            ops_.run_concurrently(
                [&] { net_.q1.backward(ops_, params_.cview(), grads_.view(), d_q1_.view(), {}, B, ws_q_pair_, false, 0); },
                [&] { net_.q1.backward(ops_, params_.cview(), grads_.view(), d_q2_.view(), {}, B, ws_q_pair_, false, 1); });
            ops_.mean(cur.subview(kQLoss, 1), loss_q_.cview());
        },
        [&] {
            fh::ops::awr_policy_loss(ops_, loss_pi_.view(), awr_weights_.view(), d_logits_.view(), logits, q1_target,
                                     q2_target, v, b_actions, static_cast<float>(profile_.iql.beta),
                                     static_cast<float>(profile_.iql.max_weight));
            net_.policy.backward(ops_, params_.cview(), grads_.view(), d_logits_.view(), {}, B, ws_policy_, false);
            ops_.mean(cur.subview(kPolicyLoss, 1), loss_pi_.cview());
            ops_.mean(cur.subview(kWeight, 1), awr_weights_.cview());
        });

    // 6. Norm, guard and the log's sums (one op), Adam; with tau > 0 the soft target copy
    //    (target += tau (online - target)) in Adam's pass, else the periodic copy after it. Only
    //    the Q slices of the target are read; updating the whole buffer keeps one operation.
    const auto stats = monitor_.current.cview();
    fh::ops::norm_and_guard(ops_, cur.subview(kGradNorm, 1), monitor_.norm_scratch.view(), grads_.cview(),
                            monitor_.gate.view(), monitor_.guard.view(), stats.subview(0, kGuardLosses),
                            ops::counter_value(update), monitor_.accum.view(), stats);
    ops::AdamParams adam;
    adam.lr = static_cast<float>(t.learning_rate);
    adam.clip_norm = static_cast<float>(t.grad_clip_norm);
    adam_.update_at_device_step(ops_, params_.view(), grads_.cview(), stats.subview(kGradNorm, 1),
                                monitor_.gate.cview(), adam,
                                t.tau > 0 ? ops::SoftTarget::of(target_.view(), t.tau) : ops::SoftTarget{});
    if (t.tau <= 0) ops_.copy_every(target_.view(), params_.cview(), update, t.target_update_period);
}

std::vector<StateTensor> IqlTrainer::state_tensors() {
    const auto P = static_cast<std::int64_t>(net_.layout.total());
    std::vector<StateTensor> t{state_tensor("params/online", "F32", {P}, params_.view()),
                               state_tensor("params/target", "F32", {P}, target_.view())};
    for (auto& a : adam_.state_tensors("adam/")) t.push_back(std::move(a));
    for (auto& m : monitor_.state_tensors()) t.push_back(std::move(m));
    return t;
}

LogLine iql_log_line(const config::Profile& profile, const std::vector<float>& acc, const nn::GuardState& g,
                     double n, double updates_per_s, long long updates, long long dataset_transitions) {
    const double loss = (acc[kValueLoss] + acc[kQLoss] + acc[kPolicyLoss]) / n;
    LogLine line;
    line.json = io::json::object({
        {"updates", updates},
        {"dataset_transitions", dataset_transitions},
        {"losses/loss", loss},
        {"losses/value", acc[kValueLoss] / n},
        {"losses/q", acc[kQLoss] / n},
        {"losses/policy", acc[kPolicyLoss] / n},
        {"charts/awr_weight", acc[kWeight] / n},
        {"values/v", acc[kV] / n},
        {"charts/grad_norm", acc[kGradNorm] / n},
        {"charts/skipped_updates", g.bad_total},
        {"perf/updates_per_s", updates_per_s},
    });
    line.text = fmt::format("update {:>8} | loss {:.4f} (value {:.4f}, Q {:.4f}, policy {:.4f}) | weight {:.3f} | V "
                            "{:+.3f} | {:.3g} updates/s",
                            updates, loss, acc[kValueLoss] / n, acc[kQLoss] / n, acc[kPolicyLoss] / n, acc[kWeight] / n,
                            acc[kV] / n, updates_per_s);
    line.loss = loss;
    line.updates_per_s = updates_per_s;
    throw_if_diverged(g, profile.training.max_bad_updates, kGuardLossNames,
                      "Lower training.learning_rate or iql.beta, or check the dataset.");
    return line;
}

LogLine IqlTrainer::read_log(double seconds) {
    const Interval r = read_interval(ops_, monitor_.accum.view(), monitor_.guard.cview(), seconds);
    return iql_log_line(profile_, r.sums, r.guard, r.updates, r.updates_per_s, updates_, dataset_transitions_);
}

double IqlTrainer::dataset_collection_env_steps_per_s() const noexcept {
    return collection_seconds_ > 0 ? static_cast<double>(dataset_transitions_) / collection_seconds_ : 0;
}

}  // namespace fh::trainers
