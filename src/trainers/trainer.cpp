/// @file trainer.cpp
#include "trainers/trainer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

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

void UpdateCountedTrainer::run_update(ops::Device& ops, AdamState& adam, ops::OpSequence& seq,
                                      const std::function<void(bool inject_nan)>& update_ops) {
    const long long u = ++updates_;
    adam.count_step();
    if (nan_injected(u))
        update_ops(true);  // never captured
    else
        ops.run_sequence(seq, [&] { update_ops(false); });
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

}  // namespace fh::trainers
