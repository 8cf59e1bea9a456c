// population-probe.cu: what a batched population could reach. The skeleton of N DQN agents'
// update at the speed goals' shapes (state 50, trunk [256, 256], head 510 = 9 actions x 51 atoms
// + the value stream, batch 256) with every layer of every agent in one launch, captured in one
// CUDA Graph and replayed; prints microseconds per population update and agent-updates/s for each
// N, with the products as cuBLASLt strided batches (bias + ReLU epilogues forward; FP32, and TF32
// as gpu.tf32 = true would) or as cublasSgemmStridedBatched (FP32). Not part of the build (docs/performance-log.md
// quotes it):
//   nvcc -O2 -std=c++17 -arch=sm_90 -o population-probe bench/population-probe.cu -lcublas -lcublasLt
//   ./population-probe
// The launches of one population update (16, whatever N):
//   sampling            1 kernel: 2B rows of 50 floats per agent gathered from a replay
//   online forward      3 batched products (N networks, 2B rows: [s; s'])
//   target forward      3 batched products (N networks, B rows: s'), beside the online one
//   loss                1 elementwise kernel over the N x B x 510 heads (a stand-in for
//                       dqn_loss_kernel: no softmaxes, so this part is a lower bound)
//   backward            per layer a bias-gradient kernel (with the ReLU's backward), the dW and
//                       the dX products (none for the first layer's dX): 8 launches
//   Adam + target       1 elementwise kernel over N x P parameters
// So the figures are what the launches and the products allow, not a trainer's rate.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

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
static const size_t kWs = 32u << 20;

__global__ void gather_rows(float* x, const float* replay, long long replay_rows, int rows, int d, int agents,
                            unsigned step) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    long long n = (long long)agents * rows * d;
    if (i >= n) return;
    long long r = i / d, c = i % d;
    unsigned h = (unsigned)r * 2654435761u + step * 97u;
    long long src = (long long)(r / rows) * replay_rows + (h % (unsigned)replay_rows);
    x[i] = replay[src * d + c];
}

__global__ void loss_standin(float* dhead, const float* head, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) dhead[i] = tanhf(head[i]) * 1e-3f;
}

// dZ = dY * relu'(Y) in place (relu) and db[net][col] = sum over the net's rows; grid (ceil(out /
// 32), nets), block (32, 32). Net k's dY at k * dy_stride, its Y at k * y_stride.
__global__ void act_bias_grad(float* dy, float* db, const float* y, int relu, int rows, int out, long long dy_stride,
                              long long y_stride, long long db_stride) {
    __shared__ float s[32][33];
    int col = blockIdx.x * 32 + threadIdx.x;
    dy += blockIdx.y * dy_stride;
    y += blockIdx.y * y_stride;
    float acc = 0.f;
    if (col < out)
        for (int r = threadIdx.y; r < rows; r += 32) {
            float v = dy[(long long)r * out + col];
            if (relu) {
                v = y[(long long)r * out + col] > 0.f ? v : 0.f;
                dy[(long long)r * out + col] = v;
            }
            acc += v;
        }
    s[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    for (int h = 16; h > 0; h /= 2) {
        if (threadIdx.y < h) s[threadIdx.y][threadIdx.x] += s[threadIdx.y + h][threadIdx.x];
        __syncthreads();
    }
    if (threadIdx.y == 0 && col < out) db[blockIdx.y * db_stride + col] = s[0][threadIdx.x];
}

__global__ void adam_standin(float* p, float* m, float* v, const float* g, float* t, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    float mi = 0.9f * m[i] + 0.1f * g[i], vi = 0.999f * v[i] + 0.001f * g[i] * g[i];
    m[i] = mi;
    v[i] = vi;
    float pi = p[i] - 1e-4f * mi / (sqrtf(vi) + 1e-8f);
    p[i] = pi;
    t[i] = 0.995f * t[i] + 0.005f * pi;
}

static unsigned blocks(long long n) {
    return (unsigned)((n + 255) / 256);
}

struct Ctx {
    cublasHandle_t blas;
    cublasLtHandle_t lt;
    void* ws;
    bool use_lt;
    bool tf32;  ///< cuBLASLt with CUBLAS_COMPUTE_32F_FAST_TF32 (gpu.tf32 = true's arithmetic)
};

// Column-major C (m x n) = op(A) (m x k) op(B) (k x n) for count strided batches, through
// cuBLASLt (epilogue, bias) or cublasSgemmStridedBatched (no epilogue: then bias and ReLU are not
// applied, which does not change the timing question).
static void gemm(Ctx& c, cudaStream_t s, bool ta, bool tb, int m, int n, int k, const float* A, int lda, long long sa,
                 const float* B, int ldb, long long sb, float* C, int ldc, long long sc, int count,
                 cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_DEFAULT, const float* bias = nullptr,
                 long long bias_stride = 0) {
    const float one = 1.f, zero = 0.f;
    if (!c.use_lt) {
        CK(cublasSetStream(c.blas, s));
        CK(cublasSgemmStridedBatched(c.blas, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k,
                                     &one, A, lda, sa, B, ldb, sb, &zero, C, ldc, sc, count));
        return;
    }
    cublasLtMatmulDesc_t op;
    CK(cublasLtMatmulDescCreate(&op, c.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t oa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, ob = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &oa, sizeof oa));
    CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &ob, sizeof ob));
    CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    if (bias) {
        CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
        if (count > 1)
            CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &bias_stride,
                                              sizeof bias_stride));
    }
    cublasLtMatrixLayout_t la, lb, lc;
    CK(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, ta ? k : m, ta ? m : k, lda));
    CK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, tb ? n : k, tb ? k : n, ldb));
    CK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, m, n, ldc));
    if (count > 1) {
        int32_t nb = count;
        long long st[3] = {sa, sb, sc};
        cublasLtMatrixLayout_t ls[3] = {la, lb, lc};
        for (int i = 0; i < 3; ++i) {
            CK(cublasLtMatrixLayoutSetAttribute(ls[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &nb, sizeof nb));
            CK(cublasLtMatrixLayoutSetAttribute(ls[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &st[i],
                                                sizeof st[i]));
        }
    }
    cublasLtMatmulPreference_t pref;
    CK(cublasLtMatmulPreferenceCreate(&pref));
    CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &kWs, sizeof kWs));
    cublasLtMatmulHeuristicResult_t res{};
    int found = 0;
    CK(cublasLtMatmulAlgoGetHeuristic(c.lt, op, la, lb, lc, lc, pref, 1, &res, &found));
    if (!found) {
        printf("no cuBLASLt algorithm for %d x %d x %d x%d\n", m, n, k, count);
        exit(1);
    }
    CK(cublasLtMatmul(c.lt, op, &one, A, la, B, lb, &zero, C, lc, C, lc, &res.algo, c.ws, kWs, s));
    // The descriptors may go once the call is captured (cuBLASLt copies what it needs).
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatmulDescDestroy(op);
}

int main() {
    cudaStream_t s0, s1;
    CK(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    Ctx c{};
    CK(cublasCreate(&c.blas));
    CK(cublasLtCreate(&c.lt));
    CK(cudaMalloc(&c.ws, kWs));
    CK(cublasSetWorkspace(c.blas, c.ws, kWs));
    cudaEvent_t fork, join, e0, e1;
    CK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
    CK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    // One network's parameters: W_l (out, in) row-major then b_l, per layer.
    long long woff[3], boff[3], P = 0;
    for (int l = 0; l < 3; ++l) {
        woff[l] = P;
        P += (long long)kIn[l] * kOut[l];
        boff[l] = P;
        P += kOut[l];
        P = (P + 31) / 32 * 32;
    }
    const long long replay_rows = 1 << 16;
    printf("| products | agents N | us per population update | agent-updates/s |\n|---|---:|---:|---:|\n");
    for (int variant = 0; variant < 3; ++variant)  // cuBLASLt FP32, cuBLASLt TF32, SgemmStridedBatched FP32
        for (int N : {1, 4, 16, 32}) {
            c.use_lt = variant < 2;
            c.tf32 = variant == 1;
            float *replay, *x, *params, *target, *grads, *m, *v, *dhead;
            float *act[3], *tact[3], *grad_h[2];
            CK(cudaMalloc(&replay, sizeof(float) * N * replay_rows * kD));
            CK(cudaMemset(replay, 0, sizeof(float) * N * replay_rows * kD));
            CK(cudaMalloc(&x, sizeof(float) * N * 2 * kB * kD));
            for (float** p : {&params, &target, &grads, &m, &v}) {
                CK(cudaMalloc(p, sizeof(float) * N * P));
                CK(cudaMemset(*p, 0, sizeof(float) * N * P));
            }
            for (int l = 0; l < 3; ++l) {
                CK(cudaMalloc(&act[l], sizeof(float) * N * 2 * kB * kOut[l]));
                CK(cudaMalloc(&tact[l], sizeof(float) * N * kB * kOut[l]));
            }
            for (int l = 0; l < 2; ++l) CK(cudaMalloc(&grad_h[l], sizeof(float) * N * kB * kOut[l]));
            CK(cudaMalloc(&dhead, sizeof(float) * N * kB * kW));
            unsigned step = 1;
            auto update = [&]() {
                gather_rows<<<blocks((long long)N * 2 * kB * kD), 256, 0, s0>>>(x, replay, replay_rows, 2 * kB, kD, N,
                                                                                step);
                CK(cudaEventRecord(fork, s0));
                CK(cudaStreamWaitEvent(s1, fork));
                // Target on s' (s1) beside the online network on [s; s'] (s0). Row-major Y (rows,
                // out) = X W^T + b is column-major Y^T (out, rows) = W^T-as-stored (in, out)^T X^T.
                for (int l = 0; l < 3; ++l) {
                    const bool relu = l < 2;
                    const cublasLtEpilogue_t epi = relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
                    const float* xin_t = l == 0 ? x + kB * kD : tact[l - 1];
                    const long long xs_t = l == 0 ? 2LL * kB * kD : (long long)kB * kIn[l];
                    gemm(c, s1, true, false, kOut[l], kB, kIn[l], target + woff[l], kIn[l], P, xin_t, kIn[l], xs_t,
                         tact[l], kOut[l], (long long)kB * kOut[l], N, epi, target + boff[l], P);
                    const float* xin = l == 0 ? x : act[l - 1];
                    const long long xs = 2LL * kB * kIn[l];
                    gemm(c, s0, true, false, kOut[l], 2 * kB, kIn[l], params + woff[l], kIn[l], P, xin, kIn[l], xs,
                         act[l], kOut[l], 2LL * kB * kOut[l], N, epi, params + boff[l], P);
                }
                CK(cudaEventRecord(join, s1));
                CK(cudaStreamWaitEvent(s0, join));
                loss_standin<<<blocks((long long)N * kB * kW), 256, 0, s0>>>(dhead, act[2], (long long)N * kB * kW);
                // Backward of the online network on s (its first B rows per agent).
                for (int l = 2; l >= 0; --l) {
                    float* dy = l == 2 ? dhead : grad_h[l];
                    const long long dys = (long long)kB * kOut[l];
                    const long long ys = 2LL * kB * kOut[l];  // Y: the forward's 2B rows per agent
                    act_bias_grad<<<dim3((kOut[l] + 31) / 32, N), dim3(32, 32), 0, s0>>>(
                        dy, grads + boff[l], act[l], l < 2 ? 1 : 0, kB, kOut[l], dys, ys, P);
                    const float* xin = l == 0 ? x : act[l - 1];
                    const long long xs = 2LL * kB * kIn[l];
                    // dW (out, in) row-major = dZ^T X: column-major dW^T (in, out) = X^T (in, B) dZ (B, out).
                    gemm(c, s0, false, true, kIn[l], kOut[l], kB, xin, kIn[l], xs, dy, kOut[l], dys, grads + woff[l],
                         kIn[l], P, N);
                    if (l > 0) {
                        // dX (B, in) = dZ W: column-major dX^T (in, B) = W^T-as-stored (in, out) dZ^T (out, B).
                        float* dxo = grad_h[l - 1];
                        gemm(c, s0, false, false, kIn[l], kB, kOut[l], params + woff[l], kIn[l], P, dy, kOut[l], dys,
                             dxo, kIn[l], (long long)kB * kIn[l], N);
                    }
                }
                adam_standin<<<blocks((long long)N * P), 256, 0, s0>>>(params, m, v, grads, target, (long long)N * P);
            };
            // Capture once, replay.
            cudaGraph_t g;
            cudaGraphExec_t ge;
            CK(cudaStreamBeginCapture(s0, cudaStreamCaptureModeThreadLocal));
            update();
            CK(cudaStreamEndCapture(s0, &g));
            CK(cudaGraphInstantiate(&ge, g, 0));
            for (int i = 0; i < 50; ++i) CK(cudaGraphLaunch(ge, s0));
            CK(cudaStreamSynchronize(s0));
            const int reps = 2000;
            CK(cudaEventRecord(e0, s0));
            for (int i = 0; i < reps; ++i) CK(cudaGraphLaunch(ge, s0));
            CK(cudaEventRecord(e1, s0));
            CK(cudaEventSynchronize(e1));
            float ms = 0;
            CK(cudaEventElapsedTime(&ms, e0, e1));
            const double us = 1000.0 * ms / reps;
            printf("| %s | %d | %.1f | %.0f |\n",
                   variant == 0   ? "cuBLASLt"
                   : variant == 1 ? "cuBLASLt, TF32"
                                  : "SgemmStridedBatched",
                   N, us, N / us * 1e6);
            CK(cudaGraphExecDestroy(ge));
            CK(cudaGraphDestroy(g));
            for (float* p : {replay, x, params, target, grads, m, v, dhead}) CK(cudaFree(p));
            for (int l = 0; l < 3; ++l) {
                CK(cudaFree(act[l]));
                CK(cudaFree(tact[l]));
            }
            for (int l = 0; l < 2; ++l) CK(cudaFree(grad_h[l]));
        }
    return 0;
}
