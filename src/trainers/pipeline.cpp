/// @file pipeline.cpp
#include "trainers/pipeline.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <ctime>

#include "config/memory_estimate.hpp"
#include "data/load.hpp"
#include "env/vec_env.hpp"
#include "io/run_directory.hpp"
#include "ops/backend.hpp"
#include "ops/cuda/cuda_ops.hpp"
#include "trainers/dqn_trainer.hpp"
#include "trainers/setup.hpp"
#include "util/errors.hpp"
#include "util/log.hpp"

namespace fh::trainers {
namespace {

using clock = std::chrono::steady_clock;

void require_trainer_built(const config::Profile& p) {
    if (p.run.trainer != "dqn")
        throw UsageError(fmt::format("the {} trainer is not built yet in this version of foxhunt-train (only dqn "
                                     "is); nothing was trained",
                                     p.run.trainer));
}

std::unique_ptr<ops::Ops> make_backend(const config::Profile& p) {
    auto ops = ops::make_ops(ops::parse_device_spec(p.run.device));
    if (auto* cuda = dynamic_cast<ops::CudaOps*>(ops.get())) cuda->set_tf32(p.gpu.tf32);
    log::info("device: {}", ops->description());
    return ops;
}

/// SPEC section 7: a run that cannot fit stops before allocating, naming the biggest consumers.
void check_device_memory(ops::Ops& ops, const config::Profile& p, std::size_t bars) {
    auto* cuda = dynamic_cast<ops::CudaOps*>(&ops);
    if (!cuda) return;
    const auto items = config::estimate_device_memory(p, bars);
    const auto need = config::total_bytes(items);
    const auto budget = static_cast<std::uint64_t>(static_cast<double>(cuda->device().free_memory) * p.gpu.memory_fraction);
    log::info("device memory: {} estimated, {} available (gpu.memory_fraction {} of {} free)", config::format_bytes(need),
              config::format_bytes(budget), p.gpu.memory_fraction, config::format_bytes(cuda->device().free_memory));
    if (need <= budget) return;
    std::string top;
    for (std::size_t i = 0; i < std::min<std::size_t>(3, items.size()); ++i)
        top += fmt::format("\n  {:>10}  {}{}", config::format_bytes(items[i].bytes), items[i].consumer,
                           items[i].key.empty() ? "" : fmt::format(" (change {})", items[i].key));
    throw DeviceError(fmt::format("the run needs about {} of device memory but {} is available on {}; the biggest "
                                  "consumers:{}",
                                  config::format_bytes(need), config::format_bytes(budget), cuda->device().name, top));
}

std::string run_name(const config::Profile& p) {
    if (!p.run.name.empty()) return p.run.name;
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&now, &tm);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
    return p.run.trainer + "-" + stamp;
}

std::string metrics_json(const DqnMetrics& m) {
    std::string hist;
    for (std::size_t i = 0; i < m.action_histogram.size(); ++i) {
        if (i) hist += ',';
        hist += std::to_string(m.action_histogram[i]);
    }
    using io::json_number;
    return fmt::format(
        "{{\"step\":{},\"env_steps\":{},\"updates\":{},\"losses/loss\":{},\"losses/c51\":{},\"losses/mse\":{},"
        "\"losses/td_abs\":{},\"q/mean\":{},\"q/min\":{},\"q/max\":{},\"charts/epsilon\":{},\"charts/grad_norm\":{},"
        "\"charts/grad_norm_max\":{},\"charts/skipped_updates\":{},\"charts/action_histogram\":[{}],"
        "\"perf/env_steps_per_s\":{},\"perf/updates_per_s\":{}}}",
        m.step, m.env_steps, m.updates, json_number(m.loss), json_number(m.loss_c51), json_number(m.loss_mse),
        json_number(m.td_abs), json_number(m.q_mean), json_number(m.q_min), json_number(m.q_max), json_number(m.epsilon),
        json_number(m.grad_norm), json_number(m.grad_norm_max), m.skipped_updates, hist, json_number(m.env_steps_per_s),
        json_number(m.updates_per_s));
}

/// What every run sets up first: the backend, the data (host) and the market on the device,
/// after checking that the run fits. Members in destruction order: the device market before its
/// backend.
struct Session {
    std::unique_ptr<ops::Ops> ops;
    data::MarketData market;
    std::unique_ptr<env::DeviceMarket> device_market;

    explicit Session(const config::Profile& p) {
        require_trainer_built(p);
        ops = make_backend(p);
        market = data::load_market(data_options(p));
        check_device_memory(*ops, p, market.bars.size());
        device_market = std::make_unique<env::DeviceMarket>(*ops, market);
    }
};

}  // namespace

std::string train(const config::Profile& p) {
    const auto t0 = clock::now();
    Session session(p);
    auto& ops = session.ops;
    const auto& dm = *session.device_market;

    auto dir = io::RunDirectory::create(p.run.output_dir, run_name(p));
    dir.write_file("config.toml", config::to_toml(p));
    log::info("run directory: {}", dir.path());

    DqnHooks hooks;
    hooks.on_log = [&](const DqnMetrics& m) {
        dir.append_metrics(metrics_json(m));
        log::info("step {:>9} env steps | loss {:.4f} (c51 {:.4f}, mse {:.4f}) | Q {:+.3f} | eps {:.3f} | "
                  "{:.3g} env steps/s, {:.3g} updates/s",
                  m.env_steps, m.loss, m.loss_c51, m.loss_mse, m.q_mean, m.epsilon, m.env_steps_per_s, m.updates_per_s);
    };
    DqnTrainer trainer(*ops, p, dm, hooks);
    std::string status = "completed";
    DqnResult result;
    try {
        result = trainer.train();
    } catch (const DivergedError& e) {
        dir.write_file("summary.json", fmt::format("{{\"status\":\"diverged\",\"trainer\":\"dqn\",\"error\":{}}}\n",
                                                   io::json_string(e.what())));
        throw;
    }

    // A quick validation check of the greedy policy against flat and random ones on the same
    // episodes (the full backtest with trading metrics is docs/metrics.md's evaluator).
    const auto params = trainer.env_params();
    const int eval_envs = std::min<int>(64, static_cast<int>(p.experience.gpu_n_episodes));
    const int eval_steps = static_cast<int>(std::min<long long>(500, p.experience.gpu_timesteps_per_episode * 2));
    const int flat_action = params.position_levels / 2 * params.urgency_levels;
    const double greedy = mean_step_reward(*ops, dm, env::Split::val, params, eval_envs, eval_steps,
        [&](ops::View<int> a, ops::View<const float> s, int n) { trainer.greedy_actions(a, s, n); });
    long long k = 0;
    const double random = mean_step_reward(*ops, dm, env::Split::val, params, eval_envs, eval_steps,
        [&](ops::View<int> a, ops::View<const float>, int) { ops->random_actions(a, static_cast<std::uint64_t>(p.run.seed) + 1, k++, env::num_actions(params)); });
    const double flat = mean_step_reward(*ops, dm, env::Split::val, params, eval_envs, eval_steps,
        [&](ops::View<int> a, ops::View<const float>, int n) { ops->upload<int>(a, std::vector<int>(static_cast<std::size_t>(n), flat_action)); });
    const double wall = std::chrono::duration<double>(clock::now() - t0).count();
    log::info("validation mean reward per step: greedy {:.5f}, flat {:.5f}, random {:.5f}", greedy, flat, random);

    const auto& last = result.log.back();
    dir.write_file("summary.json",
                   fmt::format("{{\"status\":\"{}\",\"trainer\":\"dqn\",\"device\":{},\"env_steps\":{},\"updates\":{},"
                               "\"wall_seconds\":{},\"env_steps_per_s\":{},\"final\":{},"
                               "\"validation_quick\":{{\"episodes_steps\":{},\"envs\":{},\"greedy_mean_step_reward\":{},"
                               "\"flat_mean_step_reward\":{},\"random_mean_step_reward\":{}}}}}\n",
                               status, io::json_string(ops->description()), result.env_steps, result.updates,
                               io::json_number(wall), io::json_number(static_cast<double>(result.env_steps) / result.wall_seconds),
                               metrics_json(last), eval_steps, eval_envs, io::json_number(greedy), io::json_number(flat),
                               io::json_number(random)));
    log::info("done: {} env steps, {} updates in {:.1f} s; {}", result.env_steps, result.updates, wall, dir.path());
    return dir.path();
}

std::string bench(const config::Profile& p) {
    const auto t_start = clock::now();
    Session session(p);
    auto& ops = session.ops;
    DqnTrainer trainer(*ops, p, *session.device_market);
    ops->synchronize();
    const double first_kernel_s = std::chrono::duration<double>(clock::now() - t_start).count();

    const long long n_envs = p.experience.gpu_n_episodes;
    // Fill the replay to the update threshold, then time each phase alone, then both together.
    while (!trainer.ready_to_update()) trainer.collect_step();
    const long long phase = std::max<long long>(20, std::min<long long>(500, p.run.total_steps / n_envs));
    ops->synchronize();
    auto t = clock::now();
    for (long long i = 0; i < phase; ++i) trainer.collect_step();
    ops->synchronize();
    const double collect_s = std::chrono::duration<double>(clock::now() - t).count();
    t = clock::now();
    for (long long i = 0; i < phase; ++i) trainer.update_step();
    ops->synchronize();
    const double update_s = std::chrono::duration<double>(clock::now() - t).count();
    t = clock::now();
    for (long long i = 0; i < phase; ++i) {
        trainer.collect_step();
        for (long long k = 0; k < p.training.updates_per_iteration; ++k) trainer.update_step();
    }
    ops->synchronize();
    const double e2e_s = std::chrono::duration<double>(clock::now() - t).count();
    (void)trainer.read_metrics(trainer.steps());  // surfaces a diverged guard as exit 5
    return fmt::format(
        "{{\"trainer\":\"{}\",\"device\":{},\"n_envs\":{},\"batch_size\":{},\"steps_per_phase\":{},"
        "\"collection_env_steps_per_s\":{},\"updates_per_s\":{},\"end_to_end_env_steps_per_s\":{},"
        "\"time_to_first_kernel_s\":{},\"peak_device_memory_bytes\":{}}}",
        p.run.trainer, io::json_string(ops->description()), n_envs, p.replay_buffer.batch_size, phase,
        io::json_number(static_cast<double>(phase * n_envs) / collect_s), io::json_number(static_cast<double>(phase) / update_s),
        io::json_number(static_cast<double>(phase * n_envs) / e2e_s), io::json_number(first_kernel_s), ops->peak_bytes());
}

}  // namespace fh::trainers
