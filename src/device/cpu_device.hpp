/// @file cpu_device.hpp
/// @brief The CPU reference backend: plain loops written from the math, readable as
///        documentation; the oracle the CUDA backend is tested against. The ops' CPU twins are
///        free functions (ops::cpu, src/ops/<family>/cpu.cpp).
#pragma once

#include "device/device.hpp"

namespace fh::ops {

class CpuDevice final : public Device {
public:
    Backend backend() const noexcept override { return Backend::cpu; }
    std::string description() const override { return "cpu (reference backend)"; }
    void synchronize() override {}

protected:
    void* allocate_bytes(std::size_t bytes) override;
    void release_bytes(void* p) noexcept override;
    void upload_bytes(void* dst, const void* src, std::size_t bytes) override;
    void download_bytes(void* dst, const void* src, std::size_t bytes) override;
    void copy_bytes(void* dst, const void* src, std::size_t bytes) override;

    void linear_forward_impl(View<float> Y, View<const float> X, View<const float> W, View<const float> b, int batch,
                             int in, int out, Activation act) override;
    void linear_forward_batched_impl(View<float> Y, View<const float> X, std::size_t x_stride, View<const float> params,
                                     std::size_t param_stride, std::size_t w_offset, std::ptrdiff_t b_offset, int count,
                                     int batch, int in, int out, Activation act) override;
    void head_backward_impl(View<float> dZ, View<float> grads, View<const float> dOut, View<const float> X,
                            View<const float> params, std::size_t param_stride, std::size_t head_w_offset,
                            std::ptrdiff_t head_b_offset, std::ptrdiff_t hidden_b_offset, int count, int batch, int in,
                            int out, Activation act, bool accumulate) override;
    void linear_backward_batched_impl(View<float> dX, View<float> grads, View<float> dY, View<const float> Y,
                                      View<const float> X, std::size_t x_stride, View<const float> params,
                                      std::size_t param_stride, std::size_t w_offset, std::ptrdiff_t b_offset,
                                      int count, int batch, int in, int out, Activation act, bool accumulate,
                                      BackwardPart parts) override;
    void linear_backward_impl(View<float> dX, View<float> dW, View<float> db, View<float> dY, View<const float> Y,
                              View<const float> X, View<const float> W, int batch, int in, int out, Activation act,
                              bool accumulate, BackwardPart parts) override;

private:
    /// A product's operand of n floats: x itself, or in bf16 its values rounded to BF16
    /// (core::round_to_bf16) in `copy`. tf32 is computed in FP32 here (Precision).
    const float* operand(const float* x, std::size_t n, std::vector<float>& copy) const;
    std::vector<float> a_, b_, c_;  ///< the rounded operands of the product being computed
};

}  // namespace fh::ops
