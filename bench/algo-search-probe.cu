// algo-search-probe.cu: searches cuBLASLt's FP32 algorithm space (every algorithm id, tile,
// split-K count, reduction scheme, stages and swizzle the library accepts, not only its
// heuristic's list) for the products on the DQN, IQL and PPO steps' paths (the backward's
// products, and the forwards with their bias / bias + ReLU epilogues and strided batches as the
// trainers issue them), times each configuration as the trainers issue it (20 dependent calls
// captured in a CUDA Graph, replayed), checks that it is run-to-run exact, and prints the fastest
// against cublasSgemm (backward shapes) and the heuristic's first choice. Not part of the build
// (docs/performance-log.md quotes it):
//   nvcc -O2 -std=c++17 -arch=sm_90 -o algo-search-probe bench/algo-search-probe.cu -lcublasLt -lcublas
//   ./algo-search-probe [NAME-SUBSTRING...]    (only the shapes whose name contains one of them)
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

#define CK(x)                                                   \
    do {                                                        \
        auto e_ = (x);                                          \
        if ((int)e_) {                                          \
            printf("error %d at line %d\n", (int)e_, __LINE__); \
            exit(1);                                            \
        }                                                       \
    } while (0)

// Column-major m x n = op(A) m x k times op(B) k x n, as cublasSgemm takes it.
// epi: 0 none, 1 bias, 2 bias + ReLU (the forward plans' epilogues); count: a strided batch.
struct Shape {
    const char* name;
    int m, n, k;
    bool ta, tb;
    int epi = 0;
    int count = 1;
};

struct Result {
    double us;
    int id, tile, splitk, red, stages, swizzle, custom;
    bool exact;
    float maxdiff;
};

static cudaStream_t s;

static void configure(cublasLtMatmulAlgo_t& c, uint32_t tile, uint32_t stage, uint32_t custom, uint32_t swizzle,
                      uint32_t splitk, uint32_t red) {
    const int32_t sk = (int32_t)splitk;
    cublasLtMatmulAlgoConfigSetAttribute(&c, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile);
    cublasLtMatmulAlgoConfigSetAttribute(&c, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stage, sizeof stage);
    cublasLtMatmulAlgoConfigSetAttribute(&c, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, &custom, sizeof custom);
    cublasLtMatmulAlgoConfigSetAttribute(&c, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &swizzle, sizeof swizzle);
    cublasLtMatmulAlgoConfigSetAttribute(&c, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &sk, sizeof sk);
    cublasLtMatmulAlgoConfigSetAttribute(&c, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &red, sizeof red);
}
static cudaEvent_t e0, e1;

// Microseconds per call of `run`: 20 calls captured in one graph, replayed 20 times.
template <class F>
double graph_us(F run) {
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    for (int r = 0; r < 20; ++r) run();
    CK(cudaStreamEndCapture(s, &g));
    if (cudaGraphInstantiate(&ge, g, 0) != cudaSuccess) {
        cudaGetLastError();
        cudaGraphDestroy(g);
        return -1;
    }
    CK(cudaGraphLaunch(ge, s));
    CK(cudaStreamSynchronize(s));
    CK(cudaEventRecord(e0, s));
    for (int r = 0; r < 20; ++r) CK(cudaGraphLaunch(ge, s));
    CK(cudaEventRecord(e1, s));
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
    return ms * 1000.0 / 400.0;
}

int main(int argc, char** argv) {
    cublasLtHandle_t lt;
    CK(cublasLtCreate(&lt));
    cublasHandle_t h;
    CK(cublasCreate(&h));
    const size_t wsb = 32u << 20;
    void* ws;
    CK(cudaMalloc(&ws, wsb));
    CK(cudaStreamCreate(&s));
    CK(cublasSetStream(h, s));
    CK(cublasSetWorkspace(h, ws, wsb));
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    const size_t big = 4u << 20;
    float *A, *B, *C;
    CK(cudaMalloc(&A, big * 4));
    CK(cudaMalloc(&B, big * 4));
    CK(cudaMalloc(&C, big * 4));
    std::vector<float> host(big);
    for (size_t i = 0; i < big; ++i) host[i] = (float)((i * 2654435761u) % 1000) / 1000.f - 0.5f;
    CK(cudaMemcpy(A, host.data(), big * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(B, host.data(), big * 4, cudaMemcpyHostToDevice));
    const Shape shapes[] = {
        {"dqn head dX 256x256 from 510", 256, 256, 510, false, false},
        {"dqn dX 256x256 from 256", 256, 256, 256, false, false},
        {"dqn dW 50x256 over 256 rows", 50, 256, 256, false, true},
        {"dqn head dW 256x510 over 256 rows", 256, 510, 256, false, true},
        {"dqn dW 256x256 over 256 rows", 256, 256, 256, false, true},
        {"dqn-full dX 1024x512 from 512", 512, 1024, 512, false, false},
        {"dqn-full dW 512x512 over 1024 rows", 512, 512, 1024, false, true},
        // Forwards (column-major Y^T (out x rows) = W^T X^T), as lt_linear_forward issues them.
        {"fwd dqn collection 4096x256x50 relu", 256, 4096, 50, true, false, 2},
        {"fwd dqn collection 4096x256x256 relu", 256, 4096, 256, true, false, 2},
        {"fwd dqn collection 4096x510x256 bias", 510, 4096, 256, true, false, 1},
        {"fwd dqn update 512x256x50 relu x2", 256, 512, 50, true, false, 2, 2},
        {"fwd dqn update 512x256x256 relu x2", 256, 512, 256, true, false, 2, 2},
        {"fwd dqn update 512x510x256 bias x2", 510, 512, 256, true, false, 1, 2},
        {"fwd dqn-full online 2048x512x512 relu", 512, 2048, 512, true, false, 2},
        {"fwd dqn-full online 2048x256x512 relu", 256, 2048, 512, true, false, 2},
        {"fwd dqn-full online 2048x510x256 bias", 510, 2048, 256, true, false, 1},
        {"fwd dqn-full target 1024x512x512 relu", 512, 1024, 512, true, false, 2},
        {"fwd iql-full 1024x512x512 relu x2", 512, 1024, 512, true, false, 2, 2},
    };
    int ids[256];
    int nids = 0;
    CK(cublasLtMatmulAlgoGetIds(lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, 256,
                                ids, &nids));
    printf("%d FP32 algorithm ids\n", nids);
    for (const Shape& sh : shapes) {
        bool wanted = argc < 2;
        for (int i = 1; i < argc; ++i) wanted = wanted || strstr(sh.name, argv[i]) != nullptr;
        if (!wanted) continue;
        const int lda = sh.ta ? sh.k : sh.m, ldb = sh.tb ? sh.n : sh.k, ldc = sh.m;
        const cublasOperation_t ta = sh.ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb = sh.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
        const float one = 1, zero = 0;
        const size_t outn = (size_t)sh.m * sh.n * sh.count;
        // The reference: cublasSgemm as the trainers issue the backward products.
        auto sgemm = [&] { CK(cublasSgemm(h, ta, tb, sh.m, sh.n, sh.k, &one, A, lda, B, ldb, &zero, C, ldc)); };
        sgemm();
        CK(cudaStreamSynchronize(s));
        std::vector<float> ref(outn), got(outn), again(outn);
        CK(cudaMemcpy(ref.data(), C, outn * 4, cudaMemcpyDeviceToHost));
        const double sgemm_us = sh.epi == 0 && sh.count == 1 ? graph_us(sgemm) : -1;

        cublasLtMatmulDesc_t op;
        CK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
        CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
        CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
        cublasLtMatrixLayout_t la, lb, lc;
        CK(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, sh.ta ? sh.k : sh.m, sh.ta ? sh.m : sh.k, lda));
        CK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, sh.tb ? sh.n : sh.k, sh.tb ? sh.k : sh.n, ldb));
        CK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, sh.m, sh.n, ldc));
        if (sh.epi != 0) {
            const cublasLtEpilogue_t epi = sh.epi == 2 ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
            const float* bias = A;  // any m floats
            CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
            CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
        }
        if (sh.count > 1) {
            const int32_t n = sh.count;
            const int64_t sa = (int64_t)sh.m * sh.k, sb = (int64_t)sh.k * sh.n, sc = (int64_t)sh.m * sh.n;
            for (auto [layout, stride] : {std::pair{la, sa}, {lb, sb}, {lc, sc}}) {
                CK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &n, sizeof n));
                CK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                    sizeof stride));
            }
            if (sh.epi != 0)
                CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &sa, sizeof sa));
        }
        cublasLtMatmulPreference_t pref;
        CK(cublasLtMatmulPreferenceCreate(&pref));
        CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb));
        cublasLtMatmulHeuristicResult_t heur[1];
        int found = 0;
        CK(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 1, heur, &found));

        std::vector<Result> results;
        double heuristic_us = -1;
        const auto try_algo = [&](const cublasLtMatmulAlgo_t& algo, Result r) {
            cublasLtMatmulHeuristicResult_t check{};
            if (cublasLtMatmulAlgoCheck(lt, op, la, lb, lc, lc, &algo, &check) != CUBLAS_STATUS_SUCCESS) return;
            if (check.workspaceSize > wsb) return;
            auto run = [&] {
                return cublasLtMatmul(lt, op, &one, A, la, B, lb, &zero, C, lc, C, lc, &algo, ws, wsb, s);
            };
            if (run() != CUBLAS_STATUS_SUCCESS) {
                cudaGetLastError();
                return;
            }
            if (cudaStreamSynchronize(s) != cudaSuccess) {
                cudaGetLastError();
                return;
            }
            CK(cudaMemcpy(got.data(), C, outn * 4, cudaMemcpyDeviceToHost));
            r.us = graph_us([&] { run(); });
            if (r.us < 0) return;
            CK(cudaMemcpy(again.data(), C, outn * 4, cudaMemcpyDeviceToHost));
            r.exact = memcmp(got.data(), again.data(), outn * 4) == 0;
            r.maxdiff = 0;
            for (size_t i = 0; i < outn; ++i) r.maxdiff = std::max(r.maxdiff, std::fabs(got[i] - ref[i]));
            results.push_back(r);
        };
        if (found > 0) {
            const size_t before = results.size();
            if (sgemm_us < 0) {  // the reference: the heuristic's first (the trainers' choice)
                CK(cublasLtMatmul(lt, op, &one, A, la, B, lb, &zero, C, lc, C, lc, &heur[0].algo, ws, wsb, s));
                CK(cudaStreamSynchronize(s));
                CK(cudaMemcpy(ref.data(), C, outn * 4, cudaMemcpyDeviceToHost));
            }
            try_algo(heur[0].algo, Result{0, -1, 0, 0, 0, 0, 0, 0, true, 0});
            if (results.size() > before) {
                heuristic_us = results.back().us;
                results.pop_back();
            }
        }
        for (int a = 0; a < nids; ++a) {
            cublasLtMatmulAlgo_t algo;
            if (cublasLtMatmulAlgoInit(lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F,
                                       CUDA_R_32F, ids[a], &algo) != CUBLAS_STATUS_SUCCESS)
                continue;
            size_t sz = 0;
            std::vector<uint32_t> tiles, stages;
            cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_TILE_IDS, nullptr, 0, &sz);
            tiles.resize(std::max<size_t>(1, sz / 4));
            if (sz)
                cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_TILE_IDS, tiles.data(), sz, &sz);
            else
                tiles[0] = CUBLASLT_MATMUL_TILE_UNDEFINED;
            cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_STAGES_IDS, nullptr, 0, &sz);
            stages.resize(std::max<size_t>(1, sz / 4));
            if (sz)
                cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_STAGES_IDS, stages.data(), sz, &sz);
            else
                stages[0] = CUBLASLT_MATMUL_STAGES_UNDEFINED;
            int32_t splitk_support = 0;
            uint32_t red_mask = 0;
            cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT, &splitk_support,
                                              sizeof splitk_support, &sz);
            cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK, &red_mask,
                                              sizeof red_mask, &sz);
            const uint32_t splits[] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32};
            // Pass 1: every tile, split and reduction with the library's stages (or the first
            // stages it accepts), no swizzle, no custom option.
            for (uint32_t tile : tiles)
                for (uint32_t sk : splits) {
                    if (sk > 1 && !splitk_support) break;
                    for (uint32_t red = 0; red <= 4; red = red ? red << 1 : 1) {
                        if (sk == 1 && red != 0) break;
                        if (sk > 1 && (red == 0 || !(red_mask & red))) continue;
                        std::vector<uint32_t> stage_tries{CUBLASLT_MATMUL_STAGES_UNDEFINED};
                        stage_tries.insert(stage_tries.end(), stages.begin(), stages.end());
                        for (uint32_t stage : stage_tries) {
                            cublasLtMatmulAlgo_t c = algo;
                            configure(c, tile, stage, 0, 0, sk, red);
                            cublasLtMatmulHeuristicResult_t check{};
                            if (cublasLtMatmulAlgoCheck(lt, op, la, lb, lc, lc, &c, &check) != CUBLAS_STATUS_SUCCESS)
                                continue;
                            try_algo(c, Result{0, ids[a], (int)tile, (int)sk, (int)red, (int)stage, 0, 0, true, 0});
                            break;
                        }
                    }
                }
        }
        // Pass 2: the five fastest of pass 1 with every stages, swizzle and custom option.
        std::sort(results.begin(), results.end(), [](const Result& x, const Result& y) { return x.us < y.us; });
        const std::vector<Result> best(results.begin(), results.begin() + std::min<size_t>(5, results.size()));
        for (const Result& b : best) {
            cublasLtMatmulAlgo_t algo;
            CK(cublasLtMatmulAlgoInit(lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F,
                                      CUDA_R_32F, b.id, &algo));
            size_t sz = 0;
            std::vector<uint32_t> stages;
            cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_STAGES_IDS, nullptr, 0, &sz);
            stages.resize(sz / 4);
            if (sz) cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_STAGES_IDS, stages.data(), sz, &sz);
            int32_t custom_max = 0;
            uint32_t swizzle_support = 0;
            cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_CTA_SWIZZLING_SUPPORT, &swizzle_support,
                                              sizeof swizzle_support, &sz);
            cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_CUSTOM_OPTION_MAX, &custom_max,
                                              sizeof custom_max, &sz);
            for (uint32_t stage : stages)
                for (int custom = 0; custom <= std::min(custom_max, 7); ++custom)
                    for (uint32_t swz = 0; swz <= (swizzle_support ? 1u : 0u); ++swz) {
                        if ((int)stage == b.stages && custom == 0 && swz == 0) continue;
                        cublasLtMatmulAlgo_t c = algo;
                        configure(c, (uint32_t)b.tile, stage, (uint32_t)custom, swz, (uint32_t)b.splitk,
                                  (uint32_t)b.red);
                        try_algo(c, Result{0, b.id, b.tile, b.splitk, b.red, (int)stage, (int)swz, custom, true, 0});
                    }
        }
        std::sort(results.begin(), results.end(), [](const Result& x, const Result& y) { return x.us < y.us; });
        int hid = -1;
        uint32_t htile = 0, hsplit = 0, hstages = 0;
        size_t hw = 0;
        if (found > 0) {
            cublasLtMatmulAlgoConfigGetAttribute(&heur[0].algo, CUBLASLT_ALGO_CONFIG_ID, &hid, sizeof hid, &hw);
            cublasLtMatmulAlgoConfigGetAttribute(&heur[0].algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &htile, sizeof htile,
                                                 &hw);
            cublasLtMatmulAlgoConfigGetAttribute(&heur[0].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &hsplit, sizeof hsplit,
                                                 &hw);
            cublasLtMatmulAlgoConfigGetAttribute(&heur[0].algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &hstages,
                                                 sizeof hstages, &hw);
        }
        printf(
            "== %s: %.1f MFLOP, cublasSgemm %.2f us, heuristic's first %.2f us (id %d tile %u splitk %u stages %u), "
            "%zu configurations\n",
            sh.name, 2e-6 * sh.m * sh.n * sh.k * sh.count, sgemm_us, heuristic_us, hid, htile, hsplit, hstages,
            results.size());
        int shown = 0;
        for (const Result& r : results) {
            if (shown++ >= 8) break;
            printf("  %6.2f us  id %3d tile %3d splitk %2d red %d stages %3d swizzle %d custom %d %s max|diff| %.2e\n",
                   r.us, r.id, r.tile, r.splitk, r.red, r.stages, r.swizzle, r.custom, r.exact ? "exact" : "NOT EXACT",
                   r.maxdiff);
        }
        cublasLtMatmulPreferenceDestroy(pref);
        cublasLtMatrixLayoutDestroy(la);
        cublasLtMatrixLayoutDestroy(lb);
        cublasLtMatrixLayoutDestroy(lc);
        cublasLtMatmulDescDestroy(op);
        fflush(stdout);
    }
    return 0;
}
