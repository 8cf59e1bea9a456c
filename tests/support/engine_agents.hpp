/// @file engine_agents.hpp
/// @brief A batched engine's agents as the pipeline holds them (one Trainer each), for the tests
///        that advance a population and start a new agent in one of its slots.
#pragma once

#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include "config/profile.hpp"
#include "env/vec_env.hpp"
#include "trainers/trainer.hpp"

namespace fh::test {

template <class Engine>
struct EngineAgents {
    std::shared_ptr<Engine> engine;
    std::vector<std::unique_ptr<trainers::Trainer>> members;

    explicit EngineAgents(std::shared_ptr<Engine> e) : engine(std::move(e)) {
        for (int i = 0; i < engine->agents(); ++i) members.push_back(engine->agent(i));
    }
    trainers::Trainer& operator[](std::size_t i) { return *members[i]; }
    /// `n` rounds as training issues them: every agent's prepare_iteration, then every one's iterate.
    void rounds(int n) {
        for (int k = 0; k < n; ++k) {
            for (auto& m : members) m->prepare_iteration();
            for (auto& m : members) m->iterate();
        }
    }
    /// Slot `slot` starts a new agent of `profile` on `market` as successive halving starts one
    /// (the slot's old Trainer gone first); returns its new Trainer.
    trainers::Trainer& restart(int slot, const config::Profile& profile, const env::DeviceMarket& market) {
        const auto s = static_cast<std::size_t>(slot);
        members[s].reset();
        engine->reset_agent(slot, profile, market);
        members[s] = engine->agent(slot);
        return *members[s];
    }
};

}  // namespace fh::test
