/// @file agent_run.cpp
#include "run/agent_run.hpp"

#include <optional>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>

#include "backtest/backtest.hpp"
#include "backtest/inference.hpp"
#include "io/replay_dump.hpp"
#include "run/facts.hpp"
#include "trainers/resume.hpp"
#include "trainers/run_checks.hpp"
#include "util/errors.hpp"
#include "util/fault.hpp"
#include "util/log.hpp"
#include "util/signals.hpp"

namespace fh::run {

namespace json = io::json;

AgentRun::AgentRun(const config::Profile& p, ops::Device& ops, const data::MarketData& market,
                   const env::DeviceMarket& device_market, std::unique_ptr<trainers::Trainer> trainer,
                   io::RunDirectory dir, bool resuming, AgentOptions options, clock::time_point t0)
    : p_(p),
      ops_(ops),
      market_(market),
      dm_(device_market),
      trainer_(std::move(trainer)),
      dir_(std::move(dir)),
      o_(std::move(options)),
      t0_(t0),
      by_loss_(p.early_stopping.metric == "val_loss"),  // the supervised forecaster's (resolve checks)
      early_(p.early_stopping.patience, p.early_stopping.min_delta, p.early_stopping.min_steps, by_loss_),
      progress_(static_cast<std::uint64_t>(p.run.total_steps), o_.progress_bar && io::stderr_is_terminal() &&
                                                                   log::current_format() == log::Format::text &&
                                                                   log::shows(log::Level::info)) {
    if (!resuming) {
        dir_.write_file("config.toml", config::to_toml(p_));
    } else {  // everything checked before a byte is written (src/trainers/resume.cpp)
        auto resumed =
            trainers::resume_run(dir_, ops_, *trainer_, p_, early_, static_cast<std::int64_t>(market_.bars.size()));
        record_ = std::move(resumed.record);
        best_weights_ = std::move(resumed.best_weights);
        // The validation of the checkpoint's step, if it had one (a search ranks the agents on it).
        if (const auto eval = dir_.read_file("eval.jsonl")) {
            std::string_view last = *eval;  // its last line
            if (last.ends_with('\n')) last.remove_suffix(1);
            last.remove_prefix(last.rfind('\n') == std::string_view::npos ? 0 : last.rfind('\n') + 1);
            try {
                const json::Value v = json::parse(last, json::Limits{16u << 20, 64, true});
                const auto* at = v.find(trainer_->progress_unit());
                const auto* value = v.find("value");
                if (at != nullptr && value != nullptr && at->is_integer() && value->is_number() &&
                    at->as_i64() == trainer_->progress())
                    last_val_ = value->as_double();
            } catch (const std::exception&) {  // no validation to continue from
            }
        }
    }
    wall_before_ = record_.wall_seconds;
    last_ckpt_ = dir_.file_path("checkpoints/last.safetensors");
    best_ckpt_ = dir_.file_path("checkpoints/best.safetensors");
    log::info("{}run directory: {}", o_.log_prefix, dir_.path());
    metric_label_ = p_.early_stopping.metric.substr(p_.early_stopping.metric.find('_') + 1);  // "sharpe"
    per_ = trainer_->progress_per_iteration();
    unit_key_ = trainer_->progress_unit();  // what run.*_interval count
    unit_ = unit_key_;
    std::replace(unit_.begin(), unit_.end(), '_', ' ');
    util::fault_point("agent-run");
}

trainers::RunRecord AgentRun::run_record() {  // what a checkpoint written now keeps for a resume
    record_.wall_seconds = wall_before_ + std::chrono::duration<double>(clock::now() - t0_).count();
    return record_;
}

double AgentRun::select_metric(const backtest::Metrics& m) const {
    const std::string& name = p_.early_stopping.metric;
    if (name == "val_return") return m.total_return;
    if (name == "val_sortino") return m.sortino;
    return m.sharpe;
}

void AgentRun::set_agent_keys(const config::Profile& profile) {
    config::Profile p = profile;
    p.run.name = p_.run.name;
    p.run.output_dir = p_.run.output_dir;
    trainer_->set_agent_keys(p);
    p_ = std::move(p);
    dir_.write_file("config.toml", config::to_toml(p_));
}

void AgentRun::save_checkpoint(const std::string& path) {
    trainers::save_checkpoint(path, ops_, *trainer_, p_, market_, early_, run_record());
}

backtest::BacktestReport AgentRun::greedy_backtest(env::Split split, int segments, bool keep_records) {
    auto greedy = [&](ops::View<int> a, ops::View<const float> s, int n) { trainer_->act(ops_, a, s, n); };
    return backtest::backtest(ops_, dm_, market_, split, trainer_->env_params(), greedy, segments, keep_records,
                              trainer_->policy().capture_safe());
}

void AgentRun::append_lineage(const std::string& json_object) {
    std::ofstream out(dir_.file_path("lineage.jsonl"), std::ios::app | std::ios::binary);
    out << json_object << '\n';
    if (!out) throw UsageError(fmt::format("{}: cannot append to lineage.jsonl", dir_.path()));
}

bool AgentRun::crossed(long long iterations, long long interval) const {  // progress interval crossed by this iteration
    return interval > 0 && (iterations * per_) / interval != ((iterations - 1) * per_) / interval;
}

ActionSpread action_spread(const std::vector<long long>& histogram) {
    ActionSpread s;
    long long total = 0, top = -1;
    for (std::size_t a = 0; a < histogram.size(); ++a) {
        total += histogram[a];
        if (histogram[a] > top) {
            top = histogram[a];
            s.top_action = static_cast<int>(a);
        }
    }
    if (total <= 0) return s;
    for (long long c : histogram)
        if (c > 0) {
            const double q = static_cast<double>(c) / static_cast<double>(total);
            s.entropy -= q * std::log(q);
        }
    s.top_share = static_cast<double>(top) / static_cast<double>(total);
    s.valid = true;
    return s;
}

void AgentRun::log_line(double seconds) {
    trainers::LogLine line = trainer_->read_log(seconds);
    // The collapse monitor's figures of the actions taken in the interval (DQN, PPO).
    if (const auto* h = line.json.is_object() ? line.json.find("charts/action_histogram") : nullptr;
        h != nullptr && h->is_array()) {
        std::vector<long long> counts;
        for (const auto& c : h->as_array()) counts.push_back(c.is_number() ? static_cast<long long>(c.as_double()) : 0);
        const auto spread = action_spread(counts);
        if (spread.valid) {
            auto o = line.json.as_object();
            o.emplace_back("charts/action_entropy", spread.entropy);
            o.emplace_back("charts/top_action_share", spread.top_share);
            line.json = json::Value::object(std::move(o));
        }
    }
    last_log_ = line.json;
    dir_.append_metrics(json::serialize(line.json));
    progress_.clear();
    log::info("{}{}", o_.log_prefix, line.text);
    progress_.update(static_cast<std::uint64_t>(trainer_->progress()), line.env_steps_per_s, line.updates_per_s,
                     line.loss, last_val_, metric_label_);
}

bool AgentRun::after_iteration(long long iterations) {
    if (iterations != hold_interrupt_at_ &&
        (o_.interrupt_requested ? o_.interrupt_requested() : signals::interrupt_requested())) {
        status_ = "interrupted";
        return false;
    }
    const long long at = iterations * per_;
    if (crossed(iterations, p_.run.eval_interval)) {
        const auto report = greedy_backtest(env::Split::val, static_cast<int>(p_.eval.segments), false);
        const std::optional<double> val_loss = trainer_->validation_loss();  // supervised only
        const double metric = by_loss_ ? val_loss.value_or(std::nan("")) : select_metric(report.strategy);
        last_val_ = metric;
        const auto decision = early_.observe(at, metric);
        json::Object line{{unit_key_, at},
                          {"split", "val"},
                          {"metric", p_.early_stopping.metric},
                          {"value", metric},
                          {"best", decision.improved}};
        if (val_loss) line.emplace_back("val_loss", *val_loss);
        const auto spread = action_spread(report.strategy.action_histogram);
        if (spread.valid) {
            line.emplace_back("action_entropy", spread.entropy);
            line.emplace_back("top_action_share", spread.top_share);
        }
        watch_collapse(at, spread);
        line.emplace_back("strategy", backtest::metrics_value(report.strategy));
        line.emplace_back("buy_and_hold", backtest::metrics_value(report.buy_and_hold));
        dir_.append_eval(json::serialize(json::Value::object(std::move(line))));
        progress_.clear();
        log::info("{}validation at {} {}: {} {:.4f}{}", o_.log_prefix, at, unit_, p_.early_stopping.metric, metric,
                  decision.improved ? " (best so far)" : "");
        if (decision.improved) {
            best_weights_ = ops_.to_host(ops::View<const float>(trainer_->policy_weights()));
            record_.best_validation = json::serialize(backtest::report_value(report));
            save_checkpoint(best_ckpt_);
        }
        if (decision.stop) {
            status_ = "early_stopped";
            log::info("{}early stopping: {} evaluations without improvement (best {} {:.4f} at {} {})", o_.log_prefix,
                      early_.evaluations_without_improvement(), p_.early_stopping.metric, *early_.best(),
                      early_.best_step(), unit_);
            return false;
        }
    }
    if (crossed(iterations, p_.run.checkpoint_interval)) save_checkpoint();
    return true;
}

void AgentRun::begin() {
    env_steps_at_start_ = trainer_->env_steps();
    updates_at_start_ = trainer_->updates();
    trainers::LoopCallbacks callbacks;
    callbacks.log = [this](double seconds) { log_line(seconds); };
    callbacks.after_iteration = [this](long long iterations) { return after_iteration(iterations); };
    t_train_ = clock::now();
    loop_.emplace(*trainer_, p_.run.total_steps, p_.run.log_interval, std::move(callbacks));
}

bool AgentRun::step() {
    if (!loop_) begin();
    util::fault_point("train-step");
    try {
        const bool more = loop_->step();
        if (!more && status_ != "interrupted") refuse_mostly_skipped();
        return more;
    } catch (const DivergedError& e) {
        progress_.finish();
        status_ = "diverged";
        error_ = e.what();
        write_summary({{"status", "diverged"}, {"trainer", p_.run.trainer}, {"error", e.what()}});
        return false;
    }
}

void AgentRun::watch_collapse(long long at, const ActionSpread& spread) {
    // The greedy policy on one action (at least 99% of the validation's bars) for
    // eval.collapse_window validations in a row: warned once, kept for summary.json.
    if (!collapse_.is_null()) return;
    collapsed_evaluations_ = spread.valid && spread.top_share >= 0.99 ? collapsed_evaluations_ + 1 : 0;
    if (collapsed_evaluations_ < p_.eval.collapse_window) return;
    collapse_ = json::object({{unit_key_, at},
                              {"action", spread.top_action},
                              {"top_action_share", spread.top_share},
                              {"action_entropy", spread.entropy},
                              {"evaluations", collapsed_evaluations_}});
    log::warn(
        "{}collapse: the greedy policy has taken action {} on {:.1f}% of the validation bars in {} validations "
        "in a row, up to {} {}: it no longer depends on the state (summary.json \"collapse\")",
        o_.log_prefix, spread.top_action, 100 * spread.top_share, collapsed_evaluations_, at, unit_);
}

void AgentRun::refuse_mostly_skipped() const {
    // The guard stops a run at training.max_bad_updates skipped updates; a run shorter than that
    // whose updates were mostly skipped has trained (nearly) nothing, and its results are those of
    // its initial weights: it ends as diverged too, not "completed".
    const json::Value* skipped = last_log_.is_object() ? last_log_.find("charts/skipped_updates") : nullptr;
    const long long updates = trainer_->updates();
    if (skipped == nullptr || !skipped->is_number() || updates <= 0) return;
    const auto bad = static_cast<long long>(skipped->as_double());
    if (2 * bad <= updates) return;
    throw DivergedError(
        fmt::format("training diverged: the guard skipped {} of the run's {} updates (more than half; "
                    "training.max_bad_updates = {} was not reached): the weights are (nearly) the "
                    "initial ones. Lower training.learning_rate or check the data and the instrument",
                    bad, updates, p_.training.max_bad_updates));
}

void AgentRun::prepare() {
    if (!loop_) begin();
    loop_->prepare();
}

void AgentRun::write_summary(json::Object o) {
    dir_.write_file("summary.json", json::serialize(json::Value::object(std::move(o))) + "\n");
}

void AgentRun::finish() {
    if (status_ == "diverged") return;
    util::fault_point("finish");
    if (!loop_) begin();
    ops_.synchronize();
    const double train_s = std::chrono::duration<double>(clock::now() - t_train_).count();
    progress_.finish();
    save_checkpoint();
    // wall_seconds: every process of the run (the time before the checkpoint a resume continued
    // from, then this one); the rates: this process's training loop.
    const double wall = run_record().wall_seconds;
    if (last_log_.is_null()) {  // a resume that logged nothing new: the run's last line
        const std::string line = dir_.last_metrics_line();
        if (!line.empty()) last_log_ = json::parse(line, json::Limits{1'000'000, 16, true});
    }
    trainers::Trainer& trainer = *trainer_;
    // summary.json: the status, then what every run reports, then (finished runs) the results.
    auto summary = [&](const std::string& run_status) {
        json::Object o{
            {"status", run_status},
            {"trainer", p_.run.trainer},
            {"device", ops_.description()},
            {"env_steps", trainer.env_steps()},
            {"updates", trainer.updates()},
            {"wall_seconds", wall},
            {"env_steps_per_s",
             train_s > 0 ? static_cast<double>(trainer.env_steps() - env_steps_at_start_) / train_s : 0.0},
            {"updates_per_s", train_s > 0 ? static_cast<double>(trainer.updates() - updates_at_start_) / train_s : 0.0},
            {"final", last_log_},
            {"collapse", collapse_}};
        if (!search_.is_null()) o.emplace_back("search", search_);
        for (auto& m : run_facts(p_, market_, o_.overrides, o_.resume_dir)) o.push_back(std::move(m));
        return o;
    };
    if (status_ == "interrupted") {
        write_summary(summary(status_));
        error_ = fmt::format("interrupted at {} {}; checkpoint {}; continue with --resume {}", trainer.progress(),
                             unit_, last_ckpt_, dir_.path());
        return;
    }

    if (p_.replay_buffer.save_dump) {  // resolve() allows it for DQN only
        const std::string dump_path = dir_.file_path("replay.fhreplay");
        io::write_replay_dump(dump_path, trainer.replay_dump());
        log::info("{}replay memory written to {} (an iql.dataset)", o_.log_prefix, dump_path);
    }

    // The final test backtest: one exact sequential pass with the best weights (the last ones
    // when no validation ran).
    if (!best_weights_.empty()) ops_.upload<float>(trainer.policy_weights(), best_weights_);
    const auto test = greedy_backtest(env::Split::test, 1, true);
    backtest::write_equity_csv(dir_.file_path("backtest/equity.csv"), test, market_);
    backtest::write_trades_csv(dir_.file_path("backtest/trades.csv"), test, market_);
    // backtest/val_equity.csv: the validation split with the same weights, one exact sequential
    // pass (the report's validation plot).
    // (None when the validation split has no bar to trade: data.val_fraction = 0 with
    // run.eval_interval = 0.)
    std::optional<backtest::BacktestReport> val_pass;
    if (trainers::has_validation_backtest(market_)) {
        val_pass = greedy_backtest(env::Split::val, 1, true);
        backtest::write_equity_csv(dir_.file_path("backtest/val_equity.csv"), *val_pass, market_);
    }
    if (best_weights_.empty()) save_checkpoint(best_ckpt_);
    log::info(
        "{}test backtest: return {:.4f}, Sharpe {:.3f}, max drawdown {:.4f}, {} trades (buy-and-hold: return "
        "{:.4f}, Sharpe {:.3f})",
        o_.log_prefix, test.strategy.total_return, test.strategy.sharpe, test.strategy.max_drawdown,
        test.strategy.trades, test.buy_and_hold.total_return, test.buy_and_hold.sharpe);
    json::Object done = summary(status_);
    done.emplace_back(
        "best", json::object(
                    {{unit_key_, early_.best_step()}, {"metric", p_.early_stopping.metric}, {"value", early_.best()}}));
    // Intervals and PSRs (docs/metrics.md): the test's from the test backtest, the validation's from
    // the final validation pass (backtest/val_equity.csv), both with the best weights.
    auto boot = backtest::bootstrap_options(p_.eval);
    boot.cut_block_to_series = true;  // checked against the splits before training (run_checks)
    done.emplace_back("validation", record_.best_validation.empty() || !val_pass
                                        ? json::Value()
                                        : backtest::with_inference(
                                              json::parse(record_.best_validation, json::Limits{1'000'000, 16, true}),
                                              *val_pass, boot));
    done.emplace_back("test", backtest::with_inference(backtest::report_value(test), test, boot));
    write_summary(std::move(done));
    log::info("{}done ({}): {} env steps, {} updates in {:.1f} s; {}", o_.log_prefix, status_, trainer.env_steps(),
              trainer.updates(), wall, dir_.path());
}

}  // namespace fh::run
