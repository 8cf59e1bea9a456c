/// @file agent_run.hpp
/// @brief One agent's training run: its run directory, the training loop's callbacks
///        (metrics, validation backtests, early stopping, checkpoints, interrupts), the replay
///        dump, the test backtest and summary.json. A single run (src/run/train.cpp) is one
///        AgentRun; a population (src/run/population.cpp) advances several, each host worker its agents in turn.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/profile.hpp"
#include "data/market_data.hpp"
#include "env/vec_env.hpp"
#include "backtest/backtest.hpp"
#include "io/json.hpp"
#include "io/progress.hpp"
#include "io/run_directory.hpp"
#include "device/device.hpp"
#include "trainers/checkpoint.hpp"
#include "trainers/early_stopping.hpp"
#include "trainers/trainer.hpp"

namespace fh::run {

/// The spread of an action histogram (the collapse monitor, docs/metrics.md): its entropy in
/// nats (0: one action; ln(actions): uniform) and the share of the most frequent action.
struct ActionSpread {
    bool valid = false;  ///< false for an empty histogram
    double entropy = 0, top_share = 0;
    int top_action = 0;
};
ActionSpread action_spread(const std::vector<long long>& histogram);

/// How an AgentRun reports besides its files.
struct AgentOptions {
    std::vector<std::string> overrides;  ///< recorded in summary.json (run/facts.hpp)
    std::string resume_dir;              ///< "" for a new run; summary.json keeps its first overrides
    bool progress_bar = true;            ///< the terminal's progress line (a single run's)
    std::string log_prefix;              ///< before each log line ("agent 2: " in a population)
    /// Whether SIGINT/SIGTERM asked the run to stop, polled after each iteration; empty:
    /// signals::interrupt_requested(). A batched population's agents read the answer latched at
    /// the start of each round, so that they all stop after the same iteration (and resume batched).
    std::function<bool()> interrupt_requested;
};

class AgentRun {
public:
    using clock = std::chrono::steady_clock;

    /// Takes the trainer and the run directory (created, or opened and locked for a resume:
    /// `resuming`). A new run writes config.toml; a resumed one loads its last checkpoint
    /// (trainers::resume_run, which checks everything before it writes). `t0`: when the run's
    /// process started (its wall time). `ops`, `market` and `device_market` must outlive it.
    AgentRun(const config::Profile& profile, ops::Device& ops, const data::MarketData& market,
             const env::DeviceMarket& device_market, std::unique_ptr<trainers::Trainer> trainer, io::RunDirectory dir,
             bool resuming, AgentOptions options, clock::time_point t0);
    AgentRun(const AgentRun&) = delete;
    AgentRun& operator=(const AgentRun&) = delete;

    /// Starts the clock of the training loop (the summary's rates); before the first step().
    void begin();
    /// One iteration with its log point, validation, early stopping and checkpoint. False when the
    /// loop is over: the budget reached, early stopping, an interrupt, or divergence (then
    /// summary.json says "diverged" and error() is the guard's message).
    bool step();
    /// Issues what the next step() can issue without waiting (Trainer::prepare_iteration); a
    /// population's worker prepares all its agents, then steps each.
    void prepare();
    /// After the loop: the last checkpoint and summary.json. An interrupted run stops there
    /// (status "interrupted", error() the message a single run exits with); a finished one also
    /// writes the replay dump, the test backtest and backtest/. Nothing for a diverged run.
    void finish();

    const std::string& status() const noexcept { return status_; }
    const std::string& error() const noexcept { return error_; }
    const std::string& path() const noexcept { return dir_.path(); }
    const config::Profile& profile() const noexcept { return p_; }
    trainers::Trainer& trainer() noexcept { return *trainer_; }
    ops::Device& device() noexcept { return ops_; }
    /// The metric of the last validation (early_stopping.metric; after a resume, that of the
    /// checkpoint's step when it validated there), nullopt before the first.
    std::optional<double> last_validation() const noexcept { return last_val_; }
    /// A population search: the trainer continues with `profile`'s per-agent keys
    /// (Trainer::set_agent_keys), which config.toml and later checkpoints record.
    void set_agent_keys(const config::Profile& profile);
    /// A search's round ends at this iteration: an interrupt is not taken there, so that every
    /// agent validates it (the round ranks them on it) before the population stops (interrupt()).
    void hold_interrupt_at(long long iteration) noexcept { hold_interrupt_at_ = iteration; }
    /// Ends the run as interrupted (then finish() writes its checkpoint and summary).
    void interrupt() noexcept { status_ = "interrupted"; }
    /// Successive halving stopped the run at a rung: finish() ends it as a finished run (checkpoint,
    /// test backtest, summary.json) with status "stopped".
    void stop() noexcept { status_ = "stopped"; }
    /// summary.json's "search" (a search's result for the agent: its rung and the metric there).
    void set_search_result(io::json::Value search) { search_ = std::move(search); }
    /// Writes checkpoints/last.safetensors now (a search round, so that a resume continues after it).
    void save_checkpoint() { save_checkpoint(last_ckpt_); }
    /// Appends one line to the run's lineage.jsonl (a search's record of the agent).
    void append_lineage(const std::string& json_object);

private:
    double select_metric(const backtest::Metrics& m) const;
    void save_checkpoint(const std::string& path);
    /// The trainer's greedy policy over `split` (captured where its policy allows).
    backtest::BacktestReport greedy_backtest(env::Split split, int segments, bool keep_records);
    bool after_iteration(long long iterations);
    void log_line(double seconds);
    trainers::RunRecord run_record();
    void write_summary(io::json::Object o);
    bool crossed(long long iterations, long long interval) const;
    /// Throws DivergedError when more than half of the run's updates were skipped by the guard.
    void refuse_mostly_skipped() const;
    /// The collapse monitor: counts validations whose greedy policy stays on one action.
    void watch_collapse(long long at, const ActionSpread& spread);

    config::Profile p_;
    ops::Device& ops_;
    const data::MarketData& market_;
    const env::DeviceMarket& dm_;
    std::unique_ptr<trainers::Trainer> trainer_;
    io::RunDirectory dir_;
    AgentOptions o_;
    clock::time_point t0_;
    bool by_loss_;
    trainers::EarlyStopping early_;
    trainers::RunRecord record_;
    std::vector<float> best_weights_;
    double wall_before_ = 0;
    std::string last_ckpt_, best_ckpt_;
    io::Progress progress_;
    std::string metric_label_;
    std::optional<double> last_val_;
    std::string status_ = "completed";
    std::string error_;
    long long per_ = 1;
    std::string unit_key_, unit_;
    io::json::Value last_log_;
    io::json::Value collapse_;  ///< summary.json's "collapse" (null: none)
    io::json::Value search_;    ///< summary.json's "search" (null: none)
    long long collapsed_evaluations_ = 0;
    long long env_steps_at_start_ = 0, updates_at_start_ = 0;
    long long hold_interrupt_at_ = -1;
    clock::time_point t_train_;
    std::optional<trainers::TrainingLoop> loop_;
};

}  // namespace fh::run
