/// @file device_info.hpp
/// @brief What the GPU is and whether this build can run on it.
#pragma once

#include <cstddef>
#include <string>

namespace fh::cuda {

struct DeviceInfo {
    int ordinal = 0;
    std::string name;
    int cc_major = 0;
    int cc_minor = 0;
    int sm_count = 0;
    std::size_t shared_memory_per_sm = 0;  ///< bytes a multiprocessor holds for its resident blocks
    std::size_t total_memory = 0;          ///< bytes
    std::size_t free_memory = 0;           ///< bytes, at query time
    int driver_version = 0;                ///< e.g. 13000 for CUDA 13.0
    int runtime_version = 0;
    int arch() const noexcept { return cc_major * 10 + cc_minor; }
};

/// Number of usable CUDA devices; 0 with `why` set when there is none (no driver, no GPU).
int device_count(std::string* why = nullptr);

/// Reads the properties of device `ordinal` (does not make it current).
DeviceInfo query_device(int ordinal);

/// Makes `ordinal` the current device after checking that it exists and that an embedded cubin
/// runs on it; throws DeviceError (exit 4) that says which architectures are embedded and how
/// to rebuild otherwise.
DeviceInfo select_device(int ordinal);

/// "13.0" from 13000.
std::string cuda_version_string(int v);

}  // namespace fh::cuda
