/// @file backend.cpp
#include "device/make_device.hpp"

#include <charconv>

#include "device/cuda/device_info.hpp"
#include "device/cpu_device.hpp"
#include "device/cuda_device.hpp"
#include "util/log.hpp"

namespace fh::ops {

DeviceSpec parse_device_spec(const std::string& text) {
    if (text == "auto") return {DeviceSpec::Kind::automatic, 0};
    if (text == "cpu") return {DeviceSpec::Kind::cpu, 0};
    if (text == "cuda") return {DeviceSpec::Kind::cuda, 0};
    if (text.rfind("cuda:", 0) == 0) {
        int n = -1;
        const char* first = text.data() + 5;
        const char* last = text.data() + text.size();
        const auto [ptr, ec] = std::from_chars(first, last, n);
        if (ec == std::errc() && ptr == last && first != last && n >= 0) return {DeviceSpec::Kind::cuda, n};
    }
    throw UsageError("--device: expected auto, cpu, cuda or cuda:N (N = 0, 1, ...), got '" + text + "'");
}

std::unique_ptr<Device> make_device(const DeviceSpec& spec, int side_lanes) {
    const int lanes = side_lanes < 0 ? CudaDevice::kSideLanes : side_lanes;
    switch (spec.kind) {
        case DeviceSpec::Kind::cpu:
            return std::make_unique<CpuDevice>();
        case DeviceSpec::Kind::cuda:
            return std::make_unique<CudaDevice>(spec.ordinal, lanes);
        case DeviceSpec::Kind::automatic: {
            std::string why;
            if (cuda::device_count(&why) > 0) return std::make_unique<CudaDevice>(0, lanes);
            log::warn(
                "NO GPU: {}. Running on the CPU reference backend, which is far slower. "
                "Pass --device cpu to silence this warning, or --device cuda to require a GPU.",
                why);
            return std::make_unique<CpuDevice>();
        }
    }
    throw UsageError("unknown device kind");
}

}  // namespace fh::ops
