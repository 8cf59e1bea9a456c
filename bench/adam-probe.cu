// adam-probe.cu: how should `network_adam_kernel` spread its elements over threads? It runs on
// every trainer's update path (all but DQN's fused one), right after the norm and guard, and
// reads its gate, update counter and gradient norm from device memory. Variants, each captured
// in a CUDA Graph behind a stand-in for the norm kernel (20 such pairs a graph), timed as us per
// Adam launch (the pair's time less the stand-in's alone):
//   0  the kernel as it was: 58 registers, one block-wide prologue (thread 0 reads the counter
//      and computes the bias corrections, a barrier), one element a thread below 2^20 elements,
//      four by float4 above;
//   1  one element a thread, at most 32 registers (8 blocks of 256 per SM), the element's loads
//      issued before the prologue's barrier;
//   2  as 1, every thread computing the bias corrections itself (no barrier);
//   3  as 1, two elements a thread (a block covers 512 consecutive elements);
//   4  as 1, four elements a thread by float4 at every size;
//   5  as 1, lane 0 of each warp computing the constants, shuffled to the others (no barrier).
// Every variant's parameters, moments and target must equal variant 0's bit for bit after the
// same steps (checked and printed; with core::adam_element's products and sums contracted by nvcc,
// as they were when docs/performance-log.md's table was measured, variant 3's differed; since
// core::mul_rn / add_rn they all agree). Not part of the build (docs/performance-log.md quotes it):
//   nvcc -O3 -std=c++20 -arch=sm_90 -Icuda -o adam-probe bench/adam-probe.cu && ./adam-probe
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include "math/core.h"
#define CK(x)                                           \
    do {                                                \
        auto e = (x);                                   \
        if ((int)e) {                                   \
            printf("err %d at %d\n", (int)e, __LINE__); \
            exit(1);                                    \
        }                                               \
    } while (0)
using fh::core::AdamConstants;

__device__ __forceinline__ long long gti() {
    return static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ long long gtc() {
    return static_cast<long long>(gridDim.x) * blockDim.x;
}

struct Args {
    float *params, *m, *v, *target;
    const float* grads;
    const float* grad_norm;
    const int* gate;
    const long long* counter;
    AdamConstants c;
    float tau, keep;
    int n;
};

__device__ __forceinline__ void element(float& p, float& mi, float& vi, float g, float* t, float scale,
                                        const AdamConstants& c, float tau, float keep) {
    fh::core::adam_element(p, mi, vi, g, scale, c);
    if (t != nullptr) *t = fh::core::saxpy_element(__fmul_rn(*t, keep), tau, p);
}

// The same floats without taking a register's address (which would put it on the stack).
__device__ __forceinline__ void element_t(float& p, float& mi, float& vi, float g, float& t, bool has_t, float scale,
                                          const AdamConstants& c, float tau, float keep) {
    fh::core::adam_element(p, mi, vi, g, scale, c);
    if (has_t) t = fh::core::saxpy_element(__fmul_rn(t, keep), tau, p);
}

// 0: as it was.
__global__ void adam_v0(Args a) {
    AdamConstants c = a.c;
    if (a.gate != nullptr && *a.gate == 0) return;
    {
        __shared__ AdamConstants at;
        if (threadIdx.x == 0) at = fh::core::at_step(c, *a.counter);
        __syncthreads();
        c = at;
    }
    const float scale = c.clip_norm > 0.f ? fh::core::clip_scale(*a.grad_norm, c.clip_norm) : 1.f;
    long long first = 0;
    if (a.n >= (1 << 20)) {
        const long long n4 = a.n / 4;
        auto* p4 = reinterpret_cast<float4*>(a.params);
        auto* m4 = reinterpret_cast<float4*>(a.m);
        auto* v4 = reinterpret_cast<float4*>(a.v);
        const auto* g4 = reinterpret_cast<const float4*>(a.grads);
        auto* t4 = reinterpret_cast<float4*>(a.target);
        for (long long i = gti(); i < n4; i += gtc()) {
            float4 p = p4[i], mi = m4[i], vi = v4[i];
            const float4 g = g4[i];
            float4 t = a.target != nullptr ? t4[i] : make_float4(0.f, 0.f, 0.f, 0.f);
            float* const tp = a.target != nullptr ? &t.x : nullptr;
            element(p.x, mi.x, vi.x, g.x, tp, scale, c, a.tau, a.keep);
            element(p.y, mi.y, vi.y, g.y, tp ? &t.y : nullptr, scale, c, a.tau, a.keep);
            element(p.z, mi.z, vi.z, g.z, tp ? &t.z : nullptr, scale, c, a.tau, a.keep);
            element(p.w, mi.w, vi.w, g.w, tp ? &t.w : nullptr, scale, c, a.tau, a.keep);
            p4[i] = p;
            m4[i] = mi;
            v4[i] = vi;
            if (a.target != nullptr) t4[i] = t;
        }
        first = n4 * 4;
    }
    for (long long i = first + gti(); i < a.n; i += gtc()) {
        float p = a.params[i], mi = a.m[i], vi = a.v[i];
        element(p, mi, vi, a.grads[i], a.target ? &a.target[i] : nullptr, scale, c, a.tau, a.keep);
        a.params[i] = p;
        a.m[i] = mi;
        a.v[i] = vi;
    }
}

// The constants: mode 0 a block prologue (thread 0, barrier), 1 every thread, 2 lane 0 + shuffles.
template <int kMode>
__device__ __forceinline__ AdamConstants constants(const Args& a) {
    AdamConstants c = a.c;
    if constexpr (kMode == 0) {
        __shared__ float bc[2];
        if (threadIdx.x == 0) {
            const AdamConstants s = fh::core::at_step(c, *a.counter);
            bc[0] = s.bias_correction1;
            bc[1] = s.bias_correction2;
        }
        __syncthreads();
        c.bias_correction1 = bc[0];
        c.bias_correction2 = bc[1];
    } else if constexpr (kMode == 1) {
        c = fh::core::at_step(c, *a.counter);
    } else {
        float b1 = 0.f, b2 = 0.f;
        if ((threadIdx.x & 31) == 0) {
            const AdamConstants s = fh::core::at_step(c, *a.counter);
            b1 = s.bias_correction1;
            b2 = s.bias_correction2;
        }
        c.bias_correction1 = __shfl_sync(0xffffffffu, b1, 0);
        c.bias_correction2 = __shfl_sync(0xffffffffu, b2, 0);
    }
    return c;
}

// kPer consecutive-by-blockDim elements a thread (a block covers kPer * blockDim elements), all
// loaded before the scalars are waited for.
template <int kPer, int kMode>
__global__ void __launch_bounds__(256, 8) adam_scalar(Args a) {
    const long long base = static_cast<long long>(blockIdx.x) * blockDim.x * kPer + threadIdx.x;
    float p[kPer], mi[kPer], vi[kPer], g[kPer], t[kPer];
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
        const long long i = base + static_cast<long long>(j) * blockDim.x;
        if (i < a.n) {
            p[j] = a.params[i];
            mi[j] = a.m[i];
            vi[j] = a.v[i];
            g[j] = a.grads[i];
            t[j] = a.target != nullptr ? a.target[i] : 0.f;
        }
    }
    const AdamConstants c = constants<kMode>(a);
    const bool skip = a.gate != nullptr && *a.gate == 0;
    if (skip) return;
    const float scale = c.clip_norm > 0.f ? fh::core::clip_scale(*a.grad_norm, c.clip_norm) : 1.f;
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
        const long long i = base + static_cast<long long>(j) * blockDim.x;
        if (i < a.n) {
            element_t(p[j], mi[j], vi[j], g[j], t[j], a.target != nullptr, scale, c, a.tau, a.keep);
            a.params[i] = p[j];
            a.m[i] = mi[j];
            a.v[i] = vi[j];
            if (a.target != nullptr) a.target[i] = t[j];
        }
    }
}

// 4: float4 at every size (n a multiple of 4 here), loads first.
__global__ void __launch_bounds__(256, 4) adam_by4(Args a) {
    const long long i = gti();
    const long long n4 = a.n / 4;
    float4 p{}, mi{}, vi{}, g{}, t{};
    if (i < n4) {
        p = reinterpret_cast<float4*>(a.params)[i];
        mi = reinterpret_cast<float4*>(a.m)[i];
        vi = reinterpret_cast<float4*>(a.v)[i];
        g = reinterpret_cast<const float4*>(a.grads)[i];
        if (a.target) t = reinterpret_cast<float4*>(a.target)[i];
    }
    const AdamConstants c = constants<0>(a);
    if (a.gate != nullptr && *a.gate == 0) return;
    if (i >= n4) return;
    const float scale = c.clip_norm > 0.f ? fh::core::clip_scale(*a.grad_norm, c.clip_norm) : 1.f;
    const bool ht = a.target != nullptr;
    element_t(p.x, mi.x, vi.x, g.x, t.x, ht, scale, c, a.tau, a.keep);
    element_t(p.y, mi.y, vi.y, g.y, t.y, ht, scale, c, a.tau, a.keep);
    element_t(p.z, mi.z, vi.z, g.z, t.z, ht, scale, c, a.tau, a.keep);
    element_t(p.w, mi.w, vi.w, g.w, t.w, ht, scale, c, a.tau, a.keep);
    reinterpret_cast<float4*>(a.params)[i] = p;
    reinterpret_cast<float4*>(a.m)[i] = mi;
    reinterpret_cast<float4*>(a.v)[i] = vi;
    if (a.target) reinterpret_cast<float4*>(a.target)[i] = t;
}

// The norm stand-in: 256 blocks read the gradients; block 0 writes norm and gate, then advances
// the counter (as the update's first op would).
__global__ void stand_in(float* norm, int* gate, long long* counter, const float* g, int n) {
    float s = 0.f;
    for (long long i = gti(); i < n; i += gtc()) s += g[i] * g[i];
    __shared__ float r[256];
    r[threadIdx.x] = s;
    __syncthreads();
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        *norm = 0.5f + 1e-30f * r[0];
        *gate = 1;
        *counter += 1;
    }
}

cudaStream_t s;
void launch(int variant, const Args& a) {
    const int n = a.n;
    switch (variant) {
        case 0: {
            const long long threads = n >= (1 << 20) ? (n + 3) / 4 : n;
            adam_v0<<<(threads + 255) / 256, 256, 0, s>>>(a);
            break;
        }
        case 1:
            adam_scalar<1, 0><<<(n + 255) / 256, 256, 0, s>>>(a);
            break;
        case 2:
            adam_scalar<1, 1><<<(n + 255) / 256, 256, 0, s>>>(a);
            break;
        case 3:
            adam_scalar<2, 0><<<(n + 511) / 512, 256, 0, s>>>(a);
            break;
        case 4:
            adam_by4<<<(n / 4 + 255) / 256, 256, 0, s>>>(a);
            break;
        case 5:
            adam_scalar<1, 2><<<(n + 255) / 256, 256, 0, s>>>(a);
            break;
    }
    CK(cudaGetLastError());
}

int main() {
    CK(cudaStreamCreate(&s));
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    // ppo small, dqn-ish, iql 256, ppo-full, iql-full (multiples of 4)
    const int sizes[] = {17840, 209920, 322644, 601136, 1170000};
    const bool with_target[] = {false, true, true, false, true};
    const int kPairs = 20, kReplays = 50;
    for (int round = 0; round < 2; ++round) {
        for (int si = 0; si < 5; ++si) {
            const int n = sizes[si];
            std::vector<float> h(n);
            for (int i = 0; i < n; ++i) h[i] = std::sin(0.37f * i) * 0.01f;
            float *P, *M, *V, *T, *G, *norm;
            int* gate;
            long long* counter;
            for (float** b : {&P, &M, &V, &T, &G}) CK(cudaMalloc(b, n * sizeof(float)));
            CK(cudaMalloc(&norm, 4));
            CK(cudaMalloc(&gate, 4));
            CK(cudaMalloc(&counter, 8));
            AdamConstants c{1e-3f, 0.9f, 0.999f, 1e-8f, 1.0f, 0.f, 1.f, 1.f};
            std::vector<float> ref[4];
            printf("n = %d%s\n", n, with_target[si] ? " (with a soft target)" : "");
            for (int variant = -1; variant <= 5; ++variant) {  // -1: the stand-in alone
                const int var = variant < 0 ? 0 : variant;
                CK(cudaMemcpy(P, h.data(), n * 4, cudaMemcpyHostToDevice));
                CK(cudaMemcpy(T, h.data(), n * 4, cudaMemcpyHostToDevice));
                CK(cudaMemcpy(G, h.data(), n * 4, cudaMemcpyHostToDevice));
                CK(cudaMemset(M, 0, n * 4));
                CK(cudaMemset(V, 0, n * 4));
                CK(cudaMemset(counter, 0, 8));
                Args a{P, M, V, with_target[si] ? T : nullptr, G, norm, gate, counter, c, 0.005f, 0.995f, n};
                cudaGraph_t g;
                cudaGraphExec_t ge;
                CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
                for (int k = 0; k < kPairs; ++k) {
                    stand_in<<<256, 256, 0, s>>>(norm, gate, counter, G, n);
                    if (variant >= 0) launch(var, a);
                }
                CK(cudaStreamEndCapture(s, &g));
                CK(cudaGraphInstantiate(&ge, g, 0));
                CK(cudaGraphLaunch(ge, s));
                CK(cudaStreamSynchronize(s));
                if (variant >= 0) {  // bits after kPairs steps
                    std::vector<float> out[4] = {std::vector<float>(n), std::vector<float>(n), std::vector<float>(n),
                                                 std::vector<float>(n)};
                    CK(cudaMemcpy(out[0].data(), P, n * 4, cudaMemcpyDeviceToHost));
                    CK(cudaMemcpy(out[1].data(), M, n * 4, cudaMemcpyDeviceToHost));
                    CK(cudaMemcpy(out[2].data(), V, n * 4, cudaMemcpyDeviceToHost));
                    CK(cudaMemcpy(out[3].data(), T, n * 4, cudaMemcpyDeviceToHost));
                    if (variant == 0)
                        for (int q = 0; q < 4; ++q) ref[q] = out[q];
                    bool same = true;
                    for (int q = 0; q < 4; ++q) same = same && std::memcmp(out[q].data(), ref[q].data(), n * 4) == 0;
                    if (!same) printf("  variant %d: bits DIFFER from variant 0\n", variant);
                }
                cudaEventRecord(e0, s);
                for (int r = 0; r < kReplays; ++r) CK(cudaGraphLaunch(ge, s));
                cudaEventRecord(e1, s);
                CK(cudaEventSynchronize(e1));
                float ms;
                cudaEventElapsedTime(&ms, e0, e1);
                const double us = ms * 1000.0 / kReplays / kPairs;
                static double base_us;
                if (variant < 0) {
                    base_us = us;
                    printf("  stand-in alone %.2f us\n", us);
                } else {
                    printf("  variant %d: %.2f us a pair, Adam %.2f us\n", variant, us, us - base_us);
                }
                cudaGraphExecDestroy(ge);
                cudaGraphDestroy(g);
            }
            for (float* b : {P, M, V, T, G}) cudaFree(b);
            cudaFree(norm);
            cudaFree(gate);
            cudaFree(counter);
        }
    }
    return 0;
}
