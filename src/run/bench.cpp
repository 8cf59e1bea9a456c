/// @file bench.cpp
/// @brief `bench`: the throughput of the profile's trainer, its phases timed alone and together.
#include <algorithm>
#include <chrono>
#include <functional>

#include "device/cuda/kernel_timing.hpp"
#include "io/json.hpp"
#include "run/bench_ablation.hpp"
#include "run/run.hpp"
#include "run/session.hpp"
#include "trainers/trainer.hpp"

namespace fh::run {

namespace json = io::json;
using clock = std::chrono::steady_clock;

double seconds_since(clock::time_point t) {
    return std::chrono::duration<double>(clock::now() - t).count();
}

long long bench_phase_iterations(long long total_steps, long long per) {
    const long long cap = std::clamp<long long>(5'000'000 / per, 3, 500);
    return std::clamp<long long>(total_steps / per, std::min<long long>(20, cap), cap);
}

PhaseTimes time_phases(const BenchPhases& b, long long phase) {
    PhaseTimes r;
    const auto timed = [&](const std::function<long long(long long)>& run, long long& done, double& seconds) {
        const auto t = clock::now();
        done = run(phase);
        b.synchronize();
        seconds = seconds_since(t);
    };
    if (b.collects) timed(b.collect, r.collected, r.collect_s);
    timed(b.update, r.updates, r.update_s);
    if (r.collected > 0) {
        if (b.warm_iterate) {
            (void)b.iterate(1);
            b.synchronize();
        }
        timed(b.iterate, r.e2e_steps, r.e2e_s);
    }
    return r;
}

json::Object bench_json(const config::Profile& p, const BenchFigures& b, std::size_t population) {
    const double agents = static_cast<double>(std::max<std::size_t>(population, 1));
    const double n_envs = static_cast<double>(p.experience.gpu_n_episodes);
    const double collection_steps = static_cast<double>(b.t.collected) / n_envs / agents;  // one agent's steps
    const double collection_rate =
        b.t.collected > 0 ? static_cast<double>(b.t.collected) / b.t.collect_s : b.dataset_rate;
    const double updates_rate = static_cast<double>(b.t.updates) / b.t.update_s;
    const double e2e_rate = b.t.e2e_s > 0 ? static_cast<double>(b.t.e2e_steps) / b.t.e2e_s : 0.0;
    json::Object out{
        {"trainer", p.run.trainer},
        {"device", b.device},
        {"precision", p.gpu.precision},
        {"population", static_cast<std::int64_t>(population)},
        {"batched", b.batched},
        {"n_envs", p.experience.gpu_n_episodes},
        {"batch_size", b.batch_rows},
        {"iterations_per_phase", b.phase},
        {"collection_env_steps_per_s", collection_rate},
        {"updates_per_s", updates_rate},
        {"end_to_end_env_steps_per_s", e2e_rate},
        {"agent_updates_per_s", updates_rate},
        {"updates_per_s_per_agent", updates_rate / agents},
        {"collection_env_steps_per_s_per_agent", collection_rate / agents},
        {"end_to_end_env_steps_per_s_per_agent", e2e_rate / agents},
        {"us_per_collection_step", collection_steps > 0 ? 1e6 * b.t.collect_s / collection_steps : 0.0},
        {"us_per_update", b.t.updates > 0 ? 1e6 * b.t.update_s / static_cast<double>(b.t.updates) : 0.0},
        {"time_to_first_kernel_s", b.first_kernel_s},
        {"peak_device_memory_bytes", b.peak},
    };
    if (population == 0)  // one agent's bench: none of the population's keys
        std::erase_if(out, [](const json::Member& m) {
            return m.first == "population" || m.first == "batched" || m.first.starts_with("agent_") ||
                   m.first.ends_with("_per_agent");
        });
    return out;
}

json::Value kernel_table(std::vector<cuda::KernelTime> times, double phases) {
    std::sort(times.begin(), times.end(), [](const auto& a, const auto& b) { return a.total_us > b.total_us; });
    json::Array rows;
    double total = 0;
    for (const auto& t : times) {
        total += t.total_us;
        rows.push_back(json::object(
            {{"op", t.name}, {"launches", static_cast<double>(t.calls) / phases}, {"us", t.total_us / phases}}));
    }
    return json::object({{"us_total", total / phases}, {"ops", json::Value::array(std::move(rows))}});
}

json::Value ablation_table(const std::function<void()>& synchronize, const std::vector<cuda::KernelTime>& op_names,
                           const std::function<double(long long)>& run_phase, long long runs) {
    const auto time_phase = [&] {
        (void)run_phase(1);  // captures the sequence under the current filter
        synchronize();
        const auto t = clock::now();
        const double units = run_phase(runs);
        synchronize();
        return 1e6 * seconds_since(t) / std::max(1.0, units);
    };
    cuda::set_op_filter("");
    const double whole = time_phase();
    // The graph's nodes and edges alone: every launch replaced by a kernel that does nothing.
    cuda::set_op_filter(cuda::kEveryOp, cuda::FilterMode::stand_in);
    const double skeleton = time_phase();
    json::Array rows;
    for (const auto& op : op_names) {
        cuda::set_op_filter(op.name, cuda::FilterMode::leave_out);
        const double without = time_phase();
        cuda::set_op_filter(op.name, cuda::FilterMode::stand_in);
        const double stand_in = time_phase();
        cuda::set_op_filter(op.name, cuda::FilterMode::alone);
        const double alone = time_phase();
        rows.push_back(json::object({{"op", op.name},
                                     {"us_without", without},
                                     {"us_saved", whole - without},
                                     {"us_stand_in", stand_in},
                                     {"us_work", whole - stand_in},
                                     {"us_alone", alone},
                                     {"us_alone_work", alone - skeleton}}));
    }
    cuda::set_op_filter("");
    (void)time_phase();  // the step captured whole again
    return json::object(
        {{"us_captured", whole}, {"us_skeleton", skeleton}, {"ops", json::Value::array(std::move(rows))}});
}

json::Value ablation_tables(const BenchPhases& phases, const PhaseTimes& t,
                            const std::vector<cuda::KernelTime>& collect_ops,
                            const std::vector<cuda::KernelTime>& update_ops, double per_step, long long runs) {
    json::Object parts;
    if (t.collected > 0)
        parts.emplace_back("collection",
                           ablation_table(
                               phases.synchronize, collect_ops,
                               [&](long long k) { return static_cast<double>(phases.collect(k)) / per_step; }, runs));
    if (t.updates > 0)
        parts.emplace_back("update", ablation_table(
                                         phases.synchronize, update_ops,
                                         [&](long long k) { return static_cast<double>(phases.update(k)); }, runs));
    return json::Value::object(std::move(parts));
}

std::string bench(const config::Profile& p, bool kernel_times, bool force, bool ablate) {
    const auto t_start = clock::now();
    Session session(p, force);
    auto& ops = session.ops;
    auto trainer = trainers::make_trainer(*ops, p, *session.device_market);
    ops->synchronize();
    BenchFigures b;
    b.first_kernel_s = seconds_since(t_start);
    b.phase = bench_phase_iterations(p.run.total_steps, trainer->progress_per_iteration());
    const double n_envs = static_cast<double>(p.experience.gpu_n_episodes);
    // k collection calls (their env steps), k update calls (their updates) and k iterations: what
    // every timed phase and diagnostic below runs.
    BenchPhases phases;
    const auto& collect = phases.collect = [&](long long k) {
        long long steps = 0;
        for (long long i = 0; i < k; ++i) steps += trainer->bench_collect();
        return steps;
    };
    const auto& update = phases.update = [&](long long k) {
        long long n = 0;
        for (long long i = 0; i < k; ++i) n += trainer->bench_update();
        return n;
    };
    phases.iterate = [&](long long k) {
        const long long before = trainer->env_steps();
        for (long long i = 0; i < k; ++i) trainer->iterate();
        return trainer->env_steps() - before;
    };
    phases.synchronize = [&] { ops->synchronize(); };
    phases.warm_iterate = true;

    // Each phase alone, then whole iterations as in training. One untimed collection phase and
    // update phase first: they capture the sequences (CUDA Graphs) and load the kernels the timed
    // phases run.
    trainer->bench_prepare();
    (void)collect(1);
    (void)update(1);
    ops->synchronize();
    b.t = time_phases(phases, b.phase);
    (void)trainer->read_log(1.0);  // surfaces a diverged guard as exit 5 (before the diagnostics)
    // The diagnostics: every op of a phase timed on its own (CUDA events around each launch), and
    // each op left out of the captured phase in turn.
    json::Value times, ablation;
    if ((kernel_times || ablate) && ops->cuda()) {
        constexpr long long kRuns = 20;
        cuda::set_kernel_timing(true);
        (void)cuda::collect_kernel_times();
        const double timed_steps = static_cast<double>(collect(kRuns)) / n_envs;  // steps of every environment
        auto collect_times = cuda::collect_kernel_times();
        const long long timed_updates = update(kRuns);
        auto update_times = cuda::collect_kernel_times();
        cuda::set_kernel_timing(false);
        if (ablate)  // as many steps as each timed phase, per collection step of every environment
            ablation = ablation_tables(phases, b.t, collect_times, update_times, n_envs, b.phase);
        if (kernel_times)
            times =
                json::object({{"collection", kernel_table(std::move(collect_times), std::max(1.0, timed_steps))},
                              {"update", kernel_table(std::move(update_times),
                                                      static_cast<double>(std::max<long long>(1, timed_updates)))}});
    }

    b.device = ops->description();
    b.batch_rows = trainer->batch_rows();
    b.dataset_rate = trainer->dataset_collection_env_steps_per_s();
    b.peak = ops->peak_bytes();
    json::Object out = bench_json(p, b);
    if (!times.is_null()) out.emplace_back("kernel_times", std::move(times));    // only with --kernel-times on CUDA
    if (!ablation.is_null()) out.emplace_back("ablation", std::move(ablation));  // only with --ablate on CUDA
    return json::serialize(json::Value::object(std::move(out)));
}

}  // namespace fh::run
