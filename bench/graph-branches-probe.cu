// graph-branches-probe.cu: do N agents' updates run faster as one CUDA Graph with N parallel
// branches, or as graphs without forks, than as N graphs of their own launched on N streams (what
// a population does)? Each agent's update is the skeleton of a DQN update at the speed goals'
// shapes (state 50, trunk [256, 256], head 510, batch 256): a gather, the online network on 2B
// rows (three SGEMMs, each with a bias + ReLU kernel), a loss stand-in, the backward (per layer a
// column-sum kernel and the dW product, beside the dX product on a second stream unless
// "straight") and an Adam stand-in: 22 graph nodes per agent, on the agent's own buffers. Prints,
// for each N and mode, microseconds per population update (N agent-updates), agent-updates/s and
// the host's cost of the launches alone (the GPU held by a spin kernel meanwhile). Not part of the
// build (docs/performance-log.md, "Populations", quotes it):
//   nvcc -O2 -std=c++17 -arch=sm_90 -o graph-branches-probe bench/graph-branches-probe.cu -lcublas
//   ./graph-branches-probe
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
#define CK(x)                                                   \
    do {                                                        \
        auto e_ = (x);                                          \
        if ((int)e_) {                                          \
            printf("error %d at line %d\n", (int)e_, __LINE__); \
            exit(1);                                            \
        }                                                       \
    } while (0)

static const int kB = 256, kD = 50, kH = 256, kW = 510;
static const int kIn[3] = {kD, kH, kH}, kOut[3] = {kH, kH, kW};
static const size_t kWs = 8u << 20;

__global__ void elementwise(float* y, const float* x, long long n, float a) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i] * a + 1e-3f, 0.f);
}
// column sums of dy (rows, out) into db: one block of 256 threads per 32 columns.
__global__ void col_sum(float* db, const float* dy, int rows, int out) {
    __shared__ float s[8][33];
    int c = blockIdx.x * 32 + (threadIdx.x & 31), r0 = threadIdx.x >> 5;
    float acc = 0.f;
    if (c < out)
        for (int r = r0; r < rows; r += 8) acc += dy[(long long)r * out + c];
    s[r0][threadIdx.x & 31] = acc;
    __syncthreads();
    if (r0 == 0 && c < out) {
        float t = 0.f;
        for (int k = 0; k < 8; ++k) t += s[k][threadIdx.x & 31];
        db[c] = t;
    }
}

struct Agent {
    cudaStream_t s, side;
    cudaEvent_t fork, join;
    cublasHandle_t h, h_side;
    void *ws, *ws_side;
    float *x, *act[4], *grad[4], *w[3], *dw[3], *db[3], *params;
    long long P;
};

static long long blocks(long long n) {
    return (n + 255) / 256;
}

static void gemm(cublasHandle_t h, bool ta, bool tb, int m, int n, int k, const float* A, int lda, const float* B,
                 int ldb, float* C, int ldc) {
    const float one = 1.f, zero = 0.f;
    CK(cublasSgemm(h, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k, &one, A, lda, B, ldb,
                   &zero, C, ldc));
}

__global__ void spin(long long cycles) {
    long long t0 = clock64();
    while (clock64() - t0 < cycles) {
    }
}

// One agent's update on its streams (captured); straight: the dW products on the agent's own
// stream too (a graph without forks).
static void issue(Agent& a, bool straight = false) {
    const int R = 2 * kB;
    elementwise<<<blocks((long long)R * kD), 256, 0, a.s>>>(a.x, a.x, (long long)R * kD, 1.f);
    // forward: act[l + 1] (R, out) = act[l] (R, in) W^T; column-major: (out, R) = W (out x in as in x out^T)
    for (int l = 0; l < 3; ++l) {
        gemm(a.h, true, false, kOut[l], R, kIn[l], a.w[l], kIn[l], l == 0 ? a.x : a.act[l], kIn[l], a.act[l + 1],
             kOut[l]);
        elementwise<<<blocks((long long)R * kOut[l]), 256, 0, a.s>>>(a.act[l + 1], a.act[l + 1], (long long)R * kOut[l],
                                                                     0.5f);
    }
    elementwise<<<blocks((long long)kB * kW), 256, 0, a.s>>>(a.grad[3], a.act[3], (long long)kB * kW, 0.1f);
    for (int l = 2; l >= 0; --l) {
        col_sum<<<(kOut[l] + 31) / 32, 256, 0, a.s>>>(a.db[l], a.grad[l + 1], kB, kOut[l]);
        if (!straight) {
            CK(cudaEventRecord(a.fork, a.s));
            CK(cudaStreamWaitEvent(a.side, a.fork, 0));
        }
        // dW (in x out over B rows) beside dX
        gemm(straight ? a.h : a.h_side, false, true, kIn[l], kOut[l], kB, l == 0 ? a.x : a.act[l], kIn[l],
             a.grad[l + 1], kOut[l], a.dw[l], kIn[l]);
        if (l > 0) {
            gemm(a.h, false, false, kIn[l], kB, kOut[l], a.w[l], kIn[l], a.grad[l + 1], kOut[l], a.grad[l], kIn[l]);
            elementwise<<<blocks((long long)kB * kIn[l]), 256, 0, a.s>>>(a.grad[l], a.grad[l], (long long)kB * kIn[l],
                                                                         1.f);
        }
        if (!straight) {
            CK(cudaEventRecord(a.join, a.side));
            CK(cudaStreamWaitEvent(a.s, a.join, 0));
        }
    }
    elementwise<<<blocks(a.P), 256, 0, a.s>>>(a.params, a.params, a.P, 1.f);
}

static float* zeros(size_t n) {
    float* p;
    CK(cudaMalloc(&p, n * sizeof(float)));
    CK(cudaMemset(p, 0, n * sizeof(float)));
    return p;
}

int main() {
    const int kMaxN = 16;
    std::vector<Agent> ag(kMaxN);
    for (auto& a : ag) {
        CK(cudaStreamCreateWithFlags(&a.s, cudaStreamNonBlocking));
        CK(cudaStreamCreateWithFlags(&a.side, cudaStreamNonBlocking));
        CK(cudaEventCreateWithFlags(&a.fork, cudaEventDisableTiming));
        CK(cudaEventCreateWithFlags(&a.join, cudaEventDisableTiming));
        CK(cublasCreate(&a.h));
        CK(cublasCreate(&a.h_side));
        CK(cudaMalloc(&a.ws, kWs));
        CK(cudaMalloc(&a.ws_side, kWs));
        CK(cublasSetStream(a.h, a.s));
        CK(cublasSetStream(a.h_side, a.side));
        CK(cublasSetWorkspace(a.h, a.ws, kWs));
        CK(cublasSetWorkspace(a.h_side, a.ws_side, kWs));
        CK(cublasSetMathMode(a.h, CUBLAS_PEDANTIC_MATH));
        CK(cublasSetMathMode(a.h_side, CUBLAS_PEDANTIC_MATH));
        a.x = zeros((size_t)2 * kB * kD);
        a.act[0] = a.x;
        a.grad[0] = zeros((size_t)kB * kD);
        a.P = 0;
        for (int l = 0; l < 3; ++l) {
            a.act[l + 1] = zeros((size_t)2 * kB * kOut[l]);
            a.grad[l + 1] = zeros((size_t)2 * kB * kOut[l]);
            a.w[l] = zeros((size_t)kIn[l] * kOut[l]);
            a.dw[l] = zeros((size_t)kIn[l] * kOut[l]);
            a.db[l] = zeros((size_t)kOut[l]);
            a.P += (long long)kIn[l] * kOut[l] + kOut[l];
        }
        a.params = zeros((size_t)a.P * 4);
    }
    cudaStream_t origin;
    CK(cudaStreamCreateWithFlags(&origin, cudaStreamNonBlocking));
    cudaEvent_t o_fork, t0, t1;
    CK(cudaEventCreateWithFlags(&o_fork, cudaEventDisableTiming));
    CK(cudaEventCreate(&t0));
    CK(cudaEventCreate(&t1));
    std::vector<cudaEvent_t> done(kMaxN);
    for (auto& e : done) CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));

    const int kRounds = 2000, kHostRounds = 40;
    printf(
        "N | mode | GPU us per population update | agent-updates/s | host us per population update "
        "(enqueue only, GPU held by a spin kernel)\n");
    for (int N : {1, 4, 16}) {
        // forked / straight: one graph per agent, captured on its own stream, launched on it.
        std::vector<cudaGraphExec_t> forked(N), straight(N);
        for (int k = 0; k < 2; ++k)
            for (int i = 0; i < N; ++i) {
                cudaGraph_t g;
                CK(cudaStreamBeginCapture(ag[i].s, cudaStreamCaptureModeThreadLocal));
                issue(ag[i], k == 1);
                CK(cudaStreamEndCapture(ag[i].s, &g));
                size_t nodes = 0;
                CK(cudaGraphGetNodes(g, nullptr, &nodes));
                if (i == 0 && N == 1) printf("agent graph (%s): %zu nodes\n", k ? "straight" : "forked", nodes);
                CK(cudaGraphInstantiate(k ? &straight[i] : &forked[i], g, 0));
                CK(cudaGraphDestroy(g));
            }
        // one: one graph, the agents as parallel (forked) branches joined to the origin stream.
        cudaGraphExec_t one;
        {
            cudaGraph_t g;
            CK(cudaStreamBeginCapture(origin, cudaStreamCaptureModeThreadLocal));
            CK(cudaEventRecord(o_fork, origin));
            for (int i = 0; i < N; ++i) {
                CK(cudaStreamWaitEvent(ag[i].s, o_fork, 0));
                issue(ag[i]);
                CK(cudaEventRecord(done[i], ag[i].s));
                CK(cudaStreamWaitEvent(origin, done[i], 0));
            }
            CK(cudaStreamEndCapture(origin, &g));
            CK(cudaGraphInstantiate(&one, g, 0));
            CK(cudaGraphDestroy(g));
        }
        const char* names[3] = {"separate forked graphs", "separate straight graphs", "one graph, N branches"};
        for (int rep = 0; rep < 2; ++rep)
            for (int mode = 0; mode < 3; ++mode) {
                auto round = [&] {
                    if (mode == 2)
                        CK(cudaGraphLaunch(one, origin));
                    else
                        for (int i = 0; i < N; ++i) CK(cudaGraphLaunch(mode ? straight[i] : forked[i], ag[i].s));
                };
                auto start_all = [&] {
                    CK(cudaEventRecord(t0, origin));
                    for (int i = 0; i < N; ++i) CK(cudaStreamWaitEvent(ag[i].s, t0, 0));
                };
                auto end_all = [&] {
                    for (int i = 0; i < N; ++i) {
                        CK(cudaEventRecord(done[i], ag[i].s));
                        CK(cudaStreamWaitEvent(origin, done[i], 0));
                    }
                    CK(cudaEventRecord(t1, origin));
                    CK(cudaEventSynchronize(t1));
                };
                for (int w = 0; w < 20; ++w) round();
                CK(cudaDeviceSynchronize());
                start_all();
                for (int r = 0; r < kRounds; ++r) round();
                end_all();
                float ms;
                CK(cudaEventElapsedTime(&ms, t0, t1));
                const double us = ms * 1000.0 / kRounds;
                // The host's cost of the launches alone: the GPU held back by a 20 ms spin meanwhile.
                CK(cudaDeviceSynchronize());
                spin<<<1, 1, 0, origin>>>(40000000LL);
                start_all();
                auto h0 = std::chrono::steady_clock::now();
                for (int r = 0; r < kHostRounds; ++r) round();
                auto h1 = std::chrono::steady_clock::now();
                end_all();
                const double host_us = std::chrono::duration<double, std::micro>(h1 - h0).count() / kHostRounds;
                printf("%2d | %-26s | %8.1f | %9.0f | %8.1f\n", N, names[mode], us, N * 1e6 / us, host_us);
            }
        for (auto& e : forked) CK(cudaGraphExecDestroy(e));
        for (auto& e : straight) CK(cudaGraphExecDestroy(e));
        CK(cudaGraphExecDestroy(one));
    }
    return 0;
}
