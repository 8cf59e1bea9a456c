/// @file kernel_table.hpp
/// @brief Every kernel the host launches, as typed handles generated from all_kernels.h (cuda/meson.build),
///        and the loaded modules they come from. Loading resolves every kernel at once so that a
///        missing or mismatched kernel fails at start-up, not mid-run.
#pragma once

#include <span>
#include <vector>

#include "all_kernels.h"  // generated: build/cuda/all_kernels.h
#include "cuda/kernel.hpp"

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

/// Loads every embedded module on the current device and resolves every expected kernel.
class KernelRegistry {
public:
    KernelRegistry();
    const KernelTable& kernels() const noexcept { return table_; }
    std::span<const Library> libraries() const noexcept { return libraries_; }

private:
    const Library& library(const char* module) const;
    std::vector<Library> libraries_;
    KernelTable table_;
};

}  // namespace fh::cuda
