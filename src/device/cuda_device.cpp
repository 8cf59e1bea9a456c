/// @file cuda_device.cpp
/// @brief The CUDA backend's runtime: the device, its lanes (streams with their cuBLAS handles and
///        scratch), forks and joins (run_concurrently), CUDA Graphs (run_sequence), memory from the
///        stream-ordered pool and the transfers, precision's library modes, and the core ops that
///        are one kernel each (core_vector, the global norm, Adam), all on the current lane's
///        stream. The linear layers (products, their GEMM choices and precision): cuda_linear.cpp.
///        Device:: (src/device/device.cpp) checked sizes and that outputs are distinct from every
///        other operand before these run.

#include "device/cuda_device.hpp"

#include "device/cuda/kernel_timing.hpp"
#include "device/cuda_lane.hpp"
#include "util/errors.hpp"
#include "util/log.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <cstdint>

namespace fh::ops {

using cuda::LaunchDims;

namespace {
constexpr std::uint64_t kPoolKeepBytes = std::uint64_t{64} << 20;
}  // namespace

CudaDevice::CudaDevice(int ordinal, int side_lanes)
    : device_(cuda::select_device(ordinal)), registry_(cuda::KernelRegistry::shared()) {
    FH_CUBLAS_CHECK(cublasLtCreate(&lt_));
    // The narrow layers' largest tile double-buffers its inputs in more than 48 KB.
    kernels().network_linear_narrow_8_kernel.allow_dynamic_smem(
        abi::linear_narrow_smem_bytes(128, abi::kLinearNarrowMaxIn), device_.ordinal);
    int pools = 0;
    FH_CUDA_CHECK(cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, device_.ordinal));
    stream_ordered_memory_ = pools != 0;
    if (stream_ordered_memory_) {
        // The pool keeps up to this much freed memory for the next allocations (a backtest's
        // buffers, allocated anew by every evaluation) instead of returning it at each synchronisation.
        cudaMemPool_t pool = nullptr;
        FH_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device_.ordinal));
        std::uint64_t keep = kPoolKeepBytes;
        FH_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
    }
    const int sides = std::clamp(side_lanes, 0, kSideLanes);
    for (int i = 0; i <= sides; ++i) lanes_.push_back(std::make_unique<Lane>());
    const auto s = [](Clock::time_point a, Clock::time_point b) {
        return std::chrono::duration<double>(b - a).count();
    };
    log::debug("device start-up: driver and context {:.3f} s, kernel modules {:.3f} s, streams and cuBLAS {:.3f} s",
               s(created_, context_ready_), s(context_ready_, modules_ready_), s(modules_ready_, Clock::now()));
}

CudaDevice::~CudaDevice() {
    lt_plans_.clear();
    split_k_plans_.clear();
    if (lt_) cublasLtDestroy(lt_);
}

std::string CudaDevice::description() const {
    return fmt::format("cuda:{} {} (sm_{}, {} SMs, {:.1f} GiB)", device_.ordinal, device_.name, device_.arch(),
                       device_.sm_count, static_cast<double>(device_.total_memory) / (1024.0 * 1024.0 * 1024.0));
}

std::optional<Device::MemoryInfo> CudaDevice::memory() const {
    std::size_t free_b = 0, total_b = 0;
    FH_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    return MemoryInfo{device_.name, free_b, total_b};
}

namespace {

/// A captured sequence: the graph and its executable instance.
struct CudaGraph final : OpSequence::Captured {
    unsigned filter_generation = 0;  ///< the ablation filter it was captured under (bench --ablate)
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    ~CudaGraph() override {
        if (exec) FH_CUDA_CHECK_NOTHROW(cudaGraphExecDestroy(exec));
        if (graph) FH_CUDA_CHECK_NOTHROW(cudaGraphDestroy(graph));
    }
};

/// --verbose: what a captured sequence holds (its nodes are what a step launches; docs/performance.md,
/// "Populations", compares the rates per node).
void log_graph_shape(cudaGraph_t graph) {
    if (!log::shows(log::Level::debug)) return;
    std::size_t count = 0;
    FH_CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &count));
    std::vector<cudaGraphNode_t> nodes(count);
    if (count > 0) FH_CUDA_CHECK(cudaGraphGetNodes(graph, nodes.data(), &count));
    std::size_t kernels = 0, memsets = 0, copies = 0, edges = 0;
    for (auto n : nodes) {
        cudaGraphNodeType t{};
        FH_CUDA_CHECK(cudaGraphNodeGetType(n, &t));
        kernels += t == cudaGraphNodeTypeKernel;
        memsets += t == cudaGraphNodeTypeMemset;
        copies += t == cudaGraphNodeTypeMemcpy;
    }
    FH_CUDA_CHECK(cudaGraphGetEdges(graph, nullptr, nullptr, nullptr, &edges));
    log::debug("captured a sequence: {} nodes ({} kernels, {} memsets, {} copies, {} other), {} edges", count, kernels,
               memsets, copies, count - kernels - memsets - copies, edges);
}

}  // namespace

void CudaDevice::run_sequence(OpSequence& seq, const std::function<void()>& ops) {
    if (!graphs_ || cuda::sync_debug() || cuda::kernel_timing()) {  // each op on its own
        ops();
        return;
    }
    if (seq.captured && static_cast<CudaGraph&>(*seq.captured).filter_generation != cuda::op_filter_generation()) {
        FH_CUDA_CHECK(
            cudaStreamSynchronize(stream()));  // bench --ablate changed the filter: the old graph may still run
        seq.reset();
    }
    if (!seq.captured) {
        auto g = std::make_unique<CudaGraph>();
        g->filter_generation = cuda::op_filter_generation();
        FH_CUDA_CHECK(cudaStreamBeginCapture(stream(), cudaStreamCaptureModeThreadLocal));
        try {
            ops();
        } catch (...) {
            cudaGraph_t broken = nullptr;
            (void)cudaStreamEndCapture(stream(), &broken);
            if (broken) (void)cudaGraphDestroy(broken);
            (void)cudaGetLastError();
            throw;
        }
        FH_CUDA_CHECK(cudaStreamEndCapture(stream(), &g->graph));
        log_graph_shape(g->graph);
        FH_CUDA_CHECK(cudaGraphInstantiate(&g->exec, g->graph, 0));
        seq.captured = std::move(g);
    }
    FH_CUDA_CHECK(cudaGraphLaunch(static_cast<CudaGraph&>(*seq.captured).exec, stream()));
}

void CudaDevice::synchronize() {
    lanes_[0]->stream.synchronize();
}
cudaStream_t CudaDevice::stream() const noexcept {
    return lanes_[static_cast<std::size_t>(lane_)]->stream.get();
}
cublasHandle_t CudaDevice::cublas() const noexcept {
    return lanes_[static_cast<std::size_t>(lane_)]->cublas.get();
}
void* CudaDevice::workspace() const noexcept {
    return lanes_[static_cast<std::size_t>(lane_)]->workspace;
}
float* CudaDevice::bias_partials() const noexcept {
    return lanes_[static_cast<std::size_t>(lane_)]->bias_partials;
}
unsigned* CudaDevice::bias_tickets() const noexcept {
    return lanes_[static_cast<std::size_t>(lane_)]->bias_tickets;
}

void CudaDevice::run_branches(std::span<const std::function<void()>> branches) {
    // Free lanes for all branches but the last (which stays on the current lane); branches
    // without a lane run on the current lane after the others were issued.
    std::vector<int> taken;
    if (!cuda::sync_debug() && !cuda::kernel_timing())
        for (int i = 1; i < static_cast<int>(lanes_.size()) && taken.size() + 1 < branches.size(); ++i)
            if (!lanes_[static_cast<std::size_t>(i)]->busy) taken.push_back(i);
    if (taken.empty()) {
        for (const auto& b : branches) b();
        return;
    }
    const int parent = lane_;
    fork_.record(stream());
    for (int l : taken) {
        Lane& lane = *lanes_[static_cast<std::size_t>(l)];
        lane.busy = true;
        FH_CUDA_CHECK(cudaStreamWaitEvent(lane.stream.get(), fork_.get(), 0));
    }
    auto release = [&] {
        lane_ = parent;
        for (int l : taken) lanes_[static_cast<std::size_t>(l)]->busy = false;
    };
    try {
        for (std::size_t i = 0; i < branches.size(); ++i) {
            lane_ = i < taken.size() ? taken[i] : parent;
            branches[i]();
        }
    } catch (...) {
        release();
        throw;
    }
    lane_ = parent;
    for (int l : taken) {  // join: later ops on the parent lane wait for every branch
        Lane& lane = *lanes_[static_cast<std::size_t>(l)];
        lane.done.record(lane.stream.get());
        FH_CUDA_CHECK(cudaStreamWaitEvent(stream(), lane.done.get(), 0));
    }
    release();
}

void CudaDevice::make_current() {
    FH_CUDA_CHECK(cudaSetDevice(device_.ordinal));
}

void CudaDevice::apply_precision(Precision p) {
    const auto mode = p == Precision::tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH;
    if (p == Precision::bf16) make_current();  // the scratch on this device, whatever the thread's current one
    for (const auto& lane : lanes_) {
        FH_CUBLAS_CHECK(cublasSetMathMode(lane->cublas.get(), mode));
        // Before anything is captured (set with the device): nothing may allocate inside a capture.
        if (p == Precision::bf16 && lane->bf16 == nullptr)
            FH_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&lane->bf16),
                                     2 * static_cast<std::size_t>(kBf16RegionElements) * sizeof(unsigned short)));
    }
}

void* CudaDevice::allocate_bytes(std::size_t bytes) {
    void* p = nullptr;
    if (!stream_ordered_memory_) {
        FH_CUDA_CHECK(cudaMalloc(&p, bytes == 0 ? 1 : bytes));
        return p;
    }
    // On the device's own stream, which every lane forks from and joins (so the memory is there
    // for any lane's later ops, and an upload, which uses that stream, follows the allocation).
    // The current lane captures whenever a sequence does (a lane forked inside a capture joins it).
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    FH_CUDA_CHECK(cudaStreamIsCapturing(stream(), &capturing));
    if (capturing != cudaStreamCaptureStatusNone)  // it would become a node of the graph
        throw std::logic_error("CudaDevice: memory allocated while a sequence is captured");
    cudaStream_t own = lanes_[0]->stream.get();
    FH_CUDA_CHECK(cudaMallocAsync(&p, bytes == 0 ? 1 : bytes, own));
    // Inside a branch of run_concurrently the lane forked before the allocation: wait for it.
    if (lane_ != 0) FH_CUDA_CHECK(cudaStreamSynchronize(own));
    return p;
}

void CudaDevice::release_bytes(void* p) noexcept {
    // After the ops issued so far on the current lane (a branch's own buffers) or the device's
    // stream (which has joined every branch); no wait for anything else on the GPU.
    if (stream_ordered_memory_)
        FH_CUDA_CHECK_NOTHROW(cudaFreeAsync(p, stream()));
    else
        FH_CUDA_CHECK_NOTHROW(cudaFree(p));
}

void CudaDevice::upload_bytes(void* dst, const void* src, std::size_t bytes) {
    if (bytes == 0) return;
    // Pageable source: the copy is staged, so it completes before this call returns.
    FH_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, lanes_[0]->stream.get()));
    synchronize();
}

void CudaDevice::download_bytes(void* dst, const void* src, std::size_t bytes) {
    if (bytes == 0) return;
    FH_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, lanes_[0]->stream.get()));
    synchronize();
}

void CudaDevice::copy_bytes(void* dst, const void* src, std::size_t bytes) {
    const std::string label = cuda::op_names_wanted() ? fmt::format("device copy {} bytes", bytes) : std::string();
    if (cuda::op_filtered(label, stream())) return;  // bench --ablate
    const cuda::TimedRegion timed(label, stream());
    FH_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream()));
}

void CudaDevice::fill_impl(View<float> y, float value) {
    kernels().fill_f32_kernel(stream(), LaunchDims::linear(y.size()), y.data(), value, static_cast<int>(y.size()));
}

void CudaDevice::copy_impl(View<float> dst, View<const float> src) {
    // Distinct buffers: Device::copy refused overlap before calling here.
    kernels().copy_f32_kernel(stream(), LaunchDims::linear(dst.size()), dst.data(), src.data(),
                              static_cast<int>(dst.size()));
}

void CudaDevice::copy_group_impl(std::span<const CopyPair> copies) {
    // One launch, a grid row (grid.y) per non-empty copy; Device::copy_group checked the overlaps.
    abi::CopyGroupArgs args{};
    unsigned count = 0;
    std::size_t longest = 0;
    for (const CopyPair& c : copies) {
        if (c.dst.empty()) continue;
        args.dst[count] = c.dst.data();
        args.src[count] = c.src.data();
        args.bytes[count] = static_cast<long long>(c.width);
        args.rows[count] = static_cast<long long>(c.rows);
        args.dst_pitch[count] = static_cast<long long>(c.dst_pitch);
        args.src_pitch[count] = static_cast<long long>(c.src_pitch);
        longest = std::max(longest, c.width * c.rows);
        ++count;
    }
    if (count == 0) return;
    LaunchDims dims = LaunchDims::linear((longest + 3) / 4);
    dims.grid.y = count;
    kernels().copy_group_kernel(stream(), dims, args);
}

void CudaDevice::saxpy_impl(View<float> y, float a, View<const float> x) {
    // Distinct buffers: Device::saxpy refused overlap before calling here.
    kernels().saxpy_f32_kernel(stream(), LaunchDims::linear(y.size()), y.data(), x.data(), a,
                               static_cast<int>(y.size()));
}

void CudaDevice::scale_impl(View<float> y, float alpha) {
    kernels().scale_f32_kernel(stream(), LaunchDims::linear(y.size()), y.data(), alpha, static_cast<int>(y.size()));
}

void CudaDevice::mean_impl(View<float> out, View<const float> x) {
    kernels().mean_f32_kernel(stream(), LaunchDims{dim3(static_cast<unsigned>(out.size())), dim3(abi::kMeanThreads), 0},
                              out.data(), x.data(), static_cast<int>(x.size() / out.size()));
}

void CudaDevice::increment_impl(View<long long> counter) {
    kernels().increment_i64_kernel(stream(), LaunchDims{dim3(1), dim3(1), 0}, counter.data());
}

void CudaDevice::copy_every_impl(View<float> dst, View<const float> src, View<const long long> counter,
                                 long long period) {
    kernels().copy_every_f32_kernel(stream(), LaunchDims::linear(dst.size()), dst.data(), src.data(), counter.data(),
                                    period, static_cast<int>(dst.size()));
}

void CudaDevice::global_norm_impl(View<float> out, View<const float> x, View<float> scratch) {
    // A fixed grid (abi::kNormBlocks x kNormThreads, whatever the device): a fixed summation
    // order, so the norm is the same on every run. out, x and scratch are distinct.
    const LaunchDims partial_dims{dim3(abi::kNormBlocks), dim3(abi::kNormThreads), 0};
    const LaunchDims finish_dims{dim3(1), dim3(abi::kNormThreads), 0};
    kernels().network_norm_partials_kernel(stream(), partial_dims, scratch.data(), x.data(),
                                           static_cast<int>(x.size()));
    kernels().network_norm_finish_kernel(stream(), finish_dims, out.data(), scratch.data(), abi::kNormBlocks);
}

void CudaDevice::adam_step_impl(View<float> params, View<float> m, View<float> v, View<const float> grads,
                                View<const float> grad_norm, View<const int> gate, core::CounterValue step,
                                View<const float> lr, const core::AdamConstants& c, const SoftTarget& target) {
    // params, m, v, grads and grad_norm are distinct; gate overlaps none of the written buffers.
    float* const t = target.target.empty() ? nullptr : target.target.data();
    const bool by4 =
        abi::adam_vectorized(params.data(), m.data(), v.data(), grads.data(), t, static_cast<long long>(params.size()));
    const auto blocks = abi::adam_blocks(static_cast<long long>(params.size()), by4);  // a thread per unit
    const LaunchDims dims{dim3(static_cast<unsigned>(blocks)), dim3(abi::kAdamThreads), 0};
    auto& launch = by4 ? kernels().network_adam_by4_kernel : kernels().network_adam_kernel;
    launch(stream(), dims, params.data(), m.data(), v.data(), grads.data(),
           grad_norm.empty() ? nullptr : grad_norm.data(), gate.empty() ? nullptr : gate.data(), step,
           lr.empty() ? nullptr : lr.data(), c, t, target.tau, target.keep, static_cast<int>(params.size()));
}

}  // namespace fh::ops
