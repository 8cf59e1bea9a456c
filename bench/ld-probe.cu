// ld-probe.cu: do padded leading dimensions (45 -> 48, 50 -> 52 or 56, 510 -> 512) speed up the
// trainers' FP32 products? Times each product as the trainers issue it (forward: cuBLASLt's first
// heuristic with its epilogue, as CudaDevice::lt_linear_forward; dW, dX and tanh layers' forwards:
// cublasSgemm), replayed from a CUDA Graph, with the natural stride and the padded one. Not part of
// the build (docs/performance-log.md quotes it):
//   nvcc -O2 -std=c++17 -arch=sm_90 -o ld-probe bench/ld-probe.cu -lcublasLt -lcublas && ./ld-probe
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <vector>
#define CK(x)                                           \
    do {                                                \
        auto e = (x);                                   \
        if ((int)e) {                                   \
            printf("err %d at %d\n", (int)e, __LINE__); \
            exit(1);                                    \
        }                                               \
    } while (0)
cublasLtHandle_t lt;
cublasHandle_t h;
cudaStream_t s;
void* ws;
size_t wsb = 32u << 20;
float *A, *B, *C, *bias;
cudaEvent_t e0, e1;
template <class F>
double timeit(F f) {
    for (int w = 0; w < 3; ++w) f();
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    for (int r = 0; r < 20; ++r) f();
    CK(cudaStreamEndCapture(s, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    CK(cudaGraphLaunch(ge, s));
    CK(cudaStreamSynchronize(s));
    cudaEventRecord(e0, s);
    for (int r = 0; r < 10; ++r) CK(cudaGraphLaunch(ge, s));
    cudaEventRecord(e1, s);
    cudaEventSynchronize(e1);
    float ms;
    cudaEventElapsedTime(&ms, e0, e1);
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
    return ms * 1000 / 200;
}
// forward: Y^T (out x batch, ldy) = W^T (W: in x out, ld in) X^T (in x batch, ldx), via Lt with epilogue
double lt_forward(int batch, int in, int out, int ldx, int ldy, cublasLtEpilogue_t epi) {
    cublasLtMatmulDesc_t op;
    CK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    if (epi != CUBLASLT_EPILOGUE_DEFAULT && epi != CUBLASLT_EPILOGUE_RELU)
        CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    cublasLtMatrixLayout_t la, lb, lc;
    CK(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, in, out, in));
    CK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, in, batch, ldx));
    CK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, out, batch, ldy));
    cublasLtMatmulPreference_t pref;
    CK(cublasLtMatmulPreferenceCreate(&pref));
    CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb));
    uint32_t al = 16;
    for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
        cublasLtMatmulPreferenceSetAttribute(pref, attr, &al, sizeof al);
    cublasLtMatmulHeuristicResult_t res{};
    int found = 0;
    CK(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 1, &res, &found));
    if (!found) return -1;
    const float one = 1, zero = 0;
    double t =
        timeit([&] { CK(cublasLtMatmul(lt, op, &one, A, la, B, lb, &zero, C, lc, C, lc, &res.algo, ws, wsb, s)); });
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatmulDescDestroy(op);
    return t;
}
const float one = 1, zero = 0;
double sg_forward(int batch, int in, int out, int ldx, int ldy) {
    return timeit(
        [&] { CK(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, out, batch, in, &one, A, in, B, ldx, &zero, C, ldy)); });
}
double sg_dw(int batch, int in, int out, int ldx, int ldz) {
    return timeit(
        [&] { CK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, in, out, batch, &one, B, ldx, A, ldz, &zero, C, in)); });
}
double sg_dx(int batch, int in, int out, int ldz) {
    return timeit(
        [&] { CK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, in, batch, out, &one, A, in, B, ldz, &zero, C, in)); });
}
int main() {
    CK(cublasLtCreate(&lt));
    CK(cublasCreate(&h));
    CK(cudaMalloc(&ws, wsb));
    CK(cudaStreamCreate(&s));
    CK(cublasSetStream(h, s));
    CK(cublasSetWorkspace(h, ws, wsb));
    size_t big = 40u << 20;
    CK(cudaMalloc(&A, big * 4));
    CK(cudaMalloc(&B, big * 4));
    CK(cudaMalloc(&C, big * 4));
    CK(cudaMalloc(&bias, 4096 * 4));
    std::vector<float> host(big);
    for (size_t i = 0; i < big; ++i) host[i] = (float)((i * 2654435761u) % 1000) / 1000.f - 0.5f;
    CK(cudaMemcpy(A, host.data(), big * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(B, host.data(), big * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(bias, host.data(), 4096 * 4, cudaMemcpyHostToDevice));
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    auto row = [](const char* name, double a, double b) {
        printf("%-44s %8.2f %8.2f us  %+.1f%%\n", name, a, b, 100 * (b - a) / a);
    };
    printf("%-44s %8s %8s\n", "product (natural ld vs padded ld)", "natural", "padded");
    for (int rows : {32768, 8192}) {
        char n[96];
        snprintf(n, 96, "ppo head fwd lt bias %dx45x512 (48)", rows);
        row(n, lt_forward(rows, 512, 45, 512, 45, CUBLASLT_EPILOGUE_BIAS),
            lt_forward(rows, 512, 45, 512, 48, CUBLASLT_EPILOGUE_BIAS));
        snprintf(n, 96, "ppo head fwd sgemm %dx45x512 (48)", rows);
        row(n, sg_forward(rows, 512, 45, 512, 45), sg_forward(rows, 512, 45, 512, 48));
        snprintf(n, 96, "ppo head dW 512x45 k%d (48)", rows);
        row(n, sg_dw(rows, 512, 45, 512, 45), sg_dw(rows, 512, 45, 512, 48));
        snprintf(n, 96, "ppo head dX %dx512 k45 (48)", rows);
        row(n, sg_dx(rows, 512, 45, 45), sg_dx(rows, 512, 45, 48));
        snprintf(n, 96, "ppo in fwd sgemm %dx512x50 (52)", rows);
        row(n, sg_forward(rows, 50, 512, 50, 512), sg_forward(rows, 50, 512, 52, 512));
        snprintf(n, 96, "ppo in fwd sgemm %dx512x50 (56)", rows);
        row(n, sg_forward(rows, 50, 512, 50, 512), sg_forward(rows, 56, 512, 56, 512));
        snprintf(n, 96, "ppo in dW 50x512 k%d (52)", rows);
        row(n, sg_dw(rows, 50, 512, 50, 512), sg_dw(rows, 50, 512, 52, 512));
    }
    for (int rows : {2048, 4096, 256}) {
        char n[96];
        snprintf(n, 96, "col head fwd lt bias %dx45x512 (48)", rows);
        row(n, lt_forward(rows, 512, 45, 512, 45, CUBLASLT_EPILOGUE_BIAS),
            lt_forward(rows, 512, 45, 512, 48, CUBLASLT_EPILOGUE_BIAS));
        snprintf(n, 96, "col in fwd sgemm %dx512x50 (52)", rows);
        row(n, sg_forward(rows, 50, 512, 50, 512), sg_forward(rows, 50, 512, 52, 512));
        snprintf(n, 96, "dqn in fwd lt relu %dx256x50 (52)", rows);
        row(n, lt_forward(rows, 50, 256, 50, 256, CUBLASLT_EPILOGUE_RELU_BIAS),
            lt_forward(rows, 50, 256, 52, 256, CUBLASLT_EPILOGUE_RELU_BIAS));
        snprintf(n, 96, "dqn head fwd lt bias %dx510x256 (512)", rows);
        row(n, lt_forward(rows, 256, 510, 256, 510, CUBLASLT_EPILOGUE_BIAS),
            lt_forward(rows, 256, 510, 256, 512, CUBLASLT_EPILOGUE_BIAS));
        snprintf(n, 96, "full in fwd lt relu %dx512x50 (52)", rows);
        row(n, lt_forward(rows, 50, 512, 50, 512, CUBLASLT_EPILOGUE_RELU_BIAS),
            lt_forward(rows, 50, 512, 52, 512, CUBLASLT_EPILOGUE_RELU_BIAS));
    }
    for (int rows : {1024, 256}) {
        char n[96];
        snprintf(n, 96, "dqn head dW 256x510 k%d (512)", rows);
        row(n, sg_dw(rows, 256, 510, 256, 510), sg_dw(rows, 256, 510, 256, 512));
        snprintf(n, 96, "dqn head dX %dx256 k510 (512)", rows);
        row(n, sg_dx(rows, 256, 510, 510), sg_dx(rows, 256, 510, 512));
        snprintf(n, 96, "dqn in dW 50x256 k%d (52)", rows);
        row(n, sg_dw(rows, 50, 256, 50, 256), sg_dw(rows, 50, 256, 52, 256));
        snprintf(n, 96, "full in dW 50x512 k%d (52)", rows);
        row(n, sg_dw(rows, 50, 512, 50, 512), sg_dw(rows, 50, 512, 52, 512));
    }
    return 0;
}
