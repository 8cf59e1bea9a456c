/// @file cpu_ops.hpp
/// @brief The CPU reference backend: plain loops written from the math, readable as
///        documentation; the oracle the CUDA ops are tested against.
#pragma once

#include "ops/ops.hpp"

namespace fh::ops {

class CpuOps final : public Ops {
public:
    Backend backend() const noexcept override { return Backend::cpu; }
    std::string description() const override { return "cpu (reference backend)"; }
    void synchronize() override {}

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
};

}  // namespace fh::ops
