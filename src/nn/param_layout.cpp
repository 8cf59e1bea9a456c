/// @file param_layout.cpp
/// @brief ParamLayout: slice bookkeeping and the zeroed allocation of parameter-shaped buffers.
#include "nn/param_layout.hpp"
#include "abi/core_vector.h"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

namespace fh::nn {

double InitSpec::bound() const {
    if (kind == Kind::zeros) return 0.0;
    return static_cast<double>(gain) * std::sqrt(3.0 / static_cast<double>(fan_in));
}

std::size_t ParamLayout::add(std::string name, std::size_t size, InitSpec init) {
    if (name.empty()) throw std::invalid_argument("nn::ParamLayout::add: a slice needs a name");
    if (size == 0) throw std::invalid_argument(fmt::format("nn::ParamLayout::add: slice '{}' is empty", name));
    for (const auto& s : slices_)
        if (s.name == name)
            throw std::invalid_argument(fmt::format("nn::ParamLayout::add: slice '{}' already exists", name));
    if (init.kind == InitSpec::Kind::uniform_fan_in && (init.fan_in < 1 || !(init.gain >= 0.f)))
        throw std::invalid_argument(
            fmt::format("nn::ParamLayout::add: slice '{}': uniform_fan_in needs fan_in >= 1 and gain >= 0", name));
    const std::size_t offset = (total_ + kAlignment - 1) / kAlignment * kAlignment;
    slices_.push_back(ParamSlice{std::move(name), offset, size, init});
    total_ = offset + size;
    return slices_.size() - 1;
}

const ParamSlice& ParamLayout::slice(std::size_t index) const {
    if (index >= slices_.size())
        throw std::out_of_range(fmt::format("nn::ParamLayout: slice index {} of {}", index, slices_.size()));
    return slices_[index];
}

const ParamSlice& ParamLayout::find(std::string_view name) const {
    std::string known;
    for (const auto& s : slices_) {
        if (s.name == name) return s;
        known += (known.empty() ? "" : ", ") + s.name;
    }
    throw std::out_of_range(fmt::format("nn::ParamLayout: no slice '{}' (known: {})", name, known));
}

void ParamLayout::check_buffer(std::size_t size) const {
    if (size != total_)
        throw std::invalid_argument(
            fmt::format("nn::ParamLayout: buffer has {} floats but the layout has {} (allocate it with "
                        "nn::alloc_zeroed after every slice is added)",
                        size, total_));
}

ops::Buffer<float> alloc_zeroed(ops::Device& ops, const ParamLayout& layout) {
    ops::Buffer<float> b = ops.alloc<float>(layout.total());
    ops::run(ops, ops::Fill{b.view(), 0.f});
    return b;
}

}  // namespace fh::nn
