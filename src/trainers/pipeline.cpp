/// @file pipeline.cpp
#include "trainers/pipeline.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <ctime>
#include <optional>

#include "config/memory_estimate.hpp"
#include "eval/backtest.hpp"
#include "io/progress.hpp"
#include "io/replay_dump.hpp"
#include "io/safetensors.hpp"
#include "trainers/checkpoint.hpp"
#include "trainers/early_stopping.hpp"
#include "util/signals.hpp"
#include "data/load.hpp"
#include "env/vec_env.hpp"
#include "io/run_directory.hpp"
#include "ops/backend.hpp"
#include "ops/cuda/cuda_ops.hpp"
#include "trainers/dqn_trainer.hpp"
#include "trainers/trainer.hpp"
#include "trainers/resume.hpp"
#include "trainers/run_checks.hpp"
#include "trainers/setup.hpp"
#include "util/errors.hpp"
#include "util/log.hpp"

namespace fh::trainers {
namespace {

using clock = std::chrono::steady_clock;

std::unique_ptr<ops::Ops> make_backend(const config::Profile& p) {
    auto ops = ops::make_ops(ops::parse_device_spec(p.run.device));
    if (auto* cuda = dynamic_cast<ops::CudaOps*>(ops.get())) {
        cuda->set_tf32(p.gpu.tf32);
        // Keys accepted by the schema that this version does not act on yet: said once, not
        // ignored silently (and not on the CPU backend, where they mean nothing).
        if (p.gpu.cuda_graphs)
            log::info("gpu.cuda_graphs: CUDA Graph capture is not implemented yet; kernels are launched directly");
        if (p.gpu.profile != "auto")
            log::warn("gpu.profile = \"{}\": named device classes are not implemented yet; the device is read at start",
                      p.gpu.profile);
    }
    log::info("device: {}", ops->description());
    return ops;
}

/// A run that cannot fit stops before allocating, naming the biggest consumers.
void check_device_memory(ops::Ops& ops, const config::Profile& p, const std::vector<config::MemoryItem>& items) {
    auto* cuda = dynamic_cast<ops::CudaOps*>(&ops);
    if (!cuda) return;  // the CPU backend's memory is host memory: check_run compared it
    const auto need = config::total_bytes(items);
    const auto budget = static_cast<std::uint64_t>(static_cast<double>(cuda->device().free_memory) * p.gpu.memory_fraction);
    log::info("device memory: {} estimated, {} available (gpu.memory_fraction {} of {} free)", config::format_bytes(need),
              config::format_bytes(budget), p.gpu.memory_fraction, config::format_bytes(cuda->device().free_memory));
    config::require_memory(items, budget, "device memory",
                           fmt::format("gpu.memory_fraction {} of the free memory of {}", p.gpu.memory_fraction,
                                       cuda->device().name));
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

/// What every run sets up first: the backend, the data (host) and the market on the device,
/// after checking that the run fits. Members in destruction order: the device market before its
/// backend.
struct Session {
    std::unique_ptr<ops::Ops> ops;
    data::MarketData market;
    std::unique_ptr<env::DeviceMarket> device_market;

    Session(const config::Profile& p, bool force) {
        ops = make_backend(p);
        // Everything `check` checks, before anything is allocated (src/trainers/run_checks.hpp).
        RunCheckOptions o;
        o.force = force;
        o.host_backend = dynamic_cast<ops::CudaOps*>(ops.get()) == nullptr;
        check_data_size(p, o);
        market = data::load_market(data_options(p));
        const RunSizes sizes = check_run(p, market, o);
        check_device_memory(*ops, p, sizes.device);
        device_market = std::make_unique<env::DeviceMarket>(*ops, market);
    }
};

}  // namespace

namespace {

double select_metric(const eval::Metrics& m, const std::string& name) {
    if (name == "val_return") return m.total_return;
    if (name == "val_sortino") return m.sortino;
    return m.sharpe;
}

std::string backtest_json(const eval::BacktestReport& r) {
    return fmt::format("{{\"strategy\":{},\"buy_and_hold\":{}}}", eval::metrics_json(r.strategy),
                       eval::metrics_json(r.buy_and_hold));
}

}  // namespace

std::string train(const config::Profile& p, const std::string& resume_dir, bool force) {
    const auto t0 = clock::now();
    // --resume takes the run directory's lock first: a second resume of a running run stops here.
    std::optional<io::RunDirectory> locked;
    if (!resume_dir.empty()) locked.emplace(io::RunDirectory::open(resume_dir));
    Session session(p, force);
    auto& ops = session.ops;
    const auto& dm = *session.device_market;
    const auto& market = session.market;
    auto trainer_owner = make_trainer(*ops, p, dm);
    Trainer& trainer = *trainer_owner;

    EarlyStopping early(p.early_stopping.patience, p.early_stopping.min_delta, p.early_stopping.min_steps);
    auto dir = locked ? std::move(*locked) : io::RunDirectory::create(p.run.output_dir, run_name(p));
    RunRecord record;                 // wall time before this process, the best validation backtest
    std::vector<float> best_weights;
    if (resume_dir.empty()) {
        dir.write_file("config.toml", config::to_toml(p));
    } else {  // everything checked before a byte is written (src/trainers/resume.cpp)
        auto resumed = resume_run(dir, *ops, trainer, p, early);
        record = std::move(resumed.record);
        best_weights = std::move(resumed.best_weights);
    }
    const double wall_before = record.wall_seconds;
    const auto run_record = [&] {  // what a checkpoint written now keeps for a resume
        record.wall_seconds = wall_before + std::chrono::duration<double>(clock::now() - t0).count();
        return record;
    };
    const std::string last_ckpt = dir.file_path("checkpoints/last.safetensors");
    const std::string best_ckpt = dir.file_path("checkpoints/best.safetensors");
    log::info("run directory: {}", dir.path());

    io::Progress progress(static_cast<std::uint64_t>(p.run.total_steps), io::stderr_is_terminal() &&
                              log::current_format() == log::Format::text && log::shows(log::Level::info));
    const std::string metric_label = p.early_stopping.metric.substr(p.early_stopping.metric.find('_') + 1);  // "sharpe"
    std::optional<double> last_val;
    std::string status = "completed";
    const long long per = trainer.progress_per_iteration();
    const std::string unit_key = trainer.progress_unit();  // what run.*_interval count
    std::string unit = unit_key;
    std::replace(unit.begin(), unit.end(), '_', ' ');

    std::string last_log_json;
    auto greedy = [&](ops::View<int> a, ops::View<const float> s, int n) { trainer.act(*ops, a, s, n); };
    auto crossed = [&](long long iterations, long long interval) {  // progress interval crossed by this iteration
        return interval > 0 && (iterations * per) / interval != ((iterations - 1) * per) / interval;
    };
    LoopCallbacks callbacks;
    callbacks.log = [&](double seconds) {
        const LogLine line = trainer.read_log(seconds);
        last_log_json = line.json;
        dir.append_metrics(line.json);
        progress.clear();
        log::info("{}", line.text);
        progress.update(static_cast<std::uint64_t>(trainer.progress()), line.env_steps_per_s, line.updates_per_s,
                        line.loss, last_val, metric_label);
    };
    callbacks.after_iteration = [&](long long iterations) {
        if (signals::interrupt_requested()) {
            status = "interrupted";
            return false;
        }
        const long long at = iterations * per;
        if (crossed(iterations, p.run.eval_interval)) {
            const auto report = eval::backtest(*ops, dm, market, env::Split::val, trainer.env_params(), greedy,
                                               static_cast<int>(p.eval.segments), false);
            const double metric = select_metric(report.strategy, p.early_stopping.metric);
            last_val = metric;
            const auto decision = early.observe(at, metric);
            dir.append_eval(fmt::format("{{\"{}\":{},\"split\":\"val\",\"metric\":{},\"value\":{},\"best\":{},"
                                        "\"strategy\":{},\"buy_and_hold\":{}}}",
                                        unit_key, at,
                                        io::json_string(p.early_stopping.metric), io::json_number(metric),
                                        decision.improved ? "true" : "false", eval::metrics_json(report.strategy),
                                        eval::metrics_json(report.buy_and_hold)));
            progress.clear();
            log::info("validation at {} {}: {} {:.4f}{}", at, unit, p.early_stopping.metric, metric,
                      decision.improved ? " (best so far)" : "");
            if (decision.improved) {
                best_weights = ops->to_host(ops::View<const float>(trainer.policy_weights()));
                record.best_validation = backtest_json(report);
                save_checkpoint(best_ckpt, *ops, trainer, p, market, early, run_record());
            }
            if (decision.stop) {
                status = "early_stopped";
                log::info("early stopping: {} evaluations without improvement (best {} {:.4f} at {} {})",
                          early.evaluations_without_improvement(), p.early_stopping.metric, *early.best(),
                          early.best_step(), unit);
                return false;
            }
        }
        if (crossed(iterations, p.run.checkpoint_interval))
            save_checkpoint(last_ckpt, *ops, trainer, p, market, early, run_record());
        return true;
    };

    signals::install_interrupt_handlers();
    const long long env_steps_at_start = trainer.env_steps();
    const long long updates_at_start = trainer.updates();
    const auto t_train = clock::now();
    try {
        training_loop(trainer, p.run.total_steps, p.run.log_interval, callbacks);
        ops->synchronize();
    } catch (const DivergedError& e) {
        progress.finish();
        dir.write_file("summary.json", fmt::format("{{\"status\":\"diverged\",\"trainer\":{},\"error\":{}}}\n",
                                                   io::json_string(p.run.trainer), io::json_string(e.what())));
        throw;
    }
    const double train_s = std::chrono::duration<double>(clock::now() - t_train).count();
    progress.finish();
    save_checkpoint(last_ckpt, *ops, trainer, p, market, early, run_record());
    // wall_seconds: every process of the run (the time before the checkpoint a resume continued
    // from, then this one); the rates: this process's training loop.
    const double wall = run_record().wall_seconds;
    if (last_log_json.empty()) last_log_json = dir.last_metrics_line();  // a resume that logged nothing new
    const std::string common = fmt::format(
        "\"trainer\":{},\"device\":{},\"env_steps\":{},\"updates\":{},\"wall_seconds\":{},\"env_steps_per_s\":{},"
        "\"updates_per_s\":{},\"bars_per_year\":{},\"bars_per_year_inferred\":{},\"final\":{}",
        io::json_string(p.run.trainer), io::json_string(ops->description()), trainer.env_steps(), trainer.updates(),
        io::json_number(wall),
        io::json_number(train_s > 0 ? static_cast<double>(trainer.env_steps() - env_steps_at_start) / train_s : 0),
        io::json_number(train_s > 0 ? static_cast<double>(trainer.updates() - updates_at_start) / train_s : 0),
        io::json_number(market.bars_per_year), market.bars_per_year_inferred ? "true" : "false",
        last_log_json.empty() ? "null" : last_log_json);
    if (status == "interrupted") {
        dir.write_file("summary.json", fmt::format("{{\"status\":\"interrupted\",{}}}\n", common));
        throw InterruptedError(fmt::format("interrupted at {} {}; checkpoint {}; continue with --resume {}",
                                           trainer.progress(), unit, last_ckpt, dir.path()));
    }

    if (p.replay_buffer.save_dump) {  // resolve() allows it for DQN only
        const std::string dump_path = dir.file_path("replay.fhreplay");
        io::write_replay_dump(dump_path, dynamic_cast<DqnTrainer&>(trainer).replay_dump());
        log::info("replay memory written to {} (an iql.dataset)", dump_path);
    }

    // The final test backtest: one exact sequential pass with the best weights (the last ones
    // when no validation ran).
    if (!best_weights.empty()) ops->upload<float>(trainer.policy_weights(), best_weights);
    const auto test = eval::backtest(*ops, dm, market, env::Split::test, trainer.env_params(), greedy, 1, true);
    eval::write_equity_csv(dir.file_path("backtest/equity.csv"), test, market);
    eval::write_trades_csv(dir.file_path("backtest/trades.csv"), test, market);
    if (best_weights.empty()) save_checkpoint(best_ckpt, *ops, trainer, p, market, early, run_record());
    log::info("test backtest: return {:.4f}, Sharpe {:.3f}, max drawdown {:.4f}, {} trades (buy-and-hold: return {:.4f}, "
              "Sharpe {:.3f})",
              test.strategy.total_return, test.strategy.sharpe, test.strategy.max_drawdown, test.strategy.trades,
              test.buy_and_hold.total_return, test.buy_and_hold.sharpe);
    dir.write_file("summary.json",
                   fmt::format("{{\"status\":\"{}\",{},\"best\":{{\"{}\":{},\"metric\":{},\"value\":{}}},"
                               "\"validation\":{},\"test\":{}}}\n",
                               status, common, unit_key, early.best_step(),
                               io::json_string(p.early_stopping.metric),
                               io::json_number(early.best().value_or(std::nan(""))),
                               record.best_validation.empty() ? "null" : record.best_validation,
                               backtest_json(test)));
    log::info("done ({}): {} env steps, {} updates in {:.1f} s; {}", status, trainer.env_steps(), trainer.updates(),
              wall, dir.path());
    return dir.path();
}

std::string evaluate(const std::string& checkpoint, const std::string& split_name, const std::string& data_path,
                     const std::string& device) {
    if (split_name != "val" && split_name != "test")
        throw UsageError("eval --split: expected val or test, got '" + split_name + "'");
    std::vector<std::string> overrides;
    if (!data_path.empty()) overrides.push_back("data.path=" + io::json_string(data_path));
    if (!device.empty()) overrides.push_back("run.device=" + io::json_string(device));
    const auto p = config::resolve_profile_text(checkpoint_profile_toml(checkpoint), checkpoint, overrides);
    auto ops = make_backend(p);
    auto options = data_options(p);
    options.normalization = checkpoint_normalization(checkpoint);
    const auto market = data::load_market(options);
    env::DeviceMarket dm(*ops, market);
    const auto params = env_params(p, market.market_dim);

    // Only the policy's network: the checkpoint's params/online.
    const auto policy = make_greedy_policy(p, params.state_dim);
    const auto file = io::TensorFile::read(checkpoint);
    const auto weights = file.get<float>("params/online", {policy->weights_size()});
    const auto online = ops->from_host<float>(weights);
    auto act = [&](ops::View<int> a, ops::View<const float> s, int n) { policy->act(*ops, online.cview(), a, s, n); };
    const auto report = eval::backtest(*ops, dm, market, split_name == "val" ? env::Split::val : env::Split::test,
                                       params, act, 1, false);
    return fmt::format("{{\"checkpoint\":{},\"split\":\"{}\",\"data\":{},\"strategy\":{},\"buy_and_hold\":{}}}",
                       io::json_string(checkpoint), split_name, io::json_string(market.source),
                       eval::metrics_json(report.strategy), eval::metrics_json(report.buy_and_hold));
}

std::string bench(const config::Profile& p, bool force) {
    const auto t_start = clock::now();
    Session session(p, force);
    auto& ops = session.ops;
    auto trainer = make_trainer(*ops, p, *session.device_market);
    ops->synchronize();
    const double first_kernel_s = std::chrono::duration<double>(clock::now() - t_start).count();
    const long long per = trainer->progress_per_iteration();
    // Iterations per timed phase: the run's length, at most 500 and at most ~5M progress units
    // (a PPO iteration is a whole rollout), at least 20 (fewer when that cap is lower).
    const long long cap = std::clamp<long long>(5'000'000 / per, 3, 500);
    const long long phase = std::clamp<long long>(p.run.total_steps / per, std::min<long long>(20, cap), cap);
    const BenchFigures f = trainer->bench(phase);
    return fmt::format(
        "{{\"trainer\":\"{}\",\"device\":{},\"n_envs\":{},\"batch_size\":{},\"iterations_per_phase\":{},"
        "\"collection_env_steps_per_s\":{},\"updates_per_s\":{},\"end_to_end_env_steps_per_s\":{},"
        "\"time_to_first_kernel_s\":{},\"peak_device_memory_bytes\":{}}}",
        p.run.trainer, io::json_string(ops->description()), p.experience.gpu_n_episodes, f.batch_rows,
        f.iterations, io::json_number(f.collection_env_steps_per_s), io::json_number(f.updates_per_s),
        io::json_number(f.end_to_end_env_steps_per_s), io::json_number(first_kernel_s), ops->peak_bytes());
}

}  // namespace fh::trainers
