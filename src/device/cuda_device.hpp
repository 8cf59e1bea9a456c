/// @file cuda_device.hpp
/// @brief The CUDA backend: the device, its stream, the embedded kernels (typed handles) and
///        cuBLAS. Every op is asynchronous on the stream; downloads synchronise. The ops' launch
///        rules (cuda/abi/<module>.h) launch through kernels() on stream(). Defined in
///        cuda_device.cpp (the runtime: lanes, graphs, memory) and cuda_linear.cpp (the linear layers: products, their
///        GEMM choices and precision); the lanes in cuda_lane.hpp.
#pragma once

#include <cublasLt.h>

#include <chrono>
#include <map>
#include <tuple>

#include "device/cuda/device_info.hpp"
#include "device/cuda/kernel_table.hpp"
#include "device/cuda/resources.hpp"
#include "device/device.hpp"

namespace fh::ops {

class CudaDevice final : public Device {
public:
    /// Selects the device (checking that an embedded cubin runs on it), loads every module and
    /// resolves every kernel, so that any problem shows here and not mid-run. `side_lanes`
    /// (0..kSideLanes): the streams run_concurrently may fork to; fewer only serialise branches
    /// (the results are the same) and save each lane's scratch (a population's agents).
    explicit CudaDevice(int ordinal, int side_lanes = kSideLanes);
    ~CudaDevice() override;
    CudaDevice(const CudaDevice&) = delete;
    CudaDevice& operator=(const CudaDevice&) = delete;

    Backend backend() const noexcept override { return Backend::cuda; }
    std::string description() const override;
    void synchronize() override;
    CudaDevice* cuda() noexcept override { return this; }
    std::optional<MemoryInfo> memory() const override;
    /// Graphs are used unless turned off here, by --cuda-sync-debug or by kernel timing.
    void set_graphs(bool on) override { graphs_ = on; }
    void make_current() override;
    void run_sequence(OpSequence& seq, const std::function<void()>& ops) override;
    void run_branches(std::span<const std::function<void()>> branches) override;

    /// Agents whose work shares the GPU at once (a population's, set by its set-up; 1 otherwise).
    /// Launch shapes that spend extra work for a shorter chain (dqn_loss's four warps per row)
    /// count every sharer's rows, since together they fill the GPU. The results are the same for
    /// any value.
    void set_gpu_sharers(int agents) noexcept { sharers_ = agents < 1 ? 1 : agents; }
    int gpu_sharers() const noexcept { return sharers_; }
    /// Whether the four-warp DQN loss may copy its head rows to shared memory first where they
    /// fit (abi::dqn_loss_stages_rows; on by default). The same results either way: tests turn it off
    /// to compare.
    void set_stage_head_rows(bool on) noexcept { stage_head_rows_ = on; }
    bool stage_head_rows() const noexcept { return stage_head_rows_; }

    const cuda::DeviceInfo& device() const noexcept { return device_; }
    /// The stream ops are issued to: the device's own, or a lane's inside run_concurrently.
    cudaStream_t stream() const noexcept;
    const cuda::KernelTable& kernels() const noexcept { return registry_->kernels(); }
    cublasHandle_t cublas() const noexcept;
    /// Streams besides the device's own that run_concurrently can fork to (nested forks included).
    static constexpr int kSideLanes = 5;
    /// Side lanes of a population's agent: collection beside the updates, and one fork inside.
    static constexpr int kAgentSideLanes = 2;

protected:
    /// fp32: cuBLAS's default math; tf32: CUBLAS_TF32_TENSOR_OP_MATH and cuBLASLt's
    /// CUBLAS_COMPUTE_32F_FAST_TF32; bf16: every linear layer's product from BF16 operands
    /// (bf16_linear_forward, bf16_backward), with each lane's BF16 scratch allocated here.
    void apply_precision(Precision p) override;
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
    bool mlp_infer_impl(View<float> Y, View<const float> X, View<const float> params, const abi::MlpInferLayers& layers,
                        int batch) override;
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
    /// Y = tanh(X W^T + b) for layers of at most abi::kLinearNarrowMaxIn inputs: product, bias and
    /// tanh in one network_linear_narrow_* launch, where the SGEMM path needs a pass of its own
    /// for the tanh (cuBLASLt has no tanh epilogue). False for other activations (cuBLASLt's
    /// bias and ReLU epilogues are faster there, docs/performance.md), wider layers or a grid too
    /// large. `count` layers at once, as lt_linear_forward's.
    bool narrow_linear_forward(float* Y, const float* X, long long x_stride, const float* W, const float* b,
                               long long w_stride, int count, int batch, int in, int out, Activation act);
    /// Y = act(X W^T + b) through cuBLASLt with the bias and ReLU in its epilogue; false when no
    /// algorithm fits (tanh, or the heuristic found none): then SGEMM + the bias kernel.
    /// `count` layers at once: W_k = W + k * w_stride, b_k = b + k * w_stride (b null: no bias),
    /// X_k = X + k * x_stride, Y_k = Y + k * batch * out.
    /// In bf16 X and W are BF16 (the lane's scratch, bf16_linear_forward) and b_stride is the
    /// biases' own stride (the weights' copies are packed).
    bool lt_linear_forward(float* Y, const void* X, long long x_stride, const void* W, const float* b,
                           long long w_stride, long long b_stride, int count, int batch, int in, int out,
                           Activation act);
    /// Y = act(Y + b) after a product without epilogue (network_bias_act_forward_kernel).
    void bias_act(float* Y, const float* b, Activation act, int batch, int out);

    // gpu.precision = "bf16": the operands rounded into the lane's BF16 scratch, two regions of
    // kBf16RegionElements (0: the weights, or X for dW; 1: the activations or dZ), then cuBLAS with
    // BF16 inputs, FP32 outputs and CUBLAS_COMPUTE_32F. Operands larger than a region go in row
    // chunks of a size fixed by the shape (dW: summed chunk after chunk into dW); a weight matrix
    // must fit a region (else a UsageError names the layer).
    static constexpr long long kBf16RegionElements = abi::kBf16RegionElements;
    static_assert(abi::kBf16ScratchStreams == 1 + kSideLanes);
    /// One operand: `rows` blocks of `width` floats, block r at src + r pitch (null src: none).
    struct Bf16Operand {
        const float* src = nullptr;
        long long width = 0, rows = 1, pitch = 0;
    };
    /// Rounds `a` into region 0 and `b` into region 1 (network_round_bf16_kernel, one launch).
    void round_bf16(const Bf16Operand& a, const Bf16Operand& b);
    const unsigned short* bf16_region(int region) const noexcept;
    /// C = op(A) op(B) (+ beta C) column-major, as cublasGemmEx / cublasGemmStridedBatchedEx.
    void gemm_bf16(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const unsigned short* A, int lda,
                   long long stride_a, const unsigned short* B, int ldb, long long stride_b, float beta, float* C,
                   int ldc, long long stride_c, int count, const std::string& label);
    /// linear_forward(_batched) in bf16: `count` layers, W_k at W + k w_stride, b_k at b + k b_stride.
    void bf16_linear_forward(float* Y, const float* X, long long x_stride, const float* W, long long w_stride,
                             const float* b, long long b_stride, int count, int batch, int in, int out, Activation act);
    /// One network's dW (weights) and dX (input, dX not null) from dZ in bf16.
    void bf16_backward(float* dX, float* dW, const float* dZ, const float* X, const float* W, int batch, int in,
                       int out, bool accumulate, bool weights, bool input);
    /// A weight matrix larger than a BF16 region: refused (UsageError).
    static void require_bf16_weights(int in, int out);

    // Start-up split for the debug log (members start in this order): the driver and the
    // context, the kernel modules, then the streams and cuBLAS.
    using Clock = std::chrono::steady_clock;
    Clock::time_point created_ = Clock::now();
    cuda::DeviceInfo device_;
    Clock::time_point context_ready_ = Clock::now();
    std::shared_ptr<const cuda::KernelRegistry> registry_;  ///< shared by the process's devices
    Clock::time_point modules_ready_ = Clock::now();
    // The lanes: lanes_[0] is the device's own stream, the others run_concurrently's side lanes.
    // Each is a stream with its own cuBLAS handle, cuBLAS/cuBLASLt workspace (set explicitly so
    // that no library allocates while a sequence is captured) and bias-gradient scratch (ops on
    // different lanes may run at once, so they share none), all of the same sizes so that cuBLAS
    // picks the same algorithms on every lane.
    struct Lane;
    std::vector<std::unique_ptr<Lane>> lanes_;
    int lane_ = 0;  ///< the lane ops are issued to
    cuda::Event fork_{cudaEventDisableTiming};
    cublasLtHandle_t lt_ = nullptr;
    void* workspace() const noexcept;
    /// The activation's backward and/or the bias gradient of `count` networks (linear_backward's
    /// first two parts; network_act_bias_grad_kernel).
    void act_bias_grad(float* dY, float* db, const float* Y, Activation act, bool accumulate, int batch, int out,
                       int count, long long net_stride, long long db_stride);
    float* bias_partials() const noexcept;
    unsigned* bias_tickets() const noexcept;
    /// cuBLASLt plans by shape, epilogue, math mode and alignment: the same algorithm for the same
    /// problem on every call (run-to-run determinism).
    struct LtPlan;
    std::map<std::tuple<int, int, int, int, int, int, int, long long, long long, long long>, std::shared_ptr<LtPlan>>
        lt_plans_;
    /// The weight gradient dW (in x out, column-major) = X dZ^T over `rows` rows with the rows (K)
    /// split across blocks, where its few output tiles would leave most SMs idle and the rows are
    /// many (the rule: the definition). False when the rule or the library declines: the caller
    /// issues cublasSgemm.
    bool split_k_weight_gradient(float* dW, const float* X, const float* dZ, int in, int out, int rows,
                                 const std::string& label);
    static constexpr int kSplitKMinRows = 1024;
    struct SplitKPlan;
    /// The split-K plan of a dW product (in, out, rows) at pointer alignment `align`, or null when
    /// the rule takes cublasSgemm (or none of the library's algorithms fits).
    const SplitKPlan* split_k_plan(int in, int out, int rows, int align);
    /// linear_backward_batched's weight gradients (count networks, dW of network k at k dw_stride)
    /// with the rows split (the definition says when); false: the caller issues one strided batch.
    bool split_weight_gradient_batched(float* dW, long long dw_stride, const float* X, long long x_stride,
                                       const float* dZ, int in, int out, int rows, int count, bool accumulate,
                                       const std::string& label);
    static constexpr int kSplitKBatchedMinSliceRows = 256;
    std::map<std::tuple<int, int, int, int>, std::shared_ptr<SplitKPlan>> split_k_plans_;
    bool graphs_ = true;  ///< run_sequence captures CUDA Graphs
    /// Memory from the device's stream-ordered pool (cudaMallocAsync): freeing it waits for no
    /// other stream, where cudaFree waits for the whole GPU (a population's other agents too).
    bool stream_ordered_memory_ = false;
    int sharers_ = 1;              ///< agents sharing the GPU (set_gpu_sharers)
    bool stage_head_rows_ = true;  ///< set_stage_head_rows
};

}  // namespace fh::ops
