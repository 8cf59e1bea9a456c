/// @file kernel_timing.cpp
#include "device/cuda/kernel_timing.hpp"

#include <atomic>
#include <map>
#include <mutex>
#include <stdexcept>

#include "device/cuda/check.hpp"

namespace fh::cuda {
namespace {

std::atomic<bool> g_on{false};
// The ablation filter (bench only: set between phases, read while ops are issued).
std::atomic<bool> g_filter_on{false};
std::atomic<unsigned> g_filter_generation{0};
std::mutex g_filter_mutex;
std::string g_filter_name;
FilterMode g_filter_mode = FilterMode::leave_out;
const void* g_stand_in_owner = nullptr;
std::function<void(cudaStream_t)> g_stand_in;
// Set while this thread launches the stand-in, whose own launch the filter must let through.
thread_local bool t_launching_stand_in = false;

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

void set_kernel_timing(bool on) noexcept {
    g_on = on;
}
bool kernel_timing() noexcept {
    return g_on;
}

void set_op_filter(std::string name, FilterMode mode) {
    std::lock_guard lock(g_filter_mutex);
    g_filter_on = !name.empty();
    g_filter_name = std::move(name);
    g_filter_mode = mode;
    ++g_filter_generation;
}
bool op_names_wanted() noexcept {
    return g_on || g_filter_on;
}
bool op_filtered(const std::string& name, cudaStream_t stream) {
    if (!g_filter_on || t_launching_stand_in) return false;
    std::function<void(cudaStream_t)> stand_in;
    {
        std::lock_guard lock(g_filter_mutex);
        const bool named = g_filter_name == kEveryOp || name == g_filter_name;
        if (named == (g_filter_mode == FilterMode::alone)) return false;
        if (g_filter_mode == FilterMode::leave_out) return true;
        if (!g_stand_in) throw std::logic_error("ablation filter: no stand-in kernel registered");
        stand_in = g_stand_in;
    }
    t_launching_stand_in = true;
    try {
        stand_in(stream);
    } catch (...) {
        t_launching_stand_in = false;
        throw;
    }
    t_launching_stand_in = false;
    return true;
}
void set_stand_in(const void* owner, std::function<void(cudaStream_t)> launch) {
    std::lock_guard lock(g_filter_mutex);
    g_stand_in_owner = owner;
    g_stand_in = std::move(launch);
}
void clear_stand_in(const void* owner) noexcept {
    std::lock_guard lock(g_filter_mutex);
    if (g_stand_in_owner != owner) return;
    g_stand_in_owner = nullptr;
    g_stand_in = nullptr;
}
unsigned op_filter_generation() noexcept {
    return g_filter_generation;
}

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
