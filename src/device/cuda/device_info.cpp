/// @file device_info.cpp
#include "device/cuda/device_info.hpp"

#include <fmt/format.h>

#include "device/cuda/check.hpp"
#include "build_config.hpp"
#include "device/cuda/embedded_modules.hpp"

namespace fh::cuda {

int device_count(std::string* why) {
    int n = 0;
    const cudaError_t status = cudaGetDeviceCount(&n);
    if (status != cudaSuccess) {
        (void)cudaGetLastError();
        if (why) *why = fmt::format("{} ({})", cudaGetErrorString(status), cudaGetErrorName(status));
        return 0;
    }
    if (n == 0 && why) *why = "the driver reports no CUDA device";
    return n;
}

std::string cuda_version_string(int v) {
    return fmt::format("{}.{}", v / 1000, (v % 1000) / 10);
}

DeviceInfo query_device(int ordinal) {
    DeviceInfo d;
    d.ordinal = ordinal;
    cudaDeviceProp prop{};
    FH_CUDA_CHECK(cudaGetDeviceProperties(&prop, ordinal));
    d.name = prop.name;
    d.cc_major = prop.major;
    d.cc_minor = prop.minor;
    d.sm_count = prop.multiProcessorCount;
    d.shared_memory_per_sm = prop.sharedMemPerMultiprocessor;
    d.total_memory = prop.totalGlobalMem;
    FH_CUDA_CHECK(cudaDriverGetVersion(&d.driver_version));
    FH_CUDA_CHECK(cudaRuntimeGetVersion(&d.runtime_version));
    int previous = 0;
    FH_CUDA_CHECK(cudaGetDevice(&previous));
    FH_CUDA_CHECK(cudaSetDevice(ordinal));
    std::size_t free_b = 0, total_b = 0;
    FH_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    FH_CUDA_CHECK(cudaSetDevice(previous));
    d.free_memory = free_b;
    return d;
}

DeviceInfo select_device(int ordinal) {
    std::string why;
    const int n = device_count(&why);
    if (n == 0) throw DeviceError("no CUDA device is available: " + why + " (use --device cpu)");
    if (ordinal < 0 || ordinal >= n)
        throw DeviceError(
            fmt::format("device cuda:{} does not exist: this machine has {} CUDA "
                        "device(s), cuda:0 to cuda:{}",
                        ordinal, n, n - 1));
    DeviceInfo d = query_device(ordinal);
    const auto archs = configured_archs();
    if (cubin_arch_for(d.cc_major, d.cc_minor, archs) == 0) {
        std::string list;
        for (unsigned a : archs) list += fmt::format("{}sm_{}", list.empty() ? "" : ", ", a);
        throw DeviceError(
            fmt::format("{} (cuda:{}) is compute capability {}.{} (sm_{}), but this build embeds machine code "
                        "for {} only, and nothing is compiled at run time. Rebuild with its architecture: "
                        "meson configure build -Dgpu_archs={},{} && ninja -C build",
                        d.name, ordinal, d.cc_major, d.cc_minor, d.arch(), list, FH_GPU_ARCHS, d.arch()));
    }
    FH_CUDA_CHECK(cudaSetDevice(ordinal));
    return d;
}

}  // namespace fh::cuda
