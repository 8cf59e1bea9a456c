/// @file memory_estimate.cpp
/// @brief The sizes of a run's allocations; see memory_estimate.hpp.
#include "config/memory_estimate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <string>

#include "abi/core_network.h"
#include "math/backtest.h"
#include "util/errors.hpp"

namespace fh::config {
namespace {

constexpr std::uint64_t kF32 = 4;

/// The bars of market data: the known count, else data.synthetic_bars.
std::uint64_t bars_of(const Profile& p, const SizeInputs& in) {
    return in.bars > 0 ? in.bars : static_cast<std::uint64_t>(std::max<std::int64_t>(p.data.synthetic_bars, 0));
}

/// a * b saturating at the largest uint64 (products of profile values cannot wrap).
std::uint64_t mul(std::uint64_t a, std::uint64_t b) {
    if (a != 0 && b > std::numeric_limits<std::uint64_t>::max() / a) return std::numeric_limits<std::uint64_t>::max();
    return a * b;
}
std::uint64_t add(std::uint64_t a, std::uint64_t b) {
    return b > std::numeric_limits<std::uint64_t>::max() - a ? std::numeric_limits<std::uint64_t>::max() : a + b;
}

std::string data_key(const Profile& p) {
    return p.data.path.empty() ? "data.synthetic_bars" : "data.path";
}

}  // namespace

std::vector<MemoryItem> data_device_memory(const Profile& p, const SizeInputs& in) {
    const std::uint64_t bars = bars_of(p, in);
    // The market on the device: open, high, low, close, ATR (doubles), the features (floats) and
    // the splits' episode starts and ends (ints, at most one pair per bar).
    const std::uint64_t per_bar = 5 * 8 + kMarketDim * kF32 + 2 * 4;
    std::vector<MemoryItem> items{
        {fmt::format("market data ({} bars x {} B)", bars, per_bar), mul(bars, per_bar), data_key(p)}};
    // Backtests (validation and test, one at a time): a record per bar of the split.
    const double share = std::max(p.data.val_fraction, p.data.test_fraction);
    const auto split_bars = static_cast<std::uint64_t>(static_cast<double>(bars) * share) + 1;
    items.push_back({fmt::format("backtest records ({} bars x {} B)", split_bars, sizeof(backtest::BarRecord)),
                     mul(split_bars, sizeof(backtest::BarRecord)), "data.val_fraction"});
    if (!in.host_backend)
        items.push_back(
            {"CUDA context, cuBLAS workspaces and the streams' scratch (approximate, fixed)", 600ull << 20, ""});
    if (!in.host_backend && p.gpu.precision == "bf16")  // two regions of BF16 operands per stream
        items.push_back({"BF16 operands of the matrix products (every stream's scratch)",
                         mul(static_cast<std::uint64_t>(abi::kBf16ScratchStreams),
                             2 * static_cast<std::uint64_t>(abi::kBf16RegionElements) * 2),
                         "gpu.precision"});
    return items;
}

std::vector<ArrayExtent> data_arrays(const Profile& p, const SizeInputs& in) {
    if (!in.bars_known) return {};
    const std::uint64_t bars = bars_of(p, in);
    return {{fmt::format("the market features ({} bars x {} floats)", bars, kMarketDim), mul(bars, kMarketDim),
             data_key(p)}};
}

MemoryItem market_host_memory(const Profile& p, const SizeInputs& in) {
    const std::uint64_t bars = bars_of(p, in);
    // The bars (time, OHLCV, ATR) and their features (224 B a bar); as much again for the fxcache
    // image while it is written (CSV data, or a synthetic market with a cache_dir); about 64 B a
    // bar of CSV text while it is parsed.
    const std::uint64_t bar_bytes = 8 + 6 * 8 + kMarketDim * kF32;
    const bool cached = !p.data.path.empty() || !p.data.cache_dir.empty();
    const std::uint64_t per_bar = bar_bytes * (cached ? 2 : 1) + (p.data.path.empty() ? 0 : 64);
    return {fmt::format("market data{} ({} bars x {} B)", cached ? " and its fxcache image" : "", bars, per_bar),
            mul(bars, per_bar), data_key(p)};
}

std::vector<IndexProblem> index_range_problems(const std::vector<ArrayExtent>& arrays) {
    std::vector<IndexProblem> out;
    for (const auto& a : arrays)
        if (a.elements > kMaxArrayElements)
            out.push_back({a.key, fmt::format("{}: {} elements in one array, more than the kernels' int index "
                                              "range ({}); lower {}",
                                              a.what, a.elements, kMaxArrayElements, a.key)});
    return out;
}

std::uint64_t total_bytes(const std::vector<MemoryItem>& items) {
    std::uint64_t t = 0;
    for (const auto& i : items) t = add(t, i.bytes);
    return t;
}

std::string format_bytes(std::uint64_t b) {
    const double x = static_cast<double>(b);
    if (b >= (1ull << 30)) return fmt::format("{:.2f} GiB", x / (1ull << 30));
    if (b >= (1ull << 20)) return fmt::format("{:.1f} MiB", x / (1ull << 20));
    if (b >= (1ull << 10)) return fmt::format("{:.1f} KiB", x / (1ull << 10));
    return fmt::format("{} B", b);
}

void require_memory(const std::vector<MemoryItem>& items, std::uint64_t available, const std::string& what,
                    const std::string& where) {
    const std::uint64_t need = total_bytes(items);
    if (need <= available) return;
    std::string top;
    for (std::size_t i = 0; i < std::min<std::size_t>(3, items.size()); ++i)
        top += fmt::format("\n  {:>10}  {}{}", format_bytes(items[i].bytes), items[i].consumer,
                           items[i].key.empty() ? "" : fmt::format(" (change {})", items[i].key));
    throw DeviceError(
        fmt::format("the run needs about {} of {} but {} is available ({}); the biggest consumers:{}\n"
                    "Lower the sizes named above (`foxhunt-train check PROFILE` prints the whole estimate).",
                    format_bytes(need), what, format_bytes(available), where, top));
}

std::uint64_t available_host_memory() {
    std::uint64_t avail = 0;
    std::ifstream meminfo("/proc/meminfo");
    std::string key, unit;
    for (std::uint64_t kb = 0; meminfo >> key >> kb && std::getline(meminfo, unit);)
        if (key == "MemAvailable:") avail = kb * 1024;
    // cgroup v2: the limit of this process's group, less what it uses already.
    std::string group;
    std::ifstream cgroup("/proc/self/cgroup");
    for (std::string line; std::getline(cgroup, line);)
        if (line.rfind("0::", 0) == 0) group = line.substr(3);
    const std::string base = "/sys/fs/cgroup" + (group == "/" ? std::string() : group);
    std::uint64_t limit = 0, current = 0;
    if (std::ifstream mx(base + "/memory.max"); mx) mx >> limit;  // "max" (no limit) reads as 0
    if (std::ifstream cur(base + "/memory.current"); cur) cur >> current;
    if (limit > 0) {
        const std::uint64_t left = limit > current ? limit - current : 0;
        avail = avail == 0 ? left : std::min(avail, left);
    }
    return avail;
}

}  // namespace fh::config
