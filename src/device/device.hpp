/// @file device.hpp
/// @brief The device core every layer is written against: memory (Buffer, upload, download),
///        synchronisation, streams and graphs, and the linear layers (their products are the
///        runtime's GEMM choices: cuBLAS / cuBLASLt algorithms, split-K, precision). Two
///        implementations: CpuDevice (plain loops, the reference; src/device/cpu_device.*) and
///        CudaDevice (embedded kernels and cuBLAS on one stream; src/device/cuda_device.*, its
///        linear layers in src/device/cuda_linear.cpp).
///
/// Everything else is an op: an argument struct declared in cuda/abi/<module>.h, run by
/// ops::run (src/ops/op.hpp). docs/architecture.md shows how to add an op.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "abi/core_network.h"
#include "math/core.h"
#include "device/checks.hpp"
#include "abi/view.h"

namespace fh::ops {

enum class Backend { cpu, cuda };

/// The arithmetic of the linear layers' matrix products (gpu.precision; docs/performance.md,
/// "Precision"): fp32, FP32 operands and sums; tf32, operands rounded to TF32 by the GPU's tensor
/// cores, FP32 sums (the CPU backend computes FP32: the GPU's TF32 rounding is the hardware's,
/// not reproduced); bf16, every product's operands rounded to BF16 (core::round_to_bf16, on both
/// backends) and summed in FP32. Weights, optimizer state, losses, the environment, returns and
/// advantages stay FP32 in every mode.
enum class Precision { fp32, tf32, bf16 };
/// "fp32", "tf32", "bf16": the values of gpu.precision.
std::string_view precision_name(Precision p) noexcept;
/// The Precision of a gpu.precision value, or nullopt for any other text.
std::optional<Precision> parse_precision(std::string_view name) noexcept;
/// One line for `check`: the precision and its expected effect on speed and results on a backend.
std::string precision_effect(Precision p, Backend b);

/// Network types shared with the kernels (math/core.h).
using Activation = core::Activation;
using AdamParams = core::AdamParams;
using CounterValue = core::CounterValue;

class CudaDevice;

class Device;

/// Owns `count` elements in the memory of the Device that allocated it. Move-only (copies are
/// explicit ops::Copy runs); must not outlive its Device.
template <class T>
class Buffer {
public:
    Buffer() = default;
    Buffer(Device* owner, T* data, std::size_t count) : owner_(owner), data_(data), count_(count) {}
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
    Device* owner_ = nullptr;
    T* data_ = nullptr;
    std::size_t count_ = 0;
};

/// A fixed sequence of ops run again and again (a trainer's collection step or update): on the
/// CUDA device a CUDA Graph, captured on its first run and relaunched afterwards (one launch for
/// the whole sequence); on the CPU the ops simply run. The ops of a sequence take no value that
/// changes between runs (per-step values live in device memory) and never synchronise with the
/// host. reset() makes the next run capture again (after a buffer or shape changed).
struct OpSequence {
    struct Captured {
        virtual ~Captured() = default;
    };
    std::unique_ptr<Captured> captured;
    void reset() noexcept { captured.reset(); }
};

/// The parts of Device::linear_backward, in the order `all` runs them: the activation's backward
/// (dY becomes dZ in place), the bias gradient (db from dZ), the weight gradient (dW from dZ),
/// the input's (dX from dZ). A caller may issue them apart, e.g. a layer's dW and db beside the
/// layers below (nn::Mlp's overlapped backward); each part computes what it computes within
/// `all`, bit for bit. Sets combine with |.
enum class BackwardPart : unsigned { activation = 1, bias = 2, weights = 4, input = 8, all = 15 };
constexpr BackwardPart operator|(BackwardPart a, BackwardPart b) noexcept {
    return static_cast<BackwardPart>(static_cast<unsigned>(a) | static_cast<unsigned>(b));
}
constexpr bool has_part(BackwardPart set, BackwardPart p) noexcept {
    return (static_cast<unsigned>(set) & static_cast<unsigned>(p)) != 0;
}

/// The number counter[0] * scale + offset of a counter in device memory (counter (1)), for the
/// ops that take a CounterValue; the counter must outlive the ops (and a captured sequence).
CounterValue counter_value(View<const long long> counter, long long scale = 1, long long offset = 0);

class Device {
public:
    virtual ~Device() = default;
    virtual Backend backend() const noexcept = 0;
    /// One line for logs: "cpu (reference backend)" or "cuda:0 NVIDIA H200 (sm_90, ...)".
    virtual std::string description() const = 0;
    /// Waits until every op issued so far has finished (a no-op on the CPU).
    virtual void synchronize() = 0;
    /// The CUDA device behind this one, or nullptr on the CPU backend: what op families dispatch on.
    virtual CudaDevice* cuda() noexcept { return nullptr; }

    /// The memory a run may budget for: the device's free bytes now (CUDA), or nothing where
    /// memory is not budgeted (the CPU backend).
    struct MemoryInfo {
        std::string name;
        std::size_t free_bytes = 0, total_bytes = 0;
    };
    virtual std::optional<MemoryInfo> memory() const { return std::nullopt; }
    /// The arithmetic of the linear layers' matrix products from now on (gpu.precision; fp32 until
    /// set): linear_forward(_batched), linear_backward(_batched), head_backward and mlp_infer.
    void set_precision(Precision p) {
        apply_precision(p);
        precision_ = p;
    }
    Precision precision() const noexcept { return precision_; }
    /// Makes this device the calling thread's current one (CUDA keeps the current device per
    /// thread; a device created on another thread must be made current before use).
    virtual void make_current() {}
    /// Whether run_sequence captures CUDA Graphs (gpu.cuda_graphs; off: every op launches on its
    /// own, with the same results). The CPU backend has nothing to capture.
    virtual void set_graphs(bool /*on*/) {}
    /// Runs `ops` as the sequence `seq` (see OpSequence).
    virtual void run_sequence(OpSequence& /*seq*/, const std::function<void()>& ops) { ops(); }
    /// Issues the branches in order; their ops may overlap on the device: on CUDA each branch but
    /// the last goes to a stream of its own (a lane) that forks from the current stream and joins
    /// it again before anything issued later (inside a captured sequence the fork and join are
    /// graph edges), and a branch may fork again (nested). On the CPU, while kernels are timed or
    /// synchronised one by one, and when no lane is free, branches simply run one after the
    /// other. No branch may write memory another reads or writes, so the results never depend on
    /// the overlap.
    template <class... Branches>
    void run_concurrently(Branches&&... branches) {
        const std::function<void()> list[] = {std::function<void()>(std::forward<Branches>(branches))...};
        run_branches(std::span<const std::function<void()>>(list));
    }
    virtual void run_branches(std::span<const std::function<void()>> branches) {
        for (const auto& b : branches) b();
    }

    // ---- memory ---------------------------------------------------------------------------
    template <class T>
    Buffer<T> alloc(std::size_t count) {
        T* p = static_cast<T*>(allocate_bytes(count * sizeof(T)));
        bytes_in_use_ += count * sizeof(T);
        if (bytes_in_use_ > peak_bytes_) peak_bytes_ = bytes_in_use_;
        return Buffer<T>(this, p, count);
    }
    template <class T>
    void upload(View<T> dst, std::span<const T> src) {
        detail::require_same_size(dst.size(), src.size(), "upload");
        upload_bytes(dst.data(), src.data(), src.size_bytes());
    }
    template <class T>
    void download(std::span<T> dst, View<const T> src) {
        detail::require_same_size(dst.size(), src.size(), "download");
        download_bytes(dst.data(), src.data(), dst.size_bytes());
    }
    template <class T>
    std::vector<T> to_host(View<const T> src) {
        std::vector<T> out(src.size());
        download(std::span<T>(out), src);
        return out;
    }
    template <class T>
    Buffer<T> from_host(std::span<const T> src) {
        Buffer<T> b = alloc<T>(src.size());
        upload(b.view(), src);
        return b;
    }
    /// dst = src for any trivially copyable T (a device-to-device copy on CUDA); distinct buffers.
    template <class T>
    void copy_raw(View<T> dst, View<const T> src) {
        detail::require_same_size(dst.size(), src.size(), "copy_raw");
        if (overlaps(dst, src)) throw std::invalid_argument("ops::copy_raw: dst and src overlap");
        if (!dst.empty()) copy_bytes(dst.data(), src.data(), dst.size() * sizeof(T));
    }
    void free_bytes(void* p, std::size_t bytes) noexcept {
        release_bytes(p);
        bytes_in_use_ -= bytes;
    }
    /// Bytes held in Buffers now, and the most ever held at once (libraries' own workspaces,
    /// e.g. cuBLAS's, are not counted).
    std::size_t bytes_in_use() const noexcept { return bytes_in_use_; }
    std::size_t peak_bytes() const noexcept { return peak_bytes_; }

    // ---- the linear layers (cuda/kernels/core_network.cu + cuBLAS / cuBLASLt) -----------------
    // They stay the device's, not ops: their products are the runtime's GEMM choices (cuBLAS or
    // cuBLASLt, the algorithm chosen once per shape, split-K, the precision's math mode and BF16
    // scratch, each lane's handle and workspace). Row-major matrices; shapes beside each view. Every size must be >= 1.
    // Outputs must not overlap any other operand (checked: the kernels' pointers are __restrict__ and cuBLAS forbids C
    // overlapping A or B). CPU twins: src/device/cpu_device.cpp (src/device/linear_reference.hpp).
    /// Y = act(X W^T + b). Y (batch, out), X (batch, in), W (out, in), b (out) or empty (no bias).
    void linear_forward(View<float> Y, View<const float> X, View<const float> W, View<const float> b, int batch, int in,
                        int out, Activation act);
    /// `count` layers of one shape at once (a population's networks, or an online and a target
    /// network side by side): network k's W (out, in) is at k * param_stride + w_offset in
    /// `params` and its b (out) at k * param_stride + b_offset (b_offset < 0: no bias), e.g.
    /// `count` consecutive copies of one layout, or twin networks inside a larger one; for k < count, Y_k = act(X_k
    /// W_k^T + b_k) with Y (count, batch, out) and X_k = X[k * x_stride ...] (batch, in): x_stride = batch * in for an
    /// input per network, 0 for one input they all read. On CUDA one batched matrix product.
    void linear_forward_batched(View<float> Y, View<const float> X, std::size_t x_stride, View<const float> params,
                                std::size_t param_stride, std::size_t w_offset, std::ptrdiff_t b_offset, int count,
                                int batch, int in, int out, Activation act);
    /// Backward of linear_forward. dY (batch, out) holds dL/dY (the activated output) and is
    /// overwritten in place with dL/dZ (the pre-activation gradient). Y (batch, out) is the
    /// activated output of the forward, X (batch, in) and W (out, in) its inputs.
    /// dW (out, in) and db (out) are set, or added to when `accumulate`; db may be empty (no
    /// bias). dX (batch, in) is set (never accumulated), or skipped when empty.
    /// `parts`: all, or some of them (BackwardPart): `bias`, `weights` and `input` read dY as dZ, so
    /// the activation's part must have run before them.
    void linear_backward(View<float> dX, View<float> dW, View<float> db, View<float> dY, View<const float> Y,
                         View<const float> X, View<const float> W, int batch, int in, int out, Activation act,
                         bool accumulate, BackwardPart parts = BackwardPart::all);
    /// The backward of linear_forward_batched: linear_backward for each of `count` layers of one
    /// shape. Network k's dY and Y are blocks k of dY and Y (count, batch, out); its X is
    /// X[k * x_stride ...] (batch, in) (x_stride 0: one input they all read); its W is at
    /// k * param_stride + w_offset in `params` and its dW and db at the same offsets in `grads`
    /// (a buffer of the params' layout; b_offset < 0: no bias); its dX is block k of dX (count,
    /// batch, in), or dX is empty. Each network's results are those of linear_backward on its
    /// blocks: the same bits on the CPU; on CUDA the same dZ and db (one launch for every network's
    /// activation and bias parts) and dW and dX from one strided-batched product each (count 1:
    /// linear_backward itself).
    void linear_backward_batched(View<float> dX, View<float> grads, View<float> dY, View<const float> Y,
                                 View<const float> X, std::size_t x_stride, View<const float> params,
                                 std::size_t param_stride, std::size_t w_offset, std::ptrdiff_t b_offset, int count,
                                 int batch, int in, int out, Activation act, bool accumulate,
                                 BackwardPart parts = BackwardPart::all);
    /// The backward of a narrow linear output layer without activation (out outputs, 1 <= out <=
    /// abi::kHeadBackwardMaxOut: a value head, IQL's Q and policy heads; its W (out, in) at
    /// head_w_offset, its b at head_b_offset) and of the activation `act` and bias (at
    /// hidden_b_offset) of the hidden layer below it, whose output X the head read; b offsets
    /// < 0: no bias. For `count` networks: network k's parameters and gradients at
    /// k * param_stride in `params` and `grads`, its rows in block k of dOut (count, batch, out),
    /// X and dZ (count, batch, in). Writes the head's dW and db and the hidden layer's db (set, or
    /// added to when `accumulate`) and dZ, the hidden layer's pre-activation gradient (its
    /// linear_backward parts `weights` and `input` follow). The same as linear_backward_batched
    /// on the head (every part, dX into dZ) and then on the hidden layer (parts activation and
    /// bias, dY = dZ): bit for bit on the CPU; on CUDA one pass over X
    /// (network_{scalar,narrow}_head_backward_kernel, cuda/abi/core_network.h) whose head dW and
    /// db sum in its own fixed order; with out == 1 dZ and the hidden db are bit for bit those of
    /// the separate passes, with more outputs dZ sums the outputs in order (within rounding of
    /// cuBLAS's dX). dOut is read only.
    void head_backward(View<float> dZ, View<float> grads, View<const float> dOut, View<const float> X,
                       View<const float> params, std::size_t param_stride, std::size_t head_w_offset,
                       std::ptrdiff_t head_b_offset, std::ptrdiff_t hidden_b_offset, int count, int batch, int in,
                       int out, Activation act, bool accumulate);
    /// Inference through a whole small MLP in one launch, where the backend has such a path (CUDA:
    /// network_mlp_infer_kernel, cuda/abi/core_network.h): Y (batch, last layer's out) from X
    /// (batch, layers.in[0]), each layer's W and b at its offsets in params. Nothing is kept for
    /// backward. layers.max_weights and max_width are computed here. Returns false, writing
    /// nothing, where there is no such path: the CPU backend, and CUDA when the largest layer's
    /// weights and two activation tiles exceed 48 KB of shared memory. The caller then runs the
    /// layers with linear_forward, which gives the same values within float rounding (another
    /// summation order; the [gpu] test compares them).
    bool mlp_infer(View<float> Y, View<const float> X, View<const float> params, abi::MlpInferLayers layers, int batch);

protected:
    /// What set_precision changes in the backend (CUDA: cuBLAS's math mode, BF16 scratch).
    virtual void apply_precision(Precision /*p*/) {}
    /// linear_backward_batched as one linear_backward_impl per network on its blocks (the CPU's
    /// implementation, and CUDA's for one network).
    void linear_backward_each(View<float> dX, View<float> grads, View<float> dY, View<const float> Y,
                              View<const float> X, std::size_t x_stride, View<const float> params,
                              std::size_t param_stride, std::size_t w_offset, std::ptrdiff_t b_offset, int count,
                              int batch, int in, int out, Activation act, bool accumulate, BackwardPart parts);

    virtual void* allocate_bytes(std::size_t bytes) = 0;
    virtual void release_bytes(void* p) noexcept = 0;
    virtual void upload_bytes(void* dst, const void* src, std::size_t bytes) = 0;
    virtual void download_bytes(void* dst, const void* src, std::size_t bytes) = 0;
    virtual void copy_bytes(void* dst, const void* src, std::size_t bytes) = 0;

    // The linear layers' implementations; the public functions above checked the arguments.
    virtual void linear_forward_impl(View<float> Y, View<const float> X, View<const float> W, View<const float> b,
                                     int batch, int in, int out, Activation act) = 0;
    virtual void linear_forward_batched_impl(View<float> Y, View<const float> X, std::size_t x_stride,
                                             View<const float> params, std::size_t param_stride, std::size_t w_offset,
                                             std::ptrdiff_t b_offset, int count, int batch, int in, int out,
                                             Activation act) = 0;
    virtual void head_backward_impl(View<float> dZ, View<float> grads, View<const float> dOut, View<const float> X,
                                    View<const float> params, std::size_t param_stride, std::size_t head_w_offset,
                                    std::ptrdiff_t head_b_offset, std::ptrdiff_t hidden_b_offset, int count, int batch,
                                    int in, int out, Activation act, bool accumulate) = 0;
    virtual void linear_backward_batched_impl(View<float> dX, View<float> grads, View<float> dY, View<const float> Y,
                                              View<const float> X, std::size_t x_stride, View<const float> params,
                                              std::size_t param_stride, std::size_t w_offset, std::ptrdiff_t b_offset,
                                              int count, int batch, int in, int out, Activation act, bool accumulate,
                                              BackwardPart parts) = 0;
    virtual void linear_backward_impl(View<float> dX, View<float> dW, View<float> db, View<float> dY,
                                      View<const float> Y, View<const float> X, View<const float> W, int batch, int in,
                                      int out, Activation act, bool accumulate, BackwardPart parts) = 0;
    /// layers: checked, with max_weights and max_width filled in.
    virtual bool mlp_infer_impl(View<float> /*Y*/, View<const float> /*X*/, View<const float> /*params*/,
                                const abi::MlpInferLayers& /*layers*/, int /*batch*/) {
        return false;
    }

private:
    std::size_t bytes_in_use_ = 0;
    std::size_t peak_bytes_ = 0;
    Precision precision_ = Precision::fp32;
};

template <class T>
void Buffer<T>::release() noexcept {
    if (owner_ && data_) owner_->free_bytes(data_, count_ * sizeof(T));
    data_ = nullptr;
    count_ = 0;
}

}  // namespace fh::ops
