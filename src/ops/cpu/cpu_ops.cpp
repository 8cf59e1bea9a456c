/// @file cpu_ops.cpp
/// @brief CPU twins of cuda/kernels/core_vector.cu.
#include "ops/cpu/cpu_ops.hpp"

#include <cstring>
#include <new>

#include "abi/core_vector.h"

namespace fh::ops {

namespace {
constexpr std::align_val_t kAlignment{64};
}

void* CpuOps::allocate_bytes(std::size_t bytes) {
    return ::operator new(bytes == 0 ? 1 : bytes, kAlignment);
}
void CpuOps::release_bytes(void* p) noexcept { ::operator delete(p, kAlignment); }
void CpuOps::upload_bytes(void* dst, const void* src, std::size_t bytes) {
    if (bytes) std::memcpy(dst, src, bytes);
}
void CpuOps::download_bytes(void* dst, const void* src, std::size_t bytes) {
    if (bytes) std::memcpy(dst, src, bytes);
}

void CpuOps::fill_impl(View<float> y, float value) {
    for (std::size_t i = 0; i < y.size(); ++i) y.data()[i] = value;
}

void CpuOps::copy_impl(View<float> dst, View<const float> src) {
    for (std::size_t i = 0; i < dst.size(); ++i) dst.data()[i] = src.data()[i];
}

void CpuOps::saxpy_impl(View<float> y, float a, View<const float> x) {
    for (std::size_t i = 0; i < y.size(); ++i)
        y.data()[i] = core::saxpy_element(y.data()[i], a, x.data()[i]);
}

void CpuOps::scale_impl(View<float> y, float alpha) {
    for (std::size_t i = 0; i < y.size(); ++i) y.data()[i] *= alpha;
}

}  // namespace fh::ops
