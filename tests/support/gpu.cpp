/// @file gpu.cpp
#include "support/gpu.hpp"

#include <memory>

#include "cuda/device.hpp"

namespace fh::test {

bool gpu_available(std::string* why) { return cuda::device_count(why) > 0; }

ops::CudaOps& gpu_ops() {
    static std::unique_ptr<ops::CudaOps> ops = std::make_unique<ops::CudaOps>(0);
    return *ops;
}

}  // namespace fh::test
