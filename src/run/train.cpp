/// @file train.cpp
/// @brief The training run: the run directory, the training loop with validation backtests, early
///        stopping, checkpoints and interrupts, the replay dump, the test backtest and summary.json.
#include "run/run.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <ctime>
#include <optional>

#include "config/memory_estimate.hpp"
#include "config/schema.hpp"
#include "eval/backtest.hpp"
#include "io/progress.hpp"
#include "io/replay_dump.hpp"
#include "io/safetensors.hpp"
#include "trainers/checkpoint.hpp"
#include "trainers/resume.hpp"
#include "trainers/early_stopping.hpp"
#include "util/signals.hpp"
#include "data/load.hpp"
#include "env/vec_env.hpp"
#include "io/run_directory.hpp"
#include "run/facts.hpp"
#include "run/session.hpp"
#include "trainers/trainer.hpp"
#include "trainers/setup.hpp"
#include "util/errors.hpp"
#include "util/log.hpp"

namespace fh::run {

using trainers::EarlyStopping;
using trainers::LogLine;
using trainers::LoopCallbacks;
using trainers::Trainer;
namespace {

using clock = std::chrono::steady_clock;
namespace json = io::json;

std::string run_name(const config::Profile& p) {
    if (!p.run.name.empty()) return p.run.name;
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&now, &tm);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
    return p.run.trainer + "-" + stamp;
}

double select_metric(const eval::Metrics& m, const std::string& name) {
    if (name == "val_return") return m.total_return;
    if (name == "val_sortino") return m.sortino;
    return m.sharpe;
}

}  // namespace

std::string train(const config::Profile& p, const std::string& resume_dir, const std::vector<std::string>& overrides,
                  bool force) {
    const auto t0 = clock::now();
    // --resume takes the run directory's lock first: a second resume of a running run stops here.
    std::optional<io::RunDirectory> locked;
    if (!resume_dir.empty()) locked.emplace(io::RunDirectory::open(resume_dir));
    Session session(p, force);
    auto& ops = session.ops;
    const auto& dm = *session.device_market;
    const auto& market = session.market;
    auto trainer_owner = trainers::make_trainer(*ops, p, dm);
    Trainer& trainer = *trainer_owner;

    const bool by_loss = p.early_stopping.metric == "val_loss";  // the supervised forecaster's (resolve checks)
    EarlyStopping early(p.early_stopping.patience, p.early_stopping.min_delta, p.early_stopping.min_steps, by_loss);
    auto dir = locked ? std::move(*locked) : io::RunDirectory::create(p.run.output_dir, run_name(p));
    trainers::RunRecord record;  // wall time before this process, the best validation backtest
    std::vector<float> best_weights;
    if (resume_dir.empty()) {
        dir.write_file("config.toml", config::to_toml(p));
    } else {  // everything checked before a byte is written (src/trainers/resume.cpp)
        auto resumed = trainers::resume_run(dir, *ops, trainer, p, early);
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

    json::Value last_log;  // the last metrics line (null before the first)
    auto greedy = [&](ops::View<int> a, ops::View<const float> s, int n) { trainer.act(*ops, a, s, n); };
    auto crossed = [&](long long iterations, long long interval) {  // progress interval crossed by this iteration
        return interval > 0 && (iterations * per) / interval != ((iterations - 1) * per) / interval;
    };
    LoopCallbacks callbacks;
    callbacks.log = [&](double seconds) {
        const LogLine line = trainer.read_log(seconds);
        last_log = line.json;
        dir.append_metrics(json::serialize(line.json));
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
            const std::optional<double> val_loss = trainer.validation_loss();  // supervised only
            const double metric = by_loss ? val_loss.value_or(std::nan(""))
                                          : select_metric(report.strategy, p.early_stopping.metric);
            last_val = metric;
            const auto decision = early.observe(at, metric);
            json::Object line{{unit_key, at},
                              {"split", "val"},
                              {"metric", p.early_stopping.metric},
                              {"value", metric},
                              {"best", decision.improved}};
            if (val_loss) line.emplace_back("val_loss", *val_loss);
            line.emplace_back("strategy", eval::metrics_value(report.strategy));
            line.emplace_back("buy_and_hold", eval::metrics_value(report.buy_and_hold));
            dir.append_eval(json::serialize(json::Value::object(std::move(line))));
            progress.clear();
            log::info("validation at {} {}: {} {:.4f}{}", at, unit, p.early_stopping.metric, metric,
                      decision.improved ? " (best so far)" : "");
            if (decision.improved) {
                best_weights = ops->to_host(ops::View<const float>(trainer.policy_weights()));
                record.best_validation = json::serialize(eval::report_value(report));
                trainers::save_checkpoint(best_ckpt, *ops, trainer, p, market, early, run_record());
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
            trainers::save_checkpoint(last_ckpt, *ops, trainer, p, market, early, run_record());
        return true;
    };

    signals::install_interrupt_handlers();
    const long long env_steps_at_start = trainer.env_steps();
    const long long updates_at_start = trainer.updates();
    const auto t_train = clock::now();
    try {
        trainers::training_loop(trainer, p.run.total_steps, p.run.log_interval, callbacks);
        ops->synchronize();
    } catch (const DivergedError& e) {
        progress.finish();
        dir.write_file("summary.json",
                       json::serialize(json::object({{"status", "diverged"}, {"trainer", p.run.trainer}, {"error", e.what()}})) +
                           "\n");
        throw;
    }
    const double train_s = std::chrono::duration<double>(clock::now() - t_train).count();
    progress.finish();
    trainers::save_checkpoint(last_ckpt, *ops, trainer, p, market, early, run_record());
    // wall_seconds: every process of the run (the time before the checkpoint a resume continued
    // from, then this one); the rates: this process's training loop.
    const double wall = run_record().wall_seconds;
    if (last_log.is_null()) {  // a resume that logged nothing new: the run's last line
        const std::string line = dir.last_metrics_line();
        if (!line.empty()) last_log = json::parse(line, json::Limits{1'000'000, 16, true});
    }
    // summary.json: the status, then what every run reports, then (finished runs) the results.
    auto summary = [&](const std::string& run_status) {
        json::Object o{{"status", run_status},
                       {"trainer", p.run.trainer},
                       {"device", ops->description()},
                       {"env_steps", trainer.env_steps()},
                       {"updates", trainer.updates()},
                       {"wall_seconds", wall},
                       {"env_steps_per_s",
                        train_s > 0 ? static_cast<double>(trainer.env_steps() - env_steps_at_start) / train_s : 0.0},
                       {"updates_per_s",
                        train_s > 0 ? static_cast<double>(trainer.updates() - updates_at_start) / train_s : 0.0},
                       {"final", last_log}};
        for (auto& m : run_facts(p, market, overrides, resume_dir)) o.push_back(std::move(m));
        return o;
    };
    if (status == "interrupted") {
        dir.write_file("summary.json", json::serialize(json::Value::object(summary(status))) + "\n");
        throw InterruptedError(fmt::format("interrupted at {} {}; checkpoint {}; continue with --resume {}",
                                           trainer.progress(), unit, last_ckpt, dir.path()));
    }

    if (p.replay_buffer.save_dump) {  // resolve() allows it for DQN only
        const std::string dump_path = dir.file_path("replay.fhreplay");
        io::write_replay_dump(dump_path, trainer.replay_dump());
        log::info("replay memory written to {} (an iql.dataset)", dump_path);
    }

    // The final test backtest: one exact sequential pass with the best weights (the last ones
    // when no validation ran).
    if (!best_weights.empty()) ops->upload<float>(trainer.policy_weights(), best_weights);
    const auto test = eval::backtest(*ops, dm, market, env::Split::test, trainer.env_params(), greedy, 1, true);
    eval::write_equity_csv(dir.file_path("backtest/equity.csv"), test, market);
    eval::write_trades_csv(dir.file_path("backtest/trades.csv"), test, market);
    // backtest/val_equity.csv: the validation split with the same weights, one exact sequential
    // pass (the report's validation plot).
    eval::write_equity_csv(dir.file_path("backtest/val_equity.csv"),
                           eval::backtest(*ops, dm, market, env::Split::val, trainer.env_params(), greedy, 1, true), market);
    if (best_weights.empty()) trainers::save_checkpoint(best_ckpt, *ops, trainer, p, market, early, run_record());
    log::info("test backtest: return {:.4f}, Sharpe {:.3f}, max drawdown {:.4f}, {} trades (buy-and-hold: return {:.4f}, "
              "Sharpe {:.3f})",
              test.strategy.total_return, test.strategy.sharpe, test.strategy.max_drawdown, test.strategy.trades,
              test.buy_and_hold.total_return, test.buy_and_hold.sharpe);
    json::Object done = summary(status);
    done.emplace_back("best", json::object({{unit_key, early.best_step()},
                                            {"metric", p.early_stopping.metric},
                                            {"value", early.best()}}));
    done.emplace_back("validation", record.best_validation.empty()
                                        ? json::Value()
                                        : json::parse(record.best_validation, json::Limits{1'000'000, 16, true}));
    done.emplace_back("test", eval::report_value(test));
    dir.write_file("summary.json", json::serialize(json::Value::object(std::move(done))) + "\n");
    log::info("done ({}): {} env steps, {} updates in {:.1f} s; {}", status, trainer.env_steps(), trainer.updates(),
              wall, dir.path());
    return dir.path();
}

}  // namespace fh::run
