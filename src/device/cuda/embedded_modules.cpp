/// @file embedded_modules.cpp
/// @brief The module table, generated from build/cuda/embedded_module_list.inc.
#include "device/cuda/embedded_modules.hpp"

#include <string>

#include "build_config.hpp"

#define FH_EMBEDDED_MODULE(name)                           \
    extern "C" const std::byte fh_fatbin_##name##_begin[]; \
    extern "C" const std::byte fh_fatbin_##name##_end[];
#include "cuda/embedded_module_list.inc"
#undef FH_EMBEDDED_MODULE

namespace fh::cuda {
namespace {
// g++ warns about comparing addresses of distinct arrays; the symbols are adjacent by design.
std::span<const std::byte> between(const std::byte* begin, const std::byte* end) {
    return {begin,
            static_cast<std::size_t>(reinterpret_cast<std::uintptr_t>(end) - reinterpret_cast<std::uintptr_t>(begin))};
}
}  // namespace

std::span<const EmbeddedModule> embedded_modules() {
#define FH_EMBEDDED_MODULE(name) EmbeddedModule{#name, between(fh_fatbin_##name##_begin, fh_fatbin_##name##_end)},
    static const EmbeddedModule modules[] = {
#include "cuda/embedded_module_list.inc"
    };
#undef FH_EMBEDDED_MODULE
    return modules;
}

std::vector<unsigned> configured_archs() {
    std::vector<unsigned> archs;
    const std::string s = FH_GPU_ARCHS;
    std::size_t pos = 0;
    while (pos < s.size()) {
        std::size_t comma = s.find(',', pos);
        if (comma == std::string::npos) comma = s.size();
        archs.push_back(static_cast<unsigned>(std::stoul(s.substr(pos, comma - pos))));
        pos = comma + 1;
    }
    return archs;
}

unsigned cubin_arch_for(int major, int minor, std::span<const unsigned> archs) {
    unsigned best = 0;
    for (unsigned a : archs) {
        const int amaj = static_cast<int>(a / 10), amin = static_cast<int>(a % 10);
        if (amaj == major && amin <= minor && a > best) best = a;
    }
    return best;
}

}  // namespace fh::cuda
