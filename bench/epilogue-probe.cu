// epilogue-probe.cu: two questions about cuBLASLt in FP32 at the DQN update's shapes (batch 256,
// trunk [256, 256], head 510 outputs), answered on the GPU. Not part of the build
// (docs/performance-log.md quotes it):
//   nvcc -O2 -std=c++17 -arch=sm_90 -o epilogue-probe bench/epilogue-probe.cu -lcublasLt && ./epilogue-probe
// 1. Do the backward epilogues exist in FP32 (RELU_AUX_BIAS forward, DRELU_BGRAD on the dX product,
//    BGRADB on the dW product), what do they cost against the plain products, and do their
//    results equal a host computation (within rounding) and themselves run to run (bit for bit)?
// 2. Does one layer of a batched (strided) product give the same bits for every batch count
//    (1, 2, 16), with each count's own heuristic algorithm and with one algorithm pinned? That is
//    what a population whose agents must equal their single runs needs.
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#define CK(x)                                                 \
    do {                                                      \
        auto e_ = (x);                                        \
        if ((int)e_) {                                        \
            printf("err %d at line %d\n", (int)e_, __LINE__); \
            exit(1);                                          \
        }                                                     \
    } while (0)

static cublasLtHandle_t lt;
static cudaStream_t stream;
static void* ws;
static const size_t kWs = 32u << 20;

struct Problem {
    cublasLtMatmulDesc_t op{};
    cublasLtMatrixLayout_t a{}, b{}, c{};
    cublasLtMatmulHeuristicResult_t res[16];
    int found = 0;
};

// Column-major D (m x n) = op(A) op(B), k inner; count > 1: strided batches.
static Problem make(int m, int n, int k, bool ta, bool tb, cublasLtEpilogue_t epi, int count, long long sa,
                    long long sb, long long sc) {
    Problem p;
    CK(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t oa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, ob = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    CK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &oa, sizeof oa));
    CK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &ob, sizeof ob));
    CK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    CK(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_32F, ta ? k : m, ta ? m : k, ta ? k : m));
    CK(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_32F, tb ? n : k, tb ? k : n, tb ? n : k));
    CK(cublasLtMatrixLayoutCreate(&p.c, CUDA_R_32F, m, n, m));
    if (count > 1) {
        int32_t nb = count;
        for (auto [l, st] : {std::pair{p.a, sa}, {p.b, sb}, {p.c, sc}}) {
            CK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &nb, sizeof nb));
            CK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &st, sizeof st));
        }
    }
    return p;
}

static void heuristics(Problem& p, int want = 16) {
    cublasLtMatmulPreference_t pref;
    CK(cublasLtMatmulPreferenceCreate(&pref));
    CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &kWs, sizeof kWs));
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(lt, p.op, p.a, p.b, p.c, p.c, pref, want, p.res, &p.found);
    if (st != CUBLAS_STATUS_SUCCESS) p.found = 0;
    cublasLtMatmulPreferenceDestroy(pref);
}

static cublasStatus_t run(Problem& p, const cublasLtMatmulAlgo_t* algo, const float* A, const float* B, float* D) {
    const float one = 1, zero = 0;
    return cublasLtMatmul(lt, p.op, &one, A, p.a, B, p.b, &zero, D, p.c, D, p.c, algo, ws, kWs, stream);
}

// Microseconds per call: 20 calls captured in a graph, the graph launched 20 times.
template <class F>
static double graph_us(F&& call) {
    call();
    CK(cudaStreamSynchronize(stream));
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    for (int r = 0; r < 20; ++r) call();
    CK(cudaStreamEndCapture(stream, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    CK(cudaGraphLaunch(ge, stream));
    CK(cudaStreamSynchronize(stream));
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    cudaEventRecord(e0, stream);
    for (int r = 0; r < 20; ++r) CK(cudaGraphLaunch(ge, stream));
    cudaEventRecord(e1, stream);
    cudaEventSynchronize(e1);
    float ms;
    cudaEventElapsedTime(&ms, e0, e1);
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
    return ms * 1000.0 / 400.0;
}

static std::vector<float> randoms(size_t n, unsigned seed) {
    std::vector<float> v(n);
    unsigned s = seed * 2654435761u + 1;
    for (auto& x : v) {
        s = s * 1664525u + 1013904223u;
        x = (float)((s >> 8) & 0xffff) / 65536.f - 0.5f;
    }
    return v;
}
static float* upload(const std::vector<float>& v) {
    float* d;
    CK(cudaMalloc(&d, v.size() * 4 + 256));
    CK(cudaMemcpy(d, v.data(), v.size() * 4, cudaMemcpyHostToDevice));
    return d;
}
static std::vector<float> download(const float* d, size_t n) {
    std::vector<float> v(n);
    CK(cudaMemcpy(v.data(), d, n * 4, cudaMemcpyDeviceToHost));
    return v;
}
static double max_rel(const std::vector<float>& got, const std::vector<double>& ref) {
    double worst = 0;
    for (size_t i = 0; i < ref.size(); ++i)
        worst = std::max(worst, std::fabs(got[i] - ref[i]) / (1e-3 + std::fabs(ref[i])));
    return worst;
}

int main() {
    CK(cublasLtCreate(&lt));
    CK(cudaStreamCreate(&stream));
    CK(cudaMalloc(&ws, kWs));
    const int B = 256, H = 256, O = 510;
    // ---- 1. Epilogues ------------------------------------------------------------------------
    // Row-major X (B, H) into a layer W (H, H) row-major, the trainer's convention.
    auto hX = randoms((size_t)B * H, 1), hW = randoms((size_t)H * H, 2), hb = randoms(H, 3);
    auto hWo = randoms((size_t)O * H, 4), hdZo = randoms((size_t)B * O, 5);
    float *X = upload(hX), *W = upload(hW), *bias = upload(hb), *Wo = upload(hWo), *dZo = upload(hdZo);
    float *Y, *dY, *db, *dWo, *dbo;
    CK(cudaMalloc(&Y, (size_t)B * H * 4));
    CK(cudaMalloc(&dY, (size_t)B * H * 4));
    CK(cudaMalloc(&db, H * 4));
    CK(cudaMalloc(&dWo, (size_t)O * H * 4));
    CK(cudaMalloc(&dbo, O * 4));
    const long long aux_ld = ((H + 127) / 128) * 128;
    void* aux;
    CK(cudaMalloc(&aux, aux_ld * B / 8 + 256));

    // Forward Y^T (H x B) = W^T-op X^T with bias + ReLU, plain and with the mask (aux).
    for (auto [name, epi] : {std::pair{"RELU_BIAS (today)", CUBLASLT_EPILOGUE_RELU_BIAS},
                             {"RELU_AUX_BIAS", CUBLASLT_EPILOGUE_RELU_AUX_BIAS}}) {
        Problem p = make(H, B, H, true, false, epi, 1, 0, 0, 0);
        CK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
        if (epi == CUBLASLT_EPILOGUE_RELU_AUX_BIAS) {
            CK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux));
            CK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof aux_ld));
        }
        heuristics(p);
        printf("forward %dx%dx%d %s: %d algorithms", B, H, H, name, p.found);
        if (p.found) {
            printf(", first %.2f us", graph_us([&] { CK(run(p, &p.res[0].algo, W, X, Y)); }));
        }
        printf("\n");
    }
    auto hY = download(Y, (size_t)B * H);  // after RELU_AUX_BIAS: the activated outputs

    // dX with DRELU_BGRAD: dY (B, H) = dZo (B, O) Wo (O, H), times relu'(Y), db = column sums.
    // Column-major: D (H x B) = Wo_cm (H x O) dZo_cm (O x B).
    {
        Problem plain = make(H, B, O, false, false, CUBLASLT_EPILOGUE_DEFAULT, 1, 0, 0, 0);
        heuristics(plain);
        Problem p = make(H, B, O, false, false, CUBLASLT_EPILOGUE_DRELU_BGRAD, 1, 0, 0, 0);
        CK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &db, sizeof db));
        CK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux));
        CK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof aux_ld));
        heuristics(p);
        printf("dX %dx%dx%d: plain %d algorithms (%.2f us); DRELU_BGRAD %d algorithms\n", B, H, O, plain.found,
               plain.found ? graph_us([&] { CK(run(plain, &plain.res[0].algo, Wo, dZo, dY)); }) : -1.0, p.found);
        std::vector<double> ref((size_t)B * H), refb(H, 0.0);
        for (int r = 0; r < B; ++r)
            for (int j = 0; j < H; ++j) {
                double s = 0;
                for (int o = 0; o < O; ++o) s += (double)hdZo[(size_t)r * O + o] * hWo[(size_t)o * H + j];
                ref[(size_t)r * H + j] = hY[(size_t)r * H + j] > 0 ? s : 0.0;
                refb[j] += ref[(size_t)r * H + j];
            }
        for (int i = 0; i < p.found; ++i) {
            if (run(p, &p.res[i].algo, Wo, dZo, dY) != CUBLAS_STATUS_SUCCESS) {
                printf("  algo %d fails\n", i);
                continue;
            }
            CK(cudaStreamSynchronize(stream));
            auto g1 = download(dY, ref.size()), gb1 = download(db, H);
            const double us = graph_us([&] { CK(run(p, &p.res[i].algo, Wo, dZo, dY)); });
            auto g2 = download(dY, ref.size()), gb2 = download(db, H);
            const bool same = !memcmp(g1.data(), g2.data(), g1.size() * 4) && !memcmp(gb1.data(), gb2.data(), H * 4);
            printf("  algo %d: %.2f us, dZ max rel err %.2e, db max rel err %.2e, %s, ws %zu\n", i, us,
                   max_rel(g1, ref), max_rel(gb1, refb), same ? "run to run exact" : "NOT run to run exact",
                   p.res[i].workspaceSize);
        }
    }

    // dW with BGRADB: dWo (O, H) row-major = column-major (H x O) = X_cm (H x B) dZo_cm^T (B x O);
    // db (O) = sums over the k = B rows of dZo.
    {
        Problem plain = make(H, O, B, false, true, CUBLASLT_EPILOGUE_DEFAULT, 1, 0, 0, 0);
        heuristics(plain);
        for (auto [name, epi] : {std::pair{"BGRADB", CUBLASLT_EPILOGUE_BGRADB}, {"BGRADA", CUBLASLT_EPILOGUE_BGRADA}}) {
            Problem p = make(H, O, B, false, true, epi, 1, 0, 0, 0);
            CK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &dbo, sizeof dbo));
            heuristics(p);
            printf("dW %dx%dx%d: plain %d algorithms (%.2f us); %s %d algorithms\n", H, O, B, plain.found,
                   plain.found ? graph_us([&] { CK(run(plain, &plain.res[0].algo, X, dZo, dWo)); }) : -1.0, name,
                   p.found);
            std::vector<double> refb(O, 0.0);
            for (int r = 0; r < B; ++r)
                for (int o = 0; o < O; ++o) refb[o] += hdZo[(size_t)r * O + o];
            for (int i = 0; i < p.found && i < 4; ++i) {
                if (run(p, &p.res[i].algo, X, dZo, dWo) != CUBLAS_STATUS_SUCCESS) {
                    printf("  algo %d fails\n", i);
                    continue;
                }
                CK(cudaStreamSynchronize(stream));
                auto gb = download(dbo, O);
                printf("  algo %d: %.2f us, db max rel err %.2e\n", i,
                       graph_us([&] { CK(run(p, &p.res[i].algo, X, dZo, dWo)); }), max_rel(gb, refb));
            }
        }
    }

    // ---- 2. Batch counts -----------------------------------------------------------------------
    // Forward of one [256 -> 256] layer on 256 rows per network, 16 networks' weights and inputs.
    // (a) each count's own heuristic algorithm: network 0's bits against count 1's; (b) one
    // algorithm pinned (the first heuristic result of count `pin` that runs at every count): each
    // network of counts 1, 2 and 16 against its own single product under that algorithm.
    {
        const int N = 16;
        const long long sw = (long long)H * H + 64, sx = (long long)B * H, sy = (long long)B * H;
        auto hWs = randoms((size_t)sw * N, 7), hXs = randoms((size_t)sx * N, 8);
        float *Ws = upload(hWs), *Xs = upload(hXs), *Ys, *Y1;
        CK(cudaMalloc(&Ys, (size_t)sy * N * 4));
        CK(cudaMalloc(&Y1, (size_t)sy * 4));
        std::vector<float> first;
        for (int count : {1, 2, 16}) {
            Problem p = make(H, B, H, true, false, CUBLASLT_EPILOGUE_DEFAULT, count, sw, sx, sy);
            heuristics(p);
            if (!p.found) {
                printf("count %d: no algorithm\n", count);
                continue;
            }
            CK(run(p, &p.res[0].algo, Ws, Xs, Ys));
            CK(cudaStreamSynchronize(stream));
            auto y0 = download(Ys, (size_t)sy);
            if (first.empty()) first = y0;
            int id = 0, tile = 0, splitk = 0;
            size_t sz;
            cublasLtMatmulAlgoConfigGetAttribute(&p.res[0].algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, &sz);
            cublasLtMatmulAlgoConfigGetAttribute(&p.res[0].algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile, &sz);
            cublasLtMatmulAlgoConfigGetAttribute(&p.res[0].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk,
                                                 sizeof splitk, &sz);
            printf("count %2d, own heuristic (id %d tile %d splitk %d): %.2f us, network 0 %s count 1's\n", count, id,
                   tile, splitk, graph_us([&] { CK(run(p, &p.res[0].algo, Ws, Xs, Ys)); }),
                   memcmp(y0.data(), first.data(), y0.size() * 4) ? "DIFFERS from" : "equals");
        }
        for (int pin : {2, 16}) {
            Problem from = make(H, B, H, true, false, CUBLASLT_EPILOGUE_DEFAULT, pin, sw, sx, sy);
            heuristics(from);
            Problem one = make(H, B, H, true, false, CUBLASLT_EPILOGUE_DEFAULT, 1, 0, 0, 0);
            for (int i = 0; i < from.found; ++i) {
                const cublasLtMatmulAlgo_t* algo = &from.res[i].algo;
                if (run(one, algo, Ws, Xs, Y1) != CUBLAS_STATUS_SUCCESS) continue;  // not usable on one network
                int id = 0, tile = 0, splitk = 0;
                size_t sz;
                cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, &sz);
                cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile, &sz);
                cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof splitk,
                                                     &sz);
                printf("pinned: count %d's algorithm %d (id %d tile %d splitk %d), single %.2f us\n", pin, i, id, tile,
                       splitk, graph_us([&] { CK(run(one, algo, Ws, Xs, Y1)); }));
                for (int count : {2, 16}) {
                    Problem p = make(H, B, H, true, false, CUBLASLT_EPILOGUE_DEFAULT, count, sw, sx, sy);
                    if (run(p, algo, Ws, Xs, Ys) != CUBLAS_STATUS_SUCCESS) {
                        printf("  count %d: not supported\n", count);
                        continue;
                    }
                    CK(cudaStreamSynchronize(stream));
                    auto yp = download(Ys, (size_t)sy * count);
                    int equal = 0;
                    for (int k = 0; k < count; ++k) {
                        CK(run(one, algo, Ws + k * sw, Xs + k * sx, Y1));
                        CK(cudaStreamSynchronize(stream));
                        auto yk = download(Y1, (size_t)sy);
                        equal += !memcmp(yk.data(), yp.data() + (size_t)k * sy, (size_t)sy * 4);
                    }
                    printf("  count %2d: %.2f us, %d of %d networks equal their single products bit for bit\n", count,
                           graph_us([&] { CK(run(p, algo, Ws, Xs, Ys)); }), equal, count);
                }
                break;
            }
        }
    }
    printf("done\n");
    return 0;
}
