/// @file test_kernel_registry_gpu.cpp
/// @brief [gpu] The devices of one process share one kernel registry (the embedded modules are
///        loaded once, not once per device: a population's agents), and its kernels run on each.
#include <catch2/catch.hpp>

#include <vector>

#include "device/cuda/kernel_table.hpp"
#include "device/cuda_device.hpp"
#include "support/gpu.hpp"
#include "abi/core_vector.h"

TEST_CASE("CUDA devices of one process share one kernel registry, whose kernels run on each", "[gpu]") {
    auto& first = fh::test::gpu_ops();
    fh::ops::CudaDevice second(0, 0), third(0, 1);
    CHECK(&second.kernels() == &first.kernels());
    CHECK(&third.kernels() == &first.kernels());
    CHECK(fh::cuda::KernelRegistry::shared().get() == fh::cuda::KernelRegistry::shared().get());
    for (fh::ops::CudaDevice* d : {&second, &third}) {
        auto y = d->alloc<float>(1000);
        fh::ops::run(*d, fh::ops::Fill{y.view(), 2.5f});
        CHECK(d->to_host(y.cview()) == std::vector<float>(1000, 2.5f));
    }
}
