// context-probe.cu: how long a bare CUDA program (no foxhunt-train code) takes from its start to
// its first kernel, by phase: the floor under `bench`'s time_to_first_kernel_s. Not part of the
// build (docs/performance-log.md quotes it):
//   nvcc -O2 -std=c++17 -arch=sm_90 -o context-probe bench/context-probe.cu -lcuda
//   ./context-probe          runtime API (cudaFree(0) creates the primary context)
//   ./context-probe driver   driver API (cuInit, cuDevicePrimaryCtxRetain) then a runtime kernel
#include <cuda.h>
#include <cuda_runtime.h>
#include <chrono>
#include <cstdio>
#include <cstring>
__global__ void empty_kernel(int* p) {
    if (p) *p = 1;
}
static double now_ms() {
    using namespace std::chrono;
    return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}
int main(int argc, char** argv) {
    const bool driver = argc > 1 && std::strcmp(argv[1], "driver") == 0;
    const double t0 = now_ms();
    if (driver) {
        if (cuInit(0) != CUDA_SUCCESS) return 1;
        const double t1 = now_ms();
        CUdevice dev;
        cuDeviceGet(&dev, 0);
        CUcontext ctx;
        if (cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS) return 1;
        cuCtxSetCurrent(ctx);
        const double t2 = now_ms();
        empty_kernel<<<1, 1>>>(nullptr);
        cudaDeviceSynchronize();
        const double t3 = now_ms();
        std::printf("driver: cuInit %.1f ms, primary context %.1f ms, first kernel %.1f ms, total %.1f ms\n", t1 - t0,
                    t2 - t1, t3 - t2, t3 - t0);
    } else {
        cudaFree(nullptr);
        const double t1 = now_ms();
        empty_kernel<<<1, 1>>>(nullptr);
        cudaDeviceSynchronize();
        const double t2 = now_ms();
        std::printf("runtime: cudaFree(0) %.1f ms, first kernel %.1f ms, total %.1f ms\n", t1 - t0, t2 - t1, t2 - t0);
    }
    return 0;
}
