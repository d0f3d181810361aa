/* The cuBLAS and cuBLASLt functions the cuda backend calls, through a table that
 * pp_cublas_load fills on the first CUDA device (dlopen + dlsym), so a process that never
 * makes one does not map the libraries: linked, cuBLASLt alone costs every process ~220 MiB
 * of resident memory and 0.08 s at start (0.19 s under ASan), CPU ranks and `--help` included.
 * Each field has the library function's own name and type: a call reads
 * pp_cublas()->cublasSgemm(...) where it read cublasSgemm(...). The libraries are not linked,
 * so a direct call fails to link. */
#ifndef PP_KERNELS_CUDA_CUBLAS_API_H
#define PP_KERNELS_CUDA_CUBLAS_API_H

#include <onnxpipe/core.h>

#include <cublas_v2.h>   /* before cublasLt.h, which uses its types */
#include <cublasLt.h>

/* cublasGemmEx and cublasGemmStridedBatchedEx: C++ overloads them (inline wrappers taking a
 * cudaDataType compute type), so __typeof__ cannot pick the library's own; their types, as
 * cublas_api.h declares them: */
typedef cublasStatus_t (*pp_cublas_gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                            const void *, const void *, cudaDataType, int, const void *,
                                            cudaDataType, int, const void *, void *, cudaDataType, int,
                                            cublasComputeType_t, cublasGemmAlgo_t);
typedef cublasStatus_t (*pp_cublas_gemm_strided_batched_ex)(
    cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void *, const void *, cudaDataType,
    int, long long, const void *, cudaDataType, int, long long, const void *, void *, cudaDataType, int, long long,
    int, cublasComputeType_t, cublasGemmAlgo_t);

/* Every function of libcublas, then of libcublasLt, the backend calls: X(function) where the
 * field's type is the declaration's, T(function, type) where it is spelled out above. */
#define PP_CUBLAS_FUNCS(X, T)                                                                   \
    X(cublasCreate) X(cublasDestroy) X(cublasSetStream) X(cublasSetWorkspace) X(cublasSetMathMode)    \
    X(cublasGetStatusString)                                                                    \
    X(cublasSgemm) X(cublasSgemmStridedBatched) T(cublasGemmEx, pp_cublas_gemm_ex)              \
    T(cublasGemmStridedBatchedEx, pp_cublas_gemm_strided_batched_ex)
#define PP_CUBLASLT_FUNCS(X)                                                                    \
    X(cublasLtCreate) X(cublasLtDestroy) X(cublasLtMatmul) X(cublasLtMatmulAlgoGetHeuristic)    \
    X(cublasLtMatmulDescCreate) X(cublasLtMatmulDescDestroy) X(cublasLtMatmulDescSetAttribute)  \
    X(cublasLtMatrixLayoutCreate) X(cublasLtMatrixLayoutDestroy) X(cublasLtMatrixLayoutSetAttribute) \
    X(cublasLtMatmulPreferenceCreate) X(cublasLtMatmulPreferenceDestroy)                        \
    X(cublasLtMatmulPreferenceSetAttribute)

/* pp_cublas_fn_<function>: the type of a pointer to it (declared outside the struct: C++
 * rejects a member whose own type names the global it shadows) */
#define PP_CUBLAS_FN_TYPE(f) typedef __typeof__(&f) pp_cublas_fn_##f;
#define PP_CUBLAS_NO_TYPE(f, type)
PP_CUBLAS_FUNCS(PP_CUBLAS_FN_TYPE, PP_CUBLAS_NO_TYPE)
PP_CUBLASLT_FUNCS(PP_CUBLAS_FN_TYPE)
#undef PP_CUBLAS_NO_TYPE
#undef PP_CUBLAS_FN_TYPE

typedef struct pp_cublas_api {
#define PP_CUBLAS_FIELD(f) pp_cublas_fn_##f f;
#define PP_CUBLAS_TYPED_FIELD(f, type) type f;
    PP_CUBLAS_FUNCS(PP_CUBLAS_FIELD, PP_CUBLAS_TYPED_FIELD)
    PP_CUBLASLT_FUNCS(PP_CUBLAS_FIELD)
#undef PP_CUBLAS_TYPED_FIELD
#undef PP_CUBLAS_FIELD
} pp_cublas_api;

#ifdef __cplusplus
extern "C" {
#endif

/* Loads libcublas and libcublasLt of the CUDA version this build compiled against (the
 * library path first, then the toolkit's directory at build time) and resolves every
 * function, once per process; later calls return the first outcome. A library or function
 * that is missing fails with its name, dlerror's text and what to install. Thread-safe. */
pp_status pp_cublas_load(pp_error *err);
/* The table; only after pp_cublas_load succeeded (every pp_cuda device exists after it). */
const pp_cublas_api *pp_cublas(void);

#ifdef __cplusplus
}
#endif

#endif
