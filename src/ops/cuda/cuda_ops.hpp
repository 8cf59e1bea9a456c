/// @file cuda_ops.hpp
/// @brief The CUDA backend: launches the embedded kernels (typed handles) on one stream.
///        All ops are asynchronous on that stream; downloads synchronise.
#pragma once

#include <memory>

#include "cuda/device.hpp"
#include "cuda/kernel_table.hpp"
#include "cuda/resources.hpp"
#include "ops/ops.hpp"

namespace fh::ops {

class CudaOps final : public Ops {
public:
    /// Selects the device (checking that an embedded cubin runs on it), loads every module and
    /// resolves every kernel, so that any problem shows here and not mid-run.
    explicit CudaOps(int ordinal);

    Backend backend() const noexcept override { return Backend::cuda; }
    std::string description() const override;
    void synchronize() override { stream_.synchronize(); }

    const cuda::DeviceInfo& device() const noexcept { return device_; }
    cudaStream_t stream() const noexcept { return stream_.get(); }
    const cuda::KernelTable& kernels() const noexcept { return registry_.kernels(); }
    cublasHandle_t cublas() const noexcept { return cublas_.get(); }

protected:
    void* allocate_bytes(std::size_t bytes) override;
    void release_bytes(void* p) noexcept override;
    void upload_bytes(void* dst, const void* src, std::size_t bytes) override;
    void download_bytes(void* dst, const void* src, std::size_t bytes) override;

    void fill_impl(View<float> y, float value) override;
    void copy_impl(View<float> dst, View<const float> src) override;
    void saxpy_impl(View<float> y, float a, View<const float> x) override;
    void scale_impl(View<float> y, float alpha) override;

    void env_reset_impl(View<env::EnvState> state, View<float> portfolio,
                        View<const std::uint8_t> mask, const env::MarketView& market,
                        const env::EnvParams& params) override;
    void env_step_impl(View<env::EnvState> state, View<float> portfolio, View<float> reward,
                       View<std::uint8_t> done, View<env::StepInfo> info, View<const int> actions,
                       const env::MarketView& market, const env::EnvParams& params) override;
    void gather_states_impl(View<float> states, View<const env::EnvState> state,
                            View<const float> portfolio, const env::MarketView& market,
                            const env::EnvParams& params) override;
    void random_actions_impl(View<int> actions, std::uint64_t seed, std::uint64_t step,
                             int num_actions) override;

private:
    cuda::DeviceInfo device_;
    cuda::Stream stream_;
    cuda::KernelRegistry registry_;
    cuda::CublasHandle cublas_;
};

}  // namespace fh::ops
