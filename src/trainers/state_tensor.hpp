/// @file state_tensor.hpp
/// @brief StateTensor: a named piece of a trainer's state in a device's memory, as raw bytes: what
///        a checkpoint stores and a resume restores (src/trainers/checkpoint.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "abi/view.h"

namespace fh::trainers {

/// A named piece of a trainer's state in the backend's memory, as raw bytes (checkpoints).
struct StateTensor {
    std::string name;   ///< e.g. "params/online"
    std::string dtype;  ///< safetensors dtype: F32, I32, U8, U64
    std::vector<std::int64_t> shape;
    ops::View<std::byte> bytes;
};

/// Whether a state tensor is part of a trainer's replay memory: the ring's transitions
/// ("replay/...") and, with dqn.her, their goals ("her/goals"). checkpoint.keep_replay = false
/// leaves these out of checkpoints (docs/checkpoints.md).
inline bool replay_memory(std::string_view name) noexcept {
    return name.starts_with("replay/") || name == "her/goals";
}

/// A StateTensor over a typed view.
template <class T>
StateTensor state_tensor(std::string name, std::string dtype, std::vector<std::int64_t> shape, ops::View<T> v) {
    return StateTensor{std::move(name), std::move(dtype), std::move(shape),
                       ops::View<std::byte>(reinterpret_cast<std::byte*>(v.data()), v.size() * sizeof(T))};
}

}  // namespace fh::trainers
