/// @file gpu.hpp
/// @brief The GPU fixture of [gpu] tests: one CudaDevice for the whole test run.
#pragma once

#include <string>

#include "device/cpu_device.hpp"
#include "device/cuda_device.hpp"

namespace fh::test {

/// True when a CUDA device is present (why says otherwise).
bool gpu_available(std::string* why = nullptr);

/// The shared CUDA backend on device 0 (created on first use).
ops::CudaDevice& gpu_ops();

}  // namespace fh::test
