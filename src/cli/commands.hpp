/// @file commands.hpp
/// @brief The subcommands' entry points; main.cpp only wires the command line to them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/profile.hpp"

namespace fh::cli {

/// The options of every subcommand. A subcommand's parser (main.cpp) refuses the options it does not
/// take (exit 2), so each run_* checks only combinations of those it takes.
struct GlobalOptions {
    std::string profile;                 ///< --profile PATH|NAME
    std::vector<std::string> overrides;  ///< --set section.key=value, in order
    std::string data;                    ///< --data PATH (overrides data.path); "" = not given
    std::optional<std::int64_t> seed;    ///< --seed N (overrides run.seed)
    std::string device;                  ///< --device (overrides run.device); "" = not given
    std::string output;                  ///< --output DIR (overrides run.output_dir)
    std::string resume;                  ///< --resume RUN_DIR
    bool auto_name = false;              ///< --auto-name: run.name from the overrides and seed
    bool quiet = false;
    bool verbose = false;
    std::string log_format = "text";  ///< text | json
    bool cuda_sync_debug = false;
    bool kernel_times = false;    ///< bench --kernel-times
    bool ablate = false;          ///< bench --ablate
    bool force = false;           ///< --force: train although the instrument does not fit the prices
    std::string seeds;            ///< --seeds N,N,...: a population with exactly these seeds ("" = not given)
    std::string population_grid;  ///< --population-grid FILE: one agent (or one per seed) per line
    std::string
        population_record;  ///< --population-record FILE: agents directly in the output dir, population.json there
};

/// --seeds and --population-grid as a population request (run/population.hpp); throws UsageError
/// (exit 2) for a malformed --seeds. Defined in train.cpp.
std::vector<std::int64_t> parse_seeds(const std::string& text);

/// The overrides in precedence order: --set values, then the dedicated options (--data,
/// --seed, --device, --output), which win over a --set of the same key.
std::vector<std::string> all_overrides(const GlobalOptions& options);

/// Prints `line` (a path, a JSON object) as the last line of stdout, flushed; returns 0.
int print_result(const std::string& line);

/// The profile the options name, resolved (defaults < profile < command line). With --resume
/// and no --profile, the run directory's config.toml. Throws UsageError (exit 2).
config::Profile resolve_from_options(const GlobalOptions& options, std::string* path = nullptr);

/// `foxhunt-train [train]`: with run.population > 1, --seeds or --population-grid, trains a
/// population (run/population.hpp; --resume of a directory with population.json resumes it).
/// Otherwise resolves and validates the profile, names the run (--auto-name),
/// applies run.on_exists, then trains (or skips or resumes). The run directory's path is the last
/// line of stdout when it exits 0.
int run_train(const GlobalOptions& options);

/// `foxhunt-train check PROFILE`: validates, prints the resolved profile as TOML and the
/// estimated device memory (as TOML comments, so the output feeds back as a profile).
int run_check(const GlobalOptions& options);

/// `foxhunt-train bench --profile P`: throughput figures as one JSON object on stdout.
int run_bench(const GlobalOptions& options);

/// `foxhunt-train eval --checkpoint FILE [--split val|test|all|FROM:TO] [--data PATH] [--output DIR
/// [--force]]`: backtest report as JSON; with --output (new or empty, unless --force), DIR also
/// gets eval.json, equity.csv, trades.csv, config.toml and report.html. Refuses --profile,
/// --resume, --seed and --set keys it does not honour (exit 2).
int run_eval(const GlobalOptions& options, const std::string& checkpoint, const std::string& split);

struct CompareOptions {
    std::vector<std::string> paths;   ///< run directories and sweep directories
    std::string format = "markdown";  ///< markdown | csv | json
    bool group_by_seed = false;
};
/// `foxhunt-train compare PATH...`: one table of runs (or of settings, --group-by-seed) on stdout.
int run_compare(const GlobalOptions& options, const CompareOptions& compare);

/// `foxhunt-train report PATH [-o FILE]`: a self-contained HTML report of a run, an eval output
/// directory or a sweep; the file's path is the last line of stdout.
int run_report(const GlobalOptions& options, const std::string& path, const std::string& output);

/// `foxhunt-train info`: the devices, and the embedded kernel modules with their architectures.
int run_info(const GlobalOptions& options);

/// `export SOURCE -o FILE`: the policy of a checkpoint or run directory as named tensors
/// (run::export_policy).
int run_export(const GlobalOptions& options, const std::string& source, const std::string& output);
struct AuditCommand {
    std::string source;          ///< RUN_DIR or CHECKPOINT ("" with --profile)
    int cuts = 5;                ///< --cuts: random cuts
    std::uint64_t cut_seed = 1;  ///< --cut-seed
    std::string json;            ///< --json FILE ("" = none)
};
/// `audit RUN_DIR|CHECKPOINT` or `audit --profile P`: the look-ahead audit (docs/look-ahead-audit.md);
/// returns 0 when clean, ExitCode::lookahead (6) when not.
int run_audit(const GlobalOptions& options, const AuditCommand& audit);

/// `walk-forward`: the profile's walk_forward.folds folds trained in time order and stitched
/// (docs/walk-forward.md).
int run_walk_forward(const GlobalOptions& options);

}  // namespace fh::cli
