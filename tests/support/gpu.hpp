/// @file gpu.hpp
/// @brief The GPU fixture of [gpu] tests: one CudaOps for the whole test run.
#pragma once

#include <string>

#include "ops/cpu/cpu_ops.hpp"
#include "ops/cuda/cuda_ops.hpp"

namespace fh::test {

/// True when a CUDA device is present (why says otherwise).
bool gpu_available(std::string* why = nullptr);

/// The shared CUDA backend on device 0 (created on first use).
ops::CudaOps& gpu_ops();

}  // namespace fh::test
