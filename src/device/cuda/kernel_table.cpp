/// @file kernel_table.cpp
#include "device/cuda/kernel_table.hpp"

#include <fmt/format.h>

#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "device/cuda/embedded_modules.hpp"
#include "device/cuda/kernel_timing.hpp"

namespace fh::cuda {

std::span<const KernelSpec> expected_kernels() {
#define FH_KERNEL_SPEC(module, kernel, signature) KernelSpec{#module, #kernel, SignatureLayout<abi::signature>::params},
    static const KernelSpec specs[] = {FH_ALL_KERNELS(FH_KERNEL_SPEC)};
#undef FH_KERNEL_SPEC
    return specs;
}

KernelRegistry::KernelRegistry() {
    const auto modules = embedded_modules();
    libraries_.reserve(modules.size());
    for (const auto& m : modules) libraries_.emplace_back(std::string(m.name), m.fatbin);

#define FH_RESOLVE_KERNEL(module_, kernel_, signature_) \
    table_.kernel_ = Kernel<abi::signature_>(library(#module_).kernel(#kernel_), #kernel_);
    FH_ALL_KERNELS(FH_RESOLVE_KERNEL)
#undef FH_RESOLVE_KERNEL

    // Every kernel in a module should be one the host knows: an unknown one means cuda/abi/
    // is missing a declaration (and the ABI test cannot check it).
    std::map<std::string, unsigned> expected_per_module;
    for (const auto& spec : expected_kernels()) ++expected_per_module[spec.module];
    for (const auto& lib : libraries_) {
        const unsigned have = lib.kernel_count();
        const unsigned want = expected_per_module[lib.name()];
        if (have != want)
            throw CudaError(fmt::format("module {} holds {} kernels but cuda/abi/ declares {}: "
                                        "declare every kernel in cuda/abi/ and rebuild",
                                        lib.name(), have, want),
                            0);
    }
    set_stand_in(this, [fill = table_.fill_f32_kernel](cudaStream_t stream) {
        fill(stream, LaunchDims{dim3(1), dim3(32), 0}, fh::ops::Fill{});
    });
}

KernelRegistry::~KernelRegistry() {
    clear_stand_in(this);
}

std::shared_ptr<const KernelRegistry> KernelRegistry::shared() {
    static std::mutex mutex;
    static std::weak_ptr<const KernelRegistry> current;
    const std::lock_guard lock(mutex);
    if (auto held = current.lock()) return held;
    auto fresh = std::make_shared<const KernelRegistry>();
    current = fresh;
    return fresh;
}

const Library& KernelRegistry::library(const char* module) const {
    for (const auto& lib : libraries_)
        if (lib.name() == module) return lib;
    throw CudaError(fmt::format("module {} is not embedded in this build (cuda/meson.build lists "
                                "the embedded modules)",
                                module),
                    0);
}

}  // namespace fh::cuda
