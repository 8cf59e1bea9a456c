/// @file abi_check.cpp
#include "device/cuda/abi_check.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <string_view>

#include "device/cuda/embedded_modules.hpp"

namespace fh::cuda {

std::vector<std::size_t> host_param_offsets(std::span<const ParamLayout> params) {
    std::vector<std::size_t> offsets;
    std::size_t at = 0;
    for (const auto& p : params) {
        at = (at + p.align - 1) / p.align * p.align;
        offsets.push_back(at);
        at += p.size;
    }
    return offsets;
}

std::vector<std::string> compare_kernel_abi(const KernelSpec& spec, const CubinKernel& cubin) {
    std::vector<std::string> problems;
    if (cubin.params.size() != spec.params.size()) {
        problems.push_back(fmt::format("{}: the host declares {} parameters, the cubin has {}", spec.name,
                                       spec.params.size(), cubin.params.size()));
        return problems;
    }
    const auto offsets = host_param_offsets(spec.params);
    for (std::size_t i = 0; i < spec.params.size(); ++i) {
        const auto& c = cubin.params[i];
        if (c.ordinal != i || c.size != spec.params[i].size || c.offset != offsets[i])
            problems.push_back(
                fmt::format("{}: parameter {}: host has size {} at offset {}, cubin has size {} at offset {}",
                            spec.name, i, spec.params[i].size, offsets[i], c.size, c.offset));
    }
    return problems;
}

std::vector<std::string> check_embedded_modules() {
    std::vector<std::string> problems;
    const auto archs = configured_archs();
    for (const auto& m : embedded_modules()) {
        std::vector<FatbinEntry> entries;
        try {
            entries = parse_fatbin(m.fatbin);
        } catch (const std::exception& e) {
            problems.push_back(fmt::format("module {}: {}", m.name, e.what()));
            continue;
        }
        std::set<unsigned> seen;
        for (const auto& e : entries) {
            if (e.kind == FatbinEntry::Kind::ptx) {
                problems.push_back(
                    fmt::format("module {}: contains PTX for compute_{} (the driver "
                                "could JIT it; only machine code may be embedded)",
                                m.name, e.arch));
                continue;
            }
            if (e.kind != FatbinEntry::Kind::cubin) {
                problems.push_back(fmt::format("module {}: unknown fatbin entry", m.name));
                continue;
            }
            if (e.compressed) {
                problems.push_back(
                    fmt::format("module {} sm_{}: compressed cubin (build with "
                                "--no-compress)",
                                m.name, e.arch));
                continue;
            }
            seen.insert(e.arch);
            std::vector<CubinKernel> kernels;
            try {
                kernels = parse_cubin_kernels(e.payload);
            } catch (const std::exception& ex) {
                problems.push_back(fmt::format("module {} sm_{}: {}", m.name, e.arch, ex.what()));
                continue;
            }
            std::set<std::string> declared;
            for (const auto& spec : expected_kernels()) {
                if (std::string_view(spec.module) != m.name) continue;
                declared.insert(spec.name);
                const auto it = std::find_if(kernels.begin(), kernels.end(),
                                             [&](const CubinKernel& k) { return k.name == spec.name; });
                if (it == kernels.end()) {
                    problems.push_back(fmt::format("module {} sm_{}: kernel {} is missing", m.name, e.arch, spec.name));
                    continue;
                }
                for (auto& p : compare_kernel_abi(spec, *it))
                    problems.push_back(fmt::format("module {} sm_{}: {}", m.name, e.arch, p));
            }
            for (const auto& k : kernels)
                if (!declared.count(k.name))
                    problems.push_back(
                        fmt::format("module {} sm_{}: kernel {} is not declared in "
                                    "cuda/abi/",
                                    m.name, e.arch, k.name));
        }
        for (unsigned a : archs)
            if (!seen.count(a)) problems.push_back(fmt::format("module {}: no cubin for sm_{}", m.name, a));
        for (unsigned a : seen)
            if (std::find(archs.begin(), archs.end(), a) == archs.end())
                problems.push_back(fmt::format("module {}: unexpected cubin for sm_{}", m.name, a));
    }
    return problems;
}

}  // namespace fh::cuda
