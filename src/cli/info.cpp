/// @file info.cpp
/// @brief `foxhunt-train info`.
#include <fmt/format.h>

#include <cstdio>
#include <string>

#include "build_config.hpp"
#include "cli/commands.hpp"
#include "device/cuda/device_info.hpp"
#include "device/cuda/embedded_modules.hpp"
#include "device/cuda/fatbin.hpp"
#include "device/cuda_device.hpp"

namespace fh::cli {
namespace {

std::string gib(std::size_t bytes) {
    return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
}

std::string arch_list(const std::vector<unsigned>& archs) {
    std::string s;
    for (unsigned a : archs) s += fmt::format("{}sm_{}", s.empty() ? "" : " ", a);
    return s;
}

void print_modules() {
    fmt::print("Embedded kernel modules (machine code only, no PTX, nothing compiled at run time):\n");
    for (const auto& m : cuda::embedded_modules()) {
        std::vector<unsigned> archs;
        std::string kernels = "?";
        std::string problem;
        try {
            for (const auto& e : cuda::parse_fatbin(m.fatbin)) {
                if (e.kind == cuda::FatbinEntry::Kind::ptx) problem += " [contains PTX!]";
                if (e.kind != cuda::FatbinEntry::Kind::cubin) continue;
                archs.push_back(e.arch);
                if (!e.compressed) kernels = std::to_string(cuda::parse_cubin_kernels(e.payload).size());
            }
        } catch (const std::exception& ex) {
            problem = fmt::format(" [unreadable: {}]", ex.what());
        }
        fmt::print("  {:<32} {:<24} {:>3} kernels  {:>7.1f} KiB{}\n", m.name, arch_list(archs), kernels,
                   static_cast<double>(m.fatbin.size()) / 1024.0, problem);
    }
}

}  // namespace

int run_info(const GlobalOptions&) {
    const auto archs = cuda::configured_archs();
    fmt::print("foxhunt-train {} (built for {}; CUDA runtime linked statically)\n\n", FH_VERSION, arch_list(archs));

    std::string why;
    const int n = cuda::device_count(&why);
    if (n == 0) {
        fmt::print(
            "Devices: no CUDA device ({}).\n"
            "  Training still runs on the CPU reference backend (--device cpu), slowly.\n\n",
            why);
    } else {
        fmt::print("Devices:\n");
        for (int i = 0; i < n; ++i) {
            const auto d = cuda::query_device(i);
            fmt::print("  cuda:{}  {}  compute {}.{} (sm_{}), {} SMs, {} total / {} free, driver {}, runtime {}\n", i,
                       d.name, d.cc_major, d.cc_minor, d.arch(), d.sm_count, gib(d.total_memory), gib(d.free_memory),
                       cuda::cuda_version_string(d.driver_version), cuda::cuda_version_string(d.runtime_version));
            const unsigned serving = cuda::cubin_arch_for(d.cc_major, d.cc_minor, archs);
            if (serving == 0) {
                fmt::print(
                    "    NOT SUPPORTED by this build: no embedded cubin runs on sm_{}. "
                    "Rebuild with: meson configure build -Dgpu_archs={},{} && ninja -C build\n",
                    d.arch(), FH_GPU_ARCHS, d.arch());
                continue;
            }
            try {
                ops::CudaDevice ops(i);  // loads every module, resolves every kernel
                fmt::print("    runs the embedded sm_{} cubins; all {} kernels resolved\n", serving,
                           cuda::expected_kernels().size());
            } catch (const std::exception& e) {
                fmt::print("    kernel loading FAILED: {}\n", e.what());
            }
        }
        fmt::print("\n");
    }
    print_modules();
    std::fflush(stdout);
    return 0;
}

}  // namespace fh::cli
