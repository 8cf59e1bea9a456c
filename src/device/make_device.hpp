/// @file backend.hpp
/// @brief Choosing the backend from `--device auto|cpu|cuda|cuda:N`.
#pragma once

#include <memory>
#include <string>

#include "device/device.hpp"

namespace fh::ops {

struct DeviceSpec {
    enum class Kind { automatic, cpu, cuda } kind = Kind::automatic;
    int ordinal = 0;  ///< for cuda
};

/// Parses "auto", "cpu", "cuda" or "cuda:N"; throws UsageError otherwise.
DeviceSpec parse_device_spec(const std::string& text);

/// Creates the backend. `auto` takes the GPU when one is present and otherwise warns loudly and
/// uses the CPU; an explicit `cuda` without a usable GPU is a DeviceError (exit 4).
/// `side_lanes` (CUDA): the streams run_concurrently may fork to, -1 = all
/// (CudaDevice::kSideLanes); a population's agents take fewer (CudaDevice::kAgentSideLanes).
std::unique_ptr<Device> make_device(const DeviceSpec& spec, int side_lanes = -1);

}  // namespace fh::ops
