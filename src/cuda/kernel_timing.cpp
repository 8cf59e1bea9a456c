/// @file kernel_timing.cpp
#include "cuda/kernel_timing.hpp"

#include <atomic>
#include <map>
#include <mutex>

#include "cuda/check.hpp"

namespace fh::cuda {
namespace {

std::atomic<bool> g_on{false};
// The ablation filter (bench only: set between phases, read while ops are issued).
std::atomic<bool> g_skip_on{false};
std::atomic<unsigned> g_skip_generation{0};
std::mutex g_skip_mutex;
std::string g_skip_name;

/// Recorded event pairs (reused between collections) and the name of each.
struct Recorder {
    std::mutex mutex;
    std::vector<cudaEvent_t> starts, ends;
    std::vector<std::string> names;
    std::size_t used = 0;
};
Recorder& recorder() {
    static Recorder r;
    return r;
}

}  // namespace

void set_kernel_timing(bool on) noexcept { g_on = on; }
bool kernel_timing() noexcept { return g_on; }

void set_skipped_op(std::string name) {
    std::lock_guard lock(g_skip_mutex);
    g_skip_on = !name.empty();
    g_skip_name = std::move(name);
    ++g_skip_generation;
}
bool op_names_wanted() noexcept { return g_on || g_skip_on; }
bool op_skipped(const std::string& name) {
    if (!g_skip_on) return false;
    std::lock_guard lock(g_skip_mutex);
    return name == g_skip_name;
}
unsigned op_filter_generation() noexcept { return g_skip_generation; }

TimedRegion::TimedRegion(std::string name, cudaStream_t stream) : name_(std::move(name)), stream_(stream) {
    if (!g_on) return;
    auto& r = recorder();
    std::lock_guard lock(r.mutex);
    if (r.used == r.starts.size()) {
        cudaEvent_t a = nullptr, b = nullptr;
        FH_CUDA_CHECK(cudaEventCreate(&a));
        FH_CUDA_CHECK(cudaEventCreate(&b));
        r.starts.push_back(a);
        r.ends.push_back(b);
        r.names.emplace_back();
    }
    slot_ = static_cast<int>(r.used++);
    r.names[static_cast<std::size_t>(slot_)] = name_;
    FH_CUDA_CHECK(cudaEventRecord(r.starts[static_cast<std::size_t>(slot_)], stream_));
}

TimedRegion::~TimedRegion() {
    if (slot_ < 0) return;
    auto& r = recorder();
    std::lock_guard lock(r.mutex);
    FH_CUDA_CHECK_NOTHROW(cudaEventRecord(r.ends[static_cast<std::size_t>(slot_)], stream_));
}

std::vector<KernelTime> collect_kernel_times() {
    auto& r = recorder();
    std::lock_guard lock(r.mutex);
    FH_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<KernelTime> out;
    std::map<std::string, std::size_t> index;
    for (std::size_t i = 0; i < r.used; ++i) {
        float ms = 0.f;
        FH_CUDA_CHECK(cudaEventElapsedTime(&ms, r.starts[i], r.ends[i]));
        auto [it, fresh] = index.try_emplace(r.names[i], out.size());
        if (fresh) out.push_back(KernelTime{r.names[i], 0, 0.0});
        out[it->second].calls += 1;
        out[it->second].total_us += 1000.0 * ms;
    }
    r.used = 0;
    return out;
}

}  // namespace fh::cuda
