/// @file memory_plan.hpp
/// @brief What a trainer allocates, declared once: its memory plan (TrainerKind::plan) lists every
///        device buffer by name, element count and size, grouped into the consumers `check`
///        prints with the profile key that sizes each, and the host copies a run makes. The
///        engine's own buffers are declared as its members, with their layout over the agents and
///        their starting value, and its constructor allocates them from the plan
///        (MemoryPlan::allocate): the estimate is the allocation, and a slot that starts a new
///        agent sets its slices back to the declared values (MemoryPlan::reset_agent). The parts it owns
///        (networks' workspaces, optimizers, environments) are declared by their own size
///        functions; tests/trainers/test_memory_estimate.cpp compares every plan with the bytes
///        really held. `check`'s and `train`'s estimates are the data's sizes
///        (config/memory_estimate.hpp) and the plan.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <vector>

#include "abi/core_vector.h"
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
    void consumer(std::string label, std::string key, bool transient = false) {
        consumers_.push_back({std::move(label), 0, std::move(key)});
        transient_ = transient;
    }
    /// Declares `copies` buffers of `count` Ts that a part of the engine allocates (`largest`: the
    /// largest array's elements when they are several; 0: one array).
    template <class T>
    void add(std::string name, std::uint64_t count, std::uint64_t copies = 1, std::uint64_t largest = 0) {
        entries_.push_back({std::move(name), count, sizeof(T), copies, largest > 0 ? largest : count,
                            consumers_.size() - 1, transient_});
    }
    void add(std::string name, const nn::WorkspaceSize& size, std::uint64_t copies = 1) {
        add<float>(std::move(name), size.floats, copies, size.largest);
    }
    /// What one engine buffer of a plan of several agents holds per agent: `per` elements of each
    /// agent, laid out [groups][agents][per] (groups 1: agent-major, [agents][per]; e.g. statistics
    /// stat-major, [stats][agents], are `stats` groups of 1).
    struct PerAgent {
        std::uint64_t per;
        std::uint64_t groups = 1;
    };

    /// A plan of an engine of `agents` agents (PerAgent's buffers hold that many slices).
    explicit MemoryPlan(int agents = 1) : agents_(static_cast<std::uint64_t>(agents)) {}

    /// Declares the engine's buffers `members` of `count` Ts each, which allocate() allocates
    /// (with `init`: every element that value); the engine's as a whole (reset_agent leaves them).
    template <class E, class T>
    void add(std::string name, std::initializer_list<ops::Buffer<T> E::*> members, std::uint64_t count,
             std::optional<std::type_identity_t<T>> init = std::nullopt) {
        add_members<E, T>(std::move(name), members, count, std::nullopt, init);
    }
    /// The same for buffers of a slice per agent: with `init`, reset_agent sets an agent's slices
    /// to it again.
    template <class E, class T>
    void add(std::string name, std::initializer_list<ops::Buffer<T> E::*> members, PerAgent extent,
             std::optional<std::type_identity_t<T>> init = std::nullopt) {
        add_members<E, T>(std::move(name), members, extent.groups * agents_ * extent.per, extent, init);
    }
    /// Allocates every buffer declared as a member of `engine`, each set to its starting value.
    template <class E>
    void allocate(ops::Device& ops, E& engine) const {
        check_engine<E>();
        for (const auto& m : members_) m.allocate(&engine, ops);
    }
    /// Agent `agent`'s slices of the PerAgent buffers that have a starting value, set to it again
    /// (a slot that starts a new agent): the engine's starting state as allocate() writes it,
    /// written once, here.
    template <class E>
    void reset_agent(ops::Device& ops, E& engine, int agent) const {
        check_engine<E>();
        if (agent < 0 || static_cast<std::uint64_t>(agent) >= agents_)
            throw std::out_of_range("MemoryPlan::reset_agent: no such agent");
        for (const auto& m : members_)
            if (m.reset) m.reset(&engine, ops, static_cast<std::uint64_t>(agent));
    }
    /// A host copy the run makes (a checkpoint's, a replay dump read): the host estimate lists it.
    void host(std::string label, std::uint64_t bytes, std::string key) { host_.push_back({label, bytes, key}); }

    /// Every buffer's bytes (the peak), or those held once the engine is built.
    std::uint64_t bytes(bool held = false) const;
    /// By consumer, in declaration order.
    std::vector<config::MemoryItem> device_items() const;
    const std::vector<config::MemoryItem>& host_items() const noexcept { return host_; }
    /// Every buffer is one array, indexed with int by the kernels.
    std::vector<config::ArrayExtent> arrays() const;

private:
    struct Entry {
        std::string name;
        std::uint64_t count, element, copies, largest;
        std::size_t consumer;
        bool transient;
    };
    std::vector<Entry> entries_;
    std::vector<config::MemoryItem> consumers_{{"", 0, ""}}, host_;
    bool transient_ = false;
    std::uint64_t agents_;
    struct Member {
        std::function<void(void*, ops::Device&)> allocate;
        std::function<void(void*, ops::Device&, std::uint64_t agent)> reset;  ///< PerAgent with a starting value
    };
    std::vector<Member> members_;
    const std::type_info* engine_ = nullptr;

    template <class T>
    static void fill(ops::Device& ops, ops::View<T> view, T value) {
        if constexpr (std::is_same_v<T, float>)
            ops::run(ops, ops::Fill{view, value});
        else
            ops.upload<T>(view, std::vector<T>(view.size(), value));
    }
    template <class E, class T>
    void add_members(std::string name, std::initializer_list<ops::Buffer<T> E::*> members, std::uint64_t count,
                     std::optional<PerAgent> extent, std::optional<T> init) {
        add<T>(std::move(name), count, members.size());
        for (auto m : members) {
            Member member;
            member.allocate = [m, count, init](void* engine, ops::Device& ops) {
                auto& b = static_cast<E*>(engine)->*m;
                b = ops.alloc<T>(count);
                if (init) fill(ops, b.view(), *init);
            };
            if (extent && init)
                member.reset = [m, e = *extent, agents = agents_, value = *init](void* engine, ops::Device& ops,
                                                                                 std::uint64_t a) {
                    auto& b = static_cast<E*>(engine)->*m;
                    for (std::uint64_t g = 0; g < e.groups; ++g)
                        fill(ops, b.view().subview((g * agents + a) * e.per, e.per), value);
                };
            members_.push_back(std::move(member));
        }
        engine_ = &typeid(E);
    }
    template <class E>
    void check_engine() const {
        if (engine_ != nullptr && *engine_ != typeid(E)) throw std::logic_error("MemoryPlan: another engine's plan");
    }
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
