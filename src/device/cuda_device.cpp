/// @file cuda_device.cpp
/// @brief The CUDA backend's runtime: the device, its lanes (streams with their cuBLAS handles and
///        scratch), forks and joins (run_concurrently), CUDA Graphs (run_sequence), memory from the
///        stream-ordered pool and the transfers, and precision's library modes. The linear layers
///        (products, their GEMM choices and precision): cuda_linear.cpp.

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

}  // namespace fh::ops
