/// @file init.cpp
/// @brief Parameter initialisation from Philox counters (Purpose::init).
#include "nn/init.hpp"

#include <fmt/format.h>

#include <cmath>
#include <span>

#include "math/rng.h"

namespace fh::nn {

std::vector<float> initial_params(const ParamLayout& layout, std::uint64_t seed) {
    std::vector<float> host(layout.total(), 0.f);
    const auto slices = layout.slices();
    for (std::size_t s = 0; s < slices.size(); ++s) {
        const ParamSlice& slice = slices[s];
        if (slice.init.kind != InitSpec::Kind::uniform_fan_in) continue;
        const double bound = slice.init.bound();
        for (std::size_t k = 0; k < slice.size; ++k) {
            const rng::U32x4 r = rng::draw(seed, rng::Purpose::init, static_cast<std::uint32_t>(s), k);
            const double u = rng::unit_double(r.v[0], r.v[1]);  // [0, 1)
            host[slice.offset + k] = static_cast<float>((2.0 * u - 1.0) * bound);
        }
    }
    return host;
}

void init_params(ops::Device& ops, ops::View<float> params, const ParamLayout& layout, std::uint64_t seed) {
    if (params.size() != layout.total())
        throw std::invalid_argument(
            fmt::format("nn::init_params: the buffer has {} floats, the layout {}", params.size(), layout.total()));
    const std::vector<float> host = initial_params(layout, seed);
    ops.upload(params, std::span<const float>(host));
}

float init_gain(ops::Activation act) {
    switch (act) {
        case ops::Activation::relu:
            return std::sqrt(2.f);
        case ops::Activation::tanh:
            return 5.f / 3.f;
        default:
            return 1.f;
    }
}

}  // namespace fh::nn
