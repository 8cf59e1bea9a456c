/// @file param_layout.hpp
/// @brief Named slices of ONE flat float parameter buffer. The gradients, Adam's two moments, a
///        target network and a checkpoint use the same layout, so the optimizer, the global norm,
///        the target copy, the checkpoint and the training guard each run over one flat buffer.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "device/device.hpp"

namespace fh::nn {

/// How init_params fills a slice (src/nn/init.hpp).
struct InitSpec {
    enum class Kind { zeros, uniform_fan_in };
    Kind kind = Kind::zeros;
    int fan_in = 0;    ///< uniform_fan_in: inputs per output unit
    float gain = 1.f;  ///< uniform_fan_in: bound = gain * sqrt(3 / fan_in)

    /// The bound b of U(-b, b): gain * sqrt(3 / fan_in) (0 for zeros).
    double bound() const;
};

/// One named range [offset, offset + size) of the flat buffer.
struct ParamSlice {
    std::string name;
    std::size_t offset = 0;
    std::size_t size = 0;
    InitSpec init;
};

class ParamLayout {
public:
    /// Slice offsets are multiples of this many floats (128 bytes, cuBLAS-friendly alignment).
    /// The padding between slices is never read or written by the network ops: keep it zero by
    /// allocating parameter-shaped buffers with alloc_zeroed (the norm and Adam run over it).
    static constexpr std::size_t kAlignment = 32;

    /// Appends a slice of `size` floats (>= 1) named `name` (unique); returns its index.
    std::size_t add(std::string name, std::size_t size, InitSpec init = {});

    std::span<const ParamSlice> slices() const noexcept { return slices_; }
    const ParamSlice& slice(std::size_t index) const;
    /// The slice called `name`; throws listing the known names if there is none.
    const ParamSlice& find(std::string_view name) const;
    /// Floats in the whole buffer, padding included.
    std::size_t total() const noexcept { return total_; }

    /// The slice `index` of a buffer of this layout (its size must be total()).
    template <class T>
    ops::View<T> view(ops::View<T> buffer, std::size_t index) const {
        check_buffer(buffer.size());
        const ParamSlice& s = slice(index);
        return buffer.subview(s.offset, s.size);
    }

private:
    void check_buffer(std::size_t size) const;
    std::vector<ParamSlice> slices_;
    std::size_t total_ = 0;
};

/// A buffer of layout.total() floats in `ops`' memory, all zero (parameters before
/// init_params, gradients, Adam moments).
ops::Buffer<float> alloc_zeroed(ops::Device& ops, const ParamLayout& layout);

}  // namespace fh::nn
