/// @file cublas_loader.cpp
/// @brief cuBLAS and cuBLASLt loaded when a CUDA device first uses them, not when the process
///        starts. The binary does not link them: it defines each cuBLAS entry point it calls as a
///        forwarder that opens the library (dlopen, found like a linked library: the binary's
///        run path, LD_LIBRARY_PATH, the system's) and calls the library's function. Linked, the
///        libraries' initialisers cost every start of the program about a third of a CPU-second
///        (cuBLASLt's, measured with perf on a `--help`), which the CPU backend, `--help`, `check`,
///        `compare`, `report` and the test suite's thousands of short runs never need.
///        The declarations come from the toolkit's headers: a forwarder whose signature differs
///        from the header's does not compile (two C functions of one name).
#include <cublasLt.h>
#include <cublas_v2.h>
#include <dlfcn.h>
#include <fmt/format.h>

#include "util/errors.hpp"

namespace {

#define FH_STRINGIFY2(x) #x
#define FH_STRINGIFY(x) FH_STRINGIFY2(x)
constexpr const char* cublas_name = "libcublas.so." FH_STRINGIFY(CUBLAS_VER_MAJOR);
constexpr const char* cublaslt_name = "libcublasLt.so." FH_STRINGIFY(CUBLAS_VER_MAJOR);

enum class Library { blas, lt };

void* open_library(const char* name) {
    void* handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
        const char* why = dlerror();
        throw fh::DeviceError(
            fmt::format("cannot load {}, which the CUDA backend needs for its matrix products ({}); "
                        "install the CUDA toolkit's cuBLAS {} or put its directory on "
                        "LD_LIBRARY_PATH, or train on the CPU backend (--device cpu)",
                        name, why != nullptr ? why : "no reason given", CUBLAS_VER_MAJOR));
    }
    return handle;
}

/// The library's function `name`, the library opened on first use (a failed open is tried again).
void* symbol(Library library, const char* name) {
    void* handle = nullptr;
    if (library == Library::lt) {
        static void* const lt = open_library(cublaslt_name);
        handle = lt;
    } else {
        static void* const blas = open_library(cublas_name);
        handle = blas;
    }
    void* f = dlsym(handle, name);
    if (f == nullptr)
        throw fh::DeviceError(fmt::format("{} has no function {}: the cuBLAS found is not version {}",
                                          library == Library::lt ? cublaslt_name : cublas_name, name,
                                          CUBLAS_VER_MAJOR));
    return f;
}

}  // namespace

// clang-format off
#define FH_FORWARD(library, ret, name, params, args)                                                  \
    extern "C" ret name params {                                                                      \
        static const auto f = reinterpret_cast<ret(*) params>(symbol(Library::library, #name));      \
        return f args;                                                                                \
    }
// clang-format on

// Every cuBLAS function the program calls, as the headers declare it: a call to one not listed
// here fails to link.
FH_FORWARD(blas, cublasStatus_t, cublasCreate_v2, (cublasHandle_t * handle), (handle))
FH_FORWARD(blas, cublasStatus_t, cublasDestroy_v2, (cublasHandle_t handle), (handle))
FH_FORWARD(blas, cublasStatus_t, cublasGemmEx,
           (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
            const void* alpha, const void* A, cudaDataType Atype, int lda, const void* B, cudaDataType Btype, int ldb,
            const void* beta, void* C, cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
            cublasGemmAlgo_t algo),
           (handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype, ldc, computeType,
            algo))
FH_FORWARD(blas, cublasStatus_t, cublasGemmStridedBatchedEx,
           (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
            const void* alpha, const void* A, cudaDataType Atype, int lda, long long int strideA, const void* B,
            cudaDataType Btype, int ldb, long long int strideB, const void* beta, void* C, cudaDataType Ctype, int ldc,
            long long int strideC, int batchCount, cublasComputeType_t computeType, cublasGemmAlgo_t algo),
           (handle, transa, transb, m, n, k, alpha, A, Atype, lda, strideA, B, Btype, ldb, strideB, beta, C, Ctype, ldc,
            strideC, batchCount, computeType, algo))
FH_FORWARD(blas, const char*, cublasGetStatusName, (cublasStatus_t status), (status))
FH_FORWARD(lt, cublasStatus_t, cublasLtCreate, (cublasLtHandle_t * lightHandle), (lightHandle))
FH_FORWARD(lt, cublasStatus_t, cublasLtDestroy, (cublasLtHandle_t lightHandle), (lightHandle))
FH_FORWARD(lt, cublasStatus_t, cublasLtMatmul,
           (cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc, const void* alpha, const void* A,
            cublasLtMatrixLayout_t Adesc, const void* B, cublasLtMatrixLayout_t Bdesc, const void* beta, const void* C,
            cublasLtMatrixLayout_t Cdesc, void* D, cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t* algo,
            void* workspace, size_t workspaceSizeInBytes, cudaStream_t stream),
           (lightHandle, computeDesc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc, algo, workspace,
            workspaceSizeInBytes, stream))
FH_FORWARD(lt, cublasStatus_t, cublasLtMatmulAlgoCapGetAttribute,
           (const cublasLtMatmulAlgo_t* algo, cublasLtMatmulAlgoCapAttributes_t attr, void* buf, size_t sizeInBytes,
            size_t* sizeWritten),
           (algo, attr, buf, sizeInBytes, sizeWritten))
FH_FORWARD(lt, cublasStatus_t, cublasLtMatmulAlgoCheck,
           (cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc, cublasLtMatrixLayout_t Adesc,
            cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
            const cublasLtMatmulAlgo_t* algo, cublasLtMatmulHeuristicResult_t* result),
           (lightHandle, operationDesc, Adesc, Bdesc, Cdesc, Ddesc, algo, result))
FH_FORWARD(lt, cublasStatus_t, cublasLtMatmulAlgoConfigGetAttribute,
           (const cublasLtMatmulAlgo_t* algo, cublasLtMatmulAlgoConfigAttributes_t attr, void* buf, size_t sizeInBytes,
            size_t* sizeWritten),
           (algo, attr, buf, sizeInBytes, sizeWritten))
FH_FORWARD(lt, cublasStatus_t, cublasLtMatmulAlgoConfigSetAttribute,
           (cublasLtMatmulAlgo_t * algo, cublasLtMatmulAlgoConfigAttributes_t attr, const void* buf,
            size_t sizeInBytes),
           (algo, attr, buf, sizeInBytes))
FH_FORWARD(lt, cublasStatus_t, cublasLtMatmulAlgoGetHeuristic,
           (cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc, cublasLtMatrixLayout_t Adesc,
            cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
            cublasLtMatmulPreference_t preference, int requestedAlgoCount,
            cublasLtMatmulHeuristicResult_t heuristicResultsArray[], int* returnAlgoCount),
           (lightHandle, operationDesc, Adesc, Bdesc, Cdesc, Ddesc, preference, requestedAlgoCount,
            heuristicResultsArray, returnAlgoCount))
FH_FORWARD(lt, cublasStatus_t, cublasLtMatmulAlgoGetIds,
           (cublasLtHandle_t lightHandle, cublasComputeType_t computeType, cudaDataType_t scaleType,
            cudaDataType_t Atype, cudaDataType_t Btype, cudaDataType_t Ctype, cudaDataType_t Dtype,
            int requestedAlgoCount, int algoIdsArray[], int* returnAlgoCount),
           (lightHandle, computeType, scaleType, Atype, Btype, Ctype, Dtype, requestedAlgoCount, algoIdsArray,
            returnAlgoCount))
FH_FORWARD(lt, cublasStatus_t, cublasLtMatmulAlgoInit,
           (cublasLtHandle_t lightHandle, cublasComputeType_t computeType, cudaDataType_t scaleType,
            cudaDataType_t Atype, cudaDataType_t Btype, cudaDataType_t Ctype, cudaDataType_t Dtype, int algoId,
            cublasLtMatmulAlgo_t* algo),
           (lightHandle, computeType, scaleType, Atype, Btype, Ctype, Dtype, algoId, algo))
FH_FORWARD(lt, cublasStatus_t, cublasLtMatmulDescCreate,
           (cublasLtMatmulDesc_t * matmulDesc, cublasComputeType_t computeType, cudaDataType_t scaleType),
           (matmulDesc, computeType, scaleType))
FH_FORWARD(lt, cublasStatus_t, cublasLtMatmulDescDestroy, (cublasLtMatmulDesc_t matmulDesc), (matmulDesc))
FH_FORWARD(lt, cublasStatus_t, cublasLtMatmulDescSetAttribute,
           (cublasLtMatmulDesc_t matmulDesc, cublasLtMatmulDescAttributes_t attr, const void* buf, size_t sizeInBytes),
           (matmulDesc, attr, buf, sizeInBytes))
FH_FORWARD(lt, cublasStatus_t, cublasLtMatmulPreferenceCreate, (cublasLtMatmulPreference_t * pref), (pref))
FH_FORWARD(lt, cublasStatus_t, cublasLtMatmulPreferenceDestroy, (cublasLtMatmulPreference_t pref), (pref))
FH_FORWARD(lt, cublasStatus_t, cublasLtMatmulPreferenceSetAttribute,
           (cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
            size_t sizeInBytes),
           (pref, attr, buf, sizeInBytes))
FH_FORWARD(lt, cublasStatus_t, cublasLtMatrixLayoutCreate,
           (cublasLtMatrixLayout_t * matLayout, cudaDataType type, uint64_t rows, uint64_t cols, int64_t ld),
           (matLayout, type, rows, cols, ld))
FH_FORWARD(lt, cublasStatus_t, cublasLtMatrixLayoutDestroy, (cublasLtMatrixLayout_t matLayout), (matLayout))
FH_FORWARD(lt, cublasStatus_t, cublasLtMatrixLayoutSetAttribute,
           (cublasLtMatrixLayout_t matLayout, cublasLtMatrixLayoutAttribute_t attr, const void* buf,
            size_t sizeInBytes),
           (matLayout, attr, buf, sizeInBytes))
FH_FORWARD(blas, cublasStatus_t, cublasSetMathMode, (cublasHandle_t handle, cublasMath_t mode), (handle, mode))
FH_FORWARD(blas, cublasStatus_t, cublasSetStream_v2, (cublasHandle_t handle, cudaStream_t streamId), (handle, streamId))
FH_FORWARD(blas, cublasStatus_t, cublasSetWorkspace_v2,
           (cublasHandle_t handle, void* workspace, size_t workspaceSizeInBytes),
           (handle, workspace, workspaceSizeInBytes))
FH_FORWARD(blas, cublasStatus_t, cublasSgemmStridedBatched,
           (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
            const float* alpha, const float* A, int lda, long long int strideA, const float* B, int ldb,
            long long int strideB, const float* beta, float* C, int ldc, long long int strideC, int batchCount),
           (handle, transa, transb, m, n, k, alpha, A, lda, strideA, B, ldb, strideB, beta, C, ldc, strideC,
            batchCount))
FH_FORWARD(blas, cublasStatus_t, cublasSgemm_v2,
           (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
            const float* alpha, const float* A, int lda, const float* B, int ldb, const float* beta, float* C, int ldc),
           (handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc))
