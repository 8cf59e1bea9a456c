/// @file abi_check.hpp
/// @brief Compares what the host declares for a kernel (cuda/abi/) with what nvcc recorded in
///        the cubin, parameter by parameter. Needs no GPU.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "device/cuda/fatbin.hpp"
#include "device/cuda/kernel_table.hpp"

namespace fh::cuda {

/// Byte offsets of each parameter in the launch parameter buffer (each aligned to its type).
std::vector<std::size_t> host_param_offsets(std::span<const ParamLayout> params);

/// Differences between the host's declaration and the cubin's record; empty when they agree.
std::vector<std::string> compare_kernel_abi(const KernelSpec& spec, const CubinKernel& cubin);

/// Checks every embedded module: each configured architecture present as uncompressed
/// machine code, no PTX, every expected kernel present with the host's parameter layout, and
/// no kernel the host does not declare. Returns one message per problem.
std::vector<std::string> check_embedded_modules();

}  // namespace fh::cuda
