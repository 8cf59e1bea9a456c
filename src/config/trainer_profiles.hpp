/// @file trainer_profiles.hpp
/// @brief What the profile knows of each trainer (run.trainer), in one table keyed by its name: the
///        schema section of its own keys, what it can do that other keys ask for (run.search,
///        early_stopping.metric = "val_loss", replay_buffer.save_dump), and the rules between keys
///        that hold for it alone. Profile resolution (resolve.cpp) reads them from here and never
///        compares run.trainer with a name; the trainer registry (src/trainers/registry.hpp)
///        refers to the same entries (TrainerKind::profile()).
#pragma once

#include <fmt/format.h>

#include <functional>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "config/profile.hpp"

namespace fh::config {

/// A rule over several keys, as profile resolution checks it: `keys` names every key the rule
/// reads; when each of them passed its own type and range check, `check()` runs, and the problem it
/// returns ("" when the rule holds) is reported (exit 2) at the most relevant of them: a
/// command-line value, else the last one set in the file, else the top of the file.
using CrossKeyRule =
    std::function<void(std::initializer_list<std::string> keys, const std::function<std::string()>& check)>;

/// A rule's problem when value `a` of key `a_name` exceeds `b`: "A = a exceeds B = b<why>"; else "".
template <class T>
std::string exceeds(std::string_view a_name, T a, std::string_view b_name, T b, std::string_view why = "") {
    return a > b ? fmt::format("{} = {} exceeds {} = {}{}", a_name, a, b_name, b, why) : std::string();
}

struct TrainerProfile {
    std::string_view name;         ///< run.trainer's value
    std::string_view section;      ///< the schema section of its own keys ([dqn], [ppo], ...)
    bool searches = false;         ///< run.search trains its populations (PBT, successive halving)
    bool validation_loss = false;  ///< it has a validation loss (early_stopping.metric = "val_loss")
    bool replay_memory = false;    ///< it keeps a replay memory (replay_buffer.save_dump writes it)
    /// Checks, through `rule`, the rules between keys that hold for this trainer alone.
    void (*rules)(const Profile& profile, const CrossKeyRule& rule) = nullptr;
};

/// Every trainer, in the order of run.trainer's choices (the order the docs list them).
std::span<const TrainerProfile> trainer_profiles();
/// The entry of run.trainer = `name`, or nullptr for a name that is not a trainer.
const TrainerProfile* find_trainer_profile(std::string_view name);
/// The names of the trainers that have `capability` (&TrainerProfile::searches, ...), in table order.
std::vector<std::string_view> trainers_with(bool TrainerProfile::*capability);

}  // namespace fh::config
