// gemm-probe.cu: times every cuBLASLt heuristic algorithm (FP32) for the GEMM shapes the trainers
// use, issued back to back on a stream and replayed from a CUDA Graph, and checks that each
// algorithm is run-to-run exact. Not part of the build (docs/performance-log.md quotes it):
//   nvcc -O2 -std=c++17 -arch=sm_90 -o gemm-probe bench/gemm-probe.cu -lcublasLt -lcublas && ./gemm-probe
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <vector>
#include <cstring>
#include <algorithm>
#define CK(x)                                           \
    do {                                                \
        auto e = (x);                                   \
        if ((int)e) {                                   \
            printf("err %d at %d\n", (int)e, __LINE__); \
            exit(1);                                    \
        }                                               \
    } while (0)
struct Shape {
    const char* name;
    int m, n, k;
    bool ta, tb;
    int count;
};
int main() {
    cublasLtHandle_t lt;
    CK(cublasLtCreate(&lt));
    cublasHandle_t h;
    CK(cublasCreate(&h));
    size_t wsb = 32u << 20;
    void* ws;
    CK(cudaMalloc(&ws, wsb));
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    CK(cublasSetStream(h, s));
    CK(cublasSetWorkspace(h, ws, wsb));
    size_t big = 64u << 20;
    float *A, *B, *C;
    CK(cudaMalloc(&A, big * 4));
    CK(cudaMalloc(&B, big * 4));
    CK(cudaMalloc(&C, big * 4));
    std::vector<float> host(big);
    for (size_t i = 0; i < big; ++i) host[i] = (float)((i * 2654435761u) % 1000) / 1000.f - 0.5f;
    CK(cudaMemcpy(A, host.data(), big * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(B, host.data(), big * 4, cudaMemcpyHostToDevice));
    Shape shapes[] = {
        {"dqn fwd1 x2 B512", 256, 512, 50, true, false, 2},     {"dqn fwd2 x2 B512", 256, 512, 256, true, false, 2},
        {"dqn fwd3 x2 B512", 510, 512, 256, true, false, 2},    {"dqn dW3 B256", 256, 510, 256, false, true, 1},
        {"dqn dX3 B256", 256, 256, 510, false, false, 1},       {"dqn dW2 B256", 256, 256, 256, false, true, 1},
        {"dqn dX2 B256", 256, 256, 256, false, false, 1},       {"dqn dW1 B256", 50, 256, 256, false, true, 1},
        {"col fwd1 B4096", 256, 4096, 50, true, false, 1},      {"col fwd2 B4096", 256, 4096, 256, true, false, 1},
        {"col fwd3 B4096", 510, 4096, 256, true, false, 1},     {"iql fwd2 B256", 256, 256, 256, true, false, 1},
        {"iql fwd3 B256", 9, 256, 256, true, false, 1},         {"full fwd2 x2 B2048", 512, 2048, 512, true, false, 2},
        {"full dW2 B1024", 512, 512, 1024, false, true, 1},     {"full dX2 B1024", 512, 1024, 512, false, false, 1},
        {"ppo fwd2 B32768", 512, 32768, 512, true, false, 1},   {"ppo dW2 B32768", 512, 512, 32768, false, true, 1},
        {"ppo dX2 B32768", 512, 32768, 512, false, false, 1},   {"ppo head fwd B32768", 45, 32768, 512, true, false, 1},
        {"ppo head dW B32768", 512, 45, 32768, false, true, 1}, {"ppo head dX B32768", 512, 32768, 45, false, false, 1},
        {"ppo dW1 B32768", 50, 512, 32768, false, true, 1},     {"ppo col fwd2 B2048", 512, 2048, 512, true, false, 1},
        {"ppo col head B2048", 45, 2048, 512, true, false, 1},
    };
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    for (auto& sh : shapes) {
        const int lda = sh.ta ? sh.k : sh.m, ldb = sh.tb ? sh.n : sh.k, ldc = sh.m;
        cublasLtMatmulDesc_t op;
        CK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
        cublasOperation_t ta = sh.ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb = sh.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
        CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
        CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
        cublasLtMatrixLayout_t la, lb, lc;
        CK(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, sh.ta ? sh.k : sh.m, sh.ta ? sh.m : sh.k, lda));
        CK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, sh.tb ? sh.n : sh.k, sh.tb ? sh.k : sh.n, ldb));
        CK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, sh.m, sh.n, ldc));
        if (sh.count > 1) {
            int32_t n = sh.count;
            int64_t sa = (int64_t)sh.m * sh.k + 64, sb = (int64_t)sh.k * sh.n, sc = (int64_t)sh.m * sh.n;
            for (auto [l, st] : {std::pair{la, sa}, {lb, sb}, {lc, sc}}) {
                CK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &n, sizeof n));
                CK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &st, sizeof st));
            }
        }
        cublasLtMatmulPreference_t pref;
        CK(cublasLtMatmulPreferenceCreate(&pref));
        CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb));
        cublasLtMatmulHeuristicResult_t res[64];
        int found = 0;
        CK(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 64, res, &found));
        const float one = 1, zero = 0;
        double flop = 2.0 * sh.m * sh.n * sh.k * sh.count;
        printf("== %s m=%d n=%d k=%d count=%d (%.1f MFLOP), %d algos\n", sh.name, sh.m, sh.n, sh.k, sh.count,
               flop / 1e6, found);
        const int reps = 100;
        // classic sgemm for count 1
        if (sh.count == 1) {
            for (int w = 0; w < 5; ++w)
                CK(cublasSgemm(h, ta, tb, sh.m, sh.n, sh.k, &one, A, lda, B, ldb, &zero, C, ldc));
            cudaEventRecord(e0, s);
            for (int r = 0; r < reps; ++r)
                CK(cublasSgemm(h, ta, tb, sh.m, sh.n, sh.k, &one, A, lda, B, ldb, &zero, C, ldc));
            cudaEventRecord(e1, s);
            cudaEventSynchronize(e1);
            float ms;
            cudaEventElapsedTime(&ms, e0, e1);
            cudaGraph_t g;
            cudaGraphExec_t ge;
            CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
            for (int r = 0; r < 20; ++r)
                CK(cublasSgemm(h, ta, tb, sh.m, sh.n, sh.k, &one, A, lda, B, ldb, &zero, C, ldc));
            CK(cudaStreamEndCapture(s, &g));
            CK(cudaGraphInstantiate(&ge, g, 0));
            CK(cudaGraphLaunch(ge, s));
            CK(cudaStreamSynchronize(s));
            cudaEventRecord(e0, s);
            for (int r = 0; r < 10; ++r) CK(cudaGraphLaunch(ge, s));
            cudaEventRecord(e1, s);
            cudaEventSynchronize(e1);
            float gms;
            cudaEventElapsedTime(&gms, e0, e1);
            printf("  sgemm            stream %7.2f us graph %7.2f us\n", ms * 1000 / reps, gms * 1000 / 200);
        }
        std::vector<float> ref((size_t)sh.m * sh.n), got((size_t)sh.m * sh.n);
        for (int i = 0; i < found; ++i) {
            if (res[i].state != CUBLAS_STATUS_SUCCESS) continue;
            auto run = [&]() {
                return cublasLtMatmul(lt, op, &one, A, la, B, lb, &zero, C, lc, C, lc, &res[i].algo, ws, wsb, s);
            };
            if (run() != CUBLAS_STATUS_SUCCESS) {
                printf("  algo %d fails\n", i);
                continue;
            }
            for (int w = 0; w < 3; ++w) run();
            CK(cudaStreamSynchronize(s));
            CK(cudaMemcpy(ref.data(), C, ref.size() * 4, cudaMemcpyDeviceToHost));
            cudaEventRecord(e0, s);
            for (int r = 0; r < reps; ++r) run();
            cudaEventRecord(e1, s);
            cudaEventSynchronize(e1);
            float ms;
            cudaEventElapsedTime(&ms, e0, e1);
            // graph: 20 calls captured, launched 10 times
            cudaGraph_t g;
            cudaGraphExec_t ge;
            CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
            for (int r = 0; r < 20; ++r) run();
            CK(cudaStreamEndCapture(s, &g));
            CK(cudaGraphInstantiate(&ge, g, 0));
            CK(cudaGraphLaunch(ge, s));
            CK(cudaStreamSynchronize(s));
            cudaEventRecord(e0, s);
            for (int r = 0; r < 10; ++r) CK(cudaGraphLaunch(ge, s));
            cudaEventRecord(e1, s);
            cudaEventSynchronize(e1);
            float gms;
            cudaEventElapsedTime(&gms, e0, e1);
            cudaGraphExecDestroy(ge);
            cudaGraphDestroy(g);
            CK(cudaMemcpy(got.data(), C, got.size() * 4, cudaMemcpyDeviceToHost));
            bool same = memcmp(ref.data(), got.data(), ref.size() * 4) == 0;
            int id = 0, tile = 0, splitk = 0, red = 0, stages = 0, cta = 0;
            size_t sz;
            cublasLtMatmulAlgoConfigGetAttribute(&res[i].algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, &sz);
            cublasLtMatmulAlgoConfigGetAttribute(&res[i].algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile, &sz);
            cublasLtMatmulAlgoConfigGetAttribute(&res[i].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof splitk,
                                                 &sz);
            cublasLtMatmulAlgoConfigGetAttribute(&res[i].algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &red, sizeof red,
                                                 &sz);
            cublasLtMatmulAlgoConfigGetAttribute(&res[i].algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof stages,
                                                 &sz);
            cublasLtMatmulAlgoConfigGetAttribute(&res[i].algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cta, sizeof cta,
                                                 &sz);
            printf(
                "  lt[%2d] id=%3d tile=%3d splitk=%2d red=%d stages=%3d waves=%.2f ws=%zu stream %7.2f us graph %7.2f "
                "us %s\n",
                i, id, tile, splitk, red, stages, res[i].wavesCount, res[i].workspaceSize, ms * 1000 / reps,
                gms * 1000 / 200, same ? "" : "NONDET");
        }
        cublasLtMatmulPreferenceDestroy(pref);
        cublasLtMatrixLayoutDestroy(la);
        cublasLtMatrixLayoutDestroy(lb);
        cublasLtMatrixLayoutDestroy(lc);
        cublasLtMatmulDescDestroy(op);
    }
    return 0;
}
