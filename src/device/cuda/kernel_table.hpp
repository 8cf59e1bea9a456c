/// @file kernel_table.hpp
/// @brief Every kernel the host launches, as typed handles generated from all_kernels.h (cuda/meson.build),
///        and the loaded modules they come from. Loading resolves every kernel at once so that a
///        missing or mismatched kernel fails at start-up, not mid-run.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "device/cuda/kernel.hpp"
// generated: build/cuda/all_kernels.h. The op headers' host parts (ops/op.hpp) then leave out
// device/cuda_device.hpp, which needs this table.
#define FH_INCLUDING_KERNEL_LISTS
#include "all_kernels.h"
#undef FH_INCLUDING_KERNEL_LISTS

namespace fh::cuda {

/// One expected kernel: its module, symbol and the host's parameter layout.
struct KernelSpec {
    const char* module;
    const char* name;
    std::span<const ParamLayout> params;
};

/// The list of every kernel the host expects (generated from FH_ALL_KERNELS).
std::span<const KernelSpec> expected_kernels();

struct KernelTable {
#define FH_DECLARE_KERNEL_HANDLE(module, kernel, signature) Kernel<abi::signature> kernel;
    FH_ALL_KERNELS(FH_DECLARE_KERNEL_HANDLE)
#undef FH_DECLARE_KERNEL_HANDLE
};

/// Loads every embedded module and resolves every expected kernel. The modules are libraries
/// (cudaLibrary_t), which belong to no context or device: one registry serves every device of the
/// process (shared()).
class KernelRegistry {
public:
    /// Also sets the ablation filter's stand-in (`fill_f32_kernel` over no element: a kernel that
    /// does nothing), which the destructor clears.
    KernelRegistry();
    ~KernelRegistry();
    KernelRegistry(const KernelRegistry&) = delete;
    KernelRegistry& operator=(const KernelRegistry&) = delete;
    /// The registry the process's devices share: loaded by the first device that asks while no
    /// other holds it (a population's agents load it once, not once each), unloaded with the
    /// last holder.
    static std::shared_ptr<const KernelRegistry> shared();
    const KernelTable& kernels() const noexcept { return table_; }
    std::span<const Library> libraries() const noexcept { return libraries_; }

private:
    const Library& library(const char* module) const;
    std::vector<Library> libraries_;
    KernelTable table_;
};

}  // namespace fh::cuda
