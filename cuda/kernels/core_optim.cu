/* core_optim.cu — the optimizer's kernels: the global gradient norm, Adam, an update's tail (the
 * norm and the training guard in one launch) and their forms for a population's agents.
 *
 * Math:        global norm       out = sqrt(sum_i x[i]^2); with the guard (nn::guard_decide) in
 *                                the last block: the norm and guard of an update's tail, one launch
 *              Adam              g = grad * min(1, clip / (norm + 1e-6)); m = b1 m + (1-b1) g;
 *                                v = b2 v + (1-b2) g^2; p -= lr (mhat / (sqrt(vhat) + eps) + wd p)
 *                                (core::clip_scale, core::adam_element; bias corrections from the host, or
 *                                core::at_step of the update number in device memory)
 * Layout:      x, params, m, v, grads (n) flat; out, grad_norm, gate (1); scratch (kNormBlocks
 *              partials, then the fused kernels' ticket).
 * Launch:      Norm: partials with exactly kNormBlocks x kNormThreads, then finish with one block
 *              of kNormThreads. Adam: abi::adam_blocks blocks of abi::kAdamThreads, a thread per
 *              element, or per four by float4 in network_adam_by4_kernel where
 *              abi::adam_vectorized says so. A population's norm and guard and Adam
 *              (network_norm_guard_agents_kernel, network_adam_agents_kernel): the single
 *              kernels' grids in x, one agent per blockIdx.y, each on its slices.
 * Determinism: run-to-run exact, no float atomics: the norm reduces a fixed grid (independent of
 *              the device's SM count) in a fixed tree order, in double. Adam equals the CPU twin
 *              bit for bit (its element rounds every product and sum on its own: core::mul_rn,
 *              add_rn); the norm differs from the CPU's sequential sum by order only.
 * Aliasing:    pointers are __restrict__: the six Adam buffers, out/partials/x must be distinct;
 *              the ops' checks (cuda/abi/core_optim.h) refuse overlap before launching.
 * Gate:        Adam does nothing when *gate == 0 (the training guard's skip, no host sync).
 * Signatures:  cuda/abi/core_optim.h (checked below).
 * CPU twins:   src/ops/core/cpu.cpp; tests: tests/device/test_nn_ops*.cpp, tests/ops/.
 */
#include "abi/core_optim.h"
#include "device_functions.cuh"

using fh::device::global_thread_index;

namespace {

/// Sums one value per thread of a block of kNormThreads threads in a fixed tree order; thread 0
/// gets the result.
__device__ double block_sum_fixed(double v) {
    __shared__ double s[fh::abi::kNormThreads];
    s[threadIdx.x] = v;
    __syncthreads();
    for (int stride = fh::abi::kNormThreads / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < static_cast<unsigned>(stride)) s[threadIdx.x] += s[threadIdx.x + stride];
        __syncthreads();
    }
    return s[0];
}

/// This block's partial of the squared norm of x (thread 0 gets it): every thread's grid-stride
/// fma (grid_stride_sum_squares), then block_sum_fixed. The fma is explicit: the CPU emulations
/// (src/ops/dqn/cpu.cpp) use it.
__device__ double squared_norm_partial(const float* __restrict__ x, int n) {
    return block_sum_fixed(fh::device::grid_stride_sum_squares(x, n));
}

}  // namespace

extern "C" __global__ void network_norm_partials_kernel(float* __restrict__ partials, const float* __restrict__ x,
                                                        int n) {
    const double block = squared_norm_partial(x, n);
    if (threadIdx.x == 0) partials[blockIdx.x] = static_cast<float>(block);
}

extern "C" __global__ void network_norm_finish_kernel(float* __restrict__ out, const float* __restrict__ partials,
                                                      int n_partials) {
    double acc = 0.0;
    for (int i = threadIdx.x; i < n_partials; i += blockDim.x) acc += partials[i];
    const double total = block_sum_fixed(acc);
    if (threadIdx.x == 0) out[0] = static_cast<float>(sqrt(total));
}

extern "C" __global__ void network_norm_guard_kernel(float* grad_norm, float* __restrict__ scratch,
                                                     const float* __restrict__ x, int n, int* __restrict__ gate,
                                                     fh::nn::GuardState* __restrict__ state, const float* losses,
                                                     int n_losses, fh::core::CounterValue update,
                                                     float* __restrict__ accum, const float* stats, int n_stats) {
    const double block = squared_norm_partial(x, n);  // network_norm_partials_kernel's partial
    if (threadIdx.x == 0) scratch[blockIdx.x] = static_cast<float>(block);
    unsigned* ticket = reinterpret_cast<unsigned*>(scratch + fh::abi::kNormBlocks);
    if (!fh::device::last_block_to_arrive(ticket, gridDim.x)) return;
    double sum = 0.0;  // network_norm_finish_kernel's sum (its block is kNormThreads too)
    for (int i = threadIdx.x; i < fh::abi::kNormBlocks; i += blockDim.x) sum += __ldcg(&scratch[i]);
    const double total = block_sum_fixed(sum);
    if (threadIdx.x == 0) {
        const float norm = static_cast<float>(sqrt(total));
        *grad_norm = norm;
        fh::nn::GuardState s = *state;  // training_guard_kernel
        *gate = fh::nn::guard_decide(s, losses, n_losses, norm, update.value());
        *state = s;
        *ticket = 0;
    }
    if (accum != nullptr) {  // after the norm's write (stats may hold it): saxpy_f32_kernel's a = 1
        __syncthreads();
        for (int i = threadIdx.x; i < n_stats; i += blockDim.x)
            accum[i] = fh::core::saxpy_element(accum[i], 1.0f, stats[i]);
    }
}

extern "C" __global__ void network_norm_guard_agents_kernel(float* __restrict__ scratch, const float* __restrict__ x,
                                                            int n, int* __restrict__ gate,
                                                            fh::nn::GuardState* __restrict__ state, float* stats,
                                                            int agents, int n_losses, int norm_index,
                                                            fh::core::CounterValue update, float* __restrict__ accum,
                                                            int n_stats, int accum_stride) {
    const int a = static_cast<int>(blockIdx.y);
    x += static_cast<long long>(a) * n;
    scratch += static_cast<long long>(a) * fh::abi::kNormGuardScratch;
    const double block = squared_norm_partial(x, n);  // network_norm_guard_kernel's, on agent a's slice
    if (threadIdx.x == 0) scratch[blockIdx.x] = static_cast<float>(block);
    unsigned* ticket = reinterpret_cast<unsigned*>(scratch + fh::abi::kNormBlocks);
    if (!fh::device::last_block_to_arrive(ticket, gridDim.x)) return;
    double sum = 0.0;
    for (int i = threadIdx.x; i < fh::abi::kNormBlocks; i += blockDim.x) sum += __ldcg(&scratch[i]);
    const double total = block_sum_fixed(sum);
    if (threadIdx.x == 0) {
        const float norm = static_cast<float>(sqrt(total));
        stats[static_cast<long long>(norm_index) * agents + a] = norm;
        float losses[fh::abi::kMaxAgentGuardLosses];
        for (int k = 0; k < n_losses; ++k) losses[k] = stats[static_cast<long long>(k) * agents + a];
        fh::nn::GuardState s = state[a];
        gate[a] = fh::nn::guard_decide(s, losses, n_losses, norm, update.agent(a).value());
        state[a] = s;
        *ticket = 0;
    }
    if (accum != nullptr) {
        __syncthreads();
        for (int k = threadIdx.x; k < n_stats; k += blockDim.x) {
            float& sum_k = accum[static_cast<long long>(a) * accum_stride + k];
            sum_k = fh::core::saxpy_element(sum_k, 1.0f, stats[static_cast<long long>(k) * agents + a]);
        }
    }
}

namespace {

/// kWidth consecutive floats of one array: a thread's unit of Adam's pass (float4 loads and
/// stores for 4).
template <int kWidth>
struct AdamUnit {
    float x[kWidth];
    __device__ static AdamUnit load(const float* a, long long unit) {
        AdamUnit u;
        if constexpr (kWidth == 4) {
            const float4 q = reinterpret_cast<const float4*>(a)[unit];
            u.x[0] = q.x, u.x[1] = q.y, u.x[2] = q.z, u.x[3] = q.w;
        } else {
            u.x[0] = a[unit];
        }
        return u;
    }
    __device__ void store(float* a, long long unit) const {
        if constexpr (kWidth == 4)
            reinterpret_cast<float4*>(a)[unit] = make_float4(x[0], x[1], x[2], x[3]);
        else
            a[unit] = x[0];
    }
};

/// The launch's constants: the host's c, or with the update number / learning rate in device
/// memory computed once per block (thread 0, then a barrier: the at_step chain of double
/// multiplications per thread measured slower than the barrier, bench/adam-probe.cu).
__device__ fh::core::AdamConstants adam_constants(fh::core::AdamConstants c, fh::core::CounterValue step,
                                                  const float* __restrict__ lr_from) {
    if (step.counter == nullptr && lr_from == nullptr) return c;
    __shared__ fh::core::AdamConstants at;
    if (threadIdx.x == 0) {
        at = step.counter != nullptr ? fh::core::at_step(c, step.value()) : c;
        if (lr_from != nullptr) at.lr = *lr_from;
    }
    __syncthreads();
    return at;
}

/// network_adam_kernel's pass, kWidth elements a thread's unit (network_adam_by4_kernel: 4).
/// Each thread issues its first unit's loads before it waits for the launch's scalars (the
/// counter, the gate, the norm), so the two memory round trips overlap instead of following each
/// other. Element i's floats are the same whatever the width and the grid.
template <int kWidth>
__device__ void adam_pass(float* __restrict__ params, float* __restrict__ m, float* __restrict__ v,
                          const float* __restrict__ grads, const float* __restrict__ grad_norm,
                          const int* __restrict__ gate, fh::core::CounterValue step, const float* __restrict__ lr_from,
                          fh::core::AdamConstants c, float* __restrict__ target, float target_tau, float target_keep,
                          int n) {
    using Unit = AdamUnit<kWidth>;
    const long long units = n / kWidth;
    const long long i = global_thread_index();
    const bool mine = i < units;  // the grid has a thread per unit (no grid-stride loop: fewer registers)
    Unit p{}, mi{}, vi{}, g{}, t{};
    if (mine) {
        p = Unit::load(params, i), mi = Unit::load(m, i), vi = Unit::load(v, i), g = Unit::load(grads, i);
        if (target != nullptr) t = Unit::load(target, i);
    }
    c = adam_constants(c, step, lr_from);
    const bool apply = gate == nullptr || *gate != 0;  // the guard's skip: uniform for the grid
    if (!apply && target == nullptr) return;
    const float scale = apply && c.clip_norm > 0.f ? fh::core::clip_scale(*grad_norm, c.clip_norm) : 1.f;
    // Element j's update, whichever unit holds it: the same floats.
    const auto element = [&](float& pj, float& mj, float& vj, float gj, float& tj) {
        if (apply) fh::core::adam_element(pj, mj, vj, gj, scale, c);
        if (target != nullptr) tj = fh::core::saxpy_element(__fmul_rn(tj, target_keep), target_tau, pj);
    };
    if (mine) {
#pragma unroll
        for (int j = 0; j < kWidth; ++j) element(p.x[j], mi.x[j], vi.x[j], g.x[j], t.x[j]);
        if (apply) p.store(params, i), mi.store(m, i), vi.store(v, i);
        if (target != nullptr) t.store(target, i);
    }
    if constexpr (kWidth > 1) {  // the last n % kWidth elements, one a thread
        const long long k = units * kWidth + i;
        if (k < n) {
            float pk = params[k], mk = m[k], vk = v[k], tk = target != nullptr ? target[k] : 0.f;
            element(pk, mk, vk, grads[k], tk);
            if (apply) params[k] = pk, m[k] = mk, v[k] = vk;
            if (target != nullptr) target[k] = tk;
        }
    }
}

}  // namespace

// One element a thread, at most 32 registers (a full SM of blocks of 256): below
// abi::kAdamVectorMinElements, more threads each with one element in flight measured faster than
// a quarter of them with four (bench/adam-probe.cu).
static_assert(fh::abi::kAdamThreads == 256, "FH_FULL_SM_BLOCKS_OF_256 counts blocks of 256");
extern "C" __global__ void __launch_bounds__(fh::abi::kAdamThreads, FH_FULL_SM_BLOCKS_OF_256)
    network_adam_kernel(float* __restrict__ params, float* __restrict__ m, float* __restrict__ v,
                        const float* __restrict__ grads, const float* __restrict__ grad_norm,
                        const int* __restrict__ gate, fh::core::CounterValue step, const float* __restrict__ lr_from,
                        fh::core::AdamConstants c, float* __restrict__ target, float target_tau, float target_keep,
                        int n) {
    adam_pass<1>(params, m, v, grads, grad_norm, gate, step, lr_from, c, target, target_tau, target_keep, n);
}

// Four elements a thread by float4 (every array 16-byte aligned, abi::adam_vectorized).
extern "C" __global__ void __launch_bounds__(fh::abi::kAdamThreads, 4)
    network_adam_by4_kernel(float* __restrict__ params, float* __restrict__ m, float* __restrict__ v,
                            const float* __restrict__ grads, const float* __restrict__ grad_norm,
                            const int* __restrict__ gate, fh::core::CounterValue step,
                            const float* __restrict__ lr_from, fh::core::AdamConstants c, float* __restrict__ target,
                            float target_tau, float target_keep, int n) {
    adam_pass<4>(params, m, v, grads, grad_norm, gate, step, lr_from, c, target, target_tau, target_keep, n);
}

// A population's Adam: agent blockIdx.y's slices and scalars, then network_adam_kernel's pass.
extern "C" __global__ void __launch_bounds__(fh::abi::kAdamThreads, 4)
    network_adam_agents_kernel(float* __restrict__ params, float* __restrict__ m, float* __restrict__ v,
                               const float* __restrict__ grads, const float* __restrict__ grad_norm,
                               const int* __restrict__ gate, fh::core::CounterValue step, const float* __restrict__ lr,
                               fh::core::AdamConstants c, float* __restrict__ target,
                               const float* __restrict__ tau_keep, int n) {
    const long long a = blockIdx.y, at = a * n;
    adam_pass<1>(params + at, m + at, v + at, grads + at, grad_norm != nullptr ? grad_norm + a : nullptr,
                 gate != nullptr ? gate + a : nullptr, step.agent(a), lr + a, c,
                 target != nullptr ? target + at : nullptr, target != nullptr ? tau_keep[2 * a] : 0.f,
                 target != nullptr ? tau_keep[2 * a + 1] : 1.f, n);
}

FH_KERNELS_core_optim(FH_CHECK_KERNEL_ABI)
