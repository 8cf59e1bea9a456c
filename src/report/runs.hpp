/// @file runs.hpp
/// @brief Reading finished (or unfinished) run directories back: their settings (config.toml),
///        results (summary.json), and the comparison table of `foxhunt-train compare` and of the
///        sweep report: one row per run, or one per setting with mean and sd over seeds.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "io/json.hpp"

namespace fh::report {

/// One run directory as read back.
struct RunRecord {
    std::string path;                             ///< as found (sweep dir / name)
    std::string name;                             ///< the directory's name
    std::map<std::string, std::string> settings;  ///< "section.key" -> value text, every key of config.toml
    std::int64_t seed = 0;
    std::string status;              ///< summary.json's, or "no summary" / "unreadable summary"
    std::string metric;              ///< early_stopping.metric, e.g. "val_sharpe"
    std::optional<double> best_val;  ///< summary.best.value
    std::optional<double> test_return, test_sharpe, test_max_drawdown, test_trades;
    std::optional<double> hold_return, hold_sharpe;  ///< buy-and-hold on the test split
    std::string profile_hash;        ///< XXH64 of the resolved profile but placement keys and the seed ("" unresolved)
    std::string data_hash;           ///< summary.json's data.xxh64 ("" when absent)
    bool data_follows_seed = false;  ///< synthetic market drawn from run.seed (data.seed = -1)
    std::optional<double> test_sharpe_lo, test_sharpe_hi, test_psr;  ///< test.inference (docs/metrics.md)
    io::json::Value summary;                                         ///< null when missing or unreadable
    /// A successive-halving agent (summary.json's "search"): the last rung it reached and its metric there.
    std::optional<double> rung, rung_metric;
};

/// A run left out of a table because it is the same run as another: the same resolved profile
/// (placement keys aside: name, output directory, device, run.on_exists), seed and data hash.
struct Duplicate {
    std::string path;     ///< the run left out
    std::string same_as;  ///< the run counted
};

/// Removes from `runs` every run that is the same as an earlier one (RunRecord::profile_hash,
/// seed and data_hash all equal; a run whose config.toml does not resolve is never a
/// duplicate) and returns them, in order.
std::vector<Duplicate> drop_duplicates(std::vector<RunRecord>& runs);

/// One line for people: "A is the same run as B (same resolved profile, seed and data): counted
/// once." ("A is given twice: counted once." when both are the same path).
std::string duplicate_sentence(const Duplicate& d);

/// Whether the spread over seeds holds the variance of the market as well as that of the
/// training: "data" (the runs' data hashes differ between seeds: each seed drew its own
/// synthetic market, data.seed following run.seed), "fixed" (every run of a setting saw the
/// same bars: data from files or a fixed data.seed), "mixed" (both kinds of setting), or ""
/// (no setting with two finished seeds). `sentence` gives it as one line for people.
std::string seed_spread(const std::vector<RunRecord>& runs, const std::vector<std::string>& keys);
std::string seed_spread_sentence(const std::string& spread);

/// A run directory holds config.toml (every run writes it first).
bool is_run_directory(const std::string& path);

/// Reads a run directory. Never throws for a bad summary.json (the status says so); throws
/// UsageError when `path` is not a run directory.
RunRecord read_run(const std::string& path);

/// The runs of each path: a run directory itself, or every run directory directly inside a
/// sweep directory (sorted by name). Throws UsageError (exit 2) for a path that is neither, or
/// a sweep directory without runs.
std::vector<RunRecord> collect_runs(const std::vector<std::string>& paths);

/// The keys whose values differ between the runs ("section.key", schema order), leaving out
/// where and how runs are stored and the seed (config::is_placement_key).
std::vector<std::string> differing_keys(const std::vector<RunRecord>& runs);

/// A table cell: text, or a number (null when absent), optionally with its sd.
struct Cell {
    std::string text{};
    std::optional<double> number{};
    std::optional<double> sd{};  ///< grouped tables: the sample sd over seeds (n >= 2)
    bool is_number = false;
    bool is_integer = false;  ///< written without decimals
};

/// One comparison table; `best_row` is marked (-1: none).
struct Table {
    std::vector<std::string> columns{};
    std::vector<std::vector<Cell>> rows{};
    std::vector<std::vector<std::string>> row_runs{};  ///< the run paths behind each row (links)
    int best_row = -1;
    std::string metric{};  ///< the validation metric the rows are ranked by
    bool grouped = false;
    std::vector<Duplicate> duplicates{};  ///< runs given twice, counted once (drop_duplicates)
    std::string seed_spread{};            ///< seed_spread() of the runs counted
};

/// One row per run, ranked by the best validation metric (descending; runs without one last); the
/// agents of a successive-halving search (RunRecord::rung) by the last rung reached, then the metric
/// there, with columns "rung" and "rung_metric".
/// Both tables count a run given twice once (drop_duplicates; Table::duplicates names them).
Table run_table(const std::vector<RunRecord>& runs);
/// One row per setting (the differing keys without the seed): runs, seeds, mean and sd over
/// seeds of the validation metric, test metrics and buy-and-hold, ranked by the mean validation
/// metric; unfinished runs are counted but not averaged.
Table seed_table(const std::vector<RunRecord>& runs);

/// The table as markdown (`mean ± sd`, best marked with `*`; a line per duplicate and one on
/// the seed spread below it), CSV (RFC 4180; `_mean`/`_sd` columns; nothing but the table) or
/// JSON (one object per row; "duplicates" and "seed_spread" members).
std::string to_markdown(const Table& t);
std::string to_csv(const Table& t);
std::string to_json(const Table& t);

/// A cell's text as shown in markdown and HTML ("0.1234", "0.1234 ± 0.0456", "-"), numbers
/// with `decimals` decimals.
std::string cell_text(const Cell& c, int decimals = 4);

/// Reads a whole (small) file; throws UsageError naming it when unreadable.
std::string read_text(const std::string& path, std::size_t max_bytes = 256u << 20);

/// A CSV file with a header line: the header's column names and the rows' fields (no quoting:
/// the run's CSVs have none).
struct Csv {
    std::vector<std::string> header;
    std::vector<std::vector<std::string>> rows;
    int column(const std::string& name) const;  ///< index or -1
};
Csv read_csv(const std::string& path);

/// Every line of a JSONL file that is a JSON object (lines that do not parse are skipped; lines
/// that parse to something else are skipped with a warning naming the file and line).
std::vector<io::json::Value> read_jsonl(const std::string& path);

/// Whether `p` is a regular file (false for anything unreadable).
bool is_file(const std::filesystem::path& p);

/// A JSON file of at most `max_bytes`, parsed with at most `limit` bytes (read_text's errors,
/// io::json::ParseError).
io::json::Value read_json(const std::string& path, std::size_t limit, std::size_t max_bytes = 256u << 20);

/// The member at a dotted path of a JSON value ("test.strategy.sharpe"), or nullptr.
const io::json::Value* member_at(const io::json::Value& v, const std::string& dotted);
/// The member at a dotted path as a finite number, when present.
std::optional<double> number_at(const io::json::Value& v, const std::string& dotted);
/// The member at a dotted path as a string; `otherwise` when absent or not a string.
std::string string_at(const io::json::Value& v, const std::string& dotted, const std::string& otherwise = "");

/// The mean of `xs`, and with two or more values their sample variance and sd.
struct Stat {
    std::optional<double> mean, var, sd;
};
Stat stat(const std::vector<double>& xs);

}  // namespace fh::report
