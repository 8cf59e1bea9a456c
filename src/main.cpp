/// @file main.cpp
/// @brief Command-line wiring only: options and subcommands to fh::cli entry points, exceptions
///        to exit codes (docs/cli.md "Exit codes").
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <exception>
#include <optional>
#include <string>

#include "build_config.hpp"
#include "cli/commands.hpp"
#include "device/cuda/check.hpp"
#include "util/errors.hpp"
#include "util/log.hpp"
#include "util/signals.hpp"

namespace {

constexpr const char* kDescription =
    "foxhunt-train: trains reinforcement-learning agents (DQN, PPO, IQL, a Decision Transformer)\n"
    "and a supervised baseline to trade a futures\n"
    "contract from bar data, on the GPU (or on the CPU reference backend).\n"
    "A run is described by a TOML profile (docs/profiles.md lists every key); with no\n"
    "subcommand, foxhunt-train trains.";

constexpr const char* kProfilesHelp = R"(Profiles:
  --profile takes a file path or the name of a shipped profile (dqn-smoketest, dqn-full,
  ppo-smoketest, ppo-full, iql-smoketest, iql-full, supervised-smoketest, supervised-full,
  dt-smoketest, dt-full; ".toml" optional), looked up in the
  source tree's and the install prefix's profiles/ folders. Precedence: built-in defaults <
  profile < command line (--set, then --data/--seed/--device/--output). A --set value is TOML:
  numbers as is, strings quoted (a bare word is accepted for string keys), arrays in brackets.)";

/// The top level's help only (a subcommand's --help shows its own options and notes).
constexpr const char* kExamplesHelp = R"(Examples:
  foxhunt-train check dqn-smoketest                       validate, print the resolved profile
  foxhunt-train check dqn-full --set dqn.hidden=[512,512] --set training.learning_rate=3e-4
  foxhunt-train --profile dqn-smoketest                   train (the default subcommand)
  foxhunt-train --profile dqn-full --data es_5m.csv --seed 7 --device cuda:1
  foxhunt-train check my.toml > resolved.toml             the output is itself a profile
  foxhunt-train info                                      devices and embedded kernel modules
  foxhunt-train bench --profile dqn-full --device cuda    throughput figures as JSON
  foxhunt-train eval --checkpoint runs/x/checkpoints/best.safetensors --split test --data other.csv
  foxhunt-train --resume runs/x                           continue an interrupted run
  foxhunt-train --profile dqn-full --set training.learning_rate=3e-4 --seed 2 --auto-name \
      --set run.on_exists=resume --output sweeps/lr        name the run from its overrides; re-running
                                                          skips it when finished, resumes it when not
  foxhunt-train --profile dqn-smoketest --seeds 1,2,3 --output pops
                                                          three agents in one process: pops/dqn-smoketest/<agent>/
  foxhunt-train compare sweeps/lr --group-by-seed         mean +- sd per setting over seeds, best marked
  foxhunt-train report runs/x                             runs/x/report.html (self-contained HTML)
  foxhunt-train audit runs/x                              look-ahead audit of the run's policy (exit 6: found)
  foxhunt-train eval --checkpoint runs/x/checkpoints/best.safetensors --set instrument.commission=5 \
      --output runs/x/eval-commission-5                   equity.csv, trades.csv, eval.json, report.html
  scripts/sweep.sh --profile dqn-full --set training.learning_rate=1e-4,3e-4 --seeds 1,2,3 --output sweeps/lr

Exit codes:
  0    success (also an early-stopped run)
  2    usage or profile error (every problem is listed as file:line:col: message)
  3    data error
  4    device error (no device, no cubin for its architecture, not enough device or host memory)
  5    training diverged (the guard gave up)
  6    audit: a look-ahead found (a feature, statistic or decision changed by a later bar)
  130  interrupted (SIGINT/SIGTERM; checkpoint and summary are written first)
)";

void configure_logging(const fh::cli::GlobalOptions& g) {
    const auto level = g.quiet ? fh::log::Level::warn : g.verbose ? fh::log::Level::debug : fh::log::Level::info;
    const bool json = g.log_format == "json";
    fh::log::configure(level, json ? fh::log::Format::json : fh::log::Format::text);
    fh::signals::set_json_messages(json);
    fh::cuda::set_sync_debug(g.cuda_sync_debug);
}

constexpr const char* kSetHelp =
    "Override one profile key, repeatable; the value is TOML, e.g. --set dqn.hidden=[512,512] --set "
    "run.trainer=ppo. Unknown keys are errors";
constexpr const char* kDataHelp = "Bar data (CSV file or directory); overrides data.path";

/// Options shared by several subcommands, each added to every subcommand that accepts it (bound to
/// the same variables), so that a subcommand's --help lists exactly what it accepts and the parser
/// refuses the rest (exit 2).
struct Shared {
    fh::cli::GlobalOptions& g;
    std::int64_t& seed;

    /// A non-negative integer without CLI11's validator name in the help ("N", not "N:NONNEGATIVE").
    static CLI::Validator non_negative() { return CLI::NonNegativeNumber.description(""); }

    void logging(CLI::App* a) const {
        a->add_flag("-q,--quiet", g.quiet, "Only warnings and errors");
        a->add_flag("-v,--verbose", g.verbose, "Debug output");
        a->add_option("--log-format", g.log_format, "Log line format: text or json (one object per line)")
            ->check(CLI::IsMember({"text", "json"}).description(""))
            ->type_name("text|json")
            ->capture_default_str();
    }
    void profile(CLI::App* a) const {
        a->add_option("-p,--profile", g.profile,
                      "Profile: a TOML file, or the name of a shipped profile (e.g. dqn-smoketest)")
            ->type_name("PATH|NAME");
    }
    void set(CLI::App* a, const std::string& description = kSetHelp) const {
        a->add_option("--set", g.overrides, description)->type_name("SECTION.KEY=VALUE")->allow_extra_args(false);
    }
    void data(CLI::App* a, const std::string& description = kDataHelp) const {
        a->add_option("--data", g.data, description)->type_name("PATH");
    }
    CLI::Option* seed_option(CLI::App* a) const {
        return a->add_option("--seed", seed, "Master seed; overrides run.seed")->type_name("N")->check(non_negative());
    }
    void device(CLI::App* a) const {
        a->add_option("--device", g.device,
                      "Compute device, overrides run.device: auto (GPU if present, else CPU with a warning), cpu, "
                      "cuda, cuda:N")
            ->type_name("DEVICE");
    }
    void output(CLI::App* a,
                const std::string& description = "Root directory of run directories; overrides run.output_dir") const {
        a->add_option("--output", g.output, description)->type_name("DIR");
    }
    void resume(CLI::App* a, const std::string& description) const {
        a->add_option("--resume", g.resume, description)->type_name("RUN_DIR");
    }
    void auto_name(CLI::App* a) const {
        a->add_flag("--auto-name", g.auto_name,
                    "Name the run from its --set/--data overrides and seed (docs/sweeps.md): "
                    "<run.name or trainer>,<section.key>=<value>,...,seed=<N>");
    }
    void population(CLI::App* a, bool record) const {
        a->add_option("--seeds", g.seeds,
                      "Train a population: one agent per seed, in one process, each in its own run directory under "
                      "the population's (docs/sweeps.md \"Population\")")
            ->type_name("N,N,...");
        a->add_option("--population-grid", g.population_grid,
                      "Train a population: one agent per line (\"KEY=VALUE KEY=VALUE\", per-agent scalar keys only; "
                      "crossed with --seeds or run.population's seeds)")
            ->type_name("FILE");
        if (record)
            a->add_option("--population-record", g.population_record,
                          "Train a population with the agents' run directories directly in the output directory (each "
                          "placed by run.on_exists as a single run is) and its population.json written to FILE "
                          "(scripts/sweep.sh)")
                ->type_name("FILE");
    }
    void cuda_sync_debug(CLI::App* a) const {
        a->add_flag("--cuda-sync-debug", g.cuda_sync_debug,
                    "Synchronize after every kernel launch so that a GPU fault names its kernel (slow)");
    }
    void force(CLI::App* a) const {
        a->add_flag("--force", g.force,
                    "Run although the instrument does not fit the prices (a tick over 5% of the price, costs over 10 "
                    "bar ranges); without it such a profile is refused");
    }
    /// --profile, --set, --data, --seed and --device: what a subcommand that resolves a profile
    /// takes first. Returns its --seed.
    CLI::Option* profile_inputs(CLI::App* a, const std::string& set_description = kSetHelp,
                                const std::string& data_description = kDataHelp) const {
        profile(a);
        set(a, set_description);
        data(a, data_description);
        auto* s = seed_option(a);
        device(a);
        return s;
    }
    /// --force, --cuda-sync-debug and the logging options: the last options of most subcommands.
    void last(CLI::App* a) const {
        force(a);
        cuda_sync_debug(a);
        logging(a);
    }
    /// What `foxhunt-train [train]` accepts: the top level's options and the train subcommand's.
    /// Returns its --seed.
    CLI::Option* train(CLI::App* a) const {
        auto* s = profile_inputs(a);
        output(a);
        resume(a,
               "Continue the run in RUN_DIR from its last checkpoint (its config.toml is the profile unless "
               "--profile is given)");
        auto_name(a);
        population(a, true);
        last(a);
        return s;
    }
};

/// A hint for arguments CLI11 did not expect that look like profile overrides in another tool's
/// syntax: Hydra's `section.key=value`, PufferLib's `--section.key value`.
std::string override_hint(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (i > 1 && std::string(argv[i - 1]) == "--set") continue;  // a --set's own value
        const auto eq = a.find('=');
        const auto dot = a.find('.');
        if (a.rfind("--", 0) != 0 && eq != std::string::npos && dot != std::string::npos && dot < eq)
            return fmt::format("\nTo override a profile key, use --set: --set {}", a);
        if (a.rfind("--", 0) == 0 && dot != std::string::npos && (eq == std::string::npos || dot < eq) &&
            a.find('/') == std::string::npos) {
            const std::string key = a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
            const std::string value = eq != std::string::npos ? a.substr(eq + 1) : i + 1 < argc ? argv[i + 1] : "VALUE";
            return fmt::format("\nTo override a profile key, use --set: --set {}={}", key, value);
        }
    }
    return "";
}

/// "--seed is not an option of eval" for the first argument that looks like an option the
/// subcommand `sub` does not have (before or after its name).
std::optional<std::string> unknown_option(const CLI::App& sub, int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a.size() < 2 || a[0] != '-' || (a[1] >= '0' && a[1] <= '9') || a[1] == '.') continue;  // a value
        const std::string name = a.substr(0, a.find('='));
        if (name == "--" || sub.get_option_no_throw(name) != nullptr) continue;
        return fmt::format("{} is not an option of {}", name, sub.get_name());
    }
    return std::nullopt;
}

/// `--log-format json` as given on the command line, read before (or without) CLI11 parsing.
bool wants_json(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--log-format=json" || (a == "--log-format" && i + 1 < argc && std::string(argv[i + 1]) == "json"))
            return true;
    }
    return false;
}

}  // namespace

int main(int argc, char** argv) {
    fh::cli::GlobalOptions g;
    std::int64_t seed = 0;
    std::string check_profile;

    CLI::App app{kDescription, "foxhunt-train"};
    app.set_version_flag("--version", std::string("foxhunt-train ") + FH_VERSION);
    app.require_subcommand(0, 1);

    const Shared shared{g, seed};
    // The top level trains (the default subcommand): its options are train's.
    std::vector<CLI::Option*> seed_options{shared.train(&app)};

    auto* train =
        app.add_subcommand("train", "Train an agent from the profile (the default when no subcommand is given)");
    seed_options.push_back(shared.train(train));
    auto* check =
        app.add_subcommand("check",
                           "Validate a profile and print it resolved (as TOML) with the estimated device memory; "
                           "no GPU needed");
    check->add_option("PROFILE", check_profile, "Profile file or shipped profile name")->type_name("PATH|NAME");
    seed_options.push_back(shared.profile_inputs(check));
    shared.output(check);
    shared.resume(check, "Check the profile of the run in RUN_DIR (its config.toml, unless --profile is given)");
    shared.auto_name(check);
    shared.population(check, false);
    shared.force(check);
    shared.logging(check);
    auto* info = app.add_subcommand("info", "Show the GPU(s), driver and the embedded kernel modules");
    shared.logging(info);
    std::string eval_checkpoint, eval_split = "test";
    auto* eval =
        app.add_subcommand("eval",
                           "Backtest a saved policy (a checkpoint) on the validation or test split of its profile's "
                           "data, or of --data, normalised as in training; prints the metrics as JSON");
    eval->add_option("--checkpoint", eval_checkpoint, "Checkpoint file (run/checkpoints/best.safetensors)")
        ->required()
        ->type_name("FILE");
    eval->add_option("--split", eval_split,
                     "Split to backtest: val, test, all (every bar past the warm-up) or FROM:TO (bars; FROM: to the "
                     "last bar)")
        ->type_name("val|test|all|FROM:TO")
        ->capture_default_str();
    shared.set(eval, "Override one of the keys eval honours (below), repeatable; the value is TOML");
    shared.data(eval, "Backtest these bars (CSV file or directory) instead of the profile's; overrides data.path");
    shared.device(eval);
    shared.output(eval, "Also write eval.json, equity.csv, trades.csv, config.toml and report.html to DIR");
    eval->add_flag("--force", g.force, "With --output: write into an existing non-empty directory");
    shared.cuda_sync_debug(eval);
    shared.logging(eval);
    eval->footer(
        "eval uses the checkpoint's profile. --set honours only the data keys (data.path, format, split "
        "fractions, cache_dir, synthetic market, data.seed), the costs (instrument.commission, slippage_ticks), "
        "instrument.bars_per_year, eval.segments, the eval.bootstrap_* keys, eval.confidence, dqn.her_eval_goal "
        "and run.device. --data PATH backtests other bars (normalised with the checkpoint's statistics); the "
        "profile, its instrument included, is the checkpoint's.");
    fh::cli::CompareOptions compare_options;
    auto* compare = app.add_subcommand(
        "compare",
        "One table of runs from run directories and sweep directories: the settings that differ, seed, "
        "status, best validation metric, test metrics and buy-and-hold; ranked, best marked");
    compare->add_option("PATHS", compare_options.paths, "Run directories and sweep directories (folders of runs)")
        ->required()
        ->type_name("RUN_DIR|SWEEP_DIR ...");
    compare->add_option("--format", compare_options.format, "Output format")
        ->check(CLI::IsMember({"markdown", "csv", "json"}).description(""))
        ->type_name("markdown|csv|json")
        ->capture_default_str();
    compare->add_flag("--group-by-seed", compare_options.group_by_seed,
                      "One row per setting: mean +- sd over seeds, ranked by the mean validation metric");
    shared.logging(compare);
    std::string report_path, report_output;
    auto* report = app.add_subcommand(
        "report",
        "Write a self-contained HTML report (inline SVG, no scripts, nothing from the network) of a run "
        "directory, an eval --output directory, or a sweep directory (a comparison page plus each run's report)");
    report->add_option("PATH", report_path, "Run, eval output or sweep directory")->required()->type_name("DIR");
    report->add_option("-o,--out", report_output, "The HTML file (default: PATH/report.html)")->type_name("FILE");
    shared.logging(report);
    auto* walk_forward = app.add_subcommand(
        "walk-forward",
        "Train the profile's walk_forward.folds folds in time order (each on the bars before its test "
        "block) and stitch their test blocks into one out-of-sample curve with intervals and "
        "buy-and-hold (docs/walk-forward.md)");
    seed_options.push_back(shared.profile_inputs(walk_forward));
    shared.output(walk_forward);
    shared.last(walk_forward);
    auto* bench = app.add_subcommand("bench",
                                     "Measure the profile's throughput and print it as JSON (collection env steps/s, "
                                     "updates/s, end-to-end env steps/s, time to first kernel, peak device memory)");
    seed_options.push_back(shared.profile_inputs(
        bench,
        "Override one profile key, repeatable; the value is TOML (--set run.population=N times N agents together)"));
    bench->add_flag("--kernel-times", g.kernel_times,
                    "Also time every kernel and matrix product of the phases with CUDA events (a diagnostic: the "
                    "phases then run op by op, without CUDA Graphs) and add a per-kernel table to the JSON");
    bench->add_flag("--ablate", g.ablate,
                    "Also time the captured collection step and update again with each op left out in turn (a "
                    "diagnostic, CUDA only: what each op costs inside the graph, overlap included) and add the "
                    "table to the JSON");
    shared.last(bench);
    std::string export_source, export_output;
    auto* exporter = app.add_subcommand(
        "export",
        "Write the policy of a checkpoint (or a run directory's best, else last) as named per-layer tensors "
        "with its normalisation and profile: a small safetensors file (docs/checkpoints.md)");
    exporter->add_option("SOURCE", export_source, "Run directory or checkpoint file")
        ->required()
        ->type_name("RUN_DIR|CHECKPOINT");
    exporter->add_option("-o,--out", export_output, "The safetensors file to write")->required()->type_name("FILE");
    exporter->add_flag("--force", g.force, "Replace an existing FILE");
    shared.logging(exporter);
    fh::cli::AuditCommand audit_command;
    auto* audit = app.add_subcommand(
        "audit",
        "Look-ahead audit: at several cuts, replace every later bar, recompute the features, their normalisation "
        "and the policy's greedy decisions, and report whatever changed at or before the cut (exit 6), naming the "
        "feature and the bar (docs/look-ahead-audit.md)");
    audit
        ->add_option("SOURCE", audit_command.source,
                     "Run directory (its best checkpoint, else its last) or checkpoint file; or give --profile")
        ->type_name("RUN_DIR|CHECKPOINT");
    seed_options.push_back(shared.profile_inputs(
        audit,
        "Override one key, repeatable; the value is TOML. With RUN_DIR only the keys eval honours (the data keys, "
        "e.g. --set data.seed=3)",
        "Audit on these bars (CSV file or directory); overrides data.path"));
    audit->add_option("--cuts", audit_command.cuts, "Random cuts besides the split and contract boundaries")
        ->type_name("N")
        ->check(Shared::non_negative())
        ->capture_default_str();
    audit->add_option("--cut-seed", audit_command.cut_seed, "Seed of the random cuts and of the replacement bars")
        ->type_name("N")
        ->capture_default_str();
    audit->add_option("--json", audit_command.json, "Also write the findings to FILE as JSON")->type_name("FILE");
    shared.last(audit);
    audit->footer(
        std::string(kProfilesHelp) +
        "\n\nWith RUN_DIR the policy is the run's (checkpoints/best.safetensors, else last), normalised with its "
        "checkpoint's statistics; with --profile it is the trainer's initial policy on the profile's data. It "
        "exits with 0 when clean, 6 when a look-ahead is found (2: a usage or profile error, 3: a data "
        "error).\n\nExample: foxhunt-train audit runs/dqn-smoketest --json audit.json");
    // Footers after the subcommands exist (each would inherit the top level's): the examples and
    // exit codes once, at the top; the profile notes with the subcommands that take a profile.
    app.footer(std::string(kProfilesHelp) + "\n\n" + kExamplesHelp);
    for (auto* sub : {train, check, bench}) sub->footer(kProfilesHelp);
    walk_forward->footer(
        std::string(kProfilesHelp) +
        "\n\nExample: foxhunt-train walk-forward --profile dqn-full --data bars.csv --set "
        "walk_forward.folds=5 --set run.total_steps=2000000 --set run.name=wf; then foxhunt-train "
        "report runs/wf. Run it again with the same run.name (run.on_exists = resume) to continue one.");

    try {
        app.parse(argc, argv);
        if (!check_profile.empty()) {
            if (!g.profile.empty() && g.profile != check_profile)
                throw CLI::ValidationError("check", "give the profile once: as PROFILE or --profile");
            g.profile = check_profile;
        }
        for (const auto* o : seed_options)
            if (o->count() > 0) g.seed = seed;
        if (g.quiet && g.verbose) throw CLI::ValidationError("--quiet and --verbose: give one of them");
        // Options given before a subcommand are the top level's (train's): the subcommand must take them too.
        for (CLI::App* sub : app.get_subcommands())
            for (const CLI::Option* o : app.get_options()) {
                if (o->count() == 0) continue;
                const CLI::Option* own = sub->get_option_no_throw(o->get_name());
                if (own == nullptr)
                    throw CLI::ValidationError(
                        fmt::format("{}: {} does not apply (foxhunt-train {} --help lists its options)",
                                    sub->get_name(), o->get_name(), sub->get_name()));
                if (own->count() > 0)  // each level would replace the other's values
                    throw CLI::ValidationError(fmt::format("{}: give {} after the subcommand only, not before it too",
                                                           sub->get_name(), o->get_name()));
            }
    } catch (const CLI::ParseError& e) {
        if (e.get_exit_code() == 0 || dynamic_cast<const CLI::CallForHelp*>(&e) != nullptr ||
            dynamic_cast<const CLI::CallForAllHelp*>(&e) != nullptr ||
            dynamic_cast<const CLI::CallForVersion*>(&e) != nullptr) {
            const int code = app.exit(e);  // --help, --version: printed to stdout
            return code == 0 ? 0 : static_cast<int>(fh::ExitCode::usage);
        }
        std::string message = e.what();
        if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {
            // After a subcommand: name it, and the first option it does not take.
            for (const CLI::App* sub : app.get_subcommands())
                message = fmt::format("{}: {} (foxhunt-train {} --help lists its options)", sub->get_name(),
                                      unknown_option(*sub, argc, argv).value_or(message), sub->get_name());
            message += override_hint(argc, argv);
        }
        message += "\nRun with --help for more information.";
        if (wants_json(argc, argv)) {
            fh::log::configure(fh::log::Level::info, fh::log::Format::json);
            fh::log::error("{}", message);
        } else {
            std::fprintf(stderr, "%s\n", message.c_str());
        }
        return static_cast<int>(fh::ExitCode::usage);
    }

    try {
        configure_logging(g);
        if (info->parsed()) return fh::cli::run_info(g);
        if (check->parsed()) return fh::cli::run_check(g);
        if (bench->parsed()) return fh::cli::run_bench(g);
        if (eval->parsed()) return fh::cli::run_eval(g, eval_checkpoint, eval_split);
        if (compare->parsed()) return fh::cli::run_compare(g, compare_options);
        if (report->parsed()) return fh::cli::run_report(g, report_path, report_output);
        if (exporter->parsed()) return fh::cli::run_export(g, export_source, export_output);
        if (walk_forward->parsed()) return fh::cli::run_walk_forward(g);
        if (audit->parsed()) return fh::cli::run_audit(g, audit_command);
        return fh::cli::run_train(g);
    } catch (const fh::Error& e) {
        fh::log::error("{}", e.what());
        return static_cast<int>(e.code());
    } catch (const std::exception& e) {
        fh::log::error("internal error: {}", e.what());
        return 1;
    }
}
