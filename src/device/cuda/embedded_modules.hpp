/// @file embedded_modules.hpp
/// @brief The kernel modules embedded in this executable at build time (cuda/meson.build), and
///        the architectures they were built for. Needs no GPU.
#pragma once

#include <cstddef>
#include <span>
#include <string_view>
#include <vector>

namespace fh::cuda {

struct EmbeddedModule {
    std::string_view name;              ///< cuda/<name>.cu
    std::span<const std::byte> fatbin;  ///< one cubin per architecture, no PTX
};

std::span<const EmbeddedModule> embedded_modules();

/// The -Dgpu_archs list of this build, e.g. {80, 86, 90}.
std::vector<unsigned> configured_archs();

/// The embedded architecture whose cubin runs on a device of compute capability major.minor
/// (same major, highest minor not above the device's), or 0 when none does.
unsigned cubin_arch_for(int major, int minor, std::span<const unsigned> archs);

}  // namespace fh::cuda
