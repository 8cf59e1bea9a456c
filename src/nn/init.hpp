/// @file init.hpp
/// @brief Deterministic parameter initialisation from a seed, identical on both backends.
#pragma once

#include <cstdint>
#include <vector>

#include "nn/param_layout.hpp"
#include "device/device.hpp"

namespace fh::nn {

/// The initial parameters of `layout` on the host (layout.total() floats):
///  - zeros slices (biases) and the padding between slices: 0;
///  - uniform_fan_in slices (weights): element k of slice s is (2u - 1) * bound with
///    u = rng::unit_double of Philox draw(seed, Purpose::init, stream = s, counter = k) (words 0
///    and 1), bound = gain * sqrt(3 / fan_in), so |w| <= bound (rounded to float). With the gain
///    of the layer's activation (nn::init_gain) this is Kaiming/He-uniform for ReLU
///    (bound = sqrt(6 / fan_in)), LeCun-uniform for linear layers (sqrt(3 / fan_in)), and
///    5/3 * sqrt(3 / fan_in) for tanh.
/// A pure function of (layout, seed): slices are numbered in the order they were added.
std::vector<float> initial_params(const ParamLayout& layout, std::uint64_t seed);

/// Computes initial_params on the host and uploads it into `params` (layout.total() floats):
/// the same numbers on the CPU and CUDA backends.
void init_params(ops::Device& ops, ops::View<float> params, const ParamLayout& layout, std::uint64_t seed);

/// The init gain for a layer followed by `act`: sqrt(2) for relu, 5/3 for tanh, 1 for none
/// (PyTorch's calculate_gain).
float init_gain(ops::Activation act);

}  // namespace fh::nn
