/// @file memory_plan.cpp
/// @brief MemoryPlan and the estimates made of it; see memory_plan.hpp.
#include "trainers/memory_plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "trainers/registry.hpp"

namespace fh::trainers {

std::uint64_t MemoryPlan::bytes(bool held) const {
    std::uint64_t total = 0;
    for (const Entry& e : entries_) total += held && e.transient ? 0 : e.count * e.element * e.copies;
    return total;
}

std::vector<config::MemoryItem> MemoryPlan::device_items() const {
    std::vector<config::MemoryItem> items = consumers_;
    for (const Entry& e : entries_) items[e.consumer].bytes += e.count * e.element * e.copies;
    std::erase_if(items, [](const config::MemoryItem& i) { return i.bytes == 0; });
    return items;
}

std::vector<config::ArrayExtent> MemoryPlan::arrays() const {
    std::vector<config::ArrayExtent> out;
    for (const Entry& e : entries_)
        out.push_back({fmt::format("{}: {} ({} x {} B)", consumers_[e.consumer].consumer, e.name, e.largest, e.element),
                       e.largest, consumers_[e.consumer].key});
    return out;
}

MemoryPlan memory_plan(const config::Profile& first, int agents, const PlanInputs& in) {
    return trainer_kind(first.run.trainer).plan(first, agents, in);
}

PlanInputs estimate_inputs(const config::Profile& p, const config::SizeInputs& in) {
    PlanInputs out;
    out.bars = in.bars > 0 ? in.bars : static_cast<std::uint64_t>(std::max<std::int64_t>(0, p.data.synthetic_bars));
    // A supervised sample per bar of a split at most.
    out.train_samples = out.bars;
    out.val_samples = static_cast<std::uint64_t>(static_cast<double>(out.bars) * p.data.val_fraction) + 1;
    out.dump_rows = std::max<std::uint64_t>(1, in.dump_rows);
    return out;
}

static void by_size(std::vector<config::MemoryItem>& items) {
    std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) { return a.bytes > b.bytes; });
}

std::vector<config::MemoryItem> estimate_device_memory(const config::Profile& p, const config::SizeInputs& in,
                                                       int agents) {
    auto items = config::data_device_memory(p, in);
    for (auto& i : memory_plan(p, agents, estimate_inputs(p, in)).device_items()) items.push_back(std::move(i));
    by_size(items);
    return items;
}

std::vector<config::MemoryItem> estimate_host_memory(const config::Profile& p, const config::SizeInputs& in) {
    std::vector<config::MemoryItem> items{config::market_host_memory(p, in)};
    const auto host = memory_plan(p, 1, estimate_inputs(p, in)).host_items();  // not held at once: the largest
    if (!host.empty())
        items.push_back(*std::max_element(host.begin(), host.end(),
                                          [](const auto& a, const auto& b) { return a.bytes < b.bytes; }));
    if (in.host_backend)
        for (auto item : estimate_device_memory(p, in)) {
            item.consumer += " (CPU backend)";
            items.push_back(item);
        }
    by_size(items);
    return items;
}

std::vector<config::IndexProblem> index_range_problems(const config::Profile& p, const config::SizeInputs& in) {
    auto arrays = config::data_arrays(p, in);
    for (auto& a : memory_plan(p, 1, estimate_inputs(p, in)).arrays()) arrays.push_back(std::move(a));
    return config::index_range_problems(arrays);
}

}  // namespace fh::trainers
