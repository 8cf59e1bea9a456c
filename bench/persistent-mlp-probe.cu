// persistent-mlp-probe.cu: an experiment, not part of the build (docs/performance-log.md quotes it).
// Question: would one persistent kernel for a whole DQN update (every layer in one launch, grid-wide
// barriers between the layers) beat the trainer's chain of cuBLAS launches replayed from a CUDA
// Graph? The probe times the update's forward, the online and the target network on [s; s'] (512
// rows, 50 -> 256 -> 256 -> 510, ReLU, two networks), three ways:
//   - chain:      per layer one cuBLAS SGEMM (both networks, strided batched) + a bias/ReLU kernel,
//                 the six launches captured in a CUDA Graph and replayed;
//   - empty:      six empty kernels in a graph (what the launches and their dependencies cost);
//   - persistent: one cooperative kernel, one block per SM, 32 x 32 output tiles with a 32-deep k
//                 loop through shared memory, grid.sync() between layers, bias and ReLU fused.
// The persistent kernel's result is checked against the chain's (max abs difference printed).
//   nvcc -O3 -std=c++20 -arch=sm_90 -o persistent-mlp-probe bench/persistent-mlp-probe.cu -lcublas
//   ./persistent-mlp-probe
#include <cooperative_groups.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

namespace cg = cooperative_groups;

#define CK(x)                                                                                       \
    do {                                                                                            \
        cudaError_t e_ = (x);                                                                       \
        if (e_ != cudaSuccess) {                                                                    \
            std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            std::exit(1);                                                                           \
        }                                                                                           \
    } while (0)
#define CB(x)                                                                           \
    do {                                                                                \
        if ((x) != CUBLAS_STATUS_SUCCESS) {                                             \
            std::fprintf(stderr, "%s:%d cuBLAS error in %s\n", __FILE__, __LINE__, #x); \
            std::exit(1);                                                               \
        }                                                                               \
    } while (0)

constexpr int kLayers = 3;
constexpr int kTile = 32, kThreads = 256;

struct Net {
    int rows, count;  // rows per network, networks
    int in[kLayers], out[kLayers];
    const float* w[kLayers];  // network k's W (out, in) at w + k * w_stride
    const float* b[kLayers];
    long long w_stride[kLayers], b_stride[kLayers];
    const float* x;     // (rows, in[0]), shared by the networks
    float* y[kLayers];  // (count, rows, out)
    int relu[kLayers];
};

__global__ void bias_relu(float* y, const float* b, long long b_stride, int rows, int out, int count, int relu) {
    const long long total = static_cast<long long>(count) * rows * out;
    for (long long i = blockIdx.x * 256LL + threadIdx.x; i < total; i += 256LL * gridDim.x) {
        const int j = static_cast<int>(i % out);
        const int k = static_cast<int>(i / (static_cast<long long>(rows) * out));
        float v = y[i] + b[k * b_stride + j];
        y[i] = relu && v < 0.f ? 0.f : v;
    }
}
__global__ void empty_kernel() {}

// One 32 x 32 tile of Y = act(X W^T + b): thread t computes row t / 8, columns (t % 8) * 4 + 0..3.
__device__ void tile(const float* __restrict__ X, int ldx, const float* __restrict__ W, const float* __restrict__ b,
                     float* __restrict__ Y, int rows, int in, int out, int r0, int c0, int relu) {
    __shared__ float xs[kTile][kTile + 1];
    __shared__ float ws[kTile][kTile + 1];  // ws[c][k] = W[c0 + c, k0 + k]
    const int tr = threadIdx.x / 8, tc = (threadIdx.x % 8) * 4;
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    for (int k0 = 0; k0 < in; k0 += kTile) {
        for (int i = threadIdx.x; i < kTile * kTile; i += kThreads) {
            const int r = i / kTile, k = i % kTile;
            xs[r][k] = (r0 + r < rows && k0 + k < in) ? X[static_cast<long long>(r0 + r) * ldx + k0 + k] : 0.f;
            ws[r][k] = (c0 + r < out && k0 + k < in) ? W[static_cast<long long>(c0 + r) * in + k0 + k] : 0.f;
        }
        __syncthreads();
#pragma unroll 8
        for (int k = 0; k < kTile; ++k) {
            const float a = xs[tr][k];
            for (int j = 0; j < 4; ++j) acc[j] = fmaf(a, ws[tc + j][k], acc[j]);
        }
        __syncthreads();
    }
    if (r0 + tr < rows)
        for (int j = 0; j < 4; ++j)
            if (c0 + tc + j < out) {
                float v = acc[j] + b[c0 + tc + j];
                Y[static_cast<long long>(r0 + tr) * out + c0 + tc + j] = relu && v < 0.f ? 0.f : v;
            }
}

__global__ void persistent_forward(Net n) {
    cg::grid_group grid = cg::this_grid();
    for (int l = 0; l < kLayers; ++l) {
        const int rt = (n.rows + kTile - 1) / kTile, ct = (n.out[l] + kTile - 1) / kTile;
        const int tiles = rt * ct * n.count;
        for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
            const int k = t / (rt * ct), rc = t % (rt * ct);
            const float* X = l == 0 ? n.x : n.y[l - 1] + static_cast<long long>(k) * n.rows * n.in[l];
            tile(X, n.in[l], n.w[l] + k * n.w_stride[l], n.b[l] + k * n.b_stride[l],
                 n.y[l] + static_cast<long long>(k) * n.rows * n.out[l], n.rows, n.in[l], n.out[l], (rc / ct) * kTile,
                 (rc % ct) * kTile, n.relu[l]);
        }
        grid.sync();
    }
}

int main() {
    const int rows = 512, count = 2;
    const int sizes[kLayers + 1] = {50, 256, 256, 510};
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-0.1f, 0.1f);
    auto dev = [&](std::size_t n) {
        std::vector<float> h(n);
        for (auto& v : h) v = u(rng);
        float* d = nullptr;
        CK(cudaMalloc(&d, n * sizeof(float)));
        CK(cudaMemcpy(d, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
        return d;
    };
    Net n{};
    n.rows = rows;
    n.count = count;
    n.x = dev(static_cast<std::size_t>(rows) * sizes[0]);
    Net chain_net{};
    for (int l = 0; l < kLayers; ++l) {
        n.in[l] = sizes[l];
        n.out[l] = sizes[l + 1];
        n.w_stride[l] = static_cast<long long>(sizes[l]) * sizes[l + 1];
        n.b_stride[l] = sizes[l + 1];
        n.w[l] = dev(static_cast<std::size_t>(count) * n.w_stride[l]);
        n.b[l] = dev(static_cast<std::size_t>(count) * n.b_stride[l]);
        n.y[l] = dev(static_cast<std::size_t>(count) * rows * sizes[l + 1]);
        n.relu[l] = l + 1 < kLayers;
    }
    chain_net = n;
    for (int l = 0; l < kLayers; ++l) chain_net.y[l] = dev(static_cast<std::size_t>(count) * rows * sizes[l + 1]);

    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cublasHandle_t h;
    CB(cublasCreate(&h));
    CB(cublasSetStream(h, s));
    CB(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
    const float one = 1.f, zero = 0.f;
    auto chain = [&] {
        for (int l = 0; l < kLayers; ++l) {
            const float* X = l == 0 ? chain_net.x : chain_net.y[l - 1];
            const long long x_stride = l == 0 ? 0 : static_cast<long long>(rows) * sizes[l];
            // Y_k (rows, out) = X_k (rows, in) W_k^T: column-major C (out x rows) = W (out x in) * X^T.
            CB(cublasSgemmStridedBatched(h, CUBLAS_OP_T, CUBLAS_OP_N, sizes[l + 1], rows, sizes[l], &one,
                                         chain_net.w[l], sizes[l], chain_net.w_stride[l], X, sizes[l], x_stride, &zero,
                                         chain_net.y[l], sizes[l + 1], static_cast<long long>(rows) * sizes[l + 1],
                                         count));
            bias_relu<<<264, 256, 0, s>>>(chain_net.y[l], chain_net.b[l], chain_net.b_stride[l], rows, sizes[l + 1],
                                          count, chain_net.relu[l]);
        }
    };
    auto graph_of = [&](auto&& body) {
        cudaGraph_t g;
        cudaGraphExec_t e;
        CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
        body();
        CK(cudaStreamEndCapture(s, &g));
        CK(cudaGraphInstantiate(&e, g, 0));
        return e;
    };
    int sms = 0, per_sm = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, persistent_forward, kThreads, 0));
    auto persistent = [&](int blocks) {
        void* args[] = {&n};
        CK(cudaLaunchCooperativeKernel(reinterpret_cast<void*>(persistent_forward), dim3(blocks), dim3(kThreads), args,
                                       0, s));
    };
    cudaGraphExec_t chain_graph = graph_of(chain);
    cudaGraphExec_t empty_graph = graph_of([&] {
        for (int i = 0; i < 2 * kLayers; ++i) empty_kernel<<<1, 32, 0, s>>>();
    });
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    auto time_us = [&](auto&& launch, int reps) {
        for (int i = 0; i < 20; ++i) launch();
        CK(cudaStreamSynchronize(s));
        CK(cudaEventRecord(a, s));
        for (int i = 0; i < reps; ++i) launch();
        CK(cudaEventRecord(b, s));
        CK(cudaEventSynchronize(b));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, a, b));
        return 1000.0 * ms / reps;
    };
    const int reps = 2000;
    std::printf("device: %d SMs, %d persistent blocks per SM possible\n", sms, per_sm);
    std::printf("chain (6 launches, graph):       %.2f us\n",
                time_us([&] { CK(cudaGraphLaunch(chain_graph, s)); }, reps));
    std::printf("empty (6 kernels, graph):        %.2f us\n",
                time_us([&] { CK(cudaGraphLaunch(empty_graph, s)); }, reps));
    for (int blocks : {sms / 2, sms, 2 * sms}) {
        if (blocks > sms * per_sm) continue;
        std::printf("persistent (%3d blocks):         %.2f us\n", blocks, time_us([&] { persistent(blocks); }, reps));
    }
    // Check: the last layer's outputs of both.
    CK(cudaStreamSynchronize(s));
    const std::size_t m = static_cast<std::size_t>(count) * rows * sizes[kLayers];
    std::vector<float> p(m), c(m);
    CK(cudaMemcpy(p.data(), n.y[kLayers - 1], m * sizeof(float), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(c.data(), chain_net.y[kLayers - 1], m * sizeof(float), cudaMemcpyDeviceToHost));
    double diff = 0, mag = 0;
    for (std::size_t i = 0; i < m; ++i) {
        diff = std::fmax(diff, std::fabs(static_cast<double>(p[i]) - c[i]));
        mag = std::fmax(mag, std::fabs(static_cast<double>(c[i])));
    }
    std::printf("max |persistent - chain| = %.3g (max |y| = %.3g)\n", diff, mag);
    return 0;
}
