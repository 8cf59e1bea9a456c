/// @file gpu.cpp
#include "support/gpu.hpp"

#include <memory>

#include "device/cuda/device_info.hpp"

namespace fh::test {

bool gpu_available(std::string* why) {
    return cuda::device_count(why) > 0;
}

ops::CudaDevice& gpu_ops() {
    static std::unique_ptr<ops::CudaDevice> ops = std::make_unique<ops::CudaDevice>(0);
    return *ops;
}

}  // namespace fh::test
