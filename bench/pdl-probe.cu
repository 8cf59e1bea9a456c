// pdl-probe.cu: does programmatic dependent launch (Hopper) shorten a CUDA Graph's chain of
// dependent launches? Chains of 40 kernels (elementwise of 64 or 264 blocks, and one-block
// reductions) and of 20 (cuBLAS product, kernel) pairs, captured with and without
// cudaLaunchAttributeProgrammaticStreamSerialization on our kernels; mode 1: griddepcontrol.wait
// first, mode 3: then launch_dependents. Prints us per kernel (or pair). Not part of the build
// (docs/performance-log.md quotes it):
//   nvcc -O2 -std=c++17 -arch=sm_90 -o pdl-probe bench/pdl-probe.cu -lcublas && ./pdl-probe
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cstdio>
#define CK(x)                                           \
    do {                                                \
        auto e = (x);                                   \
        if ((int)e) {                                   \
            printf("err %d at %d\n", (int)e, __LINE__); \
            exit(1);                                    \
        }                                               \
    } while (0)
__device__ __forceinline__ void gdc_wait() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void gdc_trigger() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}
// elementwise: y = relu(x + 1) over n floats; mode bit0 wait first, bit1 trigger after wait
__global__ void ew(float* y, const float* x, int n, int mode) {
    if (mode & 1) gdc_wait();
    if (mode & 2) gdc_trigger();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = fmaxf(x[i] + 1.f, 0.f) * 0.5f;
}
// a reduction-like single block kernel
__global__ void one_block(float* y, const float* x, int n, int mode) {
    if (mode & 1) gdc_wait();
    if (mode & 2) gdc_trigger();
    __shared__ float s[256];
    float a = 0;
    for (int i = threadIdx.x; i < n; i += 256) a += x[i];
    s[threadIdx.x] = a;
    __syncthreads();
    for (int k = 128; k; k >>= 1) {
        if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) y[0] = s[0] * 1e-9f;
}
cudaStream_t s;
cublasHandle_t h;
cudaEvent_t e0, e1;
void launch(void (*k)(float*, const float*, int, int), int blocks, float* y, const float* x, int n, bool pdl,
            int mode) {
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = blocks;
    cfg.blockDim = 256;
    cfg.stream = s;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at;
    cfg.numAttrs = pdl ? 1 : 0;
    CK(cudaLaunchKernelEx(&cfg, k, y, x, n, mode));
}
template <class F>
double graph_us(F f, int per) {
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    f();
    CK(cudaStreamEndCapture(s, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    CK(cudaGraphLaunch(ge, s));
    CK(cudaStreamSynchronize(s));
    cudaEventRecord(e0, s);
    for (int r = 0; r < 50; ++r) CK(cudaGraphLaunch(ge, s));
    cudaEventRecord(e1, s);
    CK(cudaEventSynchronize(e1));
    float ms;
    cudaEventElapsedTime(&ms, e0, e1);
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
    return ms * 1000 / 50 / per;
}
int main() {
    CK(cudaStreamCreate(&s));
    CK(cublasCreate(&h));
    CK(cublasSetStream(h, s));
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    void* ws;
    CK(cudaMalloc(&ws, 32 << 20));
    CK(cublasSetWorkspace(h, ws, 32 << 20));
    float *A, *B, *C, *D;
    int n = 256 * 512;
    CK(cudaMalloc(&A, 64 << 20));
    CK(cudaMalloc(&B, 64 << 20));
    CK(cudaMalloc(&C, 64 << 20));
    CK(cudaMalloc(&D, 64 << 20));
    CK(cudaMemset(A, 0, 64 << 20));
    CK(cudaMemset(B, 0, 64 << 20));
    CK(cudaMemset(C, 0, 64 << 20));
    const float one = 1, zero = 0;
    for (int round = 0; round < 2; ++round) {
        for (int blocks : {64, 264})
            for (int mode : {0, 1, 3})
                for (bool pdl : {false, true}) {
                    if (!pdl && mode) continue;
                    double t = graph_us(
                        [&] {
                            for (int i = 0; i < 40; ++i)
                                launch(ew, blocks, (i & 1) ? C : D, (i & 1) ? D : C, n, pdl, mode);
                        },
                        40);
                    printf("ew->ew x40, %3d blocks, pdl %d mode %d: %.2f us per kernel\n", blocks, pdl, mode, t);
                }
        for (int mode : {0, 1, 3})
            for (bool pdl : {false, true}) {
                if (!pdl && mode) continue;
                double t = graph_us(
                    [&] {
                        for (int i = 0; i < 40; ++i)
                            launch((i % 2) ? one_block : ew, (i % 2) ? 1 : 128, (i & 1) ? C : D, (i & 1) ? D : C, n,
                                   pdl, mode);
                    },
                    40);
                printf("ew->one_block x40, pdl %d mode %d: %.2f us per kernel\n", pdl, mode, t);
            }
        for (int m : {256, 1024})
            for (int mode : {0, 1, 3})
                for (bool pdl : {false, true}) {
                    if (!pdl && mode) continue;
                    double t = graph_us(
                        [&] {
                            for (int i = 0; i < 20; ++i) {
                                CK(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, 256, m, 256, &one, A, 256, B, 256, &zero, C,
                                               256));
                                launch(ew, 128, B, C, 256 * m, pdl, mode);
                            }
                        },
                        20);
                    printf("sgemm %dx256x256 -> ew x20, pdl %d mode %d: %.2f us per pair\n", m, pdl, mode, t);
                }
    }
    return 0;
}
