/// @file trainer.cpp
#include "trainers/trainer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <limits>

#include "nn/init.hpp"
#include "trainers/setup.hpp"
#include "util/errors.hpp"
#include "abi/core_optim.h"
#include "abi/core_vector.h"

namespace fh::trainers {

TrainingLoop::TrainingLoop(Trainer& trainer, long long total, long long log_interval, LoopCallbacks callbacks)
    : trainer_(trainer),
      callbacks_(std::move(callbacks)),
      total_iterations_(std::max<long long>(1, total / trainer.progress_per_iteration())),
      log_every_(std::max<long long>(1, log_interval / trainer.progress_per_iteration())),
      t_log_(std::chrono::steady_clock::now()),
      done_(trainer.iterations() >= total_iterations_) {}

bool TrainingLoop::step() {
    using clock = std::chrono::steady_clock;
    if (done_) return false;
    trainer_.iterate();
    const long long it = trainer_.iterations();
    if (it % log_every_ == 0 || it == total_iterations_) {
        const auto now = clock::now();
        if (callbacks_.log) callbacks_.log(std::chrono::duration<double>(now - t_log_).count());
        t_log_ = now;
    }
    if (callbacks_.after_iteration && !callbacks_.after_iteration(it)) done_ = true;
    if (trainer_.iterations() >= total_iterations_) done_ = true;
    return !done_;
}

void training_loop(Trainer& trainer, long long total, long long log_interval, const LoopCallbacks& callbacks) {
    TrainingLoop loop(trainer, total, log_interval, callbacks);
    while (loop.step()) {
    }
}

void Trainer::set_agent_keys(const config::Profile& profile) {
    throw UsageError(fmt::format("run.search: a {} agent cannot change its keys while it trains", profile.run.trainer));
}

bool Trainer::nan_injected(long long update) const noexcept {
    return std::find(nan_updates_.begin(), nan_updates_.end(), update) != nan_updates_.end();
}

void throw_if_diverged(const nn::GuardState& g, long long max_bad_updates, std::span<const char* const> losses,
                       const std::string& advice) {
    if (g.bad_total < max_bad_updates) return;
    const auto i = static_cast<std::size_t>(g.first_bad_quantity);
    const std::string quantity_name = g.first_bad_quantity < 0 ? "nothing"
                                      : i < losses.size()      ? losses[i]
                                      : i == losses.size()     ? "the gradient norm"
                                                               : "an unknown quantity";
    throw DivergedError(
        fmt::format("training diverged: the guard skipped {} updates (training.max_bad_updates = {}); "
                    "the first bad quantity was {} at update {}. {}",
                    g.bad_total, max_bad_updates, quantity_name, g.first_bad_update, advice));
}

void UpdateCountedTrainer::restore_counter_values(std::span<const std::int64_t> v) {
    if (v.size() != 1 || v[0] < 0) throw UsageError("checkpoint counters are inconsistent (updates)");
    updates_ = v[0];
    restore_optimizer_steps(updates_);
    updates_at_log_ = updates_at_last_log(updates_);
}

long long UpdateCountedTrainer::last_log_point(ops::Device& ops, ops::View<const float> accumulators,
                                               long long log_interval, long long updates) {
    const auto sums = ops.to_host(accumulators);
    const bool pending = std::any_of(sums.begin(), sums.end(), [](float x) { return x != 0.0f; });
    return pending && log_interval > 0 ? updates - updates % log_interval : updates;
}

UpdateCountedTrainer::UpdateMonitor::UpdateMonitor(ops::Device& ops, int stats)
    : current(ops.alloc<float>(static_cast<std::size_t>(stats))),
      accum(ops.alloc<float>(static_cast<std::size_t>(stats))),
      norm_scratch(ops.alloc<float>(ops::norm_guard_scratch_size())),
      gate(ops.alloc<int>(1)),
      guard(ops.from_host<nn::GuardState>(std::vector<nn::GuardState>{{0, 0, -1, 0, 0}})) {
    ops::run(ops, ops::Fill{current.view(), 0.0f});
    ops::run(ops, ops::Fill{accum.view(), 0.0f});
    ops::run(ops, ops::Fill{norm_scratch.view(), 0.0f});  // ops::norm_and_guard's ticket starts at zero
}

void UpdateCountedTrainer::UpdateMonitor::plan(MemoryPlan& plan, int stats) {
    plan.add<float>("monitor statistics", static_cast<std::uint64_t>(stats), 2);
    plan.add<float>("monitor norm scratch", ops::norm_guard_scratch_size());
    plan.add<int>("monitor gate", 1);
    plan.add<nn::GuardState>("monitor guard", 1);
}

std::vector<StateTensor> UpdateCountedTrainer::UpdateMonitor::state_tensors() {
    return {state_tensor("guard/state", "U8", {static_cast<std::int64_t>(sizeof(nn::GuardState))}, guard.view()),
            state_tensor("monitor/accumulators", "F32", {static_cast<std::int64_t>(accum.size())}, accum.view())};
}

UpdateCountedTrainer::Interval UpdateCountedTrainer::read_interval(ops::Device& ops, ops::View<float> accumulators,
                                                                   ops::View<const nn::GuardState> guard,
                                                                   double seconds) {
    Interval r{ops.to_host(ops::View<const float>(accumulators)), ops.to_host(guard)[0], 0, 0};
    ops::run(ops, ops::Fill{accumulators, 0.0f});
    r.updates = static_cast<double>(std::max<long long>(1, updates_ - updates_at_log_));
    r.updates_per_s = static_cast<double>(updates_ - updates_at_log_) / std::max(1e-9, seconds);
    updates_at_log_ = updates_;
    return r;
}

NetworkTrainer::NetworkTrainer(ops::Device& ops, const config::Profile& profile, int market_dim, int batch,
                               const char* guard_loss, const char* advice)
    : ops_(ops),
      profile_((require_greedy_evaluation(profile), profile)),
      env_params_(trainers::env_params(profile, market_dim)),
      batch_(batch),
      guard_loss_(guard_loss),
      advice_(advice) {}

void NetworkTrainer::init_network(const nn::ParamLayout& layout, const std::vector<float>& calibration, int stats) {
    param_floats_ = layout.total();
    nn::init_params(ops_, params(), layout, static_cast<std::uint64_t>(profile_.run.seed));
    ops_.upload<float>(weights_.view().subview(param_floats_, calibration.size()), calibration);
    adam_ = AdamState(ops_, layout);
    monitor_ = UpdateMonitor(ops_, stats);
}

// One update, its number (sampling, warm-up, the guard, Adam's bias corrections) read from the
// optimizer's step counter in device memory, which the update advances first: captured once and
// replayed, or issued op by op when a NaN is injected at it (tests). After the trainer's ops:
// norm, guard and the log's sums (one op), then Adam.
void NetworkTrainer::iterate() {
    const auto issue = [this](bool inject_nan) {
        adam_.advance_device_step(ops_);
        const auto update = ops::counter_value(adam_.device_step());
        update_ops(update);
        const auto cur = monitor_.current.view();
        if (inject_nan) ops::run(ops_, ops::Fill{cur.subview(kLoss, 1), std::numeric_limits<float>::quiet_NaN()});
        const auto stats = monitor_.current.cview();
        ops::run(ops_, ops::NormAndGuard{cur.subview(kGradNorm, 1), monitor_.norm_scratch.view(), grads_.cview(),
                                         monitor_.gate.view(), monitor_.guard.view(), stats.subview(0, kGradNorm),
                                         update, monitor_.accum.view(), stats});
        ops::AdamParams adam;
        adam.lr = static_cast<float>(profile_.training.learning_rate);
        adam.clip_norm = static_cast<float>(profile_.training.grad_clip_norm);
        adam_.update_at(ops_, params(), grads_.cview(), stats.subview(kGradNorm, 1), monitor_.gate.cview(), adam,
                        update, learning_rate());
    };
    adam_.count_step();
    if (nan_injected(++updates_))
        issue(true);  // never captured
    else
        ops_.run_sequence(update_sequence_, [&] { issue(false); });
}

std::vector<StateTensor> NetworkTrainer::state_tensors() {
    return online_params_tensors(weights_.view(), adam_, monitor_.state_tensors());
}

LogLine NetworkTrainer::read_log(double seconds) {
    const Interval r = read_interval(ops_, monitor_.accum.view(), monitor_.guard.cview(), seconds);
    std::vector<double> mean;
    for (const float sum : r.sums) mean.push_back(sum / r.updates);
    LogValues v = log_values(mean);
    io::json::Object json{{"updates", updates_}, std::move(v.count), {"losses/loss", mean[kLoss]}};
    for (auto& m : v.json) json.push_back(std::move(m));
    json.push_back({"charts/grad_norm", mean[kGradNorm]});
    json.push_back({"charts/skipped_updates", r.guard.bad_total});
    json.push_back({"perf/updates_per_s", r.updates_per_s});
    LogLine line;
    line.json = io::json::Value::object(std::move(json));
    line.text = fmt::format("update {:>8} | loss {:.5f} | {} | grad norm {:.3g} | {:.3g} updates/s", updates_,
                            mean[kLoss], v.text, mean[kGradNorm], r.updates_per_s);
    line.loss = mean[kLoss];
    line.updates_per_s = r.updates_per_s;
    const char* const losses[] = {guard_loss_};
    throw_if_diverged(r.guard, profile_.training.max_bad_updates, losses, advice_);
    return line;
}

}  // namespace fh::trainers
