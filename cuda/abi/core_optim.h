/// @file core_optim.h
/// @brief The optimizer's ops: the global gradient norm, Adam (with its soft target), an update's
///        tail (the norm, the training guard and the log's sums in one launch) and their forms for a
///        population's agents at once; their kernels in cuda/kernels/core_optim.cu (the math:
///        math/core.h, math/nn.h). CPU twins: src/ops/core/cpu.cpp.
#pragma once

#include "math/core.h"
#include "math/nn.h"

namespace fh::abi {

using core::AdamConstants;

/// Launch shape of the global norm: a fixed grid (independent of the device), so the summation
/// order and hence the result is the same on every run and every GPU.
inline constexpr int kNormBlocks = 256;
inline constexpr int kNormThreads = 256;

/// partials[blk] = sum of x[i]^2 over block blk's grid-stride share. Launch exactly
/// kNormBlocks x kNormThreads. partials (kNormBlocks), x (n).
using NetworkNormPartials = void(float* __restrict__ partials, const float* __restrict__ x, int n);
/// out[0] = sqrt(sum of partials), summed in a fixed tree order. One block of kNormThreads.
using NetworkNormFinish = void(float* __restrict__ out, const float* __restrict__ partials, int n_partials);
/// ops::NormAndGuard: every block computes its partial as the partials kernel does into
/// scratch[0, kNormBlocks); the last block to finish (a ticket, scratch[kNormBlocks] read as an
/// unsigned, zero between launches) does the finish, the guard and the sums. Launch exactly
/// kNormBlocks x kNormThreads. accum and stats (n_stats) or null.
using NetworkNormGuard = void(float* grad_norm, float* __restrict__ scratch, const float* __restrict__ x, int n,
                              int* __restrict__ gate, nn::GuardState* __restrict__ state, const float* losses,
                              int n_losses, core::CounterValue update, float* __restrict__ accum, const float* stats,
                              int n_stats);
/// Floats of network_norm_guard_kernel's scratch: the partials and the ticket.
inline constexpr int kNormGuardScratch = kNormBlocks + 1;
/// The most losses network_norm_guard_agents_kernel passes to an agent's guard.
inline constexpr int kMaxAgentGuardLosses = 8;
/// ops::NormAndGuardAgents: network_norm_guard_kernel for every agent at once (gridDim.y =
/// agents, each agent's blocks exactly its grid) on agent a's slices, scratch + a
/// kNormGuardScratch and column a of stats; accum rows accum_stride apart.
using NetworkNormGuardAgents = void(float* __restrict__ scratch, const float* __restrict__ x, int n,
                                    int* __restrict__ gate, nn::GuardState* __restrict__ state, float* stats,
                                    int agents, int n_losses, int norm_index, core::CounterValue update,
                                    float* __restrict__ accum, int n_stats, int accum_stride);
/// Adam's block size (both kernels). The grid has a thread per element (network_adam_kernel) or
/// per four (network_adam_by4_kernel, whose first n % 4 threads also take the tail): adam_blocks.
inline constexpr int kAdamThreads = 256;
/// Whether Adam runs as network_adam_by4_kernel, four elements a thread (float4 loads and stores,
/// then the tail one a thread), instead of network_adam_kernel, one a thread: at least
/// kAdamVectorMinElements of them and every array 16-byte aligned (target may be null). The
/// threshold is where four a thread measured faster (bench/adam-probe.cu: 601,136 elements 4.8
/// against 5.6 us, 322,644 elements 4.2 against 4.0). Each element's floats are the same either
/// way.
inline constexpr long long kAdamVectorMinElements = 1LL << 19;
FH_HD bool adam_vectorized(const void* params, const void* m, const void* v, const void* grads, const void* target,
                           long long n) {
    const unsigned long long bits = reinterpret_cast<unsigned long long>(params) |
                                    reinterpret_cast<unsigned long long>(m) | reinterpret_cast<unsigned long long>(v) |
                                    reinterpret_cast<unsigned long long>(grads) |
                                    reinterpret_cast<unsigned long long>(target);
    return n >= kAdamVectorMinElements && (bits & 15ULL) == 0;
}
/// The blocks of kAdamThreads that Adam's launch over n elements needs (by4: adam_vectorized).
FH_HD long long adam_blocks(long long n, bool by4) {
    const long long threads = by4 ? n / 4 : n;
    return threads > 0 ? (threads + kAdamThreads - 1) / kAdamThreads : 1;
}
/// ops::AdamStep: grad_norm, gate, lr_from and target null where absent; step.counter != null:
/// the bias corrections core::at_step(c, step.value()) (each block computes them once), else c's.
/// network_adam_kernel takes one element a thread, network_adam_by4_kernel four (where
/// adam_vectorized says so); the same floats. Blocks of kAdamThreads.
using NetworkAdam = void(float* __restrict__ params, float* __restrict__ m, float* __restrict__ v,
                         const float* __restrict__ grads, const float* __restrict__ grad_norm,
                         const int* __restrict__ gate, core::CounterValue step, const float* __restrict__ lr_from,
                         AdamConstants c, float* __restrict__ target, float target_tau, float target_keep, int n);
/// ops::AdamStepAgents: network_adam_kernel's pass for every agent at once (gridDim.y = agents,
/// each agent's blocks adam_blocks(n, false)) on agent a's slices and scalars.
using NetworkAdamAgents = void(float* __restrict__ params, float* __restrict__ m, float* __restrict__ v,
                               const float* __restrict__ grads, const float* __restrict__ grad_norm,
                               const int* __restrict__ gate, core::CounterValue step, const float* __restrict__ lr,
                               AdamConstants c, float* __restrict__ target, const float* __restrict__ tau_keep, int n);

}  // namespace fh::abi

#define FH_KERNELS_core_optim(FH_KERNEL)                                            \
    FH_KERNEL(core_optim, network_norm_partials_kernel, NetworkNormPartials)        \
    FH_KERNEL(core_optim, network_norm_finish_kernel, NetworkNormFinish)            \
    FH_KERNEL(core_optim, network_norm_guard_kernel, NetworkNormGuard)              \
    FH_KERNEL(core_optim, network_norm_guard_agents_kernel, NetworkNormGuardAgents) \
    FH_KERNEL(core_optim, network_adam_kernel, NetworkAdam)                         \
    FH_KERNEL(core_optim, network_adam_by4_kernel, NetworkAdam)                     \
    FH_KERNEL(core_optim, network_adam_agents_kernel, NetworkAdamAgents)

#ifndef __CUDACC__
#include <cmath>

#include "ops/op_begin.hpp"

/// Floats of scratch that GlobalNorm needs (one partial sum per block of its fixed grid).
constexpr std::size_t global_norm_scratch_size() noexcept {
    return static_cast<std::size_t>(abi::kNormBlocks);
}
/// Floats of NormAndGuard's scratch: the norm's partials and a ticket. Zero it once after
/// allocating; the op leaves it zero again.
constexpr std::size_t norm_guard_scratch_size() noexcept {
    return static_cast<std::size_t>(abi::kNormGuardScratch);
}

/// out[0] = sqrt(sum_i x[i]^2), deterministic (CUDA: a fixed grid of kNormBlocks x kNormThreads
/// partials in double and a fixed tree; the CPU: a sequential double sum; equal within rounding).
/// out (1), x (n >= 0), scratch (>= global_norm_scratch_size()); all distinct.
struct GlobalNorm {
    View<float> out;
    View<const float> x;
    View<float> scratch;
};

/// A target network that follows the parameters softly, updated in the same pass as Adam: after
/// the step, target[i] = saxpy_element(target[i] * keep, tau, params[i]), the values of
/// Scale(target, keep) then Saxpy(target, tau, params). It moves when the training guard skips the
/// update too (towards the unchanged parameters). Empty target: none.
struct SoftTarget {
    View<float> target;
    float tau = 0.f, keep = 1.f;  ///< keep = float(1 - tau), computed in double as callers did
    static SoftTarget of(View<float> target, double tau) {
        return {target, static_cast<float>(tau), static_cast<float>(1.0 - tau)};
    }
};

/// One Adam update with global-norm clipping (core::adam_element, core::clip_scale): params, m, v,
/// grads (n), all distinct. grad_norm (1): read when p.clip_norm > 0 (may be empty otherwise).
/// gate (1) or empty: when gate[0] == 0 nothing at all is written (the training guard's skip,
/// decided on the device; a soft target still follows). `step` (>= 1, 1-based) is this update's
/// number: from the host (p.step is not used: pass it) or read from device memory (counter_value),
/// with the bias corrections of core::at_step. lr (1) or empty: the learning rate read from device
/// memory instead of p.lr. target: a soft target updated in the same pass (params-sized, distinct
/// from every other buffer, 0 < tau <= 1). The same floats on both backends.
struct AdamStep {
    View<float> params, m, v;
    View<const float> grads, grad_norm;
    View<const int> gate;
    CounterValue step;
    AdamParams p;
    View<const float> lr{};
    SoftTarget target{};
};

/// An update's tail: grad_norm (1) = GlobalNorm of x, then TrainingGuard(gate, state, losses,
/// grad_norm, update), then, with accum, the log's accumulators accum += stats (Saxpy with a = 1;
/// stats may hold grad_norm and losses). On CUDA one launch (network_norm_guard_kernel) instead
/// of three, the same bits. scratch (norm_guard_scratch_size()), zero before the first call.
struct NormAndGuard {
    View<float> grad_norm, scratch;
    View<const float> x;
    View<int> gate;
    View<nn::GuardState> state;
    View<const float> losses;
    CounterValue update;
    View<float> accum{};
    View<const float> stats{};
};

/// NormAndGuard for every agent of a population in one launch. Agent a's gradients are x[a P,
/// (a + 1) P) (P = x.size() / agents), its scratch block a of scratch (agents x
/// norm_guard_scratch_size(), zero before the first call), its gate[a] and state[a]. Its
/// statistics are column a of stats (n_stats, agents), stat-major: the guard reads its losses
/// stats[k agents + a], k < n_losses (at most abi::kMaxAgentGuardLosses), and its norm goes to
/// stats[norm_index agents + a]; then, with accum (agents, n_stats), agent-major (each agent's
/// log sums contiguous, as a single run's), accum row a += column a of stats; accum_stride (0:
/// n_stats) spaces the rows where an agent keeps more sums than these (accum (agents,
/// accum_stride), the first n_stats of each row). Each agent's norm, gate, state and sums are
/// NormAndGuard's on its slices, bit for bit; agent a's update number is update.agent(a)'s (its
/// own counter where update.agent_stride > 0).
struct NormAndGuardAgents {
    int agents;
    View<const float> x;
    View<float> scratch;
    View<int> gate;
    View<nn::GuardState> state;
    View<float> stats;
    int n_losses, norm_index;
    CounterValue update;
    View<float> accum{};
    int accum_stride = 0;
};

/// AdamStep (at update number `step`) for every agent of a population in one launch. Agent a's
/// params, m, v, grads and target are [a P, (a + 1) P) of theirs (P = params.size() / agents);
/// its gradient norm grad_norm[a] (read when p.clip_norm > 0), its gate[a] (or gate empty), its
/// learning rate lr[a] (device memory; p.lr is not used) and, with a target, its soft target's
/// tau and keep tau_keep[2 a], tau_keep[2 a + 1] (device memory, SoftTarget's; target empty:
/// none). p's betas, eps, weight decay and clip are every agent's; agent a's update number is
/// step.agent(a)'s (its own counter where step.agent_stride > 0). Each agent's floats are
/// AdamStep's on its slices with its scalars.
struct AdamStepAgents {
    int agents;
    View<float> params, m, v;
    View<const float> grads, grad_norm;
    View<const int> gate;
    CounterValue step;
    AdamParams p;
    View<const float> lr;
    View<float> target{};
    View<const float> tau_keep{};
};

namespace detail {
inline void check_adam_params(const AdamParams& p, const char* op) {
    require(p.lr >= 0.f && p.beta1 >= 0.f && p.beta1 < 1.f && p.beta2 >= 0.f && p.beta2 < 1.f && p.eps > 0.f &&
                p.weight_decay >= 0.f && !std::isnan(p.clip_norm),
            op,
            "invalid hyper-parameters (lr {}, beta1 {}, beta2 {}, eps {}, weight_decay {}, clip_norm {}): need lr >= "
            "0, betas in [0, 1), eps > 0, weight_decay >= 0",
            p.lr, p.beta1, p.beta2, p.eps, p.weight_decay, p.clip_norm);
}
inline void check_adam_step(CounterValue step, const char* op) {
    require(step.counter != nullptr || step.offset >= 1, op, "step must be >= 1 (1-based), got {}", step.offset);
}
/// The launch's Adam constants: p's, with a host step's bias corrections (a step in device
/// memory: the kernel or the CPU twin computes them).
inline core::AdamConstants adam_constants(const AdamParams& p, CounterValue step) {
    const core::AdamConstants c = core::constants_of(p);
    return step.counter == nullptr ? core::at_step(c, step.offset) : c;
}
}  // namespace detail

inline void check(const GlobalNorm& a) {
    const char* op = "global_norm";
    detail::require_size(a.out.size(), 1, op, "out");
    detail::require(a.scratch.size() >= global_norm_scratch_size(), op,
                    "scratch has {} floats, needs {} (ops::global_norm_scratch_size())", a.scratch.size(),
                    global_norm_scratch_size());
    detail::checked_int_size(a.x.size(), op);
    detail::require_distinct(op, {FH_RANGES_OF(a, out, x, scratch)});
}
FH_LAUNCH(GlobalNorm) {
    // A fixed grid (abi::kNormBlocks x kNormThreads, whatever the device): a fixed summation order.
    gpu.kernels().network_norm_partials_kernel(gpu.stream(),
                                               LaunchDims{dim3(abi::kNormBlocks), dim3(abi::kNormThreads), 0},
                                               a.scratch.data(), a.x.data(), static_cast<int>(a.x.size()));
    gpu.kernels().network_norm_finish_kernel(gpu.stream(), LaunchDims{dim3(1), dim3(abi::kNormThreads), 0},
                                             a.out.data(), a.scratch.data(), abi::kNormBlocks);
}

inline bool check(const AdamStep& a) {
    const char* op = "adam_step";
    const std::size_t n = a.params.size();
    detail::require_sizes(n, op, {FH_SIZES_OF(a, m, v, grads)});
    detail::checked_int_size(n, op);
    if (a.p.clip_norm > 0.f) detail::require_size(a.grad_norm.size(), 1, op, "grad_norm (clip_norm > 0)");
    if (!a.gate.empty()) detail::require_size(a.gate.size(), 1, op, "gate");
    detail::check_adam_params(a.p, op);
    if (overlaps(a.params, a.gate) || overlaps(a.m, a.gate) || overlaps(a.v, a.gate))
        throw std::invalid_argument("ops::adam_step: gate overlaps an updated buffer");
    const View<const float> norm = a.p.clip_norm > 0.f ? a.grad_norm : View<const float>();
    detail::require_distinct(
        op, {FH_RANGES_OF(a, params, m, v, grads), detail::range("grad_norm", norm), FH_RANGES_OF(a, gate)});
    if (!a.target.target.empty()) {
        detail::require_size(a.target.target.size(), n, op, "target");
        detail::require(a.target.tau > 0.f && a.target.tau <= 1.f, op, "target tau must be in (0, 1], got {}",
                        a.target.tau);
        detail::require_distinct(
            op, {detail::range("target", a.target.target), FH_RANGES_OF(a, params, m, v, grads, grad_norm, gate, lr)});
    }
    if (!a.lr.empty()) {
        detail::require_size(a.lr.size(), 1, op, "lr");
        if (overlaps(a.params, a.lr) || overlaps(a.m, a.lr) || overlaps(a.v, a.lr))
            throw std::invalid_argument("ops::adam_step: lr overlaps an updated buffer");
    }
    detail::check_adam_step(a.step, op);
    return n > 0;
}
FH_LAUNCH(AdamStep) {
    float* const t = or_null(a.target.target);
    const long long n = static_cast<long long>(a.params.size());
    const bool by4 = abi::adam_vectorized(a.params.data(), a.m.data(), a.v.data(), a.grads.data(), t, n);
    const LaunchDims dims{dim3(static_cast<unsigned>(abi::adam_blocks(n, by4))), dim3(abi::kAdamThreads), 0};
    auto& kernel = by4 ? gpu.kernels().network_adam_by4_kernel : gpu.kernels().network_adam_kernel;
    kernel(gpu.stream(), dims, a.params.data(), a.m.data(), a.v.data(), a.grads.data(),
           a.p.clip_norm > 0.f ? or_null(a.grad_norm) : nullptr, or_null(a.gate), a.step, or_null(a.lr),
           detail::adam_constants(a.p, a.step), t, a.target.tau, a.target.keep, static_cast<int>(n));
}

inline void check(const NormAndGuard& a) {
    const char* op = "norm_and_guard";
    detail::require_size(a.scratch.size(), norm_guard_scratch_size(), op, "scratch");
    detail::require_size(a.stats.size(), a.accum.size(), op, "stats");
    detail::require_sizes(1, op, {FH_SIZES_OF(a, grad_norm, gate, state)});
    if (a.losses.empty()) throw std::invalid_argument("ops::norm_and_guard: no losses");
    detail::checked_int_size(a.x.size(), op);
    detail::checked_int_size(a.accum.size(), op);
    detail::require_distinct(op, {FH_RANGES_OF(a, grad_norm, scratch, x, gate, state, losses, accum)});
    detail::require_distinct(op, {FH_RANGES_OF(a, accum, stats)});
}
FH_LAUNCH(NormAndGuard) {
    // The fixed grid of GlobalNorm (its partials' order), the last block finishing.
    gpu.kernels().network_norm_guard_kernel(
        gpu.stream(), LaunchDims{dim3(abi::kNormBlocks), dim3(abi::kNormThreads), 0}, a.grad_norm.data(),
        a.scratch.data(), a.x.data(), static_cast<int>(a.x.size()), a.gate.data(), a.state.data(), a.losses.data(),
        static_cast<int>(a.losses.size()), a.update, or_null(a.accum), or_null(a.stats),
        static_cast<int>(a.accum.size()));
}

inline void check(const NormAndGuardAgents& a) {
    const char* op = "norm_and_guard_agents";
    detail::per_agent(a.x.size(), a.agents, op, "gradients");
    const std::size_t N = static_cast<std::size_t>(a.agents);
    detail::require(!a.stats.empty() && a.stats.size() % N == 0, op, "stats ({}) is not (n_stats, {} agents)",
                    a.stats.size(), a.agents);
    const int n_stats = static_cast<int>(a.stats.size() / N);
    detail::require(
        a.n_losses >= 1 && a.n_losses <= abi::kMaxAgentGuardLosses && a.norm_index >= 0 && a.norm_index < n_stats, op,
        "need 1 <= n_losses <= {} and a norm index below {} (got {}, {})", abi::kMaxAgentGuardLosses, n_stats,
        a.n_losses, a.norm_index);
    detail::require_size(a.scratch.size(), N * norm_guard_scratch_size(), op, "scratch");
    detail::require_sizes(N, op, {FH_SIZES_OF(a, gate, state)});
    detail::require(a.accum_stride == 0 || a.accum_stride >= n_stats, op, "accum_stride {} < {} statistics",
                    a.accum_stride, n_stats);
    if (!a.accum.empty())
        detail::require_size(a.accum.size(), N * static_cast<std::size_t>(a.accum_stride ? a.accum_stride : n_stats),
                             op, "accum");
    detail::checked_int_size(a.x.size() / N, op);
    detail::checked_int_size(a.stats.size(), op);
    detail::require_distinct(op, {FH_RANGES_OF(a, x, scratch, gate, state, stats, accum)});
}
FH_LAUNCH(NormAndGuardAgents) {
    const std::size_t N = static_cast<std::size_t>(a.agents);
    const int n_stats = static_cast<int>(a.stats.size() / N);
    gpu.kernels().network_norm_guard_agents_kernel(
        gpu.stream(), LaunchDims{dim3(abi::kNormBlocks, static_cast<unsigned>(a.agents)), dim3(abi::kNormThreads), 0},
        a.scratch.data(), a.x.data(), static_cast<int>(a.x.size() / N), a.gate.data(), a.state.data(), a.stats.data(),
        a.agents, a.n_losses, a.norm_index, a.update, or_null(a.accum), n_stats,
        a.accum_stride ? a.accum_stride : n_stats);
}

inline void check(const AdamStepAgents& a) {
    const char* op = "adam_step_agents";
    detail::per_agent(a.params.size(), a.agents, op, "parameters");
    const std::size_t N = static_cast<std::size_t>(a.agents);
    detail::require_sizes(a.params.size(), op, {FH_SIZES_OF(a, m, v, grads)});
    if (a.p.clip_norm > 0.f) detail::require_size(a.grad_norm.size(), N, op, "grad_norm (clip_norm > 0)");
    if (!a.gate.empty()) detail::require_size(a.gate.size(), N, op, "gate");
    detail::require_size(a.lr.size(), N, op, "lr");
    if (!a.target.empty()) {
        detail::require_size(a.target.size(), a.params.size(), op, "target");
        detail::require_size(a.tau_keep.size(), 2 * N, op, "tau_keep");
    }
    detail::check_adam_step(a.step, op);
    detail::checked_int_size(a.params.size() / N, op);
    detail::require_distinct(op, {FH_RANGES_OF(a, params, m, v, grads, grad_norm, gate, lr, target, tau_keep)});
}
FH_LAUNCH(AdamStepAgents) {
    const long long P = static_cast<long long>(a.params.size() / static_cast<std::size_t>(a.agents));
    const LaunchDims dims{dim3(static_cast<unsigned>(abi::adam_blocks(P, false)), static_cast<unsigned>(a.agents)),
                          dim3(abi::kAdamThreads), 0};
    gpu.kernels().network_adam_agents_kernel(gpu.stream(), dims, a.params.data(), a.m.data(), a.v.data(),
                                             a.grads.data(), a.p.clip_norm > 0.f ? or_null(a.grad_norm) : nullptr,
                                             or_null(a.gate), a.step, a.lr.data(), detail::adam_constants(a.p, a.step),
                                             or_null(a.target), or_null(a.tau_keep), static_cast<int>(P));
}

#include "ops/op_end.hpp"
#endif
