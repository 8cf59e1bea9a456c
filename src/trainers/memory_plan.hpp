/// @file memory_plan.hpp
/// @brief What a trainer allocates, declared once: its memory plan (TrainerKind::plan) lists every
///        device buffer by name, element count and size, grouped into the consumers `check`
///        prints with the profile key that sizes each, and the host copies a run makes. The
///        engine's constructor allocates its buffers from the plan by name (MemoryPlan::alloc),
///        so the estimate cannot drift from the allocation; the parts it owns (networks'
///        workspaces, optimizers, environments) are declared by their own size functions, and
///        tests/trainers/test_memory_estimate.cpp compares every plan with the bytes really held.
///        The estimates `check` and `train` compare with the memory available are the data's
///        sizes (config/memory_estimate.hpp) and the plan.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "config/memory_estimate.hpp"
#include "config/profile.hpp"
#include "device/device.hpp"
#include "nn/mlp.hpp"

namespace fh::trainers {

/// What a plan needs besides the profile: the data's shape (estimated, or the market's).
struct PlanInputs {
    int market_dim = static_cast<int>(config::kMarketDim);
    std::uint64_t bars = 0;                            ///< bars of market data
    std::uint64_t train_samples = 0, val_samples = 0;  ///< supervised: the splits' labelled bars
    std::uint64_t dump_rows = 0;                       ///< an offline trainer's replay dump: its rows
};

class MemoryPlan {
public:
    /// The buffers declared next belong to `label` (as `check` prints it), whose size `key` sets;
    /// `transient`: freed before the engine's constructor returns (they count for the peak).
    void consumer(std::string label, std::string key, bool transient = false);
    /// Declares `copies` buffers `name` of `count` Ts each (`largest`: of the element counts of
    /// several arrays, the largest; 0: one array).
    template <class T>
    void add(std::string name, std::uint64_t count, std::uint64_t copies = 1, std::uint64_t largest = 0) {
        declare(std::move(name), count, sizeof(T), copies, largest > 0 ? largest : count);
    }
    /// Declares `copies` workspaces (or other parts of the engine) of this size.
    void add(std::string name, const nn::WorkspaceSize& size, std::uint64_t copies = 1) {
        add<float>(std::move(name), size.floats, copies, size.largest);
    }
    /// One of the buffers `name`, exactly as declared; std::logic_error when the plan declares no
    /// further buffer of that name and element size.
    template <class T>
    ops::Buffer<T> alloc(ops::Device& ops, std::string_view name) {
        return ops.alloc<T>(take(name, sizeof(T)));
    }
    /// The same, uploaded from `values` (as many as declared).
    template <class T>
    ops::Buffer<T> from_host(ops::Device& ops, std::string_view name, const std::vector<T>& values) {
        if (take(name, sizeof(T)) != values.size()) mismatch(name, values.size());
        return ops.from_host<T>(values);
    }
    /// The same, every element `value`.
    template <class T>
    ops::Buffer<T> filled(ops::Device& ops, std::string_view name, const T& value) {
        return ops.from_host<T>(std::vector<T>(take(name, sizeof(T)), value));
    }
    /// A host copy the run makes (a checkpoint's, a replay dump read): the host estimate lists it.
    void host(std::string label, std::uint64_t bytes, std::string key);

    /// Every buffer's bytes (the peak), those held once the engine is built, or those of the
    /// buffers `name` (all copies).
    std::uint64_t bytes() const;
    std::uint64_t held_bytes() const;
    std::uint64_t bytes(std::string_view name) const;
    /// By consumer, in declaration order.
    std::vector<config::MemoryItem> device_items() const;
    const std::vector<config::MemoryItem>& host_items() const noexcept { return host_; }
    /// Every buffer is one array, indexed with int by the kernels.
    std::vector<config::ArrayExtent> arrays() const;

private:
    struct Entry {
        std::string name;
        std::uint64_t count, element, copies, largest, taken = 0;
        std::size_t consumer;
    };
    void declare(std::string name, std::uint64_t count, std::uint64_t element, std::uint64_t copies,
                 std::uint64_t largest);
    std::size_t take(std::string_view name, std::size_t element);
    [[noreturn]] static void mismatch(std::string_view name, std::size_t values);

    std::vector<Entry> entries_;
    std::vector<config::MemoryItem> consumers_{{"", 0, ""}}, host_;
    std::vector<bool> transient_{false};
};

/// The plan of `agents` agents of `first`'s trainer in one engine (registry.hpp: TrainerKind::plan).
MemoryPlan memory_plan(const config::Profile& first, int agents, const PlanInputs& in);

/// The plan inputs the estimates assume: the bars (data.synthetic_bars when not known), every
/// bar of a split a supervised sample, the replay dump's rows.
PlanInputs estimate_inputs(const config::Profile& profile, const config::SizeInputs& in);

/// Estimated device memory by consumer, largest first: the data's and the plan's of `agents`
/// agents in one engine.
std::vector<config::MemoryItem> estimate_device_memory(const config::Profile& profile, const config::SizeInputs& in,
                                                       int agents = 1);
/// Estimated peak host memory by consumer, largest first (the market data while its features
/// are computed and cached, the plan's host copies; with the CPU backend also the device memory).
std::vector<config::MemoryItem> estimate_host_memory(const config::Profile& profile, const config::SizeInputs& in);
/// One message per array of the data or the plan beyond config::kMaxArrayElements, naming its key.
std::vector<config::IndexProblem> index_range_problems(const config::Profile& profile, const config::SizeInputs& in);

}  // namespace fh::trainers
