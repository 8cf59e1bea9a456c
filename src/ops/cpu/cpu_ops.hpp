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
};

}  // namespace fh::ops
