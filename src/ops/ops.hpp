/// @file ops.hpp
/// @brief The device operations every trainer is written against (SPEC section 2b). Each op has a
///        CUDA implementation (ops/cuda/, the embedded kernels and cuBLAS) and a plain C++ one
///        (ops/cpu/, the reference the CUDA ops are tested against). Argument checks (sizes,
///        aliasing) live here, once, in the non-virtual public functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "abi/futures_env.h"
#include "util/errors.hpp"

namespace fh::ops {

enum class Backend { cpu, cuda };

/// `count` elements of T in a backend's memory: host memory for the CPU backend, device memory
/// for CUDA. Deliberately has no operator[]: only a backend's own code dereferences data().
template <class T> class View {
public:
    View() = default;
    View(T* data, std::size_t count) : data_(data), count_(count) {}
    template <class U>
        requires std::is_same_v<const U, T>
    View(View<U> v) : data_(v.data()), count_(v.size()) {}

    T* data() const noexcept { return data_; }
    std::size_t size() const noexcept { return count_; }
    bool empty() const noexcept { return count_ == 0; }
    View subview(std::size_t offset, std::size_t count) const;

private:
    T* data_ = nullptr;
    std::size_t count_ = 0;
};

/// True when the byte ranges of a and b share at least one byte.
template <class A, class B> bool overlaps(View<A> a, View<B> b) {
    if (a.empty() || b.empty()) return false;
    const auto a0 = reinterpret_cast<std::uintptr_t>(a.data());
    const auto b0 = reinterpret_cast<std::uintptr_t>(b.data());
    return a0 < b0 + b.size() * sizeof(B) && b0 < a0 + a.size() * sizeof(A);
}

class Ops;

/// Owns `count` elements in the memory of the Ops that allocated it. Move-only (copies are
/// explicit ops::copy calls); must not outlive its Ops.
template <class T> class Buffer {
public:
    Buffer() = default;
    Buffer(Ops* owner, T* data, std::size_t count) : owner_(owner), data_(data), count_(count) {}
    ~Buffer() { release(); }
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    Buffer(Buffer&& o) noexcept
        : owner_(std::exchange(o.owner_, nullptr)),
          data_(std::exchange(o.data_, nullptr)),
          count_(std::exchange(o.count_, 0)) {}
    Buffer& operator=(Buffer&& o) noexcept {
        if (this != &o) {
            release();
            owner_ = std::exchange(o.owner_, nullptr);
            data_ = std::exchange(o.data_, nullptr);
            count_ = std::exchange(o.count_, 0);
        }
        return *this;
    }

    View<T> view() noexcept { return {data_, count_}; }
    View<const T> view() const noexcept { return {data_, count_}; }
    View<const T> cview() const noexcept { return {data_, count_}; }
    std::size_t size() const noexcept { return count_; }

private:
    void release() noexcept;
    Ops* owner_ = nullptr;
    T* data_ = nullptr;
    std::size_t count_ = 0;
};

class Ops {
public:
    virtual ~Ops() = default;
    virtual Backend backend() const noexcept = 0;
    /// One line for logs: "cpu (reference)" or "cuda:0 NVIDIA H200 (sm_90)".
    virtual std::string description() const = 0;
    /// Waits until every op issued so far has finished (a no-op on the CPU).
    virtual void synchronize() = 0;

    // ---- memory ---------------------------------------------------------------------------
    template <class T> Buffer<T> alloc(std::size_t count) {
        return Buffer<T>(this, static_cast<T*>(allocate_bytes(count * sizeof(T))), count);
    }
    template <class T> void upload(View<T> dst, std::span<const T> src) {
        require_same_size(dst.size(), src.size(), "upload");
        upload_bytes(dst.data(), src.data(), src.size_bytes());
    }
    template <class T> void download(std::span<T> dst, View<const T> src) {
        require_same_size(dst.size(), src.size(), "download");
        download_bytes(dst.data(), src.data(), dst.size_bytes());
    }
    template <class T> std::vector<T> to_host(View<const T> src) {
        std::vector<T> out(src.size());
        download(std::span<T>(out), src);
        return out;
    }
    template <class T> Buffer<T> from_host(std::span<const T> src) {
        Buffer<T> b = alloc<T>(src.size());
        upload(b.view(), src);
        return b;
    }
    void free_bytes(void* p) noexcept { release_bytes(p); }

    // ---- utility ops (cuda/dqn_utility_kernels.cu) -----------------------------------------
    /// y[i] = value
    void fill(View<float> y, float value);
    /// dst[i] = src[i]; dst and src must not overlap.
    void copy(View<float> dst, View<const float> src);
    /// y[i] += a * x[i] (fused); x and y must be the same size and must not overlap. To scale a
    /// buffer in place use scale(), never saxpy(y, alpha - 1, y).
    void saxpy(View<float> y, float a, View<const float> x);
    /// y[i] *= alpha, in place.
    void scale(View<float> y, float alpha);

    // ---- vectorized environment (cuda/experience_kernels.cu, abi/futures_env.h) -------------
    // n_envs = state.size(). `market` points into this backend's memory (env::DeviceMarket).
    /// Resets the environments whose mask entry is non-zero; an empty mask resets all.
    /// portfolio (n_envs * PORTFOLIO_STRIDE), mask (n_envs) or empty.
    void env_reset(View<env::EnvState> state, View<float> portfolio, View<const std::uint8_t> mask,
                   const env::MarketView& market, const env::EnvParams& params);
    /// Steps every environment; actions must lie in [0, position_levels * urgency_levels).
    /// reward, done, info, actions (n_envs); all buffers distinct.
    void env_step(View<env::EnvState> state, View<float> portfolio, View<float> reward,
                  View<std::uint8_t> done, View<env::StepInfo> info, View<const int> actions,
                  const env::MarketView& market, const env::EnvParams& params);
    /// states (n_envs * state_dim) = [features of bar t | portfolio features] per environment.
    void gather_states(View<float> states, View<const env::EnvState> state,
                       View<const float> portfolio, const env::MarketView& market,
                       const env::EnvParams& params);
    /// actions[e] uniformly random in [0, num_actions), a function of (seed, e, step) only.
    void random_actions(View<int> actions, std::uint64_t seed, std::uint64_t step, int num_actions);

protected:
    virtual void* allocate_bytes(std::size_t bytes) = 0;
    virtual void release_bytes(void* p) noexcept = 0;
    virtual void upload_bytes(void* dst, const void* src, std::size_t bytes) = 0;
    virtual void download_bytes(void* dst, const void* src, std::size_t bytes) = 0;

    virtual void fill_impl(View<float> y, float value) = 0;
    virtual void copy_impl(View<float> dst, View<const float> src) = 0;
    virtual void saxpy_impl(View<float> y, float a, View<const float> x) = 0;
    virtual void scale_impl(View<float> y, float alpha) = 0;

    virtual void env_reset_impl(View<env::EnvState> state, View<float> portfolio,
                                View<const std::uint8_t> mask, const env::MarketView& market,
                                const env::EnvParams& params) = 0;
    virtual void env_step_impl(View<env::EnvState> state, View<float> portfolio, View<float> reward,
                               View<std::uint8_t> done, View<env::StepInfo> info,
                               View<const int> actions, const env::MarketView& market,
                               const env::EnvParams& params) = 0;
    virtual void gather_states_impl(View<float> states, View<const env::EnvState> state,
                                    View<const float> portfolio, const env::MarketView& market,
                                    const env::EnvParams& params) = 0;
    virtual void random_actions_impl(View<int> actions, std::uint64_t seed, std::uint64_t step,
                                     int num_actions) = 0;

    static void require_same_size(std::size_t a, std::size_t b, const char* op);
    /// Kernels index with int: refuse sizes they cannot address.
    static int checked_int_size(std::size_t n, const char* op);
};

/// The C51/MSE gradient blend of SPEC section 2: c51_grad = alpha * c51_grad + (1 - alpha) *
/// mse_grad, done as an in-place scale followed by a saxpy on two distinct buffers.
void blend_c51_mse_gradient(Ops& ops, View<float> c51_grad, View<const float> mse_grad,
                            float alpha);

template <class T> View<T> View<T>::subview(std::size_t offset, std::size_t count) const {
    if (offset > count_ || count > count_ - offset)
        throw std::out_of_range("ops::View::subview: range outside the view");
    return View<T>(data_ + offset, count);
}

template <class T> void Buffer<T>::release() noexcept {
    if (owner_ && data_) owner_->free_bytes(data_);
    data_ = nullptr;
    count_ = 0;
}

}  // namespace fh::ops
