/// @file run_checks.hpp
/// @brief The rules of a run that need its data, shared by `check` and `train` (and `bench`), so
///        that both accept and refuse the same runs, and a run is refused before anything is
///        allocated or trained: the splits backtests need, eval.segments, an IQL replay dump's
///        shape and size, the instrument against the prices, the kernels' int index range with
///        the real number of bars, the trainer's own rules that need the data
///        (TrainerKind::check_data) and the host memory. (Profile-only rules are in the profile
///        resolution, src/config/resolve.cpp and config/trainer_profiles.cpp; the device memory
///        needs the device: the pipeline and `check` on a GPU machine compare it.)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/memory_estimate.hpp"
#include "trainers/memory_plan.hpp"
#include "config/profile.hpp"
#include "data/market_data.hpp"

namespace fh::trainers {

struct RunCheckOptions {
    bool force = false;           ///< --force: train although the instrument does not fit the prices
    bool verify_dataset = false;  ///< read an iql.dataset replay dump whole (check); train validates it as it loads it
    bool host_backend = false;    ///< the CPU backend: the "device" memory is host memory too
    bool check_host_memory = true;
    std::uint64_t host_memory = 0;  ///< the host memory available; 0: read it (config::available_host_memory)
};

/// What the checks measured: the inputs of the estimates and both estimates.
struct RunSizes {
    config::SizeInputs inputs;
    std::vector<config::MemoryItem> device, host;
    std::uint64_t host_available = 0;  ///< 0: unknown (not checked)
    std::string dump_key;              ///< the key of the replay dump checked (inputs.dump_rows rows), or ""
    std::string dump_path;             ///< that dump's path (its key's value), or ""
};

/// Before the data is read: the host memory its bars will need, estimated from the size of the
/// CSV file(s) (about 40 bytes a row), so that a file too large for the host is refused before it
/// is read (DeviceError, exit 4). The synthetic market's size is bounded by the schema.
void check_data_size(const config::Profile& profile, const RunCheckOptions& options);

/// Throws UsageError (exit 2: eval.segments, the int index range, an instrument that does not
/// fit without --force), DataError (exit 3: a split without a tradable bar, a bad replay dump)
/// or DeviceError (exit 4: host memory). Logs the instrument warnings.
RunSizes check_run(const config::Profile& profile, const data::MarketData& market, const RunCheckOptions& options);

/// eval.segments against a split's tradable bars (at most half of them: every segment needs a bar
/// to decide at and one to execute in): UsageError (exit 2) naming the key. `check`, `train` and
/// `eval` use it.
void check_segments(const data::MarketData& md, const data::SplitRange& split, const char* name, std::int64_t segments);

/// Whether the validation split has a bar to trade (the test backtest's companion pass,
/// backtest/val_equity.csv, runs only then: data.val_fraction = 0 with run.eval_interval = 0 is a
/// valid run without one).
bool has_validation_backtest(const data::MarketData& md);

/// The instrument against the prices (docs/data.md, "Instruments"): a tick above 5% of the median
/// close or a round trip costing more than 10 median bar ranges is refused without --force; a
/// tenth of either, or a full position worth more than 20 times the initial equity, is a warning.
struct InstrumentFit {
    std::vector<std::string> refusals, warnings;
};
InstrumentFit instrument_fit(const config::Profile& profile, const data::BarSeries& bars);

}  // namespace fh::trainers
